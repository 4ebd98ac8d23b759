"""Generalised inverse Gaussian (GIG) and inverse-Gaussian moments and draws.

GIG(a, b, p) has density proportional to ``x**(p-1) * exp(-(a*x + b/x) / 2)`` (ERRATA.md), so

    E[x]   = sqrt(b/a) K_{p+1}(sqrt(ab)) / K_p(sqrt(ab))
    E[1/x] = sqrt(a/b) K_{p-1}(sqrt(ab)) / K_p(sqrt(ab))

with K the modified Bessel function of the second kind, evaluated through the exponentially
scaled ``scipy.special.kve`` so that large arguments do not underflow (the scaling cancels in the
ratios).  As ``b -> 0`` with ``p > 0`` the GIG tends to Gamma(p, rate a/2) and as ``a -> 0`` with
``p < 0`` to an inverse gamma; both limits are handled in closed form.
"""

import numpy as np
from scipy import special, stats

_TINY = 1e-300


def gig_moments(a, b, p):
    """Moments ``(E[x], E[1/x], E[log x])`` of GIG(a, b, p), elementwise.

    Parameters
    ----------
    a, b : array_like
        Non-negative rate parameters (not both zero).
    p : array_like
        Index.

    Returns
    -------
    mean, mean_inv, mean_log : ndarray
    """
    a, b, p = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (a, b, p)))
    mean = np.empty(a.shape)
    mean_inv = np.empty(a.shape)
    mean_log = np.empty(a.shape)

    gamma_limit = (b <= _TINY) & (p > 0)  # Gamma(p, rate a/2)
    invgamma_limit = (a <= _TINY) & (p < 0) & ~gamma_limit  # InvGamma(-p, rate b/2)
    general = ~(gamma_limit | invgamma_limit)

    if np.any(gamma_limit):
        ag, pg = a[gamma_limit], p[gamma_limit]
        mean[gamma_limit] = 2 * pg / ag
        mean_inv[gamma_limit] = np.where(pg > 1, ag / (2 * np.maximum(pg - 1, _TINY)), np.inf)
        mean_log[gamma_limit] = special.digamma(pg) - np.log(ag / 2)
    if np.any(invgamma_limit):
        bi, qi = b[invgamma_limit], -p[invgamma_limit]
        mean[invgamma_limit] = np.where(qi > 1, bi / (2 * np.maximum(qi - 1, _TINY)), np.inf)
        mean_inv[invgamma_limit] = 2 * qi / bi
        mean_log[invgamma_limit] = np.log(bi / 2) - special.digamma(qi)
    if np.any(general):
        ag, bg, pg = a[general], b[general], p[general]
        omega = np.sqrt(ag * bg)
        eta = np.sqrt(bg / ag)
        k_p = special.kve(pg, omega)
        mean[general] = eta * special.kve(pg + 1, omega) / k_p
        mean_inv[general] = special.kve(pg - 1, omega) / (eta * k_p)
        # d/dp log K_p(omega) by a central difference in p (K is smooth in its order).
        h = 1e-5
        dlogk = (np.log(special.kve(pg + h, omega)) - np.log(special.kve(pg - h, omega))) / (2 * h)
        mean_log[general] = np.log(eta) + dlogk
    return mean, mean_inv, mean_log


def sample_gig(a, b, p, rng):
    """Draw from GIG(a, b, p) elementwise, with ``rng`` a numpy Generator.

    Uses ``scipy.stats.geninvgauss`` (density ``y**(p-1) exp(-w (y + 1/y) / 2)``) with
    ``x = sqrt(b/a) y`` and ``w = sqrt(ab)``; the b -> 0 limit is drawn as a gamma.
    """
    a, b, p = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (a, b, p)))
    out = np.empty(a.shape)
    gamma_limit = (b <= _TINY) & (p > 0)
    if np.any(gamma_limit):
        out[gamma_limit] = rng.gamma(p[gamma_limit], 2.0 / a[gamma_limit])
    rest = ~gamma_limit
    if np.any(rest):
        ar, br, pr = a[rest], b[rest], p[rest]
        draws = stats.geninvgauss.rvs(pr, np.sqrt(ar * br), random_state=rng)
        out[rest] = np.sqrt(br / ar) * draws
    return out


def sample_invgauss(mean, shape, rng):
    """Draw from the inverse Gaussian IG(mean, shape) elementwise (numpy's Wald sampler)."""
    mean, shape = np.broadcast_arrays(np.asarray(mean, float), np.asarray(shape, float))
    return rng.wald(mean, shape)
