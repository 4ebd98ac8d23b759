"""State and sampler steps of one RFLVM chain (the iteration of the package docstring)."""

import time

import numpy as np
from scipy.linalg import solve_triangular
from scipy.linalg.blas import dtrsm
from scipy.linalg.lapack import dpotrf
from scipy.special import gammaln, logsumexp

from ...inference import sample_polyagamma
from ...inference.chain import burn_in_of
from ...inference.dp import NIWPrior, escobar_west, sample_dp_assignments, sample_dp_components
from ...inference.ess import elliptical_slice, elliptical_slice_rows
from ...inference.hmc import (
    dual_averaging,
    dual_averaging_final,
    dual_averaging_start,
    find_step_size,
    hmc_step,
)
from ...inference.ibp import (
    ensemble_log_mean,
    ensemble_pick,
    ibp_slice_sweep,
    sample_active_sticks,
    sample_ibp_alpha,
    sample_slice_sticks,
)
from .._base import map_blocks
from ._kernels import (
    _collapsed_row_sweep,
    _gauss_grad_rhs,
    _gauss_rows,
    _grad_latent,
)
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

LIKELIHOODS = ("gaussian", "bernoulli", "negative_binomial", "multinomial", "poisson")
COUNT_LIKELIHOODS = ("negative_binomial", "multinomial", "poisson")
STEPS = ("z", "x", "hmc", "dp", "w", "beta")
W_INIT_SCALE = 0.1
# columns per block of the logistic-link HMC gradient (map_blocks): four blocks at J = 2,000, so
# a thread slowed by a busy core takes fewer of them
GRAD_BLOCK = 512
W_ROW_BLOCK = 128  # rows per block of the W step's float32 first stage (map_blocks)


class _Chain:
    """State and sampler steps of one RFLVM chain (all arrays whole-matrix numpy)."""

    _NOT_STATE = ("est", "rng", "Y", "obs")

    def __init__(self, est, Y, obs, rng):
        self.est = est
        self.lik = est.likelihood
        self.sparse = est.sparse
        self.rng = rng
        self.Y = np.where(obs, Y, 0.0)
        self.obs = obs
        self.any_missing = not obs.all()
        self.N, self.J = Y.shape
        self.M = est.n_random_features
        self.n_evals = {
            "ess_rows": 0,
            "ess_whole": 0,
            "ess_w": 0,
            "collapsed_rows": 0,
            "collapsed_z": 0,
            "z_rows64": 0,
            "z_rejected": 0,
        }
        self.accept = [0, 0]
        self.accept_beta = [0, 0]
        self.hmc_step_size = 0.01
        self.hmc_adapt = None  # step_hmc: search pending (None), adapting (tuple), fixed (False)
        self.hmc_accept = [0.0, 0]
        self.burn = burn_in_of(est.burn_in, est.n_iter)
        N, J, M, D = self.N, self.J, self.M, est.n_latent
        self.X = self._init_latent(D)
        self.Z = np.ones((N, D), bool)
        self.alpha = 1.0
        self.pi = rng.beta(N, 1.0, size=D) if self.sparse else np.ones(D)
        # near-linear start: with |w' x| ~ 0.1, phi(x) beta ~ a linear map of the PCA scores
        # (sin u ~ u), so the chain starts where a linear factor model would; from frequencies
        # of scale 1 the PCA scores sit in a random non-linear map and the chain stays far below
        # the linear fit (Wisconsin, Cambridge bars; docs/models.md)
        self.W = W_INIT_SCALE * rng.standard_normal((M, D))
        self.labels = np.zeros(M, int)
        self.eta = 1.0
        self._dp_update()
        if self.lik == "gaussian":
            a0, b0 = est.noise_prior
            self.a_n = a0 + 0.5 * N
            colmean = np.sum(self.Y, 0) / np.maximum(obs.sum(0), 1)
            self.Yf = np.where(obs, self.Y, colmean)
            self.yy = np.sum(self.Yf**2, axis=0)
            self.sigma2 = np.ones(J)
            self.c_grid = est._scale_grid()
            self.c = float(np.sqrt(self.c_grid[0] * self.c_grid[-1]))
        self.r = np.ones(J) * (10.0 if self.lik == "negative_binomial" else 1.0)
        if self.lik == "multinomial":
            self.n_row = self.Y.sum(axis=1)
        self._refresh_const()
        self.Phi = rff(self.XZ, self.W)
        self.beta = np.zeros((2 * M, J))
        self.step_beta(0)

    def state(self):
        """Every attribute the next iteration reads, less the estimator, the Generator and the
        data (for a checkpoint)."""
        return {k: v for k, v in self.__dict__.items() if k not in self._NOT_STATE}

    @classmethod
    def restore(cls, est, Y, obs, rng, state):
        """The chain of :meth:`state` on the data ``Y`` (NaN where ``obs`` is False)."""
        chain = cls.__new__(cls)
        chain.__dict__.update(state)
        chain.est, chain.rng, chain.obs = est, rng, obs
        chain.Y = np.where(obs, Y, 0.0)
        return chain

    # ------------------------------------------------------------------ helpers
    def _init_latent(self, D):
        """PCA scores of the (column-mean imputed, variance-stabilised) data, unit variance."""
        Y = self.Y.copy()
        if self.lik in COUNT_LIKELIHOODS:
            Y = np.sqrt(Y)
        mean = np.sum(np.where(self.obs, Y, 0), 0) / np.maximum(self.obs.sum(0), 1)
        Yc = np.where(self.obs, Y, mean) - mean
        U, S, _ = np.linalg.svd(Yc, full_matrices=False)
        X = np.zeros((self.N, D))
        k = min(D, U.shape[1])
        X[:, :k] = U[:, :k] * S[:k]
        sd = X.std(axis=0)
        X[:, sd > 0] /= sd[sd > 0]
        X[:, sd == 0] = self.rng.standard_normal((self.N, int(np.sum(sd == 0))))
        return X

    @property
    def XZ(self):
        return self.X * self.Z

    @property
    def D(self):
        return self.X.shape[1]

    def _refresh_const(self):
        """Per-row sums of the terms of log p(y | psi) that do not depend on psi."""
        Y, obs = self.Y, self.obs
        self._obsf = obs.astype(float)
        # weight of softplus(psi) in the logistic-link likelihoods (zero at missing entries)
        self._logit_weight = self._obsf
        if self.lik == "negative_binomial":
            self._logit_weight = (Y + self.r) * self._obsf
            c = gammaln(Y + self.r) - gammaln(self.r) - gammaln(Y + 1)
        elif self.lik == "poisson":
            c = -gammaln(Y + 1)
        elif self.lik == "multinomial":
            self.const_rows = gammaln(self.n_row + 1) - np.sum(np.where(obs, gammaln(Y + 1), 0), 1)
            return
        elif self.lik == "gaussian":
            c = np.broadcast_to(-0.5 * np.log(2 * np.pi * self.sigma2), Y.shape)
        else:
            c = np.zeros_like(Y)
        self.const_rows = np.sum(np.where(obs, c, 0.0), axis=1)

    def psi_of(self, Phi):
        return Phi @ self.beta

    def row_loglik(self, psi, rows=None):
        """Per-row log p(y_i | psi_i, theta) over the observed entries of rows ``rows``."""
        rows = slice(None) if rows is None else rows
        Y, obs, c = self.Y[rows], self.obs[rows], self.const_rows[rows]
        if self.lik == "gaussian":
            e = -0.5 * (Y - psi) ** 2 / self.sigma2
        elif self.lik in ("bernoulli", "negative_binomial"):
            # Y is zero at missing entries, so only the psi-only term needs the mask
            return logistic_rows(Y, self._logit_weight[rows], psi) + c
        elif self.lik == "poisson":
            return np.sum(np.where(obs, Y * psi - np.exp(psi), 0.0), axis=1) + c
        else:
            lse = logsumexp(np.where(obs, psi, -np.inf), axis=1)
            lse = np.where(np.isfinite(lse), lse, 0.0)
            e = Y * psi
            return np.sum(np.where(obs, e, 0.0), axis=1) - self.n_row[rows] * lse + c
        return np.sum(np.where(obs, e, 0.0), axis=1) + c

    # ------------------------------------------------------------ Gaussian collapsed
    def _gauss_stats(self, Phi):
        return Phi.T @ Phi, Phi.T @ self.Yf

    @staticmethod
    def _gauss_eig(G, C):
        """Eigenvalues of G = Phi^T Phi (floored at 0), eigenvectors U and Q = U^T C."""
        lam, U = np.linalg.eigh(G)
        return np.maximum(lam, 0.0), U, U.T @ C

    def _gauss_const(self):
        """The terms of each column's collapsed log likelihood that depend on no variable."""
        a0, b0 = self.est.noise_prior
        return gammaln(self.a_n) - gammaln(a0) + a0 * np.log(b0) - 0.5 * self.N * np.log(2 * np.pi)

    def _gauss_marginal_cols(self, lam, Q2, c):
        """log p(y_j | Phi, c) of every column (complete data ``Yf``) with beta_j and sigma_j^2
        integrated out (section 3.1): y_j ~ t_{2 a0}(0, (b0 / a0)(I + c Phi Phi^T)).

        With Phi^T Phi = U diag(lam) U^T and Q2 = (U^T Phi^T Y)^2 (p, J): log|I + c Phi Phi^T| =
        sum log(1 + c lam) and y^T (I + c Phi Phi^T)^-1 y = y^T y - sum c q^2 / (1 + c lam)
        (Woodbury). ``c`` is a vector of G scales; returns (G, J), O(G p J).
        """
        b0 = self.est.noise_prior[1]
        c = np.atleast_1d(np.asarray(c, float))
        den = 1.0 + np.outer(c, lam)
        quad = np.maximum(self.yy - (c[:, None] / den) @ Q2, 0.0)
        logdet = np.sum(np.log(den), axis=1)[:, None]
        return self._gauss_const() - 0.5 * logdet - self.a_n * np.log(b0 + 0.5 * quad)

    def _gauss_collapsed(self, G, C):
        """sum_j log p(y_j | Phi, c) at the current c, beta and sigma^2 integrated out;
        G = Phi^T Phi, C = Phi^T Yf. Through the Cholesky factor L of A = G + I / c (one for all
        columns, O(p^3 / 3 + p^2 J)): log|I + c Phi Phi^T| = p log c + log|A| and
        y^T (I + c Phi Phi^T)^-1 y = y^T y - C^T A^-1 C (Woodbury)."""
        b0 = self.est.noise_prior[1]
        p = G.shape[0]
        A = G.copy()
        A.flat[:: p + 1] += 1.0 / self.c
        L, info = dpotrf(A, lower=1, clean=0, overwrite_a=1)
        if info != 0:
            return -np.inf
        V = dtrsm(1.0, L, C, lower=1)
        quad = np.maximum(self.yy - np.sum(V * V, axis=0), 0.0)
        logdet = p * np.log(self.c) + 2.0 * np.sum(np.log(np.diag(L)))
        return float(
            self.J * (self._gauss_const() - 0.5 * logdet)
            - self.a_n * np.sum(np.log(b0 + 0.5 * quad))
        )

    def _gauss_scale_step(self, lam, Q2):
        """Prior scale c of beta_j | sigma_j^2 ~ N(0, sigma_j^2 c I), shared by the columns:
        discrete log-uniform prior on ``c_grid``, so its conditional p(c | Yf, X, Z, W) is
        proportional to prod_j t_{2 a0}(y_j; 0, (b0 / a0)(I + c Phi Phi^T)) on the grid and is
        drawn exactly (O(p J) per grid point given the eigendecomposition)."""
        lp = np.sum(self._gauss_marginal_cols(lam, Q2, self.c_grid), axis=1)
        p = np.exp(lp - lp.max())
        self.c = float(self.c_grid[self.rng.choice(p.size, p=p / p.sum())])

    def _gauss_beta(self, update_scale=False):
        """Gaussian: (optionally c, then) (beta_j, sigma_j^2) jointly from the normal-inverse-
        gamma posterior given the complete data: with A = Phi^T Phi + I / c,
        sigma_j^2 ~ IG(a0 + N / 2, b0 + (y^T y - y^T Phi A^-1 Phi^T y) / 2) and
        beta_j | sigma_j^2 ~ N(A^-1 Phi^T y_j, sigma_j^2 A^-1). Through the eigendecomposition
        of Phi^T Phi when c is drawn (its grid needs it), else through the Cholesky factor
        L of A: with V = L^-1 Phi^T Y, beta_j = L^-T (v_j + sigma_j eps_j)."""
        rng = self.rng
        b0 = self.est.noise_prior[1]
        G, C = self._gauss_stats(self.Phi)
        L = None
        if not update_scale:
            p = G.shape[0]
            A = G.copy()
            A.flat[:: p + 1] += 1.0 / self.c
            L, info = dpotrf(A, lower=1, clean=1, overwrite_a=1)
            if info != 0:  # numerically indefinite: the eigendecomposition floors it at 0
                L = None
        if L is None:
            lam, U, Q = self._gauss_eig(G, C)
            if update_scale:
                self._gauss_scale_step(lam, Q * Q)
            prec = lam[:, None] + 1.0 / self.c
            fit = np.sum(Q * Q / prec, axis=0)
        else:
            V = dtrsm(1.0, L, C, lower=1)
            fit = np.sum(V * V, axis=0)
        b_n = b0 + 0.5 * np.maximum(self.yy - fit, 0.0)
        self.sigma2 = np.maximum(b_n / rng.gamma(self.a_n, 1.0, size=self.J), 1e-10)
        eps = rng.standard_normal(C.shape)
        if L is None:
            self.beta = U @ (Q / prec + np.sqrt(self.sigma2) * eps / np.sqrt(prec))
        else:
            self.beta = dtrsm(1.0, L, V + np.sqrt(self.sigma2) * eps, lower=1, trans_a=1)
        self._refresh_const()

    def _impute(self):
        if not self.any_missing:
            return
        psi = self.psi_of(self.Phi)
        draw = psi + np.sqrt(self.sigma2) * self.rng.standard_normal(psi.shape)
        self.Yf = np.where(self.obs, self.Y, draw)
        self.yy = np.sum(self.Yf**2, axis=0)

    # ------------------------------------------------------------------ steps
    def step_z(self, it):
        """IBP slice sweep (eq. 16-19), the active weights (eq. 18) and alpha (eq. 20). Gaussian
        likelihood: every (z_ik, x_ik) from its collapsed conditional in a sequential sweep over
        the rows (:meth:`_collapsed_sweep`); other likelihoods: column by column given beta
        (:func:`ibp_slice_sweep`), each z_ik jointly with x_ik over an ensemble."""
        if not self.sparse:
            return
        if self.lik == "gaussian":
            self._impute()
            new = sample_slice_sticks(self.pi, self.alpha, self.N, self.rng)
            if new.size:
                self.X = np.hstack([self.X, self.rng.standard_normal((self.N, new.size))])
                self.Z = np.hstack([self.Z, np.zeros((self.N, new.size), bool)])
                self.pi = np.concatenate([self.pi, new])
                self._extend_w(new.size)
            self._collapsed_sweep(update_z=True)
            keep = self.Z.any(axis=0)
            self.Z = self.Z[:, keep]
            self.pi = sample_active_sticks(self.Z.sum(axis=0), self.N, self.rng)
        else:
            keep = self._z_given_beta()
        self.X = self.X[:, keep]
        self.W = self.W[:, keep]
        self.mus = self.mus[:, keep]
        self.Sigmas = self.Sigmas[:, keep][:, :, keep]
        self.Phi = rff(self.XZ, self.W)
        a0, b0 = self.est.ibp_alpha_prior
        self.alpha = sample_ibp_alpha(self.D, self.N, a0, b0, self.rng)

    def _z_given_beta(self):
        """The slice sweep of :func:`ibp_slice_sweep` with the likelihood given beta; sets Z and
        pi (surviving columns) and returns which columns of the extended matrix survive.

        Bernoulli and negative binomial (delayed acceptance, as in :meth:`step_w`): column k's
        state s = (z_ik, ensemble index c_i)_i is proposed from its conditional q under the
        float32 likelihood :func:`logistic_rows` (``n_x_proposals`` + 1 per row) and accepted
        with probability min(1, [p(s') / q(s')] / [p(s) / q(s)]), p the float64 conditional:
        Metropolis-Hastings with an independence proposal, exact. p / q is a product over the
        rows of exp(ll - ll~) at each row's own state (prior and slice factors cancel), so only
        the rows whose state changes enter, and only their float64 likelihoods are computed.
        Other likelihoods draw from the float64 conditional directly.
        """
        rng, f32 = self.rng, np.float32
        n_prop = self.est.n_x_proposals
        screen = self.lik in ("bernoulli", "negative_binomial")
        if screen:
            Y32, weight32 = self.Y.astype(f32), self._logit_weight.astype(f32)
            beta32 = self.beta.astype(f32)
            ll_cur = self.row_loglik(self.psi_of(rff(self.XZ, self.W)))  # float64, per row

            def rows_ll(G):
                return logistic_rows(Y32, weight32, rff_from_arg32(G) @ beta32)

        else:

            def rows_ll(G):
                return self.row_loglik(self.psi_of(rff_from_arg(G)))

        def on_new(n_new):
            self.X = np.hstack([self.X, rng.standard_normal((self.N, n_new))])
            self._extend_w(n_new)

        cand = {}

        def column_loglik(k, Z):
            """Rows' log likelihoods with z_ik = 0 and, for z_ik = 1, the mean likelihood over
            the ensemble {current x_ik, n_x_proposals - 1 draws from N(0, 1)}."""
            G = (self.X * Z) @ self.W.T
            base = G - np.outer(self.X[:, k] * Z[:, k], self.W[:, k])
            xs = np.vstack([self.X[:, k], rng.standard_normal((n_prop - 1, self.N))])
            # the n_prop + 1 likelihoods are independent: on the worker threads (map_blocks)
            *ll_on, ll_off = map_blocks(
                rows_ll, [base + np.outer(x, self.W[:, k]) for x in xs] + [base]
            )
            ll_on = np.stack(ll_on)
            cand.update(x=xs, ll=ll_on, off=ll_off, Z=Z, z=Z[:, k].copy())
            return ll_off, ensemble_log_mean(ll_on)

        def on_column(k, z):
            pick = ensemble_pick(cand["ll"], z, rng)
            if screen:
                z0 = cand["z"]
                rows = np.flatnonzero((z != z0) | (z & (pick > 0)))  # rows whose state moves
                if rows.size:
                    XZ = self.X[rows] * cand["Z"][rows]
                    XZ[:, k] = cand["x"][pick[rows], rows] * z[rows]
                    ll_new = self.row_loglik(self.psi_of(rff_from_arg(XZ @ self.W.T)), rows)
                    ll = cand["ll"]
                    q_new = np.where(z[rows], ll[pick[rows], rows], cand["off"][rows])
                    q_old = np.where(z0[rows], ll[0, rows], cand["off"][rows])
                    log_r = np.sum(ll_new - q_new - ll_cur[rows] + q_old)
                    ev = self.n_evals  # .get: a checkpoint of session 7 lacks these keys
                    ev["z_rows64"] = ev.get("z_rows64", 0) + rows.size
                    if np.log(rng.uniform()) < log_r:
                        ll_cur[rows] = ll_new
                    else:  # keep the column: z is the sweep's own column (a view)
                        z[:] = z0
                        pick[:] = 0
                        ev["z_rejected"] = ev.get("z_rejected", 0) + 1
            self.X[:, k] = cand["x"][pick, np.arange(self.N)]

        Z, pi, keep = ibp_slice_sweep(
            self.Z,
            self.pi,
            self.alpha,
            self.rng,
            column_loglik=column_loglik,
            on_new=on_new,
            on_column=on_column,
        )
        self.Z, self.pi = Z, pi
        return keep

    def _extend_w(self, n_new):
        """New latent dimensions: each component gets a new mean coordinate and variance from the
        one-dimensional margins of its NIW prior (Sigma block-diagonal in the new coordinate;
        nu0 = d + 2 gives an IG(3/2, 1/2) diagonal), and each w_m a new coordinate from its
        component."""
        K = self.mus.shape[0]
        for _ in range(n_new):
            var = 1.0 / self.rng.gamma(1.5, 2.0, size=K)
            mu = self.rng.standard_normal(K) * np.sqrt(var)
            col = mu[self.labels] + np.sqrt(var[self.labels]) * self.rng.standard_normal(self.M)
            self.W = np.hstack([self.W, col[:, None]])
            self.mus = np.hstack([self.mus, mu[:, None]])
            d = self.Sigmas.shape[1]
            S = np.zeros((K, d + 1, d + 1))
            S[:, :d, :d] = self.Sigmas
            S[:, d, d] = var
            self.Sigmas = S

    def step_x(self, it):
        """X: Gaussian likelihood: a collapsed sequential sweep over rows (see
        :meth:`_x_collapsed`), then ``x_sweeps`` alternations of (beta, sigma^2 from their NIG
        posterior; row-wise ESS given them), then a collapsed whole-matrix ESS step. Other
        likelihoods: row-wise ESS given beta, all rows in parallel."""
        if self.lik == "gaussian":
            self._impute()  # the z sweep integrated the missing entries out
        if self.D == 0:
            return
        Z, W = self.Z, self.W

        def rows_ll(Xr, idx):
            psi = rff(Xr * Z[idx], W) @ self.beta
            if self.lik == "gaussian":  # row_loglik's, in one pass over the rows
                return _gauss_rows(psi, self.Y, self.obs, self.sigma2, self.const_rows, idx)
            return self.row_loglik(psi, idx)

        if self.lik == "gaussian" and not self.sparse:
            self._collapsed_sweep(update_z=False)  # the sparse model's z step did this sweep
        n_sweeps = self.est.x_sweeps if self.lik == "gaussian" else 1
        for _ in range(n_sweeps):
            if self.lik == "gaussian":
                self._gauss_beta()
            self.X, _, n = elliptical_slice_rows(
                self.X,
                self.rng.standard_normal(self.X.shape),
                rows_ll,
                self.rng,
                max_shrink=self.est.max_shrink,
            )
            self.n_evals["ess_rows"] += n
            self.Phi = rff(self.XZ, W)
            if self.lik == "gaussian":
                self._impute()
        if self.lik != "gaussian":
            return

        def whole_ll(Xc):
            return self._gauss_collapsed(*self._gauss_stats(rff(Xc * Z, W)))

        X, _, n = elliptical_slice(
            self.X,
            self.rng.standard_normal(self.X.shape),
            whole_ll,
            self.rng,
            max_shrink=self.est.max_shrink,
        )
        self.n_evals["ess_whole"] += n
        self.X = X
        self.Phi = rff(self.XZ, W)

    def _collapsed_sweep(self, update_z):
        """Gaussian: one sequential sweep over the rows with beta and sigma^2 integrated out
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
        K = self.est.n_x_proposals
        if self.D == 0 or (K < 2 and not update_z):
            return
        rng = self.rng
        N, D = self.N, self.D
        a0, b0 = self.est.noise_prior
        G, B = self._gauss_stats(self.Phi)
        _, Ainv = chol_inverse(G + np.eye(G.shape[0]) / self.c)
        if update_z:
            self.n_evals["collapsed_z"] += N * D * (K + 1)
        else:
            self.n_evals["collapsed_rows"] += N * int(round(self.Z.sum(1).mean() * K))
        _collapsed_row_sweep(
            self.X,
            self.Z,
            self.W,
            self.Yf,
            self.Phi.copy(),
            Ainv,
            B,
            self.yy,
            self.pi,
            rng.standard_normal((K - 1, N, D)),
            rng.gumbel(size=(N, D, K)),
            rng.uniform(size=(N, D)),
            np.argsort(rng.uniform(size=(N, D)), axis=1),
            float(a0),
            float(b0),
            update_z,
        )
        self.Phi = rff(self.XZ, self.W)

    def _log_target_xw(self, X, W, chol_inv):
        """log p(X, W | rest) up to a constant (float64: the Metropolis target of the HMC step).

        Gaussian: the collapsed likelihood of the completed data (beta_j, sigma_j^2 integrated
        out, :meth:`_gauss_collapsed`); other likelihoods: log p(y | Phi beta) given beta. Plus
        the priors N(0, I) on x_i and N(mu_k, Sigma_k) on w_m given its mixture component
        (``chol_inv`` the inverse Cholesky factors).
        """
        Phi = rff(X * self.Z, W)
        if self.lik == "gaussian":
            value = self._gauss_collapsed(*self._gauss_stats(Phi))
        else:
            value = float(self.row_loglik(Phi @ self.beta).sum())
        white = np.einsum("mij,mj->mi", chol_inv, W - self.mus[self.labels])
        return float(value - 0.5 * np.sum(X * X) - 0.5 * np.sum(white * white))

    def _grad_prep(self):
        """The data and parameters the HMC gradient reads, in the precision it uses; they are
        fixed during the HMC step."""
        f32 = np.float32
        if self.lik == "gaussian":
            # [Phi, Yf]: Phi^T Phi and Phi^T Yf from one product, d/dPhi = [Phi, Yf] @ rhs
            p = 2 * self.M
            PhiY = np.empty((self.N, p + self.J), f32)
            PhiY[:, p:] = self.Yf
            return PhiY, np.empty((p + self.J, p), f32)
        if self.lik in ("bernoulli", "negative_binomial"):
            # column blocks of (Y, weight, beta) for map_blocks; fixed by J, not by the threads
            blocks = [slice(j, j + GRAD_BLOCK) for j in range(0, self.J, GRAD_BLOCK)]
            Y, weight, beta = self.Y, self._logit_weight, self.beta
            return [
                (Y[:, b].astype(f32), weight[:, b].astype(f32), beta[:, b].astype(f32))
                for b in blocks
            ]
        return ()

    def _grad_xw(self, X, W, chol_inv, prep):
        """Gradient of :meth:`_log_target_xw` with respect to X and W (``prep`` from
        :meth:`_grad_prep`). The Gaussian and logistic-link likelihoods compute Phi and the
        products with it in float32 (the p x p factorisation in float64): the HMC kicks need
        only a deterministic function of the position (:func:`hmc_step`), the Metropolis step
        uses the float64 target.

        Gaussian: with A = Phi^T Phi + I / c, m_j = A^-1 Phi^T y_j, r_j = y_j - Phi m_j and
        s_j = a_n / (b0 + q_j / 2) (q_j = y_j^T r_j), d/dPhi = sum_j s_j r_j m_j^T - J Phi A^-1
        = [Phi, Y] @ [-(m S m^T + J A^-1); S m^T]: the products [Phi, Y]^T [Phi, Y] and
        [Phi, Y] @ rhs in float32, rhs from potrf's factor of A (:func:`_gauss_grad_rhs`).
        Bernoulli and negative binomial: d/dPhi = (Y - weight * sigmoid(Phi beta)) beta^T;
        Poisson and multinomial (float64): d/dPhi = (d/dpsi) beta^T. Then Phi = [cos G, sin G]
        / sqrt(M), G = (X * Z) W^T, so d/dX = (dG W) * Z and d/dW = dG^T (X * Z); the priors
        add -x and -Sigma_k^-1 (w_m - mu_k) (:func:`_grad_latent`).
        """
        Z = self.Z
        XZ = X * Z
        G = XZ @ W.T
        if self.lik == "gaussian":
            PhiY, rhs = prep
            p = 2 * self.M
            Phi = rff_from_arg32(G, out=PhiY[:, :p])
            S = (PhiY.T @ PhiY).astype(float)
            A = S[:p, :p]
            A.flat[:: p + 1] += 1.0 / self.c
            L, info = dpotrf(A, lower=1, clean=1)
            if info != 0:
                raise np.linalg.LinAlgError("Phi^T Phi + I / c is not positive definite")
            b0 = self.est.noise_prior[1]
            _gauss_grad_rhs(np.ascontiguousarray(L), S[:p, p:], self.yy, self.a_n, b0, self.J, rhs)
            d_phi = PhiY @ rhs
        elif self.lik in ("bernoulli", "negative_binomial"):
            Phi = rff_from_arg32(G)

            def d_phi_block(Y, weight, beta):
                t = Phi @ beta  # psi, then in place: Y - weight / (1 + exp(-psi))
                with np.errstate(over="ignore"):
                    np.exp(np.negative(t, out=t), out=t)
                t += 1.0
                np.subtract(Y, np.divide(weight, t, out=t), out=t)
                return t @ beta.T

            d_phi = np.sum(map_blocks(d_phi_block, *zip(*prep)), axis=0)
        else:
            Phi = rff_from_arg(G)
            d_phi = self._dloglik_dpsi(Phi @ self.beta) @ self.beta.T
        return _grad_latent(d_phi, Phi, X, Z, W, self.mus[self.labels], chol_inv)

    def _dloglik_dpsi(self, psi):
        """d log p(y | psi) / d psi over the observed entries (zero at missing ones): Poisson
        and multinomial (the logistic-link gradient is formed in :meth:`_grad_xw`, the
        Gaussian HMC target is collapsed)."""
        Y, obs = self.Y, self._obsf
        if self.lik == "poisson":
            return obs * (Y - np.exp(psi))
        logits = np.where(self.obs, psi, -np.inf)
        soft = np.exp(logits - logsumexp(logits, axis=1, keepdims=True))
        return obs * (Y - self.n_row[:, None] * np.nan_to_num(soft))

    def step_hmc(self, it):
        """``hmc_moves`` Hamiltonian Monte Carlo transitions on (X, W) jointly (Neal 2011),
        ``hmc_leapfrog`` leapfrog steps each, under :meth:`_log_target_xw` with Z, the mixture
        assignments and parameters, c and the completed data held fixed. The gradient moves
        every latent coordinate and every frequency at once along the likelihood, where the
        elliptical slice steps shrink toward the current state once the posterior is much
        narrower than the prior. The step size is found at the chain's first call
        (:func:`find_step_size`: one leapfrog step accepting with probability about 1/2), adapts
        by dual averaging toward an acceptance probability of 0.7 during burn-in only, is fixed
        to the averaged step afterwards (also from a checkpoint written before this
        adaptation existed: its step as it was) and is jittered by U(0.8, 1.2) per move."""
        if self.D == 0 or self.est.hmc_moves == 0:
            return
        chol_inv = np.linalg.inv(np.linalg.cholesky(self.Sigmas))[self.labels]
        prep = self._grad_prep()

        def log_target(X, W):
            return self._log_target_xw(X, W, chol_inv)

        def grad(X, W):
            return self._grad_xw(X, W, chol_inv, prep)

        adapt = getattr(self, "hmc_adapt", False)
        if adapt is None:  # a new chain's first call
            xw, eps = (self.X, self.W), self.hmc_step_size
            self.hmc_step_size = find_step_size(xw, log_target, grad, eps, self.rng)
            adapt = dual_averaging_start(self.hmc_step_size)
        if it >= self.burn and adapt:
            self.hmc_step_size, adapt = dual_averaging_final(adapt), False
        for _ in range(self.est.hmc_moves):
            eps = self.hmc_step_size * self.rng.uniform(0.8, 1.2)
            (self.X, self.W), prob = hmc_step(
                (self.X, self.W), log_target, grad, eps, self.est.hmc_leapfrog, self.rng
            )
            self.hmc_accept[0] += prob
            self.hmc_accept[1] += 1
            if adapt:
                adapt, self.hmc_step_size = dual_averaging(adapt, prob)
        self.hmc_adapt = adapt
        self.Phi = rff(self.XZ, self.W)

    def _dp_update(self):
        prior = NIWPrior(self.D)
        if self.D:
            self.labels = sample_dp_assignments(self.W, self.labels, self.eta, prior, self.rng)
            self.mus, self.Sigmas = sample_dp_components(self.W, self.labels, prior, self.rng)
        else:
            self.labels = np.zeros(self.M, int)
            self.mus, self.Sigmas = np.zeros((1, 0)), np.zeros((1, 0, 0))
        a, b = self.est.dp_eta_prior
        self.eta = float(escobar_west(self.eta, self.labels.max() + 1, self.M, a, b, self.rng))

    def step_dp(self, it):
        """DP mixture over the frequencies (eq. 22-24) and its concentration (eq. 25)."""
        self._dp_update()

    def step_w(self, it):
        """Metropolis-Hastings for each frequency with the prior as proposal (eq. 21).

        Bernoulli and negative binomial: delayed acceptance (Christen & Fox 2005) with the
        float32 log likelihood :func:`logistic_rows` as the first stage, exact: a proposal
        passes the first stage with probability min(1, exp(d~)) (d~ its change of the
        approximate log likelihood) and is then accepted with probability
        min(1, exp(d - d~)) (d the change of the exact one), so the exact likelihood is
        evaluated only for the few proposals the approximation would accept.
        """
        if self.D == 0:
            return
        M, rng = self.M, self.rng
        chol = np.linalg.cholesky(self.Sigmas)
        eps = rng.standard_normal((M, self.D))
        prop = self.mus[self.labels] + np.einsum("mij,mj->mi", chol[self.labels], eps)
        log_u = np.log(rng.uniform(size=M))
        XZ = self.XZ
        Phi = self.Phi
        if self.lik == "gaussian":
            A, C = self._gauss_stats(Phi)
            cur = self._gauss_collapsed(A, C)
        else:
            psi = self.psi_of(Phi)
            cur = self.row_loglik(psi).sum()
            screen = self.lik in ("bernoulli", "negative_binomial")
            if screen:
                Y32, weight32 = self.Y.astype(np.float32), self._logit_weight.astype(np.float32)

                def approx(psi):
                    return float(logistic_rows(Y32, weight32, psi.astype(np.float32)).sum())

                psi2 = np.empty_like(psi)

                def propose_rows(rows):
                    """psi2 = psi + delta beta_m on ``rows``, and their float32 likelihood."""
                    np.add(psi[rows], delta[rows] @ beta_m, out=psi2[rows])
                    ll = logistic_rows(Y32[rows], weight32[rows], psi2[rows].astype(np.float32))
                    return ll.sum()

                row_blocks = [slice(i, i + W_ROW_BLOCK) for i in range(0, self.N, W_ROW_BLOCK)]
                cur_s = approx(psi)
                log_u2 = np.log(rng.uniform(size=M))
        for m in range(M):
            idx = [m, M + m]
            g = XZ @ prop[m]
            new_cols = np.column_stack([np.cos(g), np.sin(g)]) / np.sqrt(M)
            old_cols = Phi[:, idx].copy()
            if self.lik == "gaussian":
                Phi[:, idx] = new_cols
                A2, C2 = A.copy(), C.copy()
                cross = Phi.T @ new_cols
                A2[:, idx] = cross
                A2[idx, :] = cross.T
                C2[idx] = new_cols.T @ self.Yf
                ll = self._gauss_collapsed(A2, C2)
                if log_u[m] < ll - cur:
                    A, C, cur = A2, C2, ll
                    self.W[m] = prop[m]
                    self.accept[0] += 1
                else:
                    Phi[:, idx] = old_cols
            else:
                delta, beta_m = new_cols - old_cols, self.beta[idx]
                if screen:  # row blocks on the worker threads (map_blocks)
                    ll_s = float(np.sum(map_blocks(propose_rows, row_blocks)))
                    take = log_u[m] < ll_s - cur_s
                    if take:
                        ll = self.row_loglik(psi2).sum()
                        take = log_u2[m] < (ll - cur) - (ll_s - cur_s)
                else:
                    psi2 = psi + delta @ beta_m
                    ll = self.row_loglik(psi2).sum()
                    take = log_u[m] < ll - cur
                if take:
                    psi, psi2, cur = psi2, psi, ll
                    if screen:
                        cur_s = ll_s
                    Phi[:, idx] = new_cols
                    self.W[m] = prop[m]
                    self.accept[0] += 1
            self.accept[1] += 1
        self.Phi = rff(self.XZ, self.W)
        self._w_ess(chol)

    def _w_ess(self, chol):
        """An extra elliptical slice step on all frequencies at once under their mixture
        components' Gaussians (collapsed likelihood for the Gaussian model, given beta
        otherwise). Leaves the same conditional invariant as (21); the prior-proposal MH step
        alone accepts a few per cent of proposals, this step always moves."""
        XZ = self.XZ
        if self.lik == "gaussian":

            def ll(Wc):
                return self._gauss_collapsed(*self._gauss_stats(rff(XZ, Wc)))

        else:

            def ll(Wc):
                return float(self.row_loglik(rff(XZ, Wc) @ self.beta).sum())

        nu = np.einsum("mij,mj->mi", chol[self.labels], self.rng.standard_normal(self.W.shape))
        self.W, _, n = elliptical_slice(
            self.W, nu, ll, self.rng, mean=self.mus[self.labels], max_shrink=self.est.max_shrink
        )
        self.n_evals["ess_w"] += n
        self.Phi = rff(XZ, self.W)

    def step_beta(self, it):
        """Regression weights and likelihood parameters given X, Z, W."""
        rng, Phi, Y, obs = self.rng, self.Phi, self.Y, self.obs
        if self.lik == "gaussian":
            self._gauss_beta(update_scale=True)
            self._impute()
            return
        if self.lik == "multinomial":
            self._beta_multinomial()
            return
        if self.lik == "poisson":

            def col_ll(Bc, idx):
                psi = Phi @ Bc.T
                with np.errstate(over="ignore", invalid="ignore"):
                    e = np.where(obs[:, idx], Y[:, idx] * psi - np.exp(psi), 0.0).sum(0)
                return np.where(np.isfinite(e), e, -np.inf)

            for _ in range(3):
                B, _, _ = elliptical_slice_rows(
                    self.beta.T,
                    rng.standard_normal(self.beta.T.shape),
                    col_ll,
                    rng,
                    max_shrink=self.est.max_shrink,
                )
                self.beta = np.ascontiguousarray(B.T)
            self.beta, n_acc = poisson_irls_mh(Phi, Y, obs, self.beta, rng)
            self.accept_beta[0] += n_acc
            self.accept_beta[1] += self.J
            return
        psi = self.psi_of(Phi)
        if self.lik == "bernoulli":
            b, kappa = 1.0, Y - 0.5
        else:
            b, kappa = Y + self.r, 0.5 * (Y - self.r)
        self.beta = sample_logistic_beta(Phi, psi, b, kappa, obs, rng)
        if self.lik == "negative_binomial":
            a, b0 = self.est.dispersion_prior
            sp = _softplus(self.psi_of(Phi))
            self.r = sample_nb_dispersion(Y, sp, obs, self.r, a, b0, rng)
            self._refresh_const()

    def _beta_multinomial(self):
        """Multinomial, eq. (30)-(35), one column at a time (xi_j depends on the other columns,
        so this sweep is sequential). beta_J = 0. Eq. (30) prints the PG exponent as
        y_ij + sum_j y_ij; conditioning the softmax on the others gives (e^{psi - xi})^{y_ij} /
        (1 + e^{psi - xi})^{n_i} with n_i = sum_j y_ij, consistent with tau_ij = y_ij - n_i / 2
        and eq. (35), so b_ij = n_i here. With missing entries the softmax runs over the
        observed columns of each row."""
        rng, Phi, Y, obs = self.rng, self.Phi, self.Y, self.obs
        psi = self.psi_of(Phi)
        p = Phi.shape[1]
        eye = np.eye(p)
        for j in range(self.J - 1):
            others = np.where(obs, psi, -np.inf)
            others[:, j] = -np.inf
            xi = logsumexp(others, axis=1)
            use = obs[:, j] & (self.n_row > 0) & np.isfinite(xi)
            omega = np.zeros(self.N)
            omega[use] = sample_polyagamma(self.n_row[use], psi[use, j] - xi[use], rng)
            h = np.where(use, Y[:, j] - 0.5 * self.n_row + omega * np.where(use, xi, 0.0), 0.0)
            P = Phi.T @ (omega[:, None] * Phi) + eye
            L = np.linalg.cholesky(P)
            u = solve_triangular(L, Phi.T @ h, lower=True)
            self.beta[:, j] = solve_triangular(L.T, u + rng.standard_normal(p), lower=False)
            psi[:, j] = Phi @ self.beta[:, j]
        self.beta[:, -1] = 0.0

    def log_lik(self):
        """Log likelihood of the observed entries at the current state (beta and theta given)."""
        return float(self.row_loglik(self.psi_of(self.Phi)).sum())

    def snapshot(self):
        theta = self.sigma2.copy() if self.lik == "gaussian" else self.r.copy()
        return {
            "XZ": self.XZ.copy(),
            "W": self.W.copy(),
            "beta": self.beta.copy(),
            "theta": theta,
        }

    # ------------------------------------------------- the sampler of inference.chain.run_chain
    @classmethod
    def start(cls, est, Y, obs, rng, state):
        """A new chain (``state`` None; its set-up time in ``secs["init"]``) or a restored one."""
        if state is not None:
            return cls.restore(est, Y, obs, rng, state)
        t0 = time.perf_counter()
        chain = cls(est, Y, obs, rng)
        chain.secs = dict.fromkeys(STEPS, 0.0)
        chain.secs["init"] = time.perf_counter() - t0
        return chain

    def sweep(self, it):
        """One iteration: the steps of the module docstring in order, each timed."""
        for name in STEPS:
            ts = time.perf_counter()
            getattr(self, f"step_{name}")(it)
            self.secs[name] += time.perf_counter() - ts
        self.ll = self.log_lik()
        return {"log_likelihood": self.ll, "n_active": self.D}

    def draw(self):
        # each sample's linear predictor averaged over features: identified (unlike X, W, beta)
        mean = rff(self.XZ, self.W) @ self.beta.mean(axis=1)
        stats = (self.alpha, self.eta, self.D, self.labels.max() + 1, self.ll)
        return self.snapshot(), stats, mean

    def final(self):
        return {
            "acceptance_rate": self.accept[0] / max(self.accept[1], 1),
            "hmc_acceptance": self.hmc_accept[0] / max(self.hmc_accept[1], 1),
            "hmc_step_size": self.hmc_step_size,
            "step_seconds": self.secs,
            "ess_evals": dict(self.n_evals),
            "row_totals": self.n_row if self.lik == "multinomial" else None,
        }
