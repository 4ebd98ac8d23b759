"""Bayesian maximum-margin PCA (paper 003, Du et al., AAAI 2015).

Bayesian PCA with ARD (Bishop 1999a,b) whose latent representation ``z~ = [z; 1]`` also carries a
max-margin classifier ``eta``, joined by posterior regularisation (paper eq. 2-3) and the
Polson-Scott augmentation of the hinge loss with variables ``lambda_n`` (eq. 4).  Mean-field VB over
``t, W, r, tau, Z, eta, nu, lambda``.  Gamma is shape-rate (paper footnote 1, ERRATA.md).

Estimators: :class:`BM2PCAClassifier` (binary, one-vs-rest for more classes, C by inner
cross-validation, semi-supervised rows) and :class:`BM2PCARegressor` (epsilon-insensitive loss, the
paper's second future-work item).  ``_BinaryVB`` holds every factor update and the bound.

Notation: ``X`` is ``(N, d)`` with samples in rows (the paper's ``X`` is ``d x N``); ``W`` is
``(d, k)``, so column ``w_i`` carries the ARD precision ``r_i`` and row ``w_j`` belongs to feature
``j``; ``y_n`` is +1 / -1 for labelled samples and 0 (no label term) for unlabelled ones.

Departures from the printed paper (ERRATA 003): the label term of ``mu_z^(n)`` is
``C (1 + C E[1/lambda_n]) y_n E[eta~] - C^2 E[1/lambda_n] E[eta_(k+1) eta~]`` (the print has
``E[1/lambda_n] C (E[lambda_n] + C)``); ``chi_n`` uses the second moment
``C^2 E[(1 - y_n eta^T z~_n)^2]`` (the print squares the mean); ``a_nu + L/2`` has L = k + 1.
"""

import logging
import warnings
from numbers import Integral, Real

import numpy as np
from scipy import linalg
from sklearn.base import ClassifierMixin, RegressorMixin, TransformerMixin
from sklearn.model_selection import StratifiedKFold
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import column_or_1d

from ..inference import gig_moments
from ..inference.gamma import gamma_entropy, gamma_expected_log_pdf, gamma_moments
from ._base import VBEstimator
from ._validation import POSITIVE, VB_CONSTRAINTS, check_rng, split_labels

logger = logging.getLogger("omicsbayes")

_LOG_2PI = np.log(2 * np.pi)
_U2_FLOOR = 1e-12  # floor on E[u_n^2] (|hinge residual| floored at 1e-6)
C_GRID = (10, 20, 30, 40)  # the paper's candidate set for C="cv"


def _pca_start(X, k, rng):
    """Deterministic PCA start: centre, whitened scores and their PPCA posterior variances.

    Returns ``(Z, zvar, sigma2)``: ``Z = sqrt(N) U_k`` (unit-variance principal scores, from the
    eigen-decomposition of the smaller of the Gram and covariance matrices) and
    ``zvar_i = sigma^2 / l_i``, the PPCA posterior variance (Tipping & Bishop 1999), with
    ``sigma^2`` the mean discarded eigenvalue.  Components beyond the rank of the centred data
    are filled with standard normal draws from ``rng`` (variance 1).
    """
    n, d = X.shape
    Xc = X - X.mean(axis=0)
    if n <= d:
        evals, evecs = linalg.eigh(Xc @ Xc.T)
        evals, evecs = evals[::-1] / n, evecs[:, ::-1]
        scores = evecs * np.sqrt(n)
    else:
        evals, evecs = linalg.eigh(Xc.T @ Xc / n)
        evals, evecs = evals[::-1], evecs[:, ::-1]
        scores = (Xc @ evecs) / np.sqrt(np.maximum(evals, 1e-300))
    total = max(float(np.sum(np.maximum(evals, 0))), 1e-300)
    rank = int(np.sum(evals > 1e-10 * total))
    m = min(k, rank)
    sigma2 = max(float(np.sum(np.maximum(evals[m:], 0))) / max(d - m, 1), 1e-6 * total / d)
    Z = np.empty((n, k))
    zvar = np.ones(k)
    Z[:, :m] = scores[:, :m]
    zvar[:m] = np.minimum(sigma2 / evals[:m], 1.0)
    if m < k:
        Z[:, m:] = rng.standard_normal((n, k - m))
    return Z, zvar, sigma2


class _BinaryVB:
    """Mean-field VB state and updates for one binary (or unlabelled, or regression) problem.

    Margin terms: each labelled sample carries J residuals ``u_nj = a_nj - b_nj f_n`` with
    ``f_n = eta^T z~_n``, each with pseudo-likelihood ``exp(-2C max(0, u_nj))`` augmented by
    ``lambda_nj`` (ERRATA 003).  Classification (the paper): J = 1, ``a = 1``, ``b = y_n``.
    Epsilon-insensitive regression (the paper's second future-work item):
    ``max(0, |y - f| - eps) = max(0, y - f - eps) + max(0, f - y - eps)``, so J = 2 with
    ``a = (y - eps, -y - eps)``, ``b = (1, -1)``.  In ``log phi`` a residual contributes
    ``-C u - C^2 u^2 / (2 lambda)``, so with ``s_nj = E[1/lambda_nj]`` every update sees
    ``f_n`` through ``g_n f_n - h_n f_n^2 / 2``, ``g_n = sum_j (C b_nj + C^2 s_nj a_nj b_nj)``
    and ``h_n = C^2 sum_j s_nj`` (classification: ``g_n = C (1 + C s_n) y_n``, ERRATA).

    Factors (all expectations under the current q):

    - ``q(Z) = prod_n N(mu_n, Sigma_n)`` (paper, V(Z) with the ERRATA label term).  With
      ``A = I + E[tau] E[W^T W]`` and ``B = E[eta~ eta~^T]`` (``eta~`` the first k entries),
      ``Sigma_n = (A + h_n B)^{-1}``,
      ``mu_n = Sigma_n (E[tau] E[W]^T (x_n - E[t]) + g_n E[eta~] - h_n E[eta_(k+1) eta~])``.
      One generalised eigen-decomposition ``B V = A V diag(w)``, ``V^T A V = I`` gives every
      ``Sigma_n = V diag(1/(1 + h_n w)) V^T``, so N inversions cost O(k^3 + N k).
    - ``q(t) = N(m_t, v_t I)``: ``v_t = 1/(delta + N E[tau])``,
      ``m_t = v_t E[tau] sum_n (x_n - E[W] mu_n)`` (Bishop 1999b).
    - ``q(W) = prod_j N(row_j | m_j, Sigma_W)``,
      ``Sigma_W = (diag E[r] + E[tau] sum_n E[z z^T])^-1``,
      ``M_W = E[tau] (X - 1 m_t^T)^T E[Z] Sigma_W`` (Bishop 1999b, rows share one covariance).
    - ``q(r_i) = Ga(a_r + d/2, b_r + E||w_i||^2 / 2)``.
    - ``q(tau) = Ga(a_tau + N d/2, b_tau + sum_n E||x_n - W z_n - t||^2 / 2)``.
    - ``q(eta) = N(mu_eta, Sigma_eta)``: ``Sigma_eta = (sum_n h_n E[z~ z~^T] + E[nu] I)^-1``,
      ``mu_eta = Sigma_eta sum_n g_n E[z~_n]`` (paper);
      ``q(nu) = Ga(a_nu + (k+1)/2, b_nu + E||eta||^2/2)`` (ERRATA: L = k + 1).
    - ``q(lambda_nj) = GIG(a=1, b=chi_nj, p=1/2)``, ``chi_nj = C^2 E[u_nj^2]`` (ERRATA: second
      moment), so ``E[1/lambda_nj] = chi_nj^{-1/2}``; ``E[u^2]`` is floored at 1e-12.

    The lower bound is available in closed form: every factor except q(lambda) is Gaussian or
    Gamma, and in ``E[log phi(y_n, lambda_n | .)] - E[log q(lambda_n)]`` the ``E[log lambda_n]``
    terms cancel and the GIG(1, chi, 1/2) normaliser is ``sqrt(2 pi) exp(-sqrt(chi))``, leaving
    ``-C E[u_n] - (C^2 E[u_n^2] - chi_n) E[1/lambda_n] / 2 - sqrt(chi_n)`` per residual.

    Parameters
    ----------
    y : ndarray (N,)
        Classification: +1 / -1, 0 for unlabelled.  Regression (``epsilon`` given): real
        targets, NaN for unlabelled.
    """

    def __init__(self, X, y, k, C, hyper, start, epsilon=None):
        self.X = X
        self.n, self.d = X.shape
        self.k = k
        self.C = float(C)
        self.h = hyper
        y = np.asarray(y, dtype=float)
        if epsilon is None:
            self.lab = y != 0
            self.a, self.b = np.ones((self.n, 1)), y[:, None].copy()
        else:
            self.lab = ~np.isnan(y)
            y0 = np.where(self.lab, y, 0.0)
            self.a = np.column_stack([y0 - epsilon, -y0 - epsilon])
            self.b = np.tile([1.0, -1.0], (self.n, 1))
        self.a[~self.lab] = 0.0
        self.b[~self.lab] = 0.0
        self.supervised = bool(np.any(self.lab))
        self.x_sum = X.sum(axis=0)
        self.x_sq = float(np.sum(X * X))
        # Start (the paper leaves it open): q(Z) from PCA, t at the column mean, E[tau] = 1/sigma^2
        # of the PPCA fit, no ARD shrinkage, E[eta] = 0, E[nu] = 1, E[u_n^2] = 1; then W, r, tau
        # (and eta, nu, lambda) are updated once from these so that the first sweep starts at Z.
        Z0, zvar0, sigma2 = start
        self.Zm = Z0.copy()
        self.V = np.diag(np.sqrt(zvar0))
        self.Dz = np.ones((self.n, k))
        self.tau_shape, self.tau_rate = 1.0, sigma2
        self.t_var = 1.0 / (hyper["delta"] + self.n / sigma2)
        self.t_mean = self.x_sum / self.n
        self.r_shape, self.r_rate = 1.0, np.full(k, np.inf)
        self.lam_inv = np.where(self.lab[:, None], 1.0 / self.C, 0.0) * np.ones_like(self.a)
        self.lam_chi = np.where(self.lab[:, None], self.C**2, 0.0) * np.ones_like(self.a)
        self.eta_mean = np.zeros(k + 1)
        self.eta_cov = np.eye(k + 1)
        self.nu_shape, self.nu_rate = 1.0, 1.0
        self.update_from_w()

    # -- moments ------------------------------------------------------------------------------
    def _zcov_sum(self, weights=None):
        """``sum_n c_n Sigma_n`` (``c_n = 1`` when ``weights`` is None)."""
        dsum = self.Dz.sum(axis=0) if weights is None else weights @ self.Dz
        return (self.V * dsum) @ self.V.T

    def _zcov_trace(self, Q):
        """``tr(Q Sigma_n)`` for every n, shape (N,)."""
        return self.Dz @ np.einsum("ij,ik,kj->j", self.V, Q, self.V)

    def ezz(self):
        """``sum_n E[z_n z_n^T]``."""
        return self.Zm.T @ self.Zm + self._zcov_sum()

    def ewtw(self):
        """``E[W^T W] = M_W^T M_W + d Sigma_W``."""
        return self.W_mean.T @ self.W_mean + self.d * self.W_cov

    def eta_outer(self):
        return self.eta_cov + np.outer(self.eta_mean, self.eta_mean)

    def hinge_moments(self):
        """``(E[u_nj], E[u_nj^2])`` of ``u_nj = a_nj - b_nj eta^T z~_n``, shape (N, J)."""
        k = self.k
        f_mean = (self.Zm @ self.eta_mean[:k] + self.eta_mean[k])[:, None]
        E = self.eta_outer()
        zt = np.hstack([self.Zm, np.ones((self.n, 1))])
        f_sq = (np.einsum("ni,ij,nj->n", zt, E, zt) + self._zcov_trace(E[:k, :k]))[:, None]
        a, b = self.a, self.b
        return a - b * f_mean, a**2 - 2 * a * b * f_mean + b**2 * f_sq

    def margin_coefficients(self):
        """``(g_n, h_n)``: the label terms enter as ``g_n f_n - h_n f_n^2 / 2``."""
        C, s = self.C, self.lam_inv
        g = np.sum(C * self.b + C**2 * s * self.a * self.b, axis=1)
        return g, C**2 * s.sum(axis=1)

    # -- updates ------------------------------------------------------------------------------
    def update_z(self):
        """q(Z); label term per ERRATA: C(1 + C s_n) y_n E[eta~] - C^2 s_n E[eta_(k+1) eta~]."""
        k = self.k
        tau = self.tau_shape / self.tau_rate
        A = np.eye(k) + tau * self.ewtw()
        b = tau * (self.X @ self.W_mean - self.t_mean @ self.W_mean)
        if self.supervised:
            E = self.eta_outer()
            w, self.V = linalg.eigh(E[:k, :k], A)
            w = np.maximum(w, 0.0)
            g, h = self.margin_coefficients()
            b += np.outer(g, self.eta_mean[:k]) - np.outer(h, E[k, :k])
            self.Dz = 1.0 / (1.0 + np.outer(h, w))
        else:
            self.V = np.linalg.inv(np.linalg.cholesky(A)).T  # V^T A V = I
            self.Dz = np.ones((self.n, k))
        self.Zm = ((b @ self.V) * self.Dz) @ self.V.T

    def update_t(self):
        tau = self.tau_shape / self.tau_rate
        prec = self.h["delta"] + self.n * tau
        self.t_var = 1.0 / prec
        self.t_mean = tau * (self.x_sum - self.W_mean @ self.Zm.sum(axis=0)) / prec

    def update_w(self):
        er = self.r_shape / self.r_rate
        tau = self.tau_shape / self.tau_rate
        prec = np.diag(er) + tau * self.ezz()
        self.W_cov = np.linalg.inv(prec)
        self.W_cov = (self.W_cov + self.W_cov.T) / 2
        self.XtZ = self.X.T @ self.Zm
        self.W_mean = tau * (self.XtZ - np.outer(self.t_mean, self.Zm.sum(axis=0))) @ self.W_cov

    def update_r(self):
        h = self.h
        self.r_shape = h["a_r"] + self.d / 2
        w_sq = np.sum(self.W_mean**2, axis=0) + self.d * np.diag(self.W_cov)
        self.r_rate = h["b_r"] + w_sq / 2

    def expected_sq_error(self):
        """``sum_n E||x_n - W z_n - t||^2`` (uses ``X^T E[Z]`` from the last q(W) update)."""
        t_sq = float(self.t_mean @ self.t_mean) + self.d * self.t_var
        zsum = self.Zm.sum(axis=0)
        return (
            self.x_sq
            + self.n * t_sq
            + float(np.sum(self.ewtw() * self.ezz()))
            + 2 * float(self.t_mean @ self.W_mean @ zsum)
            - 2 * float(np.sum(self.W_mean * self.XtZ))
            - 2 * float(self.x_sum @ self.t_mean)
        )

    def update_tau(self):
        h = self.h
        self.tau_shape = h["a_tau"] + self.n * self.d / 2
        self.tau_rate = h["b_tau"] + max(self.expected_sq_error(), 0.0) / 2

    def update_eta(self):
        k, lab = self.k, self.lab
        g, h = self.margin_coefficients()
        Zl, hl, gl = self.Zm[lab], h[lab], g[lab]
        M = np.empty((k + 1, k + 1))
        M[:k, :k] = (Zl * hl[:, None]).T @ Zl + self._zcov_sum(h)
        M[:k, k] = M[k, :k] = hl @ Zl
        M[k, k] = hl.sum()
        nu = self.nu_shape / self.nu_rate
        self.eta_cov = np.linalg.inv(M + nu * np.eye(k + 1))
        self.eta_cov = (self.eta_cov + self.eta_cov.T) / 2
        rhs = np.append(gl @ Zl, gl.sum())
        self.eta_mean = self.eta_cov @ rhs

    def update_nu(self):
        h = self.h
        self.nu_shape = h["a_nu"] + (self.k + 1) / 2
        self.nu_rate = h["b_nu"] + (self.eta_mean @ self.eta_mean + np.trace(self.eta_cov)) / 2

    def update_lambda(self):
        _, u2 = self.hinge_moments()
        chi = self.C**2 * np.maximum(u2[self.lab], _U2_FLOOR)
        _, lam_inv, _ = gig_moments(1.0, chi, 0.5)
        self.lam_chi = np.zeros_like(self.a)
        self.lam_chi[self.lab] = chi
        self.lam_inv = np.zeros_like(self.a)
        self.lam_inv[self.lab] = lam_inv

    def update_from_w(self):
        """W, r, tau, then eta, nu, lambda (labelled problems only): the part of a sweep after
        Z and t, also run once from the initial Z and t."""
        self.update_w()
        self.update_r()
        self.update_tau()
        if self.supervised:
            self.update_eta()
            self.update_nu()
            self.update_lambda()

    def sweep(self):
        """One VB iteration: Z, t, then :meth:`update_from_w`."""
        self.update_z()
        self.update_t()
        self.update_from_w()

    # -- bound --------------------------------------------------------------------------------
    def lower_bound(self):
        """Closed-form evidence lower bound of the regularised objective (eq. 3 with eq. 4)."""
        h, n, d, k = self.h, self.n, self.d, self.k
        tau, log_tau = gamma_moments(self.tau_shape, self.tau_rate)
        r, log_r = gamma_moments(self.r_shape, self.r_rate)
        ezz = self.ezz()
        t_sq = float(self.t_mean @ self.t_mean) + d * self.t_var
        w_sq = np.sum(self.W_mean**2, axis=0) + d * np.diag(self.W_cov)

        value = n * d / 2 * (log_tau - _LOG_2PI) - tau / 2 * self.expected_sq_error()
        value += -n * k / 2 * _LOG_2PI - np.trace(ezz) / 2
        value += d / 2 * (np.log(h["delta"]) - _LOG_2PI) - h["delta"] / 2 * t_sq
        value += d / 2 * np.sum(log_r) - d * k / 2 * _LOG_2PI - float(r @ w_sq) / 2
        value += np.sum(gamma_expected_log_pdf(h["a_r"], h["b_r"], r, log_r))
        value += gamma_expected_log_pdf(h["a_tau"], h["b_tau"], tau, log_tau)
        # entropies of q(Z), q(t), q(W), q(r), q(tau)
        _, logdet_v = np.linalg.slogdet(self.V)
        value += n * k / 2 * (1 + _LOG_2PI) + n * logdet_v + np.sum(np.log(self.Dz)) / 2
        value += d / 2 * (1 + _LOG_2PI + np.log(self.t_var))
        value += d * k / 2 * (1 + _LOG_2PI) + d / 2 * np.linalg.slogdet(self.W_cov)[1]
        value += np.sum(gamma_entropy(self.r_shape, self.r_rate))
        value += gamma_entropy(self.tau_shape, self.tau_rate)
        if self.supervised:
            C, lab = self.C, self.lab
            nu, log_nu = gamma_moments(self.nu_shape, self.nu_rate)
            eta_sq = self.eta_mean @ self.eta_mean + np.trace(self.eta_cov)
            value += (k + 1) / 2 * (log_nu - _LOG_2PI) - nu / 2 * eta_sq
            value += gamma_expected_log_pdf(h["a_nu"], h["b_nu"], nu, log_nu)
            value += (k + 1) / 2 * (1 + _LOG_2PI) + np.linalg.slogdet(self.eta_cov)[1] / 2
            value += gamma_entropy(self.nu_shape, self.nu_rate)
            u, u2 = self.hinge_moments()
            chi, s = self.lam_chi[lab], self.lam_inv[lab]
            value += np.sum(-C * u[lab] - (C**2 * u2[lab] - chi) * s / 2 - np.sqrt(chi))
        return float(value)

    def summary(self):
        """The fitted moments that transform and prediction need (no training data)."""
        return {
            "t_mean": self.t_mean,
            "W_mean": self.W_mean,
            "W_cov": self.W_cov,
            "tau": self.tau_shape / self.tau_rate,
            "r": self.r_shape / self.r_rate,
            "eta_mean": self.eta_mean if self.supervised else None,
            "eta_cov": self.eta_cov if self.supervised else None,
            "nu": self.nu_shape / self.nu_rate if self.supervised else None,
        }


def _project(fit, X):
    """Single-step variational projection (paper, "Prediction on unseen data"):
    ``Sigma = (I + E[tau] E[W^T W])^{-1}``, ``mu = Sigma E[tau] E[W]^T (x - E[t])``."""
    W, k = fit["W_mean"], fit["W_mean"].shape[1]
    A = np.eye(k) + fit["tau"] * (W.T @ W + W.shape[0] * fit["W_cov"])
    return fit["tau"] * np.linalg.solve(A, W.T @ (X - fit["t_mean"]).T).T


def _decision(fits, X):
    """``E[eta]^T [mu_new; 1]`` per binary problem: (n,) for one, (n, n_problems) for more."""
    dec = [_project(f, X) @ f["eta_mean"][:-1] + f["eta_mean"][-1] for f in fits]
    return dec[0] if len(dec) == 1 else np.column_stack(dec)


def _run_vb(est, vb, label):
    """Iterate ``vb.sweep`` until the relative bound change is below ``est.tol`` (the VB loop of
    :class:`~omicsbayes.models._base.VBEstimator`; the history starts with the bound at the
    start). Returns the history and the sweeps run."""

    def step(it):
        vb.sweep()
        return vb.lower_bound()

    bounds, n_iter, _ = est._run_vb(step, name=label, initial=vb.lower_bound(), record=False)
    return bounds, n_iter


_HYPER_NAMES = ("a_r", "b_r", "a_tau", "b_tau", "a_nu", "b_nu", "delta")
_CONSTRAINTS = {
    "n_components": [Interval(Integral, 1, None, closed="left")],
    "C": [POSITIVE],
    **{name: [POSITIVE] for name in _HYPER_NAMES},
    **VB_CONSTRAINTS,
}


def _check_fit(est, X):
    """Check the training matrix; return ``X`` and the prior dict.

    Sets ``n_components_``, the latent dimension fitted: ``n_components`` capped at the number
    of features (an upper bound that ARD prunes), with a ``UserWarning`` naming the cap.
    """
    X = est._check_X(X, reset=True)
    est.n_components_ = min(int(est.n_components), X.shape[1])
    if est.n_components_ < est.n_components:
        warnings.warn(
            f"{type(est).__name__}: n_components={est.n_components} is more than the "
            f"{X.shape[1]} features of X allow; fitting n_components_={est.n_components_}",
            UserWarning,
            stacklevel=3,
        )
    return X, {name: float(getattr(est, name)) for name in _HYPER_NAMES}


class BM2PCAClassifier(ClassifierMixin, TransformerMixin, VBEstimator):
    """Bayesian maximum-margin PCA classifier and transformer (paper 003).

    Bayesian PCA with ARD, ``x_n ~ N(W z_n + t, tau^-1 I)``, joined to a max-margin classifier
    ``f = eta^T [z; 1]`` by posterior regularisation (eq. 2-4), fitted by mean-field VB (see
    ``_BinaryVB`` for every factor update; those the paper omits follow Bishop 1999b).  Several
    classes by one-vs-rest, each with its own subspace; the largest decision value wins.

    Convergence is judged on the closed-form lower bound (the GIG normaliser of q(lambda) has a
    closed form at p = 1/2, so the bound needs no numerical integration): iteration stops when
    its relative change falls below ``tol`` or after ``max_iter`` sweeps.

    Parameters
    ----------
    n_components : int
        Upper bound on the latent dimension k (capped at the number of features, see
        ``n_components_``).  ARD (the precisions r) switches off the components the data do
        not need, so k is an upper bound: the default 20 is
        ahead of the paper's 10 or level with it on three real cohorts at 1.1-2.2x the CPU,
        and 40 gains nothing more (``python -m benchmarks.fidelity --review-defaults``).
    C : float or "cv"
        Hinge-loss weight (eq. 2).  ``"cv"`` picks C from {10, 20, 30, 40} by L-fold stratified
        cross-validation on the labelled training samples, L = min(5, smallest class count).
    a_r, b_r, a_tau, b_tau, a_nu, b_nu : float
        Shape and rate of the Gamma priors on the ARD precisions r, noise precision tau and
        classifier precision nu (paper defaults).
    delta : float
        Prior precision of the mean t.
    max_iter : int
        Maximum VB sweeps per binary problem.
    tol : float
        Stop when the relative change of the lower bound is below this.
    random_state : int, Generator or None
        Seeds the cross-validation folds and the start of components beyond the data rank.
    verbose : bool, default True
        tqdm progress bar per binary fit.

    Attributes
    ----------
    classes_ : ndarray
        Class labels (empty when fitted without labels).
    loadings_ : ndarray, shape (n_features, k) or (n_features, n_classes * k)
        Posterior mean loadings ``E[W]`` (side by side per one-vs-rest problem).
    scores_ : ndarray, shape (n_samples, k) or (n_samples, n_classes * k)
        Posterior means ``E[z_n]`` of the training samples (same column order).
    lower_bound_ : ndarray or list of ndarray
        Bound history (including the start); one array per class when multi-class.
    n_iter_ : int or ndarray
        Sweeps run; shape (n_classes,) when multi-class.
    C_ : float
        The C used (chosen by cross-validation when ``C="cv"``).
    cv_results_ : dict or None
        Mean cross-validated accuracy per candidate C when ``C="cv"``.
    n_components_ : int
        Latent dimension fitted: ``n_components`` capped at the number of features.
    fits_ : list of dict
        Fitted moments per binary problem (t, W, tau, r, eta, nu).

    Notes
    -----
    Semi-supervised use: rows of ``y`` that are NaN/None contribute to the PCA part only; with no
    labels at all the model is Bayesian PCA and only ``transform`` is available.  Cost per
    sweep is O(N d k + d k^2 + N k^2 + k^3): two ``N x d x k`` products (``X E[W]`` and
    ``X^T E[Z]``) dominate; the N per-sample ``k x k`` inverses reduce to one generalised
    eigen-decomposition because they differ only by the scalar ``E[1/lambda_n]``.

    Examples
    --------
    >>> import numpy as np
    >>> from omicsbayes.models import BM2PCAClassifier
    >>> X, y = np.random.default_rng(0).normal(size=(60, 8)), np.repeat(["case", "control"], 30)
    >>> X[:30, 0] += 3.0  # gene 0 separates the classes
    >>> y_part = y.astype(object)
    >>> y_part[1::2] = None  # semi-supervised: every other sample unlabelled
    >>> clf = BM2PCAClassifier(n_components=3, random_state=0).fit(X, y_part)
    >>> clf.loadings_.shape, clf.scores_.shape  # E[W] and E[z_n] of every sample
    ((8, 3), (60, 3))
    >>> bool((clf.predict(X[1::2]) == y[1::2]).mean() > 0.7)  # the unlabelled samples
    True
    """

    capabilities = frozenset({"classifier", "semi_supervised", "vb"})
    _trace_label = "lower bound"  # lower_bound_ is the closed-form evidence lower bound
    _parameter_constraints = {**_CONSTRAINTS, "C": [POSITIVE, StrOptions({"cv"})]}

    def __init__(
        self,
        n_components=20,
        C=10,
        a_r=1e-3,
        b_r=1e-3,
        a_tau=1e-2,
        b_tau=1e-5,
        a_nu=1e-1,
        b_nu=1e-5,
        delta=1e-5,
        max_iter=1000,  # tissue few-shot fits need over 300 (benchmarks.fidelity)
        tol=1e-6,
        random_state=None,
        verbose=True,
    ):
        self.n_components = n_components
        self.C = C
        self.a_r = a_r
        self.b_r = b_r
        self.a_tau = a_tau
        self.b_tau = b_tau
        self.a_nu = a_nu
        self.b_nu = b_nu
        self.delta = delta
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.verbose = verbose

    def _blas_shape(self, shape):
        """BLAS threads follow N x k, not N x d: the products with X are thin (k columns) and
        the rest are k x k blocks, so one thread is faster unless N k is large
        (benchmarks/bench_threads.py: two threads 9x slower on 600 x 2000, k = 20, with the
        other core busy)."""
        return (shape[0], min(shape[1], int(self.n_components)))

    # -- fitting ------------------------------------------------------------------------------
    def _fit_problems(self, X, codes, n_classes, C, rng, label):
        """Fit the one-vs-rest problems for integer ``codes`` (-1 = unlabelled)."""
        k = self.n_components_
        start = _pca_start(X, k, rng)
        if n_classes == 0:
            targets = [np.zeros(len(codes))]
        elif n_classes == 2:
            targets = [np.where(codes < 0, 0.0, np.where(codes == 1, 1.0, -1.0))]
        else:
            targets = [
                np.where(codes < 0, 0.0, np.where(codes == c, 1.0, -1.0)) for c in range(n_classes)
            ]
        fits, bounds, iters = [], [], []
        for i, y in enumerate(targets):
            vb = _BinaryVB(X, y, k, C, self._hyper, start)
            tag = label if len(targets) == 1 else f"{label} class {i}"
            b, n_it = _run_vb(self, vb, tag)
            fits.append({**vb.summary(), "Z_mean": vb.Zm})
            bounds.append(b)
            iters.append(n_it)
        return fits, bounds, iters

    def _select_C(self, X, codes, n_classes, rng):
        labelled = np.flatnonzero(codes >= 0)
        unlabelled = np.flatnonzero(codes < 0)
        counts = np.bincount(codes[labelled], minlength=n_classes)
        n_folds = int(min(5, counts.min()))
        if n_folds < 2:
            logger.warning(
                "C='cv' needs at least 2 labelled samples per class (smallest class has %d); "
                "using C=%d",
                counts.min(),
                C_GRID[0],
            )
            return float(C_GRID[0]), None
        folds = StratifiedKFold(n_folds, shuffle=True, random_state=int(rng.integers(2**31)))
        splits = list(folds.split(labelled, codes[labelled]))
        scores = {}
        for C in C_GRID:
            acc = []
            for f, (tr, te) in enumerate(splits):
                rows = np.concatenate([labelled[tr], unlabelled])
                fits, _, _ = self._fit_problems(
                    X[rows], codes[rows], n_classes, C, rng, f"BM2PCA cv C={C} fold {f}"
                )
                dec = _decision(fits, X[labelled[te]])
                pred = (dec > 0).astype(int) if dec.ndim == 1 else np.argmax(dec, axis=1)
                acc.append(np.mean(pred == codes[labelled[te]]))
            scores[C] = float(np.mean(acc))
        best = max(C_GRID, key=lambda c: (scores[c], -c))
        return float(best), scores

    def fit(self, X, y=None):
        """Fit by mean-field VB.

        Parameters
        ----------
        X : array_like, shape (n_samples, n_features)
        y : array_like, shape (n_samples,) or None
            Class labels; NaN / None marks an unlabelled sample (PCA part only).  ``None``
            (or all missing) fits plain Bayesian PCA.
        """
        who = type(self).__name__
        X, self._hyper = _check_fit(self, X)
        n, d = X.shape
        rng = check_rng(self.random_state)
        y, labelled = split_labels(np.full(n, np.nan) if y is None else y, who, n)
        missing = ~labelled
        self.classes_ = np.unique(y[labelled]) if np.any(labelled) else np.array([])
        n_classes = len(self.classes_)
        if n_classes == 1:
            raise ValueError(
                f"y has labels of only one class ({self.classes_[0]!r}); "
                f"{who} needs at least two classes (or no labels at all)"
            )
        codes = np.full(n, -1)
        if n_classes:
            codes[~missing] = np.searchsorted(self.classes_, y[~missing])
        if isinstance(self.C, str):
            if n_classes:
                self.C_, self.cv_results_ = self._select_C(X, codes, n_classes, rng)
            else:
                self.C_, self.cv_results_ = float(C_GRID[0]), None
        else:
            self.C_, self.cv_results_ = float(self.C), None
        fits, bounds, iters = self._fit_problems(X, codes, n_classes, self.C_, rng, "BM2PCA")
        self.fits_ = fits
        self.loadings_ = np.hstack([f["W_mean"] for f in fits])
        self.scores_ = np.hstack([f.pop("Z_mean") for f in fits])
        if len(fits) == 1:
            self.lower_bound_, self.n_iter_ = bounds[0], iters[0]
        else:
            self.lower_bound_, self.n_iter_ = bounds, np.asarray(iters)
        return self

    # -- prediction ---------------------------------------------------------------------------
    def transform(self, X):
        """Latent means by the single-step variational projection.

        ``Sigma = (I + E[tau] E[W^T W])^{-1}``, ``mu = Sigma E[tau] E[W]^T (x - E[t])``; for
        several classes the per-class projections are concatenated, shape (n, n_classes * k).
        """
        X = self._check_X(X, reset=False)
        return np.hstack([_project(f, X) for f in self.fits_])

    def decision_function(self, X):
        """``E[eta]^T [mu_new; 1]``: shape (n,) for two classes (positive = classes_[1]),
        (n, n_classes) for more."""
        if len(self.classes_) == 0:
            raise ValueError("BM2PCAClassifier was fitted without labels; only transform works")
        X = self._check_X(X, reset=False)
        return _decision(self.fits_, X)

    def predict(self, X):
        dec = self.decision_function(X)
        if dec.ndim == 1:
            return self.classes_[(dec > 0).astype(int)]
        return self.classes_[np.argmax(dec, axis=1)]


class BM2PCARegressor(RegressorMixin, TransformerMixin, VBEstimator):
    """Bayesian maximum-margin PCA for regression (paper 003, second future-work item).

    The hinge loss of :class:`BM2PCAClassifier` replaced by the epsilon-insensitive loss
    ``max(0, |y - eta^T z~| - epsilon)``, written as two hinges and augmented with two
    ``lambda`` per labelled sample (``_BinaryVB`` gives the updates); everything else, the bound
    and the stopping rule are the classifier's.  Prediction is ``E[eta]^T [mu_new; 1]`` with
    ``mu_new`` the single-step projection.  ``C`` and ``epsilon`` act in the units of ``y``
    (standardise ``y`` for scale-free settings).

    Parameters
    ----------
    n_components, C, a_r, b_r, a_tau, b_tau, a_nu, b_nu, delta, max_iter, tol, random_state, verbose
        As in :class:`BM2PCAClassifier` (``C`` must be a number).
    epsilon : float
        Half-width of the insensitive tube, >= 0.

    Attributes
    ----------
    loadings_, scores_, lower_bound_, n_iter_, n_components_, fits_
        As for a binary :class:`BM2PCAClassifier`.

    Examples
    --------
    >>> import numpy as np
    >>> from omicsbayes.models import BM2PCARegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 8))
    >>> y = X[:, 0] + 0.1 * rng.normal(size=60)
    >>> reg = BM2PCARegressor(n_components=3, random_state=0).fit(X, y)
    >>> reg.predict(X[:4]).shape
    (4,)
    >>> bool(np.corrcoef(reg.predict(X), y)[0, 1] > 0.5)
    True
    """

    capabilities = frozenset({"regressor", "vb"})
    _trace_label = "lower bound"  # lower_bound_ is the closed-form evidence lower bound
    _blas_shape = BM2PCAClassifier._blas_shape
    _parameter_constraints = {**_CONSTRAINTS, "epsilon": [Interval(Real, 0, np.inf, closed="left")]}

    def __init__(
        self,
        n_components=10,
        C=10,
        epsilon=0.1,
        a_r=1e-3,
        b_r=1e-3,
        a_tau=1e-2,
        b_tau=1e-5,
        a_nu=1e-1,
        b_nu=1e-5,
        delta=1e-5,
        max_iter=300,
        tol=1e-6,
        random_state=None,
        verbose=True,
    ):
        self.n_components = n_components
        self.C = C
        self.epsilon = epsilon
        self.a_r = a_r
        self.b_r = b_r
        self.a_tau = a_tau
        self.b_tau = b_tau
        self.a_nu = a_nu
        self.b_nu = b_nu
        self.delta = delta
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.verbose = verbose

    def fit(self, X, y):
        """Fit by mean-field VB; NaN targets mark unlabelled samples (PCA part only)."""
        who = type(self).__name__
        X, hyper = _check_fit(self, X)
        if y is None:
            raise ValueError(f"{who} requires y to be passed, but the target y is None")
        y = column_or_1d(np.asarray(y, dtype=float), warn=True)
        if len(y) != len(X):
            raise ValueError(f"y has {len(y)} targets but X has {len(X)} rows")
        if np.any(np.isinf(y)) or np.all(np.isnan(y)):
            raise ValueError(f"y must hold finite targets (NaN = unlabelled, not all); {who}")
        rng = check_rng(self.random_state)
        vb = _BinaryVB(
            X,
            y,
            self.n_components_,
            self.C,
            hyper,
            _pca_start(X, self.n_components_, rng),
            epsilon=float(self.epsilon),
        )
        self.lower_bound_, self.n_iter_ = _run_vb(self, vb, "BM2PCA regression")
        self.fits_ = [vb.summary()]
        self.loadings_, self.scores_ = vb.W_mean, vb.Zm
        return self

    def transform(self, X):
        """Latent means by the single-step variational projection, shape (n, k)."""
        return _project(self.fits_[0], self._check_X(X, reset=False))

    def predict(self, X):
        """``E[eta]^T [mu_new; 1]``."""
        return _decision(self.fits_, self._check_X(X, reset=False))
