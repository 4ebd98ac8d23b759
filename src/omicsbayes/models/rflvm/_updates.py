"""RFLVM building blocks that hold no chain state: random Fourier features (eq. 12), CRT and
negative-binomial dispersion draws, Polya-gamma Gibbs draws of the regression weights and the
Poisson IRLS Metropolis-Hastings step."""

import numpy as np
from scipy.linalg.lapack import dpotrf, dpotri

from ...inference import sample_polyagamma
from .._threads import map_blocks
from ._kernels import _chol_draw, _crt_counts, _rff_map


def _softplus(x):
    return np.logaddexp(0.0, x)


def rff(XZ, W):
    """Random Fourier features (eq. 12): [cos(XZ W^T), sin(XZ W^T)] / sqrt(M), shape (N, 2M).

    With w_m ~ N(0, I), phi(x) phi(x')^T is an unbiased estimate of ``exp(-|x - x'|^2 / 2)``.
    """
    return rff_from_arg(XZ @ W.T)


def rff_from_arg(G):
    """Random Fourier features from their arguments G = XZ W^T (N, M)."""
    return _rff_map(np.ascontiguousarray(G, dtype=float))


def rff_from_arg32(G, out=None):
    """The random Fourier features of :func:`rff_from_arg` in single precision (numpy's
    vectorised float32 sin and cos, about ten times faster than float64), for the HMC
    gradient only (:meth:`_Chain._grad_xw`); written into ``out`` (N, 2M) when given."""
    G = np.asarray(G, dtype=np.float32)
    M = G.shape[1]
    Phi = np.empty((G.shape[0], 2 * M), np.float32) if out is None else out
    np.cos(G, out=Phi[:, :M])
    np.sin(G, out=Phi[:, M:])
    Phi *= np.float32(1.0 / np.sqrt(M))
    return Phi


def logistic_rows(Y, weight, psi, block=32, task=128):
    """Row sums of Y * psi - weight * softplus(psi): the logistic-link log likelihoods up to
    their constants (Bernoulli with weight = 1, negative binomial with weight = y + r; ``Y``
    and ``weight`` zero at missing entries), in the precision of ``psi`` with the row sums in
    float64. numpy's vectorised exp and log1p over blocks of ``block`` rows that stay in cache
    (float64: faster than a scalar numba loop, the same values to rounding),
    ``task`` rows to a call on the worker threads (:func:`~omicsbayes.models._threads.map_blocks`;
    each row's sum is the same on any number of threads).
    In float32 (``Y``, ``weight`` and ``psi`` float32) it is a cheap deterministic
    approximation, the first stage of the delayed-acceptance W and z steps."""
    n = psi.shape[0]
    out = np.empty(n)

    def rows(start):
        for s in range(start, min(n, start + task), block):
            x = psi[s : s + block]
            t = np.abs(x)
            np.exp(np.negative(t, out=t), out=t)
            np.log1p(t, out=t)
            t += np.maximum(x, 0.0)
            t *= weight[s : s + block]
            np.subtract(Y[s : s + block] * x, t, out=t)
            out[s : s + block] = t.sum(axis=1, dtype=np.float64)

    map_blocks(rows, range(0, n, task))
    return out


def chol_inverse(A):
    """Lower Cholesky factor L of a symmetric positive definite A and A^-1 from it (LAPACK
    potrf and potri: p^3 / 3 each, where an explicit triangular inverse and product cost
    2 p^3 / 3 more). Raises numpy.linalg.LinAlgError when A is not positive definite."""
    L, info = dpotrf(A, lower=1, clean=1)
    if info != 0:
        raise np.linalg.LinAlgError("matrix is not positive definite")
    Ainv, info = dpotri(L, lower=1)  # lower triangle; the upper one is L's, zero
    if info != 0:
        raise np.linalg.LinAlgError("singular Cholesky factor")
    Ainv += Ainv.T
    Ainv.flat[:: Ainv.shape[0] + 1] *= 0.5
    return L, Ainv


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
            _crt_counts(yy, r[start:stop], rng.uniform(size=tot), out[start:stop])
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


def _batched_chol(F, weights, iu, ju, p):
    """Cholesky factors of P_j = Phi^T diag(weights_j) Phi + I for the columns of ``weights``,
    from the upper-triangle products ``F = Phi[:, iu] * Phi[:, ju]``. Only the lower triangle
    of each P_j is written: LAPACK's potrf (``numpy.linalg.cholesky``) reads no other."""
    P = np.zeros((weights.shape[1], p, p))
    P[:, ju, iu] = weights.T @ F
    P[:, np.arange(p), np.arange(p)] += 1.0
    return np.linalg.cholesky(P)


def _chol_mean(L, r):
    """P^{-1} r for stacked Cholesky factors L (J, p, p) and right-hand sides r (p, J); also
    returns the half-solve L^{-1} r (J, p, 1)."""
    u = np.linalg.solve(L, r.T[:, :, None])
    return np.linalg.solve(np.swapaxes(L, 1, 2), u)[:, :, 0].T, u


def sample_logistic_beta(Phi, psi, b, kappa, obs, rng, chunk=256):
    """Polya-gamma Gibbs for the regression weights of a logistic-link likelihood, all columns.

    Per column j, omega_ij ~ PG(b_ij, psi_ij) at the observed entries (zero elsewhere), then
    beta_j ~ N(P_j^{-1} Phi^T h_j, P_j^{-1}) with P_j = Phi^T diag(omega_j) Phi + I and
    h_j = kappa_j at the observed entries (paper 002, eq. (27) with B_0 = I, beta_0 = 0, and
    eq. (28): Bernoulli b = 1, kappa = y - 1/2; negative binomial b = y + r_j,
    kappa = (y - r_j) / 2). The precisions are formed from their upper triangles (N x p(p+1)/2
    products by a J x N matrix), factorised in a batch and solved by substitution
    (:func:`_chol_draw`). Blocks of ``chunk`` columns run
    on the worker threads (:func:`~omicsbayes.models._threads.map_blocks`), each with its own
    generator seeded from ``rng``, so the draws do not depend on the number of threads.

    Parameters
    ----------
    Phi : (N, p) feature map; psi : (N, J) = Phi beta; b, kappa : (N, J) or broadcastable;
    obs : (N, J) bool; rng : numpy Generator.

    Returns
    -------
    beta : (p, J)
    """
    p = Phi.shape[1]
    N, J = psi.shape
    iu, ju = np.triu_indices(p)
    F = Phi[:, iu] * Phi[:, ju]
    R = Phi.T @ np.where(obs, kappa, 0.0)
    b = np.broadcast_to(b, (N, J))
    blocks = [slice(start, min(J, start + chunk)) for start in range(0, J, chunk)]
    seeds = rng.integers(2**63, size=len(blocks))

    def draw(sl, seed):
        block_rng = np.random.default_rng(seed)
        seen = obs[:, sl]
        omega = np.zeros(seen.shape)
        omega[seen] = sample_polyagamma(b[:, sl][seen], psi[:, sl][seen], block_rng)
        L = _batched_chol(F, omega, iu, ju, p)
        eps = block_rng.standard_normal((L.shape[0], p))
        return _chol_draw(L, np.ascontiguousarray(R[:, sl].T), eps).T

    return np.hstack(map_blocks(draw, blocks, seeds))


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
