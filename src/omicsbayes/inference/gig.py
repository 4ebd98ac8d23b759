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
from numba import njit
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

    With a scalar ``p`` the whole array is drawn at once by :func:`sample_gig_vectorised`;
    an array ``p`` falls back to ``scipy.stats.geninvgauss`` (density
    ``y**(p-1) exp(-w (y + 1/y) / 2)``, with ``x = sqrt(b/a) y`` and ``w = sqrt(ab)``), which loops
    over entries. The b -> 0 limit is drawn as a gamma.
    """
    a, b, p = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (a, b, p)))
    out = np.empty(a.shape)
    gamma_limit = (b <= _TINY) & (p > 0)
    if np.any(gamma_limit):
        out[gamma_limit] = rng.gamma(p[gamma_limit], 2.0 / a[gamma_limit])
    rest = ~gamma_limit
    if np.any(rest):
        ar, br, pr = a[rest], b[rest], p[rest]
        if np.all(pr == pr[0]):
            out[rest] = sample_gig_vectorised(ar, br, float(pr[0]), rng)
        else:
            draws = stats.geninvgauss.rvs(pr, np.sqrt(ar * br), random_state=rng)
            out[rest] = np.sqrt(br / ar) * draws
    return out


def sample_invgauss(mean, shape, rng):
    """Draw from the inverse Gaussian IG(mean, shape) elementwise (numpy's Wald sampler)."""
    mean, shape = np.broadcast_arrays(np.asarray(mean, float), np.asarray(shape, float))
    return rng.wald(mean, shape)


@njit(cache=True)
def _k1_over_k0(x):
    """``K_1(x) / K_0(x)`` elementwise for x > 0 (1-D): Temme's series below 2 and Steed's
    continued fraction CF2 from 2 on, as in Numerical Recipes' ``bessik`` with order 0 (the
    ratio needs only CF2's sum, not the normalisation); relative error below 1e-14."""
    out = np.empty(x.size)
    for j in range(x.size):
        xj = x[j]
        if not 0.0 < xj < np.inf:  # the limit at infinity; NaN (or x <= 0) gives NaN
            out[j] = 1.0 if xj == np.inf else np.nan
        elif xj < 2.0:  # K_0 = sum c_i f_i, K_1 = (2 / x) sum c_i (p_i - i f_i)
            half = 0.5 * xj
            f = -np.log(half) - 0.5772156649015329  # -log(x / 2) - Euler's gamma
            k0 = f
            k1 = 0.5
            p = q = 0.5
            c = 1.0
            i = 1
            while True:
                f = (i * f + p + q) / (i * i)
                c *= half * half / i
                p /= i
                q /= i
                k0 += c * f
                k1 += c * (p - i * f)
                if abs(c * f) < 1e-16 * abs(k0):
                    break
                i += 1
            out[j] = k1 * (2.0 / xj) / k0
        else:
            b = 2.0 * (1.0 + xj)
            d = h = delta = 1.0 / b
            a = -0.25
            i = 2
            while True:
                a -= 2.0 * (i - 1)
                b += 2.0
                d = 1.0 / (b + a * d)
                delta *= b * d - 1.0
                h += delta
                if abs(delta) < 1e-16 * abs(h):
                    break
                i += 1
            out[j] = (xj + 0.5 - 0.25 * h) / xj
    return out


def gig_mean_and_inverse_mean(a, b, p):
    """``E[x]`` and ``E[1/x]`` of GIG(a, b, p) for a, b > 0 (Bessel ratios of ERRATA.md), with
    two or three scaled Bessel evaluations instead of the five of ``gig_moments`` (which also
    returns E[log x], not needed here); when p = 0 (horseshoe) both are ``K_1 / K_0`` times
    ``eta`` or ``1 / eta`` (``K_{-1} = K_1``), one compiled ratio (twice as fast as scipy's
    ``k1e / k0e``)."""
    omega = np.sqrt(a * b)
    eta = np.sqrt(b / a)
    if p == 0:
        ratio = _k1_over_k0(np.ravel(omega)).reshape(np.shape(omega))
        return eta * ratio, ratio / eta
    k_p = special.kve(p, omega)
    k_up = special.kve(p + 1, omega)
    k_down = special.kve(p - 1, omega)
    return eta * k_up / k_p, k_down / (eta * k_p)


@njit(cache=True, inline="always")
def _log_q(x, p, w):
    """log quasi-density of the standard GIG: (p - 1) log x - w (x + 1/x) / 2."""
    return (p - 1) * np.log(x) - w * (x + 1 / x) / 2


@njit(cache=True, inline="always")
def _mode(p, w):
    if p < 1:
        return w / (np.sqrt((p - 1) ** 2 + w**2) + 1 - p)
    return (np.sqrt((1 - p) ** 2 + w**2) - (1 - p)) / w


_EXP_M1 = np.exp(-1.0)


@njit(cache=True, error_model="numpy")
def _gig_one(q, w, rng):
    """One draw of Hoermann & Leydold's (2014) standard GIG(q, w) sampler (``q >= 0``) with
    uniforms from the Generator ``rng`` (two per candidate, ``u`` in (0, 1]), in scipy's
    ``geninvgauss`` regimes: ratio of uniforms with mode shift when ``q >= 1`` or ``w > 1``,
    without it for ``w >= min(1/2, 2 sqrt(1 - q) / 3)``, else their rejection algorithm for
    small omega.  What depends on ``(q, w)`` only is computed once, before the candidates."""
    if q >= 1 or w > 1:  # ratio of uniforms with mode shift
        m = _mode(q, w)
        a2 = -2 * (q + 1) / w - m
        a1 = 2 * m * (q - 1) / w - 1
        p1 = a1 - a2**2 / 3
        q1 = 2 * a2**3 / 27 - a2 * a1 / 3 + m
        phi = np.arccos(min(max(-q1 * np.sqrt(-27 / p1**3) / 2, -1.0), 1.0))
        s1 = -np.sqrt(-4 * p1 / 3)
        r1 = s1 * np.cos(phi / 3 + np.pi / 3) - a2 / 3
        r2 = -s1 * np.cos(phi / 3) - a2 / 3
        lm = _log_q(m, q, w)
        vmin = (r1 - m) * np.exp(0.5 * (_log_q(r1, q, w) - lm))
        vmax = (r2 - m) * np.exp(0.5 * (_log_q(r2, q, w) - lm))
        while True:
            u = 1.0 - rng.random()
            x = (vmin + (vmax - vmin) * rng.random()) / u + m
            if x > 0 and 2 * np.log(u) <= _log_q(x, q, w) - lm:
                return x
    if w >= min(0.5, 2 * np.sqrt(max(1 - q, 0.0)) / 3):  # without the shift
        m = _mode(q, w)
        xplus = ((1 + q) + np.sqrt((1 + q) ** 2 + w**2)) / w
        umax = np.exp(0.5 * _log_q(m, q, w))
        vmax = xplus * np.exp(0.5 * _log_q(xplus, q, w))
        while True:
            u = umax * (1.0 - rng.random())
            x = vmax * rng.random() / u
            if x > 0 and 2 * np.log(u) <= _log_q(x, q, w):
                return x
    # small omega: q < 1, rejection constant below 2.73; for q = 0 (the horseshoe) x0 = w,
    # xs = 2 / w (w < 1/2), k3 = w / 2, A3 = e^-1, and the test log(u h) <= log_q(x) is taken
    # as u h x <= exp(-w (x + 1/x) / 2)
    x0 = w / (1 - q)
    xs = max(x0, 2 / w)
    m = _mode(q, w)
    if q == 0:  # the constants without pow, and exp(-xs w / 2) = e^-1: four functions, not eight
        k1 = np.exp(-0.5 * w * (m + 1 / m)) / m
        k2 = np.exp(-w)
        A2 = k2 * np.log(2 / w**2)
        k3 = 0.5 * w
        tail = _EXP_M1
    else:
        k1 = np.exp(_log_q(m, q, w))
        has2 = x0 < 2 / w
        k2 = np.exp(-w) if has2 else 0.0
        A2 = k2 * ((2 / w) ** q - x0**q) / q if has2 else 0.0
        k3 = xs ** (q - 1)
        tail = np.exp(-xs * w / 2)
    A1 = k1 * x0
    A3 = 2 * k3 * tail / w
    while True:
        u = 1.0 - rng.random()
        vv = (A1 + A2 + A3) * rng.random()
        if vv <= A1:
            x = x0 * vv / A1
            h = k1
        elif vv <= A1 + A2:
            if q > 0:
                x = (x0**q + (vv - A1) * q / k2) ** (1 / q)
                h = k2 * x ** (q - 1)
            else:
                x = w * np.exp((vv - A1) / k2)
                h = k2 / x
        else:
            z = tail - w * (vv - A1 - A2) / (2 * k3)
            x = -2 / w * np.log(z)
            h = k3 * z  # k3 exp(-x w / 2)
        if q == 0:
            if u * h * x <= np.exp(-0.5 * w * (x + 1 / x)):
                return x
        elif np.log(u * h) <= _log_q(x, q, w):
            return x


@njit(cache=True)
def _gig_draws(q, w, rng, out):
    """:func:`_gig_one` for every entry of ``w`` into ``out``, in order."""
    for j in range(w.size):
        out[j] = _gig_one(q, w[j], rng)


def sample_gig_vectorised(a, b, p, rng):
    """GIG(a, b, p) draws (density x^(p-1) exp(-(a x + b/x)/2)) for arrays a, b and scalar p.

    Hoermann & Leydold (2014), the three regimes of ``scipy.stats.geninvgauss``, compiled per
    entry with its rejection loop (:func:`_gig_one`; numbers from ``rng`` itself, entry by
    entry); scipy loops over entries in Python, which is too slow for a draw per loading in
    every Gibbs sweep.  ``p < 0`` draws 1 / GIG(-p).
    """
    a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
    invert = p < 0
    q = float(-p if invert else p)
    w = np.ascontiguousarray(np.sqrt(a * b).ravel())
    out = np.empty(w.shape)
    _gig_draws(q, w, rng, out)
    y = out.reshape(a.shape)
    if invert:
        y = 1 / y
    return np.sqrt(b / a) * y
