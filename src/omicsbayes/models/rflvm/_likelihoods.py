"""RFLVM's five likelihoods, one object each (after statsmodels' ``families``).

A likelihood object is chosen once from ``RFLVM(likelihood=...)`` (:func:`likelihood_of`) and
holds no chain state: its methods read and set the state of the chain ``ch`` they are given
(:class:`~omicsbayes.models.rflvm._chain._Chain`). Each supplies

* its data check (:meth:`Likelihood.check_values`) and the parameters it adds to a chain
  (:meth:`Likelihood.start`: dispersions, noise variances, row totals);
* the log likelihood of the observed entries given the linear predictor psi
  (:meth:`Likelihood.row_loglik`, with the psi-free constants from
  :meth:`Likelihood.constants`) and the target of the (X, W) steps (:meth:`Likelihood.target`);
* the gradient of that target with respect to the random features, for the HMC step
  (:meth:`Likelihood.grad_prep`, :meth:`Likelihood.grad_phi`);
* the auxiliary-variable step of the regression weights (:meth:`Likelihood.step_beta`:
  Polya-gamma Gibbs, CRT for the dispersions, elliptical slice and IRLS for Poisson, the
  normal-inverse-gamma posterior for the Gaussian);
* the held-out predictive (:meth:`Likelihood.heldout_logpdf`, :meth:`Likelihood.log_rate`).

The z, x and w steps of the chain are written given beta (:meth:`Likelihood.step_z`,
:meth:`Likelihood.step_x`, :meth:`Likelihood.step_w` call the chain's given-beta steps). The
Gaussian likelihood is conjugate: :class:`Gaussian` integrates beta and sigma^2 out and supplies
the collapsed versions of those steps. The logistic links (Bernoulli, negative binomial) add a
float32 first stage for the delayed-acceptance z and w steps (:meth:`Likelihood.first_stage`).
"""

import numpy as np
from scipy.linalg import solve_triangular
from scipy.linalg.blas import dtrsm
from scipy.linalg.lapack import dpotrf
from scipy.special import gammaln, logsumexp

from ...inference import sample_polyagamma
from ...inference.ess import elliptical_slice, elliptical_slice_rows
from ...inference.ibp import sample_active_sticks, sample_slice_sticks
from .._threads import map_blocks
from ._kernels import _collapsed_row_sweep, _gauss_grad_rhs, _gauss_rows
from ._updates import (
    _softplus,
    chol_inverse,
    logistic_rows,
    poisson_irls_mh,
    rff,
    rff_from_arg,
    rff_from_arg32,
    sample_logistic_beta,
    sample_nb_dispersion,
)

# columns per block of the logistic-link HMC gradient (map_blocks): four blocks at J = 2,000, so
# a thread slowed by a busy core takes fewer of them
GRAD_BLOCK = 512


class Likelihood:
    """A likelihood of y_ij given psi_ij = phi(x_i * z_i) beta_j, sampled given beta.

    Subclasses set ``name`` and ``counts`` and supply :meth:`entry_constants`,
    :meth:`row_loglik`, :meth:`dloglik_dpsi` (or :meth:`grad_phi`), :meth:`step_beta` and
    :meth:`entry_logpdf`.
    """

    name = None
    counts = False  # non-negative integer counts: checked, and the PCA start uses sqrt(y)
    initial_dispersion = 1.0  # r_j of a new chain (read by the negative binomial only)

    # ---------------------------------------------------------------- data and parameters
    def check_values(self, values, what):
        """ValueError naming ``what`` when the observed ``values`` are not data of this
        likelihood."""
        if self.counts and (np.any(values < 0) or np.any(values != np.round(values))):
            raise ValueError(
                f"{what} must hold non-negative integer counts (or NaN) for "
                f"likelihood={self.name!r}"
            )

    def stabilise(self, Y):
        """The data the PCA start is computed from (square root of counts)."""
        return np.sqrt(Y) if self.counts else Y

    def offset(self, Y):
        """The per-column offset of ``Y`` (NaN = missing) that is subtracted before sampling and
        added to every draw's linear predictor: zero, the link carries the level."""
        return np.zeros(Y.shape[1])

    def start(self, ch):
        """The likelihood's parameters of a new chain."""
        ch.r = np.ones(ch.J) * self.initial_dispersion

    def entry_constants(self, ch):
        """The terms of log p(y_ij | psi_ij) that do not depend on psi (N, J)."""
        return np.zeros_like(ch.Y)

    def constants(self, ch):
        """``(weight, const_rows)``: the weight of softplus(psi) at each entry of the
        logistic-link likelihoods (zero at missing entries) and the per-row sums of
        :meth:`entry_constants` over the observed entries."""
        c = self.entry_constants(ch)
        return ch._obsf, np.sum(np.where(ch.obs, c, 0.0), axis=1)

    def theta(self, ch):
        """The per-column likelihood parameter of a draw (dispersions r_j)."""
        return ch.r.copy()

    def row_totals(self, ch):
        return None

    # ---------------------------------------------------------------- log likelihood
    def row_loglik(self, ch, psi, rows=None):
        """Per-row log p(y_i | psi_i, theta) over the observed entries of rows ``rows``."""
        raise NotImplementedError

    def target(self, ch, Phi):
        """The log likelihood the (X, W) steps target at the random features ``Phi``: given
        beta."""
        return float(self.row_loglik(ch, Phi @ ch.beta).sum())

    def first_stage(self, ch):
        """A cheap deterministic approximation ``rows_ll(psi32, rows=slice(None))`` of
        :meth:`row_loglik` in float32, the first stage of the delayed-acceptance z and w steps,
        or None (every proposal is scored exactly)."""
        return None

    # ---------------------------------------------------------------- gradient (HMC)
    def dloglik_dpsi(self, ch, psi):
        """d log p(y | psi) / d psi over the observed entries (zero at missing ones)."""
        raise NotImplementedError

    def grad_prep(self, ch):
        """The data and parameters :meth:`grad_phi` reads, in the precision it uses; fixed
        during one HMC step."""
        return ()

    def grad_phi(self, ch, G, prep):
        """``(Phi, d/dPhi)`` of :meth:`target` at the feature arguments ``G = (X * Z) W^T``
        (float64: d/dPhi = (d/dpsi) beta^T)."""
        Phi = rff_from_arg(G)
        return Phi, self.dloglik_dpsi(ch, Phi @ ch.beta) @ ch.beta.T

    # ---------------------------------------------------------------- sampler steps
    def step_z(self, ch):
        """The sparse model's z step; returns which columns of the extended matrix survive."""
        return ch._z_given_beta()

    def step_x(self, ch):
        """The x step: row-wise elliptical slice sampling given beta."""
        if ch.D:
            ch._ess_rows()

    def step_w(self, ch, prop, log_u):
        """Metropolis-Hastings of each frequency towards ``prop`` (accepted when ``log_u`` is
        below the log likelihood ratio)."""
        ch._w_given_beta(prop, log_u)

    def step_beta(self, ch):
        """The regression weights (and likelihood parameters) given X, Z, W: the
        auxiliary-variable step."""
        raise NotImplementedError

    # ---------------------------------------------------------------- predictive
    def entry_logpdf(self, psi, theta, y):
        """log p(y_ij | psi_ij, theta_j) of held-out entries (vectors)."""
        raise NotImplementedError

    def heldout_logpdf(self, psi, theta, rows, cols, y):
        """log p(y | draw) of the held-out entries ``(rows, cols)`` with values ``y``, given a
        draw's linear predictor ``psi`` (N, J) and parameter ``theta`` (J,)."""
        return self.entry_logpdf(psi[rows, cols], theta[cols], y)

    def log_rate(self, psi, theta):
        """Log of the (unnormalised) expected counts of a draw, for the perplexity."""
        return psi


class _LogisticLink(Likelihood):
    """Likelihoods with ``Y psi - weight softplus(psi)`` (Bernoulli, negative binomial):
    Polya-gamma augmentation, a float32 HMC gradient and a float32 first stage."""

    def row_loglik(self, ch, psi, rows=None):
        rows = slice(None) if rows is None else rows
        # Y is zero at missing entries, so only the psi-only term needs the mask
        return logistic_rows(ch.Y[rows], ch._logit_weight[rows], psi) + ch.const_rows[rows]

    def first_stage(self, ch):
        Y32, weight32 = ch.Y.astype(np.float32), ch._logit_weight.astype(np.float32)

        def rows_ll(psi32, rows=slice(None)):
            return logistic_rows(Y32[rows], weight32[rows], psi32)

        return rows_ll

    def grad_prep(self, ch):
        # column blocks of (Y, weight, beta) for map_blocks; fixed by J, not by the threads
        f32 = np.float32
        blocks = [slice(j, j + GRAD_BLOCK) for j in range(0, ch.J, GRAD_BLOCK)]
        Y, weight, beta = ch.Y, ch._logit_weight, ch.beta
        return [
            (Y[:, b].astype(f32), weight[:, b].astype(f32), beta[:, b].astype(f32)) for b in blocks
        ]

    def grad_phi(self, ch, G, prep):
        """float32: d/dPhi = (Y - weight * sigmoid(Phi beta)) beta^T, column blocks on the
        worker threads."""
        Phi = rff_from_arg32(G)

        def d_phi_block(Y, weight, beta):
            t = Phi @ beta  # psi, then in place: Y - weight / (1 + exp(-psi))
            with np.errstate(over="ignore"):
                np.exp(np.negative(t, out=t), out=t)
            t += 1.0
            np.subtract(Y, np.divide(weight, t, out=t), out=t)
            return t @ beta.T

        return Phi, np.sum(map_blocks(d_phi_block, *zip(*prep)), axis=0)

    def pg_parameters(self, ch):
        """``(b, kappa)`` of the Polya-gamma augmentation: the likelihood of each entry is
        proportional to e^{kappa psi} / (1 + e^psi)^b."""
        raise NotImplementedError

    def step_beta(self, ch):
        """Polya-gamma Gibbs of every column of beta (eq. 27, 33)."""
        b, kappa = self.pg_parameters(ch)
        ch.beta = sample_logistic_beta(ch.Phi, ch.psi_of(ch.Phi), b, kappa, ch.obs, ch.rng)


class Bernoulli(_LogisticLink):
    """y_ij ~ Bernoulli(sigmoid(psi_ij))."""

    name = "bernoulli"

    def check_values(self, values, what):
        if not np.all((values == 0) | (values == 1)):
            raise ValueError(f"{what} must hold 0/1 values (or NaN) for likelihood='bernoulli'")

    def pg_parameters(self, ch):
        return 1.0, ch.Y - 0.5

    def entry_logpdf(self, psi, theta, y):
        return y * psi - _softplus(psi)


class NegativeBinomial(_LogisticLink):
    """y_ij ~ NB(r_j, sigmoid(psi_ij)); the dispersions r_j by CRT augmentation."""

    name = "negative_binomial"
    counts = True
    initial_dispersion = 10.0

    def constants(self, ch):
        c = gammaln(ch.Y + ch.r) - gammaln(ch.r) - gammaln(ch.Y + 1)
        return (ch.Y + ch.r) * ch._obsf, np.sum(np.where(ch.obs, c, 0.0), axis=1)

    def pg_parameters(self, ch):
        return ch.Y + ch.r, 0.5 * (ch.Y - ch.r)

    def step_beta(self, ch):
        """Polya-gamma Gibbs of beta, then r_j (Zhou & Carin 2012)."""
        super().step_beta(ch)
        a, b0 = ch.est.dispersion_prior
        sp = _softplus(ch.psi_of(ch.Phi))
        ch.r = sample_nb_dispersion(ch.Y, sp, ch.obs, ch.r, a, b0, ch.rng)
        ch._refresh_const()

    def entry_logpdf(self, psi, theta, y):
        return (
            gammaln(y + theta)
            - gammaln(theta)
            - gammaln(y + 1)
            + y * psi
            - (y + theta) * _softplus(psi)
        )

    def log_rate(self, psi, theta):
        return psi + np.log(theta)


class Poisson(Likelihood):
    """y_ij ~ Poisson(exp(psi_ij)); beta by elliptical slice and IRLS Metropolis-Hastings."""

    name = "poisson"
    counts = True

    def entry_constants(self, ch):
        return -gammaln(ch.Y + 1)

    def row_loglik(self, ch, psi, rows=None):
        rows = slice(None) if rows is None else rows
        Y, obs = ch.Y[rows], ch.obs[rows]
        return np.sum(np.where(obs, Y * psi - np.exp(psi), 0.0), axis=1) + ch.const_rows[rows]

    def dloglik_dpsi(self, ch, psi):
        return ch._obsf * (ch.Y - np.exp(psi))

    def step_beta(self, ch):
        """Three elliptical slice steps of every column under its N(0, I) prior, then the IRLS
        Metropolis-Hastings step (package docstring)."""
        rng, Phi, Y, obs = ch.rng, ch.Phi, ch.Y, ch.obs

        def col_ll(Bc, idx):
            psi = Phi @ Bc.T
            with np.errstate(over="ignore", invalid="ignore"):
                e = np.where(obs[:, idx], Y[:, idx] * psi - np.exp(psi), 0.0).sum(0)
            return np.where(np.isfinite(e), e, -np.inf)

        for _ in range(3):
            B, _, _ = elliptical_slice_rows(
                ch.beta.T,
                rng.standard_normal(ch.beta.T.shape),
                col_ll,
                rng,
                max_shrink=ch.est.max_shrink,
            )
            ch.beta = np.ascontiguousarray(B.T)
        ch.beta, n_acc = poisson_irls_mh(Phi, Y, obs, ch.beta, rng)
        ch.accept_beta[0] += n_acc
        ch.accept_beta[1] += ch.J

    def entry_logpdf(self, psi, theta, y):
        return y * psi - np.exp(psi) - gammaln(y + 1)


class Multinomial(Likelihood):
    """y_i ~ Multinomial(n_i, softmax(psi_i)) over the observed columns of row i; beta_J = 0."""

    name = "multinomial"
    counts = True

    def start(self, ch):
        super().start(ch)
        ch.n_row = ch.Y.sum(axis=1)

    def constants(self, ch):
        Y = ch.Y
        return ch._obsf, gammaln(ch.n_row + 1) - np.sum(np.where(ch.obs, gammaln(Y + 1), 0), 1)

    def row_totals(self, ch):
        return ch.n_row

    def row_loglik(self, ch, psi, rows=None):
        rows = slice(None) if rows is None else rows
        Y, obs, c = ch.Y[rows], ch.obs[rows], ch.const_rows[rows]
        lse = logsumexp(np.where(obs, psi, -np.inf), axis=1)
        lse = np.where(np.isfinite(lse), lse, 0.0)
        e = Y * psi
        return np.sum(np.where(obs, e, 0.0), axis=1) - ch.n_row[rows] * lse + c

    def dloglik_dpsi(self, ch, psi):
        logits = np.where(ch.obs, psi, -np.inf)
        soft = np.exp(logits - logsumexp(logits, axis=1, keepdims=True))
        return ch._obsf * (ch.Y - ch.n_row[:, None] * np.nan_to_num(soft))

    def step_beta(self, ch):
        """Eq. (30)-(35), one column at a time (xi_j depends on the other columns, so this
        sweep is sequential). beta_J = 0. Eq. (30) prints the PG exponent as y_ij + sum_j
        y_ij; conditioning the softmax on the others gives (e^{psi - xi})^{y_ij} /
        (1 + e^{psi - xi})^{n_i} with n_i = sum_j y_ij, consistent with tau_ij = y_ij - n_i / 2
        and eq. (35), so b_ij = n_i here. With missing entries the softmax runs over the
        observed columns of each row."""
        rng, Phi, Y, obs = ch.rng, ch.Phi, ch.Y, ch.obs
        psi = ch.psi_of(Phi)
        p = Phi.shape[1]
        eye = np.eye(p)
        for j in range(ch.J - 1):
            others = np.where(obs, psi, -np.inf)
            others[:, j] = -np.inf
            xi = logsumexp(others, axis=1)
            use = obs[:, j] & (ch.n_row > 0) & np.isfinite(xi)
            omega = np.zeros(ch.N)
            omega[use] = sample_polyagamma(ch.n_row[use], psi[use, j] - xi[use], rng)
            h = np.where(use, Y[:, j] - 0.5 * ch.n_row + omega * np.where(use, xi, 0.0), 0.0)
            P = Phi.T @ (omega[:, None] * Phi) + eye
            L = np.linalg.cholesky(P)
            u = solve_triangular(L, Phi.T @ h, lower=True)
            ch.beta[:, j] = solve_triangular(L.T, u + rng.standard_normal(p), lower=False)
            psi[:, j] = Phi @ ch.beta[:, j]
        ch.beta[:, -1] = 0.0

    def heldout_logpdf(self, psi, theta, rows, cols, y):
        """The word-level probability y_ij log theta_ij, theta_i the softmax over all
        features."""
        logp = psi - logsumexp(psi, axis=1, keepdims=True)
        return y * logp[rows, cols]


class Gaussian(Likelihood):
    """y_ij ~ N(psi_ij, sigma_j^2) with the conjugate prior of eq. (13): beta_j | sigma_j^2 ~
    N(0, sigma_j^2 c I), sigma_j^-2 ~ Ga(a0, b0), c on a log-uniform grid.

    The z, x and w steps and the HMC target use the collapsed likelihood (beta_j and sigma_j^2
    integrated out) of the completed data ``Yf`` (missing entries imputed, :meth:`impute`);
    the row-wise x step and every reported likelihood use the observed entries given beta.
    """

    name = "gaussian"

    def offset(self, Y):
        """The observed mean of each column (0 for a column with none observed). Eq. (13) puts
        beta_j ~ N(0, sigma_j^2 c I) and phi(x) has no constant feature, so a column's level
        is not part of the model; the paper standardises real-valued data to zero mean
        (appendix A.1). Uncentred, a level of 100 drives c to the top of its grid and Phi^T Phi +
        I / c to the edge of positive definiteness."""
        obs = ~np.isnan(Y)
        return np.sum(np.where(obs, Y, 0.0), axis=0) / np.maximum(obs.sum(axis=0), 1)

    def start(self, ch):
        super().start(ch)
        a0, b0 = ch.est.noise_prior
        ch.a_n = a0 + 0.5 * ch.N
        colmean = np.sum(ch.Y, 0) / np.maximum(ch.obs.sum(0), 1)
        ch.Yf = np.where(ch.obs, ch.Y, colmean)
        ch.yy = np.sum(ch.Yf**2, axis=0)
        ch.sigma2 = np.ones(ch.J)
        ch.c_grid = ch.est._scale_grid()
        ch.c = float(np.sqrt(ch.c_grid[0] * ch.c_grid[-1]))

    def entry_constants(self, ch):
        return np.broadcast_to(-0.5 * np.log(2 * np.pi * ch.sigma2), ch.Y.shape)

    def theta(self, ch):
        return ch.sigma2.copy()

    def row_loglik(self, ch, psi, rows=None):
        """Every row (numpy) or the rows of an index array ``rows`` (numba, one pass)."""
        if rows is not None:
            return _gauss_rows(psi, ch.Y, ch.obs, ch.sigma2, ch.const_rows, rows)
        e = -0.5 * (ch.Y - psi) ** 2 / ch.sigma2
        return np.sum(np.where(ch.obs, e, 0.0), axis=1) + ch.const_rows

    def entry_logpdf(self, psi, theta, y):
        return -0.5 * np.log(2 * np.pi * theta) - 0.5 * (y - psi) ** 2 / theta

    # ------------------------------------------------------------ collapsed likelihood
    def target(self, ch, Phi):
        """The collapsed log likelihood of the completed data (:meth:`collapsed`)."""
        return self.collapsed(ch, *self.stats(ch, Phi))

    @staticmethod
    def stats(ch, Phi):
        return Phi.T @ Phi, Phi.T @ ch.Yf

    @staticmethod
    def eig(G, C):
        """Eigenvalues of G = Phi^T Phi (floored at 0), eigenvectors U and Q = U^T C."""
        lam, U = np.linalg.eigh(G)
        return np.maximum(lam, 0.0), U, U.T @ C

    @staticmethod
    def const(ch):
        """The terms of each column's collapsed log likelihood that depend on no variable."""
        a0, b0 = ch.est.noise_prior
        return gammaln(ch.a_n) - gammaln(a0) + a0 * np.log(b0) - 0.5 * ch.N * np.log(2 * np.pi)

    def marginal_cols(self, ch, lam, Q2, c):
        """log p(y_j | Phi, c) of every column (complete data ``Yf``) with beta_j and sigma_j^2
        integrated out (section 3.1): y_j ~ t_{2 a0}(0, (b0 / a0)(I + c Phi Phi^T)).

        With Phi^T Phi = U diag(lam) U^T and Q2 = (U^T Phi^T Y)^2 (p, J): log|I + c Phi Phi^T| =
        sum log(1 + c lam) and y^T (I + c Phi Phi^T)^-1 y = y^T y - sum c q^2 / (1 + c lam)
        (Woodbury). ``c`` is a vector of G scales; returns (G, J), O(G p J).
        """
        b0 = ch.est.noise_prior[1]
        c = np.atleast_1d(np.asarray(c, float))
        den = 1.0 + np.outer(c, lam)
        quad = np.maximum(ch.yy - (c[:, None] / den) @ Q2, 0.0)
        logdet = np.sum(np.log(den), axis=1)[:, None]
        return self.const(ch) - 0.5 * logdet - ch.a_n * np.log(b0 + 0.5 * quad)

    def collapsed(self, ch, G, C):
        """sum_j log p(y_j | Phi, c) at the current c, beta and sigma^2 integrated out;
        G = Phi^T Phi, C = Phi^T Yf. Through the Cholesky factor L of A = G + I / c (one for all
        columns, O(p^3 / 3 + p^2 J)): log|I + c Phi Phi^T| = p log c + log|A| and
        y^T (I + c Phi Phi^T)^-1 y = y^T y - C^T A^-1 C (Woodbury)."""
        b0 = ch.est.noise_prior[1]
        p = G.shape[0]
        A = G.copy()
        A.flat[:: p + 1] += 1.0 / ch.c
        L, info = dpotrf(A, lower=1, clean=0, overwrite_a=1)
        if info != 0:
            return -np.inf
        V = dtrsm(1.0, L, C, lower=1)
        quad = np.maximum(ch.yy - np.sum(V * V, axis=0), 0.0)
        logdet = p * np.log(ch.c) + 2.0 * np.sum(np.log(np.diag(L)))
        return float(
            ch.J * (self.const(ch) - 0.5 * logdet) - ch.a_n * np.sum(np.log(b0 + 0.5 * quad))
        )

    def scale_step(self, ch, lam, Q2):
        """Prior scale c of beta_j | sigma_j^2 ~ N(0, sigma_j^2 c I), shared by the columns:
        discrete log-uniform prior on ``c_grid``, so its conditional p(c | Yf, X, Z, W) is
        proportional to prod_j t_{2 a0}(y_j; 0, (b0 / a0)(I + c Phi Phi^T)) on the grid and is
        drawn exactly (O(p J) per grid point given the eigendecomposition)."""
        lp = np.sum(self.marginal_cols(ch, lam, Q2, ch.c_grid), axis=1)
        p = np.exp(lp - lp.max())
        ch.c = float(ch.c_grid[ch.rng.choice(p.size, p=p / p.sum())])

    def draw_beta(self, ch, update_scale=False):
        """(Optionally c, then) (beta_j, sigma_j^2) jointly from the normal-inverse-gamma
        posterior given the complete data: with A = Phi^T Phi + I / c,
        sigma_j^2 ~ IG(a0 + N / 2, b0 + (y^T y - y^T Phi A^-1 Phi^T y) / 2) and
        beta_j | sigma_j^2 ~ N(A^-1 Phi^T y_j, sigma_j^2 A^-1). Through the eigendecomposition
        of Phi^T Phi when c is drawn (its grid needs it), else through the Cholesky factor
        L of A: with V = L^-1 Phi^T Y, beta_j = L^-T (v_j + sigma_j eps_j)."""
        rng = ch.rng
        b0 = ch.est.noise_prior[1]
        G, C = self.stats(ch, ch.Phi)
        L = None
        if not update_scale:
            p = G.shape[0]
            A = G.copy()
            A.flat[:: p + 1] += 1.0 / ch.c
            L, info = dpotrf(A, lower=1, clean=1, overwrite_a=1)
            if info != 0:  # numerically indefinite: the eigendecomposition floors it at 0
                L = None
        if L is None:
            lam, U, Q = self.eig(G, C)
            if update_scale:
                self.scale_step(ch, lam, Q * Q)
            prec = lam[:, None] + 1.0 / ch.c
            fit = np.sum(Q * Q / prec, axis=0)
        else:
            V = dtrsm(1.0, L, C, lower=1)
            fit = np.sum(V * V, axis=0)
        b_n = b0 + 0.5 * np.maximum(ch.yy - fit, 0.0)
        ch.sigma2 = np.maximum(b_n / rng.gamma(ch.a_n, 1.0, size=ch.J), 1e-10)
        eps = rng.standard_normal(C.shape)
        if L is None:
            ch.beta = U @ (Q / prec + np.sqrt(ch.sigma2) * eps / np.sqrt(prec))
        else:
            ch.beta = dtrsm(1.0, L, V + np.sqrt(ch.sigma2) * eps, lower=1, trans_a=1)
        ch._refresh_const()

    def impute(self, ch):
        """The missing entries of ``Yf`` from y ~ N(phi beta_j, sigma_j^2) (data augmentation)."""
        if not ch.any_missing:
            return
        psi = ch.psi_of(ch.Phi)
        draw = psi + np.sqrt(ch.sigma2) * ch.rng.standard_normal(psi.shape)
        ch.Yf = np.where(ch.obs, ch.Y, draw)
        ch.yy = np.sum(ch.Yf**2, axis=0)

    def collapsed_sweep(self, ch, update_z):
        """One sequential sweep over the rows with beta and sigma^2 integrated out
        (numba, :func:`_collapsed_row_sweep`). The collapsed likelihood factorises as
        p(Yf_-i | Phi_-i) p(y_i | Yf_-i, phi_i), so row i's latent variables enter only through
        the leave-one-out predictive prod_j t_{2 a0 + N - 1}(y_ij; phi_i^T m_j,
        (b_j / a)(1 + phi_i^T A^-1 phi_i)) of row i given the other rows (their NIG posterior
        A, m_j, a, b_j). Each x_ik (z_ik = 1) is drawn from the ensemble {current x_ik,
        ``n_x_proposals`` - 1 draws from N(0, 1)} proportionally to it (Tjelmeland 2004; exact
        on the ensemble-augmented space), and x_ik with z_ik = 0 from its prior. With
        ``update_z`` each (z_ik, x_ik) is drawn jointly as in eq. (17): z_ik = 1 weighted by
        pi_k and the ensemble mean of the predictive, z_ik = 0 by 1 - pi_k and the predictive
        without the dimension, times the slice factor 1 / pi*(Z) (every instantiated stick is
        above the slice). The row's own influence on beta (leverage ~ 2M / N) anchors the
        given-beta steps; collapsed, a dimension the data do not need can be switched off."""
        K = ch.est.n_x_proposals
        if ch.D == 0 or (K < 2 and not update_z):
            return
        rng = ch.rng
        N, D = ch.N, ch.D
        a0, b0 = ch.est.noise_prior
        G, B = self.stats(ch, ch.Phi)
        _, Ainv = chol_inverse(G + np.eye(G.shape[0]) / ch.c)
        if update_z:
            ch.n_evals["collapsed_z"] += N * D * (K + 1)
        else:
            ch.n_evals["collapsed_rows"] += N * int(round(ch.Z.sum(1).mean() * K))
        _collapsed_row_sweep(
            ch.X,
            ch.Z,
            ch.W,
            ch.Yf,
            ch.Phi.copy(),
            Ainv,
            B,
            ch.yy,
            ch.pi,
            rng.standard_normal((K - 1, N, D)),
            rng.gumbel(size=(N, D, K)),
            rng.uniform(size=(N, D)),
            np.argsort(rng.uniform(size=(N, D)), axis=1),
            float(a0),
            float(b0),
            update_z,
        )
        ch.Phi = rff(ch.XZ, ch.W)

    # ------------------------------------------------------------ collapsed steps
    def step_z(self, ch):
        """Every (z_ik, x_ik) from its collapsed conditional in a sequential sweep over the rows
        (:meth:`collapsed_sweep`), after the slice's new dimensions; sets Z and pi."""
        self.impute(ch)
        new = sample_slice_sticks(ch.pi, ch.alpha, ch.N, ch.rng)
        if new.size:
            ch.X = np.hstack([ch.X, ch.rng.standard_normal((ch.N, new.size))])
            ch.Z = np.hstack([ch.Z, np.zeros((ch.N, new.size), bool)])
            ch.pi = np.concatenate([ch.pi, new])
            ch._extend_w(new.size)
        self.collapsed_sweep(ch, update_z=True)
        keep = ch.Z.any(axis=0)
        ch.Z = ch.Z[:, keep]
        ch.pi = sample_active_sticks(ch.Z.sum(axis=0), ch.N, ch.rng)
        return keep

    def step_x(self, ch):
        """The dense model's collapsed row sweep (the sparse model's z step did it), then
        ``x_sweeps`` alternations of (beta, sigma^2 from their NIG posterior; row-wise ESS given
        them), then a collapsed whole-matrix ESS step."""
        self.impute(ch)  # the z sweep integrated the missing entries out
        if ch.D == 0:
            return
        if not ch.sparse:
            self.collapsed_sweep(ch, update_z=False)
        for _ in range(ch.est.x_sweeps):
            self.draw_beta(ch)
            ch._ess_rows()
            self.impute(ch)
        Z, W = ch.Z, ch.W

        def whole_ll(Xc):
            return self.target(ch, rff(Xc * Z, W))

        X, _, n = elliptical_slice(
            ch.X,
            ch.rng.standard_normal(ch.X.shape),
            whole_ll,
            ch.rng,
            max_shrink=ch.est.max_shrink,
        )
        ch.n_evals["ess_whole"] += n
        ch.X = X
        ch.Phi = rff(ch.XZ, W)

    def step_w(self, ch, prop, log_u):
        """Prior-proposal Metropolis-Hastings of each frequency on the collapsed likelihood,
        Phi^T Phi and Phi^T Yf updated in the two columns of the frequency."""
        Phi = ch.Phi
        A, C = self.stats(ch, Phi)
        cur = self.collapsed(ch, A, C)
        XZ, M = ch.XZ, ch.M
        for m in range(M):
            idx = [m, M + m]
            g = XZ @ prop[m]
            new_cols = np.column_stack([np.cos(g), np.sin(g)]) / np.sqrt(M)
            old_cols = Phi[:, idx].copy()
            Phi[:, idx] = new_cols
            A2, C2 = A.copy(), C.copy()
            cross = Phi.T @ new_cols
            A2[:, idx] = cross
            A2[idx, :] = cross.T
            C2[idx] = new_cols.T @ ch.Yf
            ll = self.collapsed(ch, A2, C2)
            if log_u[m] < ll - cur:
                A, C, cur = A2, C2, ll
                ch.W[m] = prop[m]
                ch.accept[0] += 1
            else:
                Phi[:, idx] = old_cols
            ch.accept[1] += 1

    def step_beta(self, ch):
        """c on its grid, (beta_j, sigma_j^2) from the NIG posterior, then the imputation."""
        self.draw_beta(ch, update_scale=True)
        self.impute(ch)

    # ------------------------------------------------------------ HMC gradient (float32)
    def grad_prep(self, ch):
        # [Phi, Yf]: Phi^T Phi and Phi^T Yf from one product, d/dPhi = [Phi, Yf] @ rhs
        p = 2 * ch.M
        PhiY = np.empty((ch.N, p + ch.J), np.float32)
        PhiY[:, p:] = ch.Yf
        return PhiY, np.empty((p + ch.J, p), np.float32)

    def grad_phi(self, ch, G, prep):
        """With A = Phi^T Phi + I / c, m_j = A^-1 Phi^T y_j, r_j = y_j - Phi m_j and
        s_j = a_n / (b0 + q_j / 2) (q_j = y_j^T r_j), d/dPhi = sum_j s_j r_j m_j^T - J Phi A^-1
        = [Phi, Y] @ [-(m S m^T + J A^-1); S m^T]: the products [Phi, Y]^T [Phi, Y] and
        [Phi, Y] @ rhs in float32, rhs from potrf's factor of A (:func:`_gauss_grad_rhs`)."""
        PhiY, rhs = prep
        p = 2 * ch.M
        Phi = rff_from_arg32(G, out=PhiY[:, :p])
        S = (PhiY.T @ PhiY).astype(float)
        A = S[:p, :p]
        A.flat[:: p + 1] += 1.0 / ch.c
        L, info = dpotrf(A, lower=1, clean=1)
        if info != 0:
            raise np.linalg.LinAlgError("Phi^T Phi + I / c is not positive definite")
        b0 = ch.est.noise_prior[1]
        _gauss_grad_rhs(np.ascontiguousarray(L), S[:p, p:], ch.yy, ch.a_n, b0, ch.J, rhs)
        return Phi, PhiY @ rhs


FAMILIES = {
    f.name: f for f in (Gaussian(), Bernoulli(), NegativeBinomial(), Multinomial(), Poisson())
}
LIKELIHOODS = tuple(FAMILIES)
COUNT_LIKELIHOODS = tuple(name for name, family in FAMILIES.items() if family.counts)


def likelihood_of(name):
    """The likelihood object of ``RFLVM(likelihood=name)``."""
    return FAMILIES[name]
