"""Truncated-normal moments and draws, stable in the tails.

Moments use the log-space difference of normal CDFs (``scipy.special.log_ndtr``) so that
truncation far into a tail does not cancel catastrophically; draws use
``scipy.stats.truncnorm`` with the standardised bounds.
"""

import numpy as np
from scipy import special, stats


def _log_diff_cdf(alpha, beta):
    """log(Phi(beta) - Phi(alpha)) for alpha < beta, evaluated on the tail that is accurate."""
    # Reflect to the lower tail where both bounds are positive: Phi(b)-Phi(a) = Phi(-a)-Phi(-b).
    flip = alpha > 0
    lo = np.where(flip, -beta, alpha)
    hi = np.where(flip, -alpha, beta)
    log_hi = special.log_ndtr(hi)
    log_lo = special.log_ndtr(lo)
    return log_hi + np.log1p(-np.exp(np.minimum(log_lo - log_hi, -1e-300)))


def truncnorm_moments(mu, sigma, lower=-np.inf, upper=np.inf):
    """Mean and variance of N(mu, sigma^2) truncated to (lower, upper), elementwise.

    Returns
    -------
    mean, var : ndarray
    """
    mu, sigma, lower, upper = np.broadcast_arrays(
        *(np.asarray(v, dtype=float) for v in (mu, sigma, lower, upper))
    )
    alpha = (lower - mu) / sigma
    beta = (upper - mu) / sigma
    log_z = _log_diff_cdf(alpha, beta)
    log_phi = -0.5 * np.log(2 * np.pi)
    pdf_a = np.where(np.isfinite(alpha), np.exp(log_phi - 0.5 * alpha**2 - log_z), 0.0)
    pdf_b = np.where(np.isfinite(beta), np.exp(log_phi - 0.5 * beta**2 - log_z), 0.0)
    a_pdf_a = np.where(np.isfinite(alpha), alpha, 0.0) * pdf_a
    b_pdf_b = np.where(np.isfinite(beta), beta, 0.0) * pdf_b
    delta = pdf_a - pdf_b
    mean = mu + sigma * delta
    var = sigma**2 * np.maximum(1.0 + a_pdf_a - b_pdf_b - delta**2, 1e-12)
    return mean, var


def sample_truncnorm(mu, sigma, lower, upper, rng):
    """Draw from N(mu, sigma^2) truncated to (lower, upper), elementwise, with Generator ``rng``."""
    mu, sigma, lower, upper = np.broadcast_arrays(
        *(np.asarray(v, dtype=float) for v in (mu, sigma, lower, upper))
    )
    alpha = (lower - mu) / sigma
    beta = (upper - mu) / sigma
    return mu + sigma * stats.truncnorm.rvs(alpha, beta, random_state=rng)
