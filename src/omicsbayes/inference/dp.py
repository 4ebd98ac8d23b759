"""Dirichlet-process mixture of Gaussians with a normal-inverse-Wishart base measure (paper 002,
equations 22-25): collapsed Gibbs for the assignments, the conjugate re-instantiation of the
component parameters and the Escobar & West (1995) update of the concentration.

Notation: prior NIW(mu0, lam0, Psi0, nu0) means Sigma ~ IW(Psi0, nu0), mu | Sigma ~
N(mu0, Sigma / lam0). The paper writes kappa0 for nu0 and lambda0 for lam0.
"""

import numpy as np
from scipy.special import gammaln, multigammaln
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
        (n = 0 gives the prior predictive). Equations (22)-(23): degrees of freedom
        nu_n - d + 1 (the paper's kappa'_k) and shape Psi_n (lam_n + 1) / (lam_n (nu_n - d + 1));
        the paper's Sigma'_k is Psi_n without that scale factor, which the t density needs.
        Psi_n is written as Psi0 + ss + lam0 mu0 mu0^T - lam_n mu_n mu_n^T, which equals the
        scatter form of :meth:`posterior` and needs no mean of an empty component.
        """
        n = np.asarray(n, float)
        lam_n = self.lam0 + n
        nu_n = self.nu0 + n
        mu_n = (self.lam0 * self.mu0 + s) / lam_n[:, None]
        Psi_n = (
            self.Psi0
            + ss
            + self.lam0 * np.outer(self.mu0, self.mu0)
            - lam_n[:, None, None] * np.einsum("ki,kj->kij", mu_n, mu_n)
        )
        df = nu_n - self.d + 1.0
        shape = Psi_n * ((lam_n + 1.0) / (lam_n * df))[:, None, None]
        L = np.linalg.cholesky(shape)
        z = np.linalg.solve(L, (w - mu_n)[:, :, None])[:, :, 0]
        maha = np.sum(z * z, axis=1)
        d = self.d
        return (
            gammaln((df + d) / 2)
            - gammaln(df / 2)
            - 0.5 * d * np.log(df * np.pi)
            - np.sum(np.log(np.diagonal(L, axis1=1, axis2=2)), axis=1)
            - 0.5 * (df + d) * np.log1p(maha / df)
        )

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
    W = np.atleast_2d(W)
    labels = np.unique(np.asarray(labels), return_inverse=True)[1]
    d = W.shape[1]
    K = labels.max() + 1
    n = np.bincount(labels, minlength=K).astype(float)
    s = np.zeros((K, d))
    np.add.at(s, labels, W)
    ss = np.einsum("mi,mj->mij", W, W)
    S2 = np.zeros((K, d, d))
    np.add.at(S2, labels, ss)
    for m in range(W.shape[0]):
        k_old = labels[m]
        n[k_old] -= 1
        s[k_old] -= W[m]
        S2[k_old] -= ss[m]
        live = np.flatnonzero(n > 0)
        nn = np.append(n[live], 0.0)
        logw = np.append(np.log(n[live]), np.log(eta)) + prior.log_predictive(
            W[m],
            nn,
            np.vstack([s[live], np.zeros((1, d))]),
            np.concatenate([S2[live], np.zeros((1, d, d))]),
        )
        p = np.exp(logw - logw.max())
        choice = rng.choice(p.size, p=p / p.sum())
        if choice == live.size:
            empty = np.flatnonzero(n == 0)
            if empty.size:
                k_new = empty[0]
            else:
                k_new = n.size
                n = np.append(n, 0.0)
                s = np.vstack([s, np.zeros((1, d))])
                S2 = np.concatenate([S2, np.zeros((1, d, d))])
        else:
            k_new = live[choice]
        labels[m] = k_new
        n[k_new] += 1
        s[k_new] += W[m]
        S2[k_new] += ss[m]
    return np.unique(labels, return_inverse=True)[1]


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
