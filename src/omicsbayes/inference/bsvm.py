"""Polson-Scott Bayesian-SVM augmentation block (the Bayesian SVM on fixed features,
:class:`omicsbayes.models.bsvm.BayesianSVM`, and the rank factor model use it).

The hinge pseudo-likelihood is a location-scale mixture of normals (paper 000, equation 8)::

    exp(-2 max(0, u)) = int_0^inf (2 pi lam)^(-1/2) exp(-(u + lam)^2 / (2 lam)) d lam,

with ``u = 1 - y f`` the hinge residual.  Given ``u`` the augmentation variable is
``lam | u ~ GIG(1, u^2, 1/2)``, so ``1/lam ~ IG(mean=1/|u|, shape=1)`` (section 7, item 3), and
given ``lam`` the pseudo-likelihood is Gaussian in ``f`` with precision ``1/lam`` and linear
coefficient ``y (1 + 1/lam)``.
"""

import numpy as np
from scipy import special

from .gig import sample_invgauss

RESIDUAL_FLOOR = 1e-6


def sample_inv_lambda(residual, rng):
    """Gibbs draw of ``1/lambda ~ IG(mean=1/max(|u|, 1e-6), shape=1)`` (paper 000, section 7, 3).

    Parameters
    ----------
    residual : array_like
        Hinge residuals ``u = 1 - y f``.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray
        Draws of ``1/lambda``, same shape as ``residual``.
    """
    u = np.maximum(np.abs(np.asarray(residual, float)), RESIDUAL_FLOOR)
    return sample_invgauss(1.0 / u, np.ones_like(u), rng)


def expected_inv_lambda(residual_second_moment):
    """VB moment ``E[1/lambda] = max(E[u^2], 1e-12)^(-1/2)``.

    ``q(lambda) = GIG(1, E[u^2], 1/2)``, whose ``E[1/lambda]`` is ``E[u^2]^(-1/2)``.  The paper
    (section 8, item 3) plugs in the mean, ``|<u>|^-1``; ERRATA.md (000, sections 7-8) notes that
    the mean-field update uses the second moment, which is what is used here.
    """
    m2 = np.maximum(np.asarray(residual_second_moment, float), RESIDUAL_FLOOR**2)
    return 1.0 / np.sqrt(m2)


def bsvm_coef_posterior(X, y, inv_lambda, prior_precision):
    """Gaussian conditional of the coefficients given the augmentation variables.

    ``precision = diag(prior_precision) + X^T diag(1/lambda) X`` and
    ``mean = cov X^T (y (1 + 1/lambda))`` (paper 000, section 7, item 4, in matrix form).

    Parameters
    ----------
    X : ndarray of shape (n, K)
    y : ndarray of shape (n,), values in {-1, +1}
    inv_lambda : ndarray of shape (n,)
    prior_precision : ndarray of shape (K,)

    Returns
    -------
    mean : ndarray of shape (K,)
    cov : ndarray of shape (K, K)
    """
    X = np.asarray(X, float)
    inv_lambda = np.asarray(inv_lambda, float)
    precision = (X.T * inv_lambda) @ X
    precision[np.diag_indices_from(precision)] += np.asarray(prior_precision, float)
    chol = np.linalg.cholesky(precision)
    chol_inv = np.linalg.solve(chol, np.eye(len(precision)))
    cov = chol_inv.T @ chol_inv
    mean = cov @ (X.T @ (np.asarray(y, float) * (1.0 + inv_lambda)))
    return mean, cov


def expected_hinge(mean, var):
    """``E[max(0, u)]`` for ``u ~ N(mean, var)``, elementwise (used in monitoring bounds)."""
    sd = np.sqrt(np.maximum(var, 1e-300))
    t = mean / sd
    return mean * special.ndtr(t) + sd * np.exp(-0.5 * t**2) / np.sqrt(2 * np.pi)


def gauss_kl(mean, cov, prior_precision):
    """KL(N(mean, cov) || N(0, diag(1/prior_precision)))."""
    sign, logdet = np.linalg.slogdet(cov)
    return 0.5 * (
        np.sum(prior_precision * (np.diag(cov) + mean**2))
        - len(mean)
        - logdet
        - np.sum(np.log(prior_precision))
    )
