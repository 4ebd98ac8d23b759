"""Random feature latent variable models (paper 002): the IBP RFLVM (``sparse=True``) and the dense
RFLVM of Gundersen et al. (``sparse=False``), fitted by MCMC on a matrix with missing entries.

Model (eq. 15): y_ij ~ L(g(phi_W(x_i * z_i) beta_j), theta_j), phi_W(x) = [cos(W x), sin(W x)] /
sqrt(M) (eq. 12, M frequencies), x_i ~ N(0, I), the frequencies w_m ~ DP mixture of Gaussians with
an NIW base measure, Z ~ IBP(alpha) through its stick-breaking construction; beta_j ~ N(0, I)
for the count likelihoods, and for the Gaussian the conjugate normal-inverse-gamma prior of
eq. (13) with B0 = c I scaled by the noise: beta_j | sigma_j^2 ~ N(0, sigma_j^2 c I),
sigma_j^-2 ~ Ga(a0, b0), and c (the prior signal-to-noise ratio, shared by the columns) with a
log-uniform prior on a grid.

One iteration (section 3.1):

1. ``z``: IBP slice sweep (eq. 16-19; new dimensions get x from N(0, 1) and w from the prior of
   their mixture component), then the active weights (eq. 18) and alpha (eq. 20). Sparse model
   only. Each z_ik is updated jointly with x_ik: x_ik is a model variable whatever z_ik is
   (with z_ik = 0 its conditional is its N(0, 1) prior), so eq. (17)'s p(y_i | z_ik = 1) is
   averaged over an ensemble {current x_ik, ``n_x_proposals`` - 1 prior draws} and x_ik is then
   picked from the ensemble (Tjelmeland 2004; exact). Gaussian likelihood: beta and sigma^2 are
   integrated out, and the sweep runs row by row (numba) under row i's leave-one-out
   multivariate-t predictive given the other rows; given beta, which has adapted to every
   dimension, a dimension the data do not need is almost never switched off. Other
   likelihoods: column by column given beta.
2. ``x``: Gaussian: ``x_sweeps`` alternations of (beta, sigma^2 from their NIG posterior;
   elliptical slice sampling of every row in parallel given them), then one whole-matrix ESS
   step on the collapsed likelihood; the dense model first runs the collapsed row sweep of
   step 1 on the active x_ik only. Other likelihoods: row-wise ESS given beta.
3. ``hmc``: ``hmc_moves`` Hamiltonian Monte Carlo transitions on (X, W) jointly, on the
   collapsed likelihood of the completed data (Gaussian) or given beta (other likelihoods),
   with the priors N(0, I) on x_i and the component Gaussians on w_m; step size adapted
   during burn-in only. Not in the paper: an extra exact move that leaves the same
   conditional invariant as the ESS and MH steps. Those shrink toward the current state
   when the posterior is much narrower than the prior (low noise); on the Cambridge-bars data
   the chains without it stayed far below the planted state's collapsed likelihood.
4. ``dp``: DP mixture over the frequencies (eq. 22-24, NIW integrated out) and its concentration
   by Escobar & West (eq. 25).
5. ``w``: Metropolis-Hastings for each w_m with the prior as proposal (eq. 21), then one
   elliptical slice step on all of W under the component Gaussians (it always moves, where the
   prior proposal is accepted a few per cent of the time); Gaussian: on the collapsed likelihood.
6. ``beta``: Gaussian: c from its exact conditional on the grid (collapsed), then (beta_j,
   sigma_j^2) jointly from the NIG posterior (exact, for the row-wise steps, the imputation and
   the held-out predictive); Bernoulli / negative binomial / multinomial: Polya-gamma Gibbs
   (eq. 27, 33-35); negative binomial dispersion r_j by CRT augmentation (Zhou & Carin 2012);
   Poisson: see below.

Initialisation: X from the PCA scores of the column-mean imputed data (square root for counts),
scaled to unit variance, every z_ik = 1, and W from N(0, 0.1^2 I), so the initial map
phi(x) beta is close to linear in the PCA scores (sin(w' x) ~ w' x); the chain then learns the
frequencies. ``n_latent`` sets the number of dimensions the chain starts with (the paper: 2).

Gaussian collapsed likelihood (section 3.1, "beta_j and sigma_j^2 integrated out"):
y_j | Phi, c ~ t_{2 a0}(0, (b0 / a0)(I + c Phi Phi^T)), for all columns from one
eigendecomposition of Phi^T Phi (O(M^2 N + M^3 + M N J)); each grid value of c then costs
O(M J). A fixed c = 1 (B0 = I) ties the signal variance of phi beta_j to the noise variance and
underfits data with a small noise; with c on a grid, small-noise data get a large c.

Poisson (the paper leaves the sampler open): Polya-gamma augmentation does not apply to the log
link, so each column beta_j gets three elliptical slice steps under its N(0, I) prior (robust:
they always move, also far from the mode) and then a Metropolis-Hastings step with the
iteratively-reweighted-least-squares proposal of Gamerman (1997) (efficient near the mode): at
the current beta, N(m(beta), P(beta)^-1) with P = Phi^T diag(mu) Phi + I and
m = P^-1 Phi^T (y - mu + mu psi) (one Newton step, shortened to a trust region); the reverse
proposal is built at the proposed point. All columns move in parallel (batched Cholesky).

Missing entries (NaN) never enter a likelihood. For the Gaussian likelihood the collapsed steps
need a complete matrix: missing entries are imputed from y ~ N(phi beta_j, sigma_j^2) with
(beta_j, sigma_j^2) from the NIG posterior (data augmentation, an exact Gibbs step on the
augmented space), after the beta step and the row-wise steps and before the collapsed X sweep;
the collapsed steps condition on them, the row-wise steps, the slice sweep and every reported
likelihood use the observed entries only.
"""

import logging
import time

import numpy as np
from numba import njit
from scipy.linalg import solve_triangular
from scipy.special import expit, gammaln, logsumexp
from sklearn.base import BaseEstimator
from threadpoolctl import threadpool_limits

from ..inference import check_finite, sample_polyagamma
from ..inference.checkpoint import Checkpoint, fingerprint
from ..inference.dp import NIWPrior, escobar_west, sample_dp_assignments, sample_dp_components
from ..inference.ess import elliptical_slice, elliptical_slice_rows
from ..inference.hmc import adapt_step_size, hmc_step
from ..inference.ibp import (
    ensemble_log_mean,
    ensemble_pick,
    ibp_slice_sweep,
    sample_active_sticks,
    sample_ibp_alpha,
    sample_slice_sticks,
)

logger = logging.getLogger("omicsbayes")

LIKELIHOODS = ("gaussian", "bernoulli", "negative_binomial", "multinomial", "poisson")
COUNT_LIKELIHOODS = ("negative_binomial", "multinomial", "poisson")
STEPS = ("z", "x", "hmc", "dp", "w", "beta")
W_INIT_SCALE = 0.1


def _rng(random_state):
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(2**31))
    return np.random.default_rng(random_state)


def _softplus(x):
    return np.logaddexp(0.0, x)


def rff(XZ, W):
    """Random Fourier features (eq. 12): [cos(XZ W^T), sin(XZ W^T)] / sqrt(M), shape (N, 2M).

    With w_m ~ N(0, I), phi(x) phi(x')^T is an unbiased estimate of exp(-|x - x'|^2 / 2).
    """
    return rff_from_arg(XZ @ W.T, W.shape[0])


def rff_from_arg(G, M):
    """Random Fourier features from their arguments G = XZ W^T (N, M)."""
    return np.hstack([np.cos(G), np.sin(G)]) / np.sqrt(M)


def sample_crt(y, r, rng, chunk=2_000_000):
    """Chinese restaurant table counts L ~ CRT(y, r), elementwise: L = sum_{t=0}^{y-1} b_t,
    b_t ~ Bernoulli(r / (r + t)) (Zhou & Carin 2012). ``y`` non-negative integers."""
    shape = np.shape(y)
    r = np.broadcast_to(np.asarray(r, float), shape).ravel()
    y = np.asarray(y).astype(np.int64).ravel()
    out = np.zeros(y.size)
    ends = np.cumsum(y)
    start = 0
    while start < y.size:
        stop = int(np.searchsorted(ends, ends[start] - y[start] + chunk, side="right"))
        stop = max(stop, start + 1)
        yy = y[start:stop]
        tot = int(yy.sum())
        if tot:
            owner = np.repeat(np.arange(yy.size), yy)
            t = np.arange(tot) - np.repeat(np.cumsum(yy) - yy, yy)
            rr = r[start:stop][owner]
            hit = rng.uniform(size=tot) < rr / (rr + t)
            out[start:stop] = np.bincount(owner, weights=hit, minlength=yy.size)
        start = stop
    return out.reshape(shape)


def sample_nb_dispersion(Y, softplus_psi, obs, r, a, b, rng):
    """Negative-binomial dispersions r_j given y_ij ~ NB(r_j, sigmoid(psi_ij)), Gamma(a, b) prior.

    CRT augmentation (Zhou & Carin 2012): L_ij ~ CRT(y_ij, r_j), then r_j ~ Gamma(a + sum_i L_ij,
    rate b + sum_i softplus(psi_ij)), sums over observed entries; -log(1 - p) = softplus(psi).
    """
    Yo = np.where(obs, Y, 0).astype(np.int64)
    L = sample_crt(Yo, np.broadcast_to(r, Y.shape), rng)
    shape = a + L.sum(axis=0)
    rate = b + np.sum(np.where(obs, softplus_psi, 0.0), axis=0)
    return rng.gamma(shape, 1.0 / rate)


def _sym_from_triu(vals, iu, ju, p):
    """Stack of symmetric (p, p) matrices from their upper-triangle values (rows of ``vals``)."""
    P = np.empty((vals.shape[0], p, p))
    P[:, iu, ju] = vals
    P[:, ju, iu] = vals
    return P


def _batched_chol(F, weights, iu, ju, p):
    """Cholesky factors of P_j = Phi^T diag(weights_j) Phi + I for the columns of ``weights``,
    from the upper-triangle products ``F = Phi[:, iu] * Phi[:, ju]``."""
    P = _sym_from_triu(weights.T @ F, iu, ju, p)
    P[:, np.arange(p), np.arange(p)] += 1.0
    return np.linalg.cholesky(P)


def _chol_mean(L, r):
    """P^{-1} r for stacked Cholesky factors L (J, p, p) and right-hand sides r (p, J); also
    returns the half-solve L^{-1} r (J, p, 1)."""
    u = np.linalg.solve(L, r.T[:, :, None])
    return np.linalg.solve(np.swapaxes(L, 1, 2), u)[:, :, 0].T, u


def sample_gaussian_rows_batch(Phi, weights, rhs, rng, chunk=256):
    """beta_j ~ N(P_j^{-1} Phi^T h_j, P_j^{-1}), P_j = Phi^T diag(weights_j) Phi + I, for all j.

    ``weights`` (N, J) and ``rhs`` = h (N, J). Precisions are formed from the upper triangle only
    (N x p(p+1)/2 products by a J x N matrix) in chunks of columns; batched Cholesky and solves.
    Returns beta of shape (p, J).
    """
    p = Phi.shape[1]
    iu, ju = np.triu_indices(p)
    F = Phi[:, iu] * Phi[:, ju]
    R = Phi.T @ rhs
    J = weights.shape[1]
    beta = np.empty((p, J))
    for start in range(0, J, chunk):
        sl = slice(start, min(J, start + chunk))
        L = _batched_chol(F, weights[:, sl], iu, ju, p)
        u = np.linalg.solve(L, R[:, sl].T[:, :, None])
        eps = rng.standard_normal(u.shape)
        beta[:, sl] = np.linalg.solve(np.swapaxes(L, 1, 2), u + eps)[:, :, 0].T
    return beta


def poisson_irls_mh(Phi, Y, obs, beta, rng, chunk=256, max_step=2.0):
    """One Metropolis-Hastings step for every column of beta under y_ij ~ Poisson(exp(psi_ij)),
    beta_j ~ N(0, I), with the IRLS (Gamerman 1997) Gaussian proposal. The proposal mean is the
    Newton step from the current beta, shortened to length ``max_step`` when longer (a trust
    region, so that a chain far from the mode does not overshoot; near the mode it is the plain
    Newton step). Returns (beta, n_accepted).
    """
    p = Phi.shape[1]
    iu, ju = np.triu_indices(p)
    F = Phi[:, iu] * Phi[:, ju]
    beta = beta.copy()
    n_acc = 0

    def parts(b, Yc, Oc):
        psi = Phi @ b
        with np.errstate(over="ignore", invalid="ignore"):
            mu = np.where(Oc, np.exp(psi), 0.0)
            target = np.sum(np.where(Oc, Yc * psi, 0.0) - mu, 0) - 0.5 * np.sum(b * b, 0)
            ok = np.isfinite(target) & np.all(np.isfinite(mu), 0)
            mu = np.where(np.isfinite(mu), mu, 0.0)
            L = _batched_chol(F, mu, iu, ju, p)
            m, _ = _chol_mean(L, Phi.T @ np.where(Oc, Yc - mu + mu * psi, 0.0))
        step = m - b
        norm = np.sqrt(np.sum(step * step, 0))
        m = b + step * np.minimum(1.0, max_step / np.maximum(norm, 1e-300))
        return target, ok, L, m

    def log_q(x, L, m):
        z = np.einsum("jpq,pj->jq", L, x - m)  # L^T (x - m), row form
        return np.sum(np.log(np.diagonal(L, axis1=1, axis2=2)), 1) - 0.5 * np.sum(z * z, 1)

    for start in range(0, Y.shape[1], chunk):
        sl = slice(start, min(Y.shape[1], start + chunk))
        Yc, Oc, b0 = Y[:, sl], obs[:, sl], beta[:, sl]
        t0, _, L0, m0 = parts(b0, Yc, Oc)
        eps = rng.standard_normal(b0.shape)
        b1 = m0 + np.linalg.solve(np.swapaxes(L0, 1, 2), eps.T[:, :, None])[:, :, 0].T
        t1, ok1, L1, m1 = parts(b1, Yc, Oc)
        log_r = t1 + log_q(b0, L1, m1) - t0 - log_q(b1, L0, m0)
        acc = ok1 & (np.log(rng.uniform(size=b0.shape[1])) < np.where(ok1, log_r, -np.inf))
        beta[:, sl] = np.where(acc, b1, b0)
        n_acc += int(acc.sum())
    return beta, n_acc


@njit(cache=True)
def _row_features(g, phi, M):
    """phi = [cos g, sin g] / sqrt(M) in place."""
    sq = 1.0 / np.sqrt(M)
    for m in range(M):
        phi[m] = np.cos(g[m]) * sq
        phi[M + m] = np.sin(g[m]) * sq


@njit(cache=True)
def _collapsed_row_sweep(
    X, Z, W, Yf, Phi, Ainv, B, yy, pi, cand, gumb, unif, order, a0, b0, update_z
):
    """Sequential (numba) sweep over the rows with beta and sigma^2 integrated out; see
    :meth:`_Chain._collapsed_sweep`. Row i's leave-one-out NIG posterior (``Ainv`` =
    (Phi^T Phi + I / c)^-1, ``B`` = Phi^T Yf, ``yy`` and ``Phi`` of all rows) is formed by a
    rank-one downdate and row i is put back with its new features by an update. The entries of
    row i are visited in the order ``order[i]``; each (z_ik, x_ik) (``update_z``) or each active
    x_ik is drawn over the ensemble {X[i, k], cand[:, i, k]}; ``gumb`` (Gumbel) and ``unif``
    are the random numbers of the choices. ``pi`` are the stick weights (``update_z`` only).
    Updates X, Z, Phi, Ainv and B in place."""
    N, D = X.shape
    M = W.shape[0]
    J = Yf.shape[1]
    K = cand.shape[0] + 1
    a_n = a0 + 0.5 * (N - 1)
    phi = np.empty(2 * M)
    g = np.empty(M)
    ll = np.empty(K)
    counts = np.zeros(D, np.int64)
    for i in range(N):
        for k in range(D):
            if Z[i, k]:
                counts[k] += 1
    for i in range(N):
        y = Yf[i]
        u = Ainv @ Phi[i]
        A1 = Ainv + np.outer(u, u) / (1.0 - Phi[i] @ u)
        B1 = B - np.outer(Phi[i], y)
        m = A1 @ B1
        bn = b0 + 0.5 * np.maximum(yy - y * y - np.sum(B1 * m, axis=0), 0.0)
        for kk in range(D):
            k = order[i, kk]
            if update_z or Z[i, k]:
                for mm in range(M):  # w_m' (x_i z_i) without dimension k
                    t = 0.0
                    for q in range(D):
                        if Z[i, q] and q != k:
                            t += W[mm, q] * X[i, q]
                    g[mm] = t
                # log predictive t_{2 a_n}(y_i; phi' m, (b_n / a_n)(1 + phi' A1 phi)) up to a
                # constant: c = 0 is z_ik = 0, c = 1.. the ensemble members with z_ik = 1
                ll_off = 0.0
                for c in range(K + 1 if update_z else K):
                    cc = c - 1 if update_z else c
                    if cc < 0:
                        _row_features(g, phi, M)
                    else:
                        xc = X[i, k] if cc == 0 else cand[cc - 1, i, k]
                        _row_features(g + W[:, k] * xc, phi, M)
                    v = 1.0 + phi @ (A1 @ phi)
                    mean = phi @ m
                    tot = 0.0
                    for j in range(J):
                        r = y[j] - mean[j]
                        tot += np.log1p(r * r / (2.0 * bn[j] * v))
                    val = -0.5 * J * np.log(v) - (a_n + 0.5) * tot
                    if cc < 0:
                        ll_off = val
                    else:
                        ll[cc] = val
            z_new = Z[i, k]
            if update_z:
                # eq. (17): prior pi_k^z (1 - pi_k)^(1 - z), the ensemble mean of the predictive
                # for z = 1, and the slice factor 1 / pi*(Z), which differs between z = 0 and
                # z = 1 only when z_ik is the only 1 of its column
                mx = ll.max()
                w_on = np.log(pi[k]) + mx + np.log(np.mean(np.exp(ll - mx)))
                w_off = np.log1p(-pi[k]) + ll_off
                if counts[k] == (1 if Z[i, k] else 0):
                    rest = 1.0
                    for q in range(D):
                        if q != k and counts[q] > 0 and pi[q] < rest:
                            rest = pi[q]
                    w_off -= np.log(rest)
                    w_on -= np.log(min(rest, pi[k]))
                z_new = unif[i, k] < 1.0 / (1.0 + np.exp(w_off - w_on))
            best, top = 0, -np.inf
            for c in range(K):  # proportional to the predictive if z_ik = 1, else uniform
                val = gumb[i, k, c] + (ll[c] if z_new else 0.0)
                if val > top:
                    best, top = c, val
            if best > 0:
                X[i, k] = cand[best - 1, i, k]
            if z_new != Z[i, k]:
                counts[k] += 1 if z_new else -1
                Z[i, k] = z_new
        for mm in range(M):
            t = 0.0
            for q in range(D):
                if Z[i, q]:
                    t += W[mm, q] * X[i, q]
            g[mm] = t
        _row_features(g, phi, M)
        Phi[i] = phi
        u = A1 @ phi
        Ainv[:, :] = A1 - np.outer(u, u) / (1.0 + phi @ u)
        B[:, :] = B1 + np.outer(phi, y)


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
        }
        self.accept = [0, 0]
        self.accept_beta = [0, 0]
        self.hmc_step_size = 0.01
        self.hmc_accept = [0.0, 0]
        self.burn = est.n_iter // 2 if est.burn_in is None else est.burn_in
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
        if self.lik == "negative_binomial":
            self._yr = (Y + self.r) * self._obsf
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
        elif self.lik == "bernoulli":
            # Y is zero at missing entries, so only the psi-only term needs the mask
            return np.sum(Y * psi - self._obsf[rows] * _softplus(psi), axis=1) + c
        elif self.lik == "negative_binomial":
            return np.sum(Y * psi - self._yr[rows] * _softplus(psi), axis=1) + c
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

    def _gauss_marginal_cols(self, lam, Q2, c):
        """log p(y_j | Phi, c) of every column (complete data ``Yf``) with beta_j and sigma_j^2
        integrated out (section 3.1): y_j ~ t_{2 a0}(0, (b0 / a0)(I + c Phi Phi^T)).

        With Phi^T Phi = U diag(lam) U^T and Q2 = (U^T Phi^T Y)^2 (p, J): log|I + c Phi Phi^T| =
        sum log(1 + c lam) and y^T (I + c Phi Phi^T)^-1 y = y^T y - sum c q^2 / (1 + c lam)
        (Woodbury). ``c`` is a vector of G scales; returns (G, J), O(G p J).
        """
        a0, b0 = self.est.noise_prior
        c = np.atleast_1d(np.asarray(c, float))
        den = 1.0 + np.outer(c, lam)
        quad = np.maximum(self.yy - (c[:, None] / den) @ Q2, 0.0)
        const = gammaln(self.a_n) - gammaln(a0) + a0 * np.log(b0) - 0.5 * self.N * np.log(2 * np.pi)
        logdet = np.sum(np.log(den), axis=1)[:, None]
        return const - 0.5 * logdet - self.a_n * np.log(b0 + 0.5 * quad)

    def _gauss_collapsed(self, G, C):
        """sum_j log p(y_j | Phi, c), beta and sigma^2 integrated out; G = Phi^T Phi,
        C = Phi^T Yf; one eigendecomposition for all columns (O(p^3 + p^2 J))."""
        try:
            lam, _, Q = self._gauss_eig(G, C)
        except np.linalg.LinAlgError:
            return -np.inf
        return float(np.sum(self._gauss_marginal_cols(lam, Q * Q, self.c)))

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
        beta_j | sigma_j^2 ~ N(A^-1 Phi^T y_j, sigma_j^2 A^-1)."""
        rng = self.rng
        a0, b0 = self.est.noise_prior
        lam, U, Q = self._gauss_eig(*self._gauss_stats(self.Phi))
        if update_scale:
            self._gauss_scale_step(lam, Q * Q)
        prec = lam[:, None] + 1.0 / self.c
        quad = np.maximum(self.yy - np.sum(Q * Q / prec, axis=0), 0.0)
        b_n = b0 + 0.5 * quad
        self.sigma2 = np.maximum(b_n / rng.gamma(self.a_n, 1.0, size=self.J), 1e-10)
        eps = rng.standard_normal(Q.shape)
        self.beta = U @ (Q / prec + np.sqrt(self.sigma2) * eps / np.sqrt(prec))
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
        pi (surviving columns) and returns which columns of the extended matrix survive."""

        def on_new(n_new):
            self.X = np.hstack([self.X, self.rng.standard_normal((self.N, n_new))])
            self._extend_w(n_new)

        n_prop = self.est.n_x_proposals
        cand = {}

        def column_loglik(k, Z):
            """Rows' log likelihoods with z_ik = 0 and, for z_ik = 1, the mean likelihood over
            the ensemble {current x_ik, n_x_proposals - 1 draws from N(0, 1)}."""
            G = (self.X * Z) @ self.W.T
            base = G - np.outer(self.X[:, k] * Z[:, k], self.W[:, k])
            ll_off = self.row_loglik(self.psi_of(rff_from_arg(base, self.M)))
            xs = np.vstack([self.X[:, k], self.rng.standard_normal((n_prop - 1, self.N))])
            ll_on = np.stack(
                [
                    self.row_loglik(
                        self.psi_of(rff_from_arg(base + np.outer(x, self.W[:, k]), self.M))
                    )
                    for x in xs
                ]
            )
            cand["x"], cand["ll"] = xs, ll_on
            return ll_off, ensemble_log_mean(ll_on)

        def on_column(k, z):
            self.X[:, k] = cand["x"][ensemble_pick(cand["ll"], z, self.rng), np.arange(self.N)]

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
            Phi = rff(Xr * Z[idx], W)
            return self.row_loglik(Phi @ self.beta, idx)

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
        L = np.linalg.cholesky(G + np.eye(G.shape[0]) / self.c)
        Linv = solve_triangular(L, np.eye(G.shape[0]), lower=True)
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
            Linv.T @ Linv,
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
        """log p(X, W | rest) up to a constant and its gradient with respect to X and W.

        Gaussian: the collapsed likelihood of the completed data (beta_j, sigma_j^2 integrated
        out, :meth:`_gauss_marginal_cols`); with A = Phi^T Phi + I / c, m_j = A^-1 Phi^T y_j,
        r_j = y_j - Phi m_j and s_j = a_n / (b0 + q_j / 2), d/dPhi = -J Phi A^-1 + sum_j s_j
        r_j m_j^T. Other likelihoods: log p(y | Phi beta) given beta, d/dPhi = (d/dpsi) beta^T.
        Then Phi = [cos G, sin G] / sqrt(M), G = (X * Z) W^T, so d/dX = (dG W) * Z and
        d/dW = dG^T (X * Z); the priors N(0, I) on x_i and N(mu_k, Sigma_k) on w_m (given its
        mixture component, ``chol_inv`` the inverse Cholesky factors) add -x and
        -Sigma_k^-1 (w_m - mu_k).
        """
        M, Z = self.M, self.Z
        XZ = X * Z
        G = XZ @ W.T
        cos_g, sin_g = np.cos(G), np.sin(G)
        Phi = np.hstack([cos_g, sin_g]) / np.sqrt(M)
        if self.lik == "gaussian":
            a0, b0 = self.est.noise_prior
            A = Phi.T @ Phi + np.eye(2 * M) / self.c
            L = np.linalg.cholesky(A)
            Linv = solve_triangular(L, np.eye(2 * M), lower=True)
            Ainv = Linv.T @ Linv
            C = Phi.T @ self.Yf
            mean = Ainv @ C
            q = np.maximum(self.yy - np.sum(C * mean, axis=0), 0.0)
            value = -self.J * np.sum(np.log(np.diag(L))) - self.a_n * np.sum(np.log(b0 + 0.5 * q))
            d_phi = (
                -self.J * (Phi @ Ainv)
                + (self.Yf - Phi @ mean) * (self.a_n / (b0 + 0.5 * q)) @ mean.T
            )
        else:
            psi = Phi @ self.beta
            value = float(self.row_loglik(psi).sum())
            d_phi = self._dloglik_dpsi(psi) @ self.beta.T
        d_g = (d_phi[:, M:] * cos_g - d_phi[:, :M] * sin_g) / np.sqrt(M)
        white = np.einsum("mij,mj->mi", chol_inv, W - self.mus[self.labels])
        value += -0.5 * np.sum(X * X) - 0.5 * np.sum(white * white)
        grad_x = (d_g @ W) * Z - X
        grad_w = d_g.T @ XZ - np.einsum("mji,mj->mi", chol_inv, white)
        return float(value), (grad_x, grad_w)

    def _dloglik_dpsi(self, psi):
        """d log p(y | psi) / d psi over the observed entries (zero at missing ones); the
        count and binary likelihoods (the Gaussian HMC target is collapsed)."""
        Y, obs = self.Y, self._obsf
        if self.lik == "bernoulli":
            return Y - obs * expit(psi)
        if self.lik == "negative_binomial":
            return Y - self._yr * expit(psi)
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
        narrower than the prior. The step size (jittered by U(0.8, 1.2) per move) adapts toward
        an acceptance probability of 0.7 during burn-in only and is fixed afterwards."""
        if self.D == 0 or self.est.hmc_moves == 0:
            return
        chol_inv = np.linalg.inv(np.linalg.cholesky(self.Sigmas))[self.labels]

        def log_target(X, W):
            return self._log_target_xw(X, W, chol_inv)

        for _ in range(self.est.hmc_moves):
            eps = self.hmc_step_size * self.rng.uniform(0.8, 1.2)
            (self.X, self.W), prob = hmc_step(
                (self.X, self.W), log_target, eps, self.est.hmc_leapfrog, self.rng
            )
            self.hmc_accept[0] += prob
            self.hmc_accept[1] += 1
            if it < self.burn:
                self.hmc_step_size = adapt_step_size(self.hmc_step_size, prob)
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
        """Metropolis-Hastings for each frequency with the prior as proposal (eq. 21)."""
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
                psi2 = psi + (new_cols - old_cols) @ self.beta[idx]
                ll = self.row_loglik(psi2).sum()
                if log_u[m] < ll - cur:
                    psi, cur = psi2, ll
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
        omega = np.zeros_like(Y)
        bb = np.broadcast_to(b, Y.shape)
        omega[obs] = sample_polyagamma(bb[obs], psi[obs], rng)
        self.beta = sample_gaussian_rows_batch(Phi, omega, np.where(obs, kappa, 0.0), rng)
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


class RFLVM(BaseEstimator):
    """Random feature latent variable model, sparse (IBP RFLVM) or dense, fitted by MCMC.

    Parameters
    ----------
    likelihood : {"gaussian", "bernoulli", "negative_binomial", "multinomial", "poisson"}
    sparse : bool
        ``True``: IBP RFLVM, latent dimension infinite a priori (``n_latent`` is the initial
        number of instantiated dimensions). ``False``: dense RFLVM with ``n_latent`` dimensions.
    n_random_features : int
        Number M of random frequencies (2M features).
    n_latent : int
        Initial (sparse) or fixed (dense) latent dimension.
    n_iter : int
        MCMC iterations.
    burn_in : int, optional
        Iterations discarded; default ``n_iter // 2``.
    ibp_alpha_prior, dp_eta_prior : (float, float)
        Gamma(shape, rate) priors of the IBP concentration alpha and the DP concentration eta.
    noise_prior : (float, float)
        Gaussian likelihood: sigma_j^-2 ~ Gamma(a0, rate b0) (section 3.1, eq. 13).
    beta_scale_prior : (float, float)
        Gaussian likelihood: range (c_min, c_max) of the log-uniform prior of the shared scale c
        in beta_j | sigma_j^2 ~ N(0, sigma_j^2 c I) (c is the prior signal-to-noise ratio),
        discretised on a grid of 10 points per decade.
    dispersion_prior : (float, float)
        Gamma(shape, rate) prior of the negative-binomial dispersions r_j.
    max_shrink : int
        Largest number of bracket shrinks in one elliptical slice step.
    x_sweeps : int
        Gaussian likelihood: alternations of (row-wise ESS of X, beta and sigma^2 Gibbs) per
        iteration before the collapsed whole-matrix step (cheap; X and beta are coupled).
    n_x_proposals : int
        Size of the ensembles {current x_ik, draws from N(0, 1)} over which each z_ik is
        updated jointly with x_ik (sparse model) and, Gaussian likelihood, each active x_ik is
        drawn in the collapsed row sweep. 1: z_ik given x_ik, no collapsed sweep of the dense
        model.
    hmc_moves : int
        Hamiltonian Monte Carlo transitions on (X, W) jointly per iteration (0 turns them off).
    hmc_leapfrog : int
        Leapfrog steps per HMC transition. Long trajectories matter: on the Cambridge bars
        one transition of 150 steps per iteration reaches the planted mode from a PCA start
        where three of 20 do not (docs/models.md).
    random_state : None, int or numpy.random.Generator
    verbose : bool
        Show a tqdm progress bar.
    checkpoint : str, os.PathLike or None
        File to write the chain state to every ``checkpoint_every`` iterations (atomically);
        ``fit`` resumes from it when it was written for the same parameters and data, and gives
        the same draws as an uninterrupted chain. Removed after a successful fit. None: off.
    checkpoint_every : int
        Iterations between checkpoints.

    Attributes
    ----------
    latent_ : ndarray (n_samples, max active dims)
        Posterior mean of X * Z over the retained draws (dimensions padded with zeros).
    n_active_ : ndarray (n_iter,)
        Number of instantiated latent dimensions after each iteration.
    log_lik_ : ndarray (n_iter,)
        Log likelihood of the observed entries after each iteration.
    idata_ : arviz.InferenceData
        Retained draws of alpha, eta, n_active, n_clusters, log_lik and X * Z.
    acceptance_rate_ : float
        Acceptance rate of the frequency Metropolis-Hastings step.
    hmc_acceptance_ : float
        Mean acceptance probability of the HMC transitions on (X, W).
    hmc_step_size_ : float
        HMC leapfrog step size after burn-in adaptation.
    step_seconds_ : dict
        Seconds spent in each sampler step ("z", "x", "hmc", "dp", "w", "beta") over the whole
        fit, and in the initialisation ("init").
    ess_evals_ : dict
        Likelihood evaluations of the elliptical slice steps: rows ("ess_rows"), whole
        matrix ("ess_whole"), frequencies ("ess_w"); Gaussian likelihood: predictives scored
        in the collapsed sweeps of x ("collapsed_rows", dense model) and of (z, x)
        ("collapsed_z", sparse model).
    n_iter_ : int
    """

    capabilities = frozenset({"heldout_scoring", "counts", "mcmc"})

    def __init__(
        self,
        likelihood="gaussian",
        sparse=True,
        n_random_features=50,
        n_latent=2,
        n_iter=100,
        burn_in=None,
        ibp_alpha_prior=(1.0, 1.0),
        dp_eta_prior=(1.0, 1.0),
        noise_prior=(1.0, 1.0),
        beta_scale_prior=(1e-3, 1e6),
        dispersion_prior=(1.0, 1.0),
        max_shrink=100,
        x_sweeps=3,
        n_x_proposals=10,
        hmc_moves=1,
        hmc_leapfrog=150,
        random_state=None,
        verbose=False,
        checkpoint=None,
        checkpoint_every=10,
    ):
        self.likelihood = likelihood
        self.sparse = sparse
        self.n_random_features = n_random_features
        self.n_latent = n_latent
        self.n_iter = n_iter
        self.burn_in = burn_in
        self.ibp_alpha_prior = ibp_alpha_prior
        self.dp_eta_prior = dp_eta_prior
        self.noise_prior = noise_prior
        self.beta_scale_prior = beta_scale_prior
        self.dispersion_prior = dispersion_prior
        self.max_shrink = max_shrink
        self.x_sweeps = x_sweeps
        self.n_x_proposals = n_x_proposals
        self.hmc_moves = hmc_moves
        self.hmc_leapfrog = hmc_leapfrog
        self.random_state = random_state
        self.verbose = verbose
        self.checkpoint = checkpoint
        self.checkpoint_every = checkpoint_every

    # ------------------------------------------------------------------ validation
    def _check_params(self):
        if self.likelihood not in LIKELIHOODS:
            raise ValueError(f"likelihood={self.likelihood!r}; expected one of {LIKELIHOODS}")
        for name in (
            "n_random_features",
            "n_latent",
            "n_iter",
            "max_shrink",
            "x_sweeps",
            "n_x_proposals",
        ):
            v = getattr(self, name)
            if not isinstance(v, int | np.integer) or v < 1:
                raise ValueError(f"{name}={v!r}; expected a positive integer")
        if not isinstance(self.hmc_moves, int | np.integer) or self.hmc_moves < 0:
            raise ValueError(f"hmc_moves={self.hmc_moves!r}; expected a non-negative integer")
        if not isinstance(self.hmc_leapfrog, int | np.integer) or self.hmc_leapfrog < 1:
            raise ValueError(f"hmc_leapfrog={self.hmc_leapfrog!r}; expected a positive integer")
        burn = self.n_iter // 2 if self.burn_in is None else self.burn_in
        if not isinstance(burn, int | np.integer) or not 0 <= burn < self.n_iter:
            raise ValueError(f"burn_in={self.burn_in!r}; expected an integer in [0, n_iter)")
        for name in (
            "ibp_alpha_prior",
            "dp_eta_prior",
            "noise_prior",
            "beta_scale_prior",
            "dispersion_prior",
        ):
            v = getattr(self, name)
            if len(v) != 2 or not all(np.isfinite(x) and x > 0 for x in v):
                raise ValueError(f"{name}={v!r}; expected two positive numbers")
        lo, hi = self.beta_scale_prior
        if not lo < hi:
            raise ValueError(f"beta_scale_prior={self.beta_scale_prior!r}; expected c_min < c_max")
        return int(burn)

    def _scale_grid(self):
        """Grid of the prior scale c: log-spaced over ``beta_scale_prior``, 10 points a decade."""
        lo, hi = np.log10(self.beta_scale_prior)
        return np.logspace(lo, hi, max(2, int(round(10 * (hi - lo))) + 1))

    def _check_Y(self, Y, what="Y"):
        Y = np.asarray(Y, dtype=float)
        if Y.ndim != 2 or Y.shape[0] < 2 or Y.shape[1] < 2:
            raise ValueError(f"{what} has shape {Y.shape}; RFLVM needs a 2-D matrix, at least 2x2")
        if np.isinf(Y).any():
            raise ValueError(f"{what} has {int(np.isinf(Y).sum())} infinite values")
        vals = Y[~np.isnan(Y)]
        if self.likelihood == "bernoulli" and not np.all((vals == 0) | (vals == 1)):
            raise ValueError(f"{what} must hold 0/1 values (or NaN) for likelihood='bernoulli'")
        if self.likelihood in COUNT_LIKELIHOODS and (
            np.any(vals < 0) or np.any(vals != np.round(vals))
        ):
            raise ValueError(
                f"{what} must hold non-negative integer counts (or NaN) for "
                f"likelihood={self.likelihood!r}"
            )
        return Y

    # ------------------------------------------------------------------ fit
    def fit(self, Y, y=None):
        """Run the sampler on ``Y`` (samples x features); NaN entries are treated as missing.

        Parameters
        ----------
        Y : array_like (n_samples, n_features)
        y : ignored

        Returns
        -------
        self
        """
        # the matrices are small (N x 2M, 2M x 2M): extra BLAS threads only contend (5 x slower
        # with two threads on Cambridge bars, docs/models.md)
        with threadpool_limits(1):
            return self._fit(Y)

    def _fit(self, Y):
        import arviz as az

        burn = self._check_params()
        ckpt = Checkpoint(self.checkpoint, self.checkpoint_every, "RFLVM")
        Y = self._check_Y(Y)
        obs = ~np.isnan(Y)
        if not obs.any():
            raise ValueError("Y has no observed entries; RFLVM needs some non-NaN values")
        key = fingerprint(self, Y)
        rng = _rng(self.random_state)
        t0 = time.perf_counter()
        saved = ckpt.load(key, rng)
        if saved is None:
            start = 0
            chain = _Chain(self, Y, obs, rng)
            secs = dict.fromkeys(STEPS, 0.0)
            secs["init"] = time.perf_counter() - t0
            n_active, log_lik, draws, stats = [], [], [], []
        else:
            start, state = saved
            chain = _Chain.restore(self, Y, obs, rng, state["chain"])
            secs, n_active, log_lik = state["secs"], state["n_active"], state["log_lik"]
            draws, stats = state["draws"], state["stats"]
        steps = [(s, getattr(chain, f"step_{s}")) for s in STEPS]
        every = max(1, self.n_iter // 10)
        bar = None
        if self.verbose:
            from tqdm.auto import tqdm

            bar = tqdm(total=self.n_iter, initial=start, desc=f"RFLVM ({self.likelihood})")
        for it in range(start, self.n_iter):
            for name, step in steps:
                ts = time.perf_counter()
                step(it)
                secs[name] += time.perf_counter() - ts
            ll = chain.log_lik()
            check_finite(ll, "RFLVM log likelihood", it)
            log_lik.append(ll)
            n_active.append(chain.D)
            if it >= burn:
                draws.append(chain.snapshot())
                stats.append((chain.alpha, chain.eta, chain.D, chain.labels.max() + 1, ll))
            if bar is not None:
                bar.update(1)
            if (it + 1) % every == 0 or it + 1 == self.n_iter:
                el = time.perf_counter() - t0
                logger.info(
                    "RFLVM iteration %d/%d log-lik %.4g active dims %d elapsed %.1fs left %.1fs",
                    it + 1,
                    self.n_iter,
                    ll,
                    chain.D,
                    el,
                    el / (it + 1 - start) * (self.n_iter - it - 1),
                )
            if ckpt.due(it, self.n_iter):
                state = {
                    "chain": chain.state(),
                    "secs": secs,
                    "n_active": n_active,
                    "log_lik": log_lik,
                    "draws": draws,
                    "stats": stats,
                }
                ckpt.save(it + 1, state, key, rng)
        if bar is not None:
            bar.close()
        self.n_iter_ = self.n_iter
        self.n_active_ = np.asarray(n_active)
        self.log_lik_ = np.asarray(log_lik)
        self.draws_ = draws
        self.acceptance_rate_ = chain.accept[0] / max(chain.accept[1], 1)
        self.hmc_acceptance_ = chain.hmc_accept[0] / max(chain.hmc_accept[1], 1)
        self.hmc_step_size_ = chain.hmc_step_size
        self.step_seconds_ = secs
        self.ess_evals_ = dict(chain.n_evals)
        self.n_features_in_ = Y.shape[1]
        self.n_samples_fit_ = Y.shape[0]
        self.row_totals_ = chain.n_row if self.likelihood == "multinomial" else None
        d_max = max(max(d["XZ"].shape[1] for d in draws), 1)
        Xs = np.zeros((len(draws), Y.shape[0], d_max))
        for s, d in enumerate(draws):
            Xs[s, :, : d["XZ"].shape[1]] = d["XZ"]
        self.latent_ = Xs.mean(axis=0)
        st = np.asarray(stats, float)
        post = {
            "alpha": st[:, 0],
            "eta": st[:, 1],
            "n_active": st[:, 2],
            "n_clusters": st[:, 3],
            "log_lik": st[:, 4],
            "X": Xs,
        }
        if not self.sparse:
            del post["alpha"]
        self.idata_ = az.from_dict(
            posterior={k: v[None] for k, v in post.items()},
            dims={"X": ["sample", "latent_dim"]},
        )
        ckpt.remove()
        return self

    def fit_transform(self, Y, y=None):
        """Fit and return ``latent_``."""
        return self.fit(Y).latent_

    # ------------------------------------------------------------------ evaluation
    def _check_heldout(self, Y, mask):
        if not hasattr(self, "draws_"):
            raise ValueError("this RFLVM is not fitted yet; call fit(Y) first")
        Y = self._check_Y(Y)
        mask = np.asarray(mask, bool)
        if Y.shape != (self.n_samples_fit_, self.n_features_in_) or mask.shape != Y.shape:
            raise ValueError(
                f"Y {Y.shape} and mask {mask.shape} must both have the fitted shape "
                f"{(self.n_samples_fit_, self.n_features_in_)}"
            )
        if np.isnan(Y[mask]).any():
            raise ValueError(f"Y has {int(np.isnan(Y[mask]).sum())} NaN values where mask is True")
        if not mask.any():
            raise ValueError("mask selects no entries; mark held-out entries with True")
        return Y, mask

    def _draw_psi(self, d):
        return rff(d["XZ"], d["W"]) @ d["beta"]

    def _entry_logpdf(self, psi, theta, y):
        """log p(y_ij | draw) for held-out entries (vectors) of the draw."""
        lik = self.likelihood
        if lik == "gaussian":
            return -0.5 * np.log(2 * np.pi * theta) - 0.5 * (y - psi) ** 2 / theta
        if lik == "bernoulli":
            return y * psi - _softplus(psi)
        if lik == "negative_binomial":
            return (
                gammaln(y + theta)
                - gammaln(theta)
                - gammaln(y + 1)
                + y * psi
                - (y + theta) * _softplus(psi)
            )
        return y * psi - np.exp(psi) - gammaln(y + 1)

    def log_likelihood(self, Y, mask):
        """Held-out log posterior predictive, sum over entries with ``mask`` True.

        Each entry's predictive density is the average over retained draws of p(y_ij | draw)
        (beta_j and the likelihood parameters of the draw). Multinomial: the word-level
        probability y_ij log theta_ij with theta_i the softmax over all features.

        Parameters
        ----------
        Y : array_like (n_samples, n_features)
            Matrix holding the true values at the held-out entries (other entries ignored).
        mask : array_like of bool
            True where an entry was held out (NaN in the matrix given to ``fit``).

        Returns
        -------
        float
        """
        Y, mask = self._check_heldout(Y, mask)
        rows, cols = np.nonzero(mask)
        y = Y[rows, cols]
        per_draw = np.empty((len(self.draws_), y.size))
        for s, d in enumerate(self.draws_):
            psi = self._draw_psi(d)
            if self.likelihood == "multinomial":
                logp = psi - logsumexp(psi, axis=1, keepdims=True)
                per_draw[s] = y * logp[rows, cols]
            else:
                th = d["theta"][cols]
                per_draw[s] = self._entry_logpdf(psi[rows, cols], th, y)
        return float(np.sum(logsumexp(per_draw, axis=0) - np.log(len(self.draws_))))

    def perplexity(self, Y, mask):
        """Held-out perplexity exp(-sum y_ij log f_ij / sum y_ij) over entries with mask True.

        f_ij is the posterior mean (over retained draws) of the normalised rate mu_ij / sum_j
        mu_ij, mu = exp(psi) (Poisson), r exp(psi) (negative binomial), softmax(psi)
        (multinomial): the per-word definition used for PFA and LDA (Zhou et al. 2012a).
        """
        if self.likelihood not in COUNT_LIKELIHOODS:
            raise ValueError(
                f"perplexity needs a count likelihood {COUNT_LIKELIHOODS}; "
                f"this RFLVM has likelihood={self.likelihood!r}"
            )
        Y, mask = self._check_heldout(Y, mask)
        f = np.zeros(Y.shape)
        for d in self.draws_:
            psi = self._draw_psi(d)
            if self.likelihood == "negative_binomial":
                psi = psi + np.log(d["theta"])
            f += np.exp(psi - logsumexp(psi, axis=1, keepdims=True))
        f /= len(self.draws_)
        y = Y[mask]
        if y.sum() <= 0:
            raise ValueError("the held-out entries hold no counts; perplexity is undefined")
        return float(np.exp(-np.sum(y * np.log(np.maximum(f[mask], 1e-300))) / y.sum()))


__all__ = ["RFLVM", "rff", "sample_crt", "sample_nb_dispersion"]
