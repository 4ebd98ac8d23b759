"""Three-parameter-beta-normal (TPBN) global-local shrinkage block (Armagan et al. 2011).

Hierarchy (paper 000, section 6, with the conditionals corrected as in ERRATA.md, section 7)::

    theta[b, g, m] ~ N(0, xi[b, g, m])
    xi[b, g, m]    ~ Ga(r, eta[b, g, m])            (shape, rate)
    eta[b, g, m]   ~ Ga(s, Phi[b, g])
    Phi[b, g]      ~ Ga(1/2, Phi_tilde[b])
    Phi_tilde[b]   ~ Ga(1/2, 1)

``b`` indexes independent blocks, ``g`` the groups that own a global scale and ``m`` the members
of a group.  Loadings A (d x K) with a global scale per column are one block of K groups of d
members (``theta = A.T[None]``); the coefficients of T classifier tasks are T blocks of one group
of K members.  ``r = s = 1/2`` is the horseshoe.

Conditionals (derived from the joint density)::

    xi        | .  ~ GIG(2 eta, theta^2, r - 1/2)
    eta       | .  ~ Ga(r + s, xi + Phi)
    Phi       | .  ~ Ga(1/2 + s M, Phi_tilde + sum_m eta)       (ERRATA: no 1/2 before the sum)
    Phi_tilde | .  ~ Ga(1/2 + G/2, 1 + sum_g Phi)                (ERRATA: printed Ga(1, ...))

The mean-field VB updates replace each conditioning variable by its expectation and
``theta^2`` by ``E[theta^2]`` (paper 000, section 8, with the Bessel ratios of ERRATA.md).
"""

import numpy as np
from scipy import special

_FLOOR = 1e-12


def gig_mean_and_inverse_mean(a, b, p):
    """``E[x]`` and ``E[1/x]`` of GIG(a, b, p) for a, b > 0 (Bessel ratios of ERRATA.md), with
    two or three scaled Bessel evaluations instead of the five of ``gig_moments`` (which also
    returns E[log x], not needed here); ``K_{-v} = K_v`` is used when p = 0."""
    omega = np.sqrt(a * b)
    eta = np.sqrt(b / a)
    if p == 0:  # horseshoe: the dedicated order-0 and order-1 routines are much faster
        k_p, k_up = special.k0e(omega), special.k1e(omega)
        k_down = k_up
    else:
        k_p = special.kve(p, omega)
        k_up = special.kve(p + 1, omega)
        k_down = special.kve(p - 1, omega)
    return eta * k_up / k_p, k_down / (eta * k_p)


def _log_q(x, p, w):
    """log quasi-density of the standard GIG: (p - 1) log x - w (x + 1/x) / 2."""
    return (p - 1) * np.log(x) - w * (x + 1 / x) / 2


def _mode(p, w):
    if p < 1:
        return w / (np.sqrt((p - 1) ** 2 + w**2) + 1 - p)
    return (np.sqrt((1 - p) ** 2 + w**2) - (1 - p)) / w


def sample_gig_vectorised(a, b, p, rng):
    """GIG(a, b, p) draws (density x^(p-1) exp(-(a x + b/x)/2)) for arrays a, b and scalar p.

    Hoermann & Leydold (2014), the three regimes of ``scipy.stats.geninvgauss`` (ratio of uniforms
    with and without mode shift, and their rejection algorithm for small omega), run on whole
    arrays with rejection rounds over the entries not yet accepted; scipy loops over entries in
    Python, which is too slow for a draw per loading in every Gibbs sweep.
    """
    a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
    invert = p < 0
    q = -p if invert else p
    w_all = np.sqrt(a * b).ravel()
    out = np.empty(w_all.shape)
    shift = (q >= 1) | (w_all > 1)
    plain = ~shift & (w_all >= min(0.5, 2 * np.sqrt(max(1 - q, 0.0)) / 3))
    new = ~(shift | plain)
    if shift.any():
        w = w_all[shift]
        m = _mode(q, w)
        a2 = -2 * (q + 1) / w - m
        a1 = 2 * m * (q - 1) / w - 1
        p1 = a1 - a2**2 / 3
        q1 = 2 * a2**3 / 27 - a2 * a1 / 3 + m
        phi = np.arccos(np.clip(-q1 * np.sqrt(-27 / p1**3) / 2, -1, 1))
        s1 = -np.sqrt(-4 * p1 / 3)
        r1 = s1 * np.cos(phi / 3 + np.pi / 3) - a2 / 3
        r2 = -s1 * np.cos(phi / 3) - a2 / 3
        lm = _log_q(m, q, w)
        vmin = (r1 - m) * np.exp(0.5 * (_log_q(r1, q, w) - lm))
        vmax = (r2 - m) * np.exp(0.5 * (_log_q(r2, q, w) - lm))
        out[shift] = _rou(rng, np.ones_like(w), vmin, vmax, m, q, w, lm)
    if plain.any():
        w = w_all[plain]
        m = _mode(q, w)
        xplus = ((1 + q) + np.sqrt((1 + q) ** 2 + w**2)) / w
        umax = np.exp(0.5 * _log_q(m, q, w))
        vmax = xplus * np.exp(0.5 * _log_q(xplus, q, w))
        out[plain] = _rou(rng, umax, np.zeros_like(w), vmax, 0.0, q, w, 0.0)
    if new.any():
        out[new] = _small_omega(rng, q, w_all[new])
    y = out.reshape(a.shape)
    if invert:
        y = 1 / y
    return np.sqrt(b / a) * y


def _rou(rng, umax, vmin, vmax, c, q, w, lm):
    """Ratio-of-uniforms rounds; ``c`` is the shift, ``lm`` the log quasi-density at the mode."""
    c = np.broadcast_to(c, w.shape)
    lm = np.broadcast_to(lm, w.shape)
    out = np.empty(w.shape)
    todo = np.arange(w.size)
    while todo.size:
        u = umax[todo] * rng.uniform(size=todo.size)
        v = vmin[todo] + (vmax[todo] - vmin[todo]) * rng.uniform(size=todo.size)
        x = v / u + c[todo]
        with np.errstate(divide="ignore", invalid="ignore"):
            ok = (x > 0) & (2 * np.log(u) <= _log_q(x, q, w[todo]) - lm[todo])
        out[todo[ok]] = x[ok]
        todo = todo[~ok]
    return out


def _small_omega(rng, q, w):
    """Hoermann & Leydold (2014) algorithm for q < 1 and small omega (rejection constant < 2.73)."""
    x0 = w / (1 - q)
    xs = np.maximum(x0, 2 / w)
    k1 = np.exp(_log_q(_mode(q, w), q, w))
    A1 = k1 * x0
    has2 = x0 < 2 / w
    k2 = np.where(has2, np.exp(-w), 0.0)
    if q > 0:
        A2 = np.where(has2, k2 * ((2 / w) ** q - x0**q) / q, 0.0)
    else:
        A2 = np.where(has2, k2 * np.log(2 / w**2), 0.0)
    k3 = xs ** (q - 1)
    A3 = 2 * k3 * np.exp(-xs * w / 2) / w
    A = A1 + A2 + A3
    out = np.empty(w.shape)
    todo = np.arange(w.size)
    while todo.size:
        t = todo
        u = rng.uniform(size=t.size)
        v = A[t] * rng.uniform(size=t.size)
        c1 = v <= A1[t]
        c2 = ~c1 & (v <= A1[t] + A2[t])
        c3 = ~(c1 | c2)
        x = np.empty(t.size)
        h = np.empty(t.size)
        x[c1] = x0[t][c1] * v[c1] / A1[t][c1]
        h[c1] = k1[t][c1]
        if q > 0:
            x[c2] = (x0[t][c2] ** q + (v[c2] - A1[t][c2]) * q / k2[t][c2]) ** (1 / q)
        else:
            x[c2] = w[t][c2] * np.exp((v[c2] - A1[t][c2]) * np.exp(w[t][c2]))
        h[c2] = k2[t][c2] * x[c2] ** (q - 1)
        z = np.exp(-xs[t][c3] * w[t][c3] / 2) - w[t][c3] * (v[c3] - A1[t][c3] - A2[t][c3]) / (
            2 * k3[t][c3]
        )
        x[c3] = -2 / w[t][c3] * np.log(z)
        h[c3] = k3[t][c3] * np.exp(-x[c3] * w[t][c3] / 2)
        with np.errstate(divide="ignore", invalid="ignore"):
            ok = np.log(u * h) <= _log_q(x, q, w[t])
        out[t[ok]] = x[ok]
        todo = t[~ok]
    return out


class TPBNShrinkage:
    """State of a TPBN block; ``prior_precision`` is what the coefficient update needs.

    Parameters
    ----------
    shape : tuple of int
        ``(n_blocks, n_groups, n_members)``.
    r, s : float
        TPBN shape parameters (``r = s = 1/2``: horseshoe).

    Attributes
    ----------
    prior_precision : ndarray of shape ``shape``
        ``E[1/xi]`` after a VB update, ``1/xi`` after a Gibbs update.
    """

    def __init__(self, shape, r=0.5, s=0.5):
        if r <= 0 or s <= 0:
            raise ValueError(f"TPBN shape parameters r and s must be > 0, got r={r}, s={s}")
        self.shape = tuple(shape)
        self.r = float(r)
        self.s = float(s)
        n_blocks, n_groups, _ = self.shape
        self.xi = np.ones(self.shape)
        self.prior_precision = np.ones(self.shape)
        self.eta = np.ones(self.shape)
        self.phi = np.ones((n_blocks, n_groups))
        self.phi_tilde = np.ones(n_blocks)

    def update_vb(self, second_moment):
        """One mean-field sweep given ``E[theta^2]`` (array of ``shape``); returns E[1/xi]."""
        b = np.maximum(np.asarray(second_moment, float), _FLOOR)
        n_members = self.shape[2]
        n_groups = self.shape[1]
        mean_xi, mean_inv_xi = gig_mean_and_inverse_mean(2.0 * self.eta, b, self.r - 0.5)
        self.xi = mean_xi
        self.prior_precision = mean_inv_xi
        self.eta = (self.r + self.s) / (mean_xi + self.phi[:, :, None])
        self.phi = (0.5 + self.s * n_members) / (self.phi_tilde[:, None] + self.eta.sum(axis=2))
        self.phi_tilde = (0.5 + 0.5 * n_groups) / (1.0 + self.phi.sum(axis=1))
        return self.prior_precision

    def update_gibbs(self, theta, rng):
        """One Gibbs sweep given the current coefficients ``theta``; returns 1/xi."""
        b = np.maximum(np.asarray(theta, float) ** 2, _FLOOR)
        n_members = self.shape[2]
        n_groups = self.shape[1]
        self.xi = np.maximum(sample_gig_vectorised(2.0 * self.eta, b, self.r - 0.5, rng), _FLOOR)
        self.prior_precision = 1.0 / self.xi
        self.eta = rng.gamma(self.r + self.s, 1.0 / (self.xi + self.phi[:, :, None]))
        self.phi = rng.gamma(
            0.5 + self.s * n_members, 1.0 / (self.phi_tilde[:, None] + self.eta.sum(axis=2))
        )
        self.phi_tilde = rng.gamma(0.5 + 0.5 * n_groups, 1.0 / (1.0 + self.phi.sum(axis=1)))
        return self.prior_precision
