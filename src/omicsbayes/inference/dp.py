"""Dirichlet-process mixture of Gaussians with a normal-inverse-Wishart base measure (paper 002,
equations 22-25): collapsed Gibbs for the assignments, the conjugate re-instantiation of the
component parameters and the Escobar & West (1995) update of the concentration.

Notation: prior NIW(mu0, lam0, Psi0, nu0) means Sigma ~ IW(Psi0, nu0), mu | Sigma ~
N(mu0, Sigma / lam0). The paper writes kappa0 for nu0 and lambda0 for lam0.
"""

import math

import numpy as np
from numba import njit
from scipy.special import multigammaln
from scipy.stats import invwishart


class NIWPrior:
    """Normal-inverse-Wishart hyperparameters ``(mu0, lam0, Psi0, nu0)`` in ``d`` dimensions.

    Defaults: mu0 = 0, lam0 = 1, Psi0 = I, nu0 = d + 2 (so that E[Sigma] = I, the RBF kernel
    with unit length scale when all frequencies share one component).
    """

    def __init__(self, d, mu0=None, lam0=1.0, Psi0=None, nu0=None):
        self.d = int(d)
        self.mu0 = np.zeros(self.d) if mu0 is None else np.asarray(mu0, float)
        self.lam0 = float(lam0)
        self.Psi0 = np.eye(self.d) if Psi0 is None else np.asarray(Psi0, float)
        self.nu0 = self.d + 2.0 if nu0 is None else float(nu0)

    def posterior(self, n, s, ss):
        """NIW posterior from n points with sum ``s`` and sum of outer products ``ss``.

        Equation (23) with two corrections: the prior-to-mean term is lam0 n / (lam0 + n)
        (wbar - mu0)(wbar - mu0)^T once, not a sum over the members of (w_m - mu0)(w_m - mu0)^T.
        """
        lam_n = self.lam0 + n
        nu_n = self.nu0 + n
        if n == 0:
            return self.mu0, lam_n, self.Psi0, nu_n
        wbar = s / n
        scatter = ss - n * np.outer(wbar, wbar)
        dev = wbar - self.mu0
        Psi_n = self.Psi0 + scatter + (self.lam0 * n / lam_n) * np.outer(dev, dev)
        mu_n = (self.lam0 * self.mu0 + s) / lam_n
        return mu_n, lam_n, Psi_n, nu_n

    def log_predictive(self, w, n, s, ss):
        """log p(w | component statistics), a multivariate t, for each of K components.

        ``n`` (K,), ``s`` (K, d), ``ss`` (K, d, d): counts, sums and sums of outer products
        (n = 0 gives the prior predictive); :func:`_log_predictive`.
        """
        n = np.asarray(n, float)
        s = np.asarray(s, float).reshape(n.size, self.d)
        ss = np.asarray(ss, float).reshape(n.size, self.d, self.d)
        w = np.asarray(w, float)
        fixed = self._fixed()
        return np.array([_log_predictive(w, n[k], s[k], ss[k], *fixed) for k in range(n.size)])

    def _fixed(self):
        """The hyperparameters as :func:`_log_predictive` takes them."""
        base = self.Psi0 + self.lam0 * np.outer(self.mu0, self.mu0)
        return self.mu0, self.lam0, np.ascontiguousarray(base), self.nu0

    def log_marginal(self, W):
        """log p(W) of all rows of ``W`` in one component (closed form, for checks)."""
        W = np.atleast_2d(W)
        n = W.shape[0]
        mu_n, lam_n, Psi_n, nu_n = self.posterior(n, W.sum(0), W.T @ W)
        d = self.d
        return (
            -0.5 * n * d * np.log(np.pi)
            + multigammaln(nu_n / 2, d)
            - multigammaln(self.nu0 / 2, d)
            + 0.5 * self.nu0 * np.linalg.slogdet(self.Psi0)[1]
            - 0.5 * nu_n * np.linalg.slogdet(Psi_n)[1]
            + 0.5 * d * (np.log(self.lam0) - np.log(lam_n))
        )

    def sample(self, n, s, ss, rng):
        """Component parameters from the NIW posterior, equation (24)."""
        mu_n, lam_n, Psi_n, nu_n = self.posterior(n, s, ss)
        Sigma = np.atleast_2d(invwishart.rvs(df=nu_n, scale=Psi_n, random_state=rng))
        mu = rng.multivariate_normal(mu_n, Sigma / lam_n)
        return mu, Sigma


def sample_dp_assignments(W, labels, eta, prior, rng):
    """One collapsed Gibbs sweep over the component labels of the rows of ``W``, equation (22).

    The component parameters are integrated out under the NIW base measure, so each row moves to
    an existing component k with weight n_k^{-m} times the t predictive of k, or to a new one with
    weight eta times the prior predictive. This is Neal's (2000) algorithm 3, which is what the
    paper's "algorithm 8 with the mixture locations integrated out" reduces to (eq. 22 writes
    alpha for the DP concentration eta). Labels are returned relabelled 0..K-1.
    """
    W = np.ascontiguousarray(np.atleast_2d(W), dtype=float)
    if not np.isfinite(W).all():
        raise ValueError("sample_dp_assignments: W has non-finite entries")
    if not 0.0 <= eta < np.inf:
        raise ValueError(f"sample_dp_assignments: the concentration eta must be >= 0, got {eta}")
    labels = np.unique(np.asarray(labels), return_inverse=True)[1].astype(np.int64)
    M, d = W.shape
    # room for every row in a component of its own: a new component takes the first empty slot
    slots = labels.max() + 1 + M
    n = np.bincount(labels, minlength=slots).astype(float)
    s = np.zeros((slots, d))
    np.add.at(s, labels, W)
    S2 = np.zeros((slots, d, d))
    np.add.at(S2, labels, np.einsum("mi,mj->mij", W, W))
    u = rng.random(M)  # the uniform of each row's draw (as rng.choice(p=...) would take it)
    with np.errstate(divide="ignore"):  # eta = 0: no new components
        log_eta = np.log(eta)
    _assignment_sweep(W, labels, n, s, S2, log_eta, *prior._fixed(), u)
    return np.unique(labels, return_inverse=True)[1]


@njit(cache=True)
def _log_predictive(w, n, s, ss, mu0, lam0, base, nu0):
    """log of the t predictive of ``w`` given a component's count ``n``, sum ``s`` and sum of
    outer products ``ss`` (n = 0: the prior predictive); ``base`` = Psi0 + lam0 mu0 mu0^T.

    Equations (22)-(23): degrees of freedom nu_n - d + 1 (the paper's kappa'_k) and shape Psi_n
    (lam_n + 1) / (lam_n (nu_n - d + 1)); the paper's Sigma'_k is Psi_n without that scale
    factor, which the t density needs. Psi_n is written as Psi0 + ss + lam0 mu0 mu0^T - lam_n
    mu_n mu_n^T, which equals the scatter form of :meth:`NIWPrior.posterior` and needs no mean
    of an empty component. The shape's Cholesky factor L and z = L^-1 (w - mu_n) row by row.
    """
    d = w.size
    lam_n = lam0 + n
    df = nu0 + n - d + 1.0
    scale = (lam_n + 1.0) / (lam_n * df)
    mu = (lam0 * mu0 + s) / lam_n
    L = np.zeros((d, d))
    z = np.empty(d)
    log_diag = 0.0
    maha = 0.0
    for i in range(d):
        for j in range(i + 1):
            acc = (base[i, j] + ss[i, j] - lam_n * mu[i] * mu[j]) * scale
            for k in range(j):
                acc -= L[i, k] * L[j, k]
            L[i, j] = np.sqrt(acc) if i == j else acc / L[j, j]
        r = w[i] - mu[i]
        for k in range(i):
            r -= L[i, k] * z[k]
        z[i] = r / L[i, i]
        log_diag += np.log(L[i, i])
        maha += z[i] * z[i]
    return (
        math.lgamma((df + d) / 2)
        - math.lgamma(df / 2)
        - 0.5 * d * np.log(df * np.pi)
        - log_diag
        - 0.5 * (df + d) * np.log1p(maha / df)
    )


@njit(cache=True)
def _assignment_sweep(W, labels, n, s, S2, log_eta, mu0, lam0, base, nu0, u):
    """The sweep of :func:`sample_dp_assignments` in place on ``labels`` and the component
    statistics ``n``, ``s``, ``S2`` (one slot per possible component; a new component takes the
    first empty slot). Row m's component is drawn as ``rng.choice(p=...)`` draws it from the
    uniform ``u[m]``: the first index whose normalised cumulative weight exceeds it."""
    M, d = W.shape
    slots = n.size
    logw = np.empty(slots + 1)
    index = np.empty(slots + 1, np.int64)
    zero_s = np.zeros(d)
    zero_ss = np.zeros((d, d))
    for m in range(M):
        w = W[m]
        k = labels[m]
        n[k] -= 1.0
        for i in range(d):
            s[k, i] -= w[i]
            for j in range(d):
                S2[k, i, j] -= w[i] * w[j]
        c = 0
        for k in range(slots):
            if n[k] > 0.0:
                index[c] = k
                logw[c] = np.log(n[k]) + _log_predictive(w, n[k], s[k], S2[k], mu0, lam0, base, nu0)
                c += 1
        index[c] = -1  # a new component
        logw[c] = log_eta + _log_predictive(w, 0.0, zero_s, zero_ss, mu0, lam0, base, nu0)
        c += 1
        p = np.exp(logw[:c] - logw[:c].max())
        total = p.sum()
        if not 0.0 < total < np.inf:  # NaN too
            raise ValueError("DP assignment weights are not finite and positive")
        cdf = np.cumsum(p / total)
        pick = np.searchsorted(cdf / cdf[-1], u[m], side="right")
        k = index[pick]
        if k < 0:
            k = 0
            while n[k] > 0.0:
                k += 1
        labels[m] = k
        n[k] += 1.0
        for i in range(d):
            s[k, i] += w[i]
            for j in range(d):
                S2[k, i, j] += w[i] * w[j]


def sample_dp_components(W, labels, prior, rng):
    """Means and covariances of the occupied components from the NIW posterior, equation (24)."""
    W = np.atleast_2d(W)
    K = labels.max() + 1
    mus = np.empty((K, W.shape[1]))
    Sigmas = np.empty((K, W.shape[1], W.shape[1]))
    for k in range(K):
        Wk = W[labels == k]
        mus[k], Sigmas[k] = prior.sample(Wk.shape[0], Wk.sum(0), Wk.T @ Wk, rng)
    return mus, Sigmas


def escobar_west(eta, n_clusters, n, a, b, rng):
    """Escobar & West (1995) update of the DP concentration, equation (25), vectorised in ``eta``.

    rho ~ Beta(eta + 1, n); odds pi/(1 - pi) = (a + K - 1) / (n (b - log rho));
    eta ~ pi Gamma(a + K, b - log rho) + (1 - pi) Gamma(a + K - 1, b - log rho) (rates). The
    paper's log(h) in the first rate is log(rho) (ERRATA 002).
    """
    eta = np.asarray(eta, float)
    rho = rng.beta(eta + 1.0, n)
    rate = b - np.log(rho)
    odds = (a + n_clusters - 1.0) / (n * rate)
    first = rng.uniform(size=eta.shape) < odds / (1.0 + odds)
    shape = np.where(first, a + n_clusters, a + n_clusters - 1.0)
    return rng.gamma(shape, 1.0 / rate)
