"""Indian buffet process utilities: the semi-ordered stick-breaking slice sampler of Teh, Gorur &
Ghahramani (2007) as used by the IBP RFLVM (paper 002, equations 16-20).

State: a binary matrix ``Z`` (n x K, every column active) and the weights ``pi`` of the active
columns. One sweep (:func:`ibp_slice_sweep`) draws the slice ``s ~ U(0, pi*)``, instantiates new
(inactive) sticks above ``s`` from equation (19), updates each column of ``Z`` given the caller's
per-row log likelihoods with the ``pi_d / pi*`` factor of equation (17), drops columns left empty
and redraws the active weights from equation (18). :func:`sample_ibp_alpha` is equation (20).
"""

import numpy as np

from .convergence import NumericalError


def harmonic(n):
    """H_n = sum_{i=1}^n 1/i."""
    return float(np.sum(1.0 / np.arange(1, int(n) + 1)))


def sample_ibp_alpha(n_active, n, a0, b0, rng):
    """IBP concentration, equation (20): alpha ~ Gamma(a0 + K+, rate b0 + H_N).

    Exact in the semi-ordered representation too: with the active weights kept, p(Z, pi | alpha)
    is alpha^{K+} exp(-alpha H_N) times terms free of alpha (Teh et al. 2007, section 4).
    """
    return rng.gamma(a0 + n_active, 1.0 / (b0 + harmonic(n)))


def sample_active_sticks(counts, n, rng):
    """Weights of the active columns, equation (18): pi_d ~ Beta(m_d, 1 + N - m_d)."""
    counts = np.asarray(counts, float)
    return rng.beta(counts, 1.0 + n - counts)


def _stick_logdens(t, alpha, n):
    """Log density (19) of t = log(pi), up to a constant, and its derivative in t.

    h(t) = alpha sum_i (1 - pi)^i / i + N log(1 - pi) + alpha t, h'(t) = alpha (1 - pi)^N
    - N pi / (1 - pi); h' is decreasing, so h is concave and adaptive rejection sampling applies.
    """
    t = np.atleast_1d(np.asarray(t, float))
    pi = np.exp(t)
    q = -np.expm1(t)  # 1 - pi, accurate for small pi
    i = np.arange(1, n + 1)
    series = np.sum(q[:, None] ** i / i, axis=1)
    h = alpha * series + n * np.log(q) + alpha * t
    dh = alpha * q**n - n * pi / q
    return h, dh


def _sample_logconcave(h_fun, upper, start, rng, max_tries=200):
    """Adaptive rejection sampling (Gilks & Wild 1992) on (-inf, upper] for a concave log
    density ``h_fun(t) -> (h, h')`` with tangent points ``start`` (the leftmost with h' > 0)."""
    pts = np.sort(np.asarray(start, float))
    h, dh = h_fun(pts)
    for _ in range(max_tries):
        # intersections of consecutive tangents
        z = (h[1:] - h[:-1] - pts[1:] * dh[1:] + pts[:-1] * dh[:-1]) / (dh[:-1] - dh[1:])
        lo = np.concatenate([[-np.inf], z])
        hi = np.concatenate([z, [upper]])
        length = hi - lo
        g = dh
        u_lo = h + g * (lo - pts)
        u_hi = h + g * (hi - pts)
        u_max = np.where(g > 0, u_hi, u_lo)
        a = np.abs(g)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            frac = np.where(a > 1e-12, -np.expm1(-a * length) / np.where(a > 1e-12, a, 1.0), length)
        logm = u_max + np.log(frac)
        w = np.exp(logm - logm.max())
        k = rng.choice(len(pts), p=w / w.sum())
        v = rng.uniform()
        if a[k] > 1e-12:
            step = -np.log1p(-v * (-np.expm1(-a[k] * length[k]))) / a[k]
            t = hi[k] - step if g[k] > 0 else lo[k] + step
        else:
            t = lo[k] + v * length[k]
        ht, dht = h_fun(t)
        if np.log(rng.uniform()) <= ht[0] - (h[k] + g[k] * (t - pts[k])):
            return t
        order = np.searchsorted(pts, t)
        pts = np.insert(pts, order, t)
        h = np.insert(h, order, ht[0])
        dh = np.insert(dh, order, dht[0])
    raise NumericalError(f"adaptive rejection sampling of a new IBP stick failed {max_tries} times")


def sample_new_stick(upper, alpha, n, rng):
    """One new stick weight pi in (0, upper) from equation (19) (ordered inactive sticks)."""

    def h_fun(t):
        return _stick_logdens(t, alpha, n)

    t_up = np.log(upper)
    if h_fun(t_up)[1][0] >= 0:
        start = [t_up - 2.0, t_up - 0.5]
    else:
        lo, hi = t_up - 60.0, t_up  # h'(lo) > 0 unless pi is astronomically small
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if h_fun(mid)[1][0] > 0:
                lo = mid
            else:
                hi = mid
        mode = 0.5 * (lo + hi)
        start = [mode - 1.0, mode, min(mode + 1.0, 0.5 * (mode + t_up))]
    return float(np.exp(_sample_logconcave(h_fun, t_up, start, rng)))


def sample_new_sticks(pi_star, s, alpha, n, rng, max_new=1000):
    """New sticks pi_{d*} in (s, pi*), drawn one after another from equation (19)."""
    out = []
    upper = pi_star
    while len(out) <= max_new:
        p = sample_new_stick(upper, alpha, n, rng)
        if p <= s:
            return np.asarray(out, float)
        out.append(p)
        upper = p
    raise NumericalError(
        f"the IBP slice instantiated more than {max_new} new dimensions; alpha={alpha:.3g} "
        "is implausibly large"
    )


def sample_z_column(logp_on, logp_off, pi_k, pi_star_rest, rng):
    """Block update of one column of Z, equation (17), rows conditionally independent.

    ``logp_on[i] = log pi_k + log p(y_i | z_ik = 1, -)`` and ``logp_off[i] = log(1 - pi_k) +
    log p(y_i | z_ik = 0, -)``. The slice density 1/pi* couples the rows only through whether the
    column is empty: pi* = min(pi*_rest, pi_k) if any z_ik = 1, pi*_rest otherwise. The column is
    drawn exactly: first "empty or not", then the rows given "not empty" (first active row, then
    the later rows independently).
    """
    logp_on = np.asarray(logp_on, float)
    logp_off = np.asarray(logp_off, float)
    d = logp_on - logp_off
    log_prod_all = np.sum(np.logaddexp(logp_on, logp_off))
    log_prod_off = np.sum(logp_off)
    gap = min(log_prod_off - log_prod_all, 0.0)
    w_empty = -np.log(pi_star_rest) + log_prod_off
    with np.errstate(divide="ignore"):
        w_some = -np.log(min(pi_star_rest, pi_k)) + log_prod_all + np.log(-np.expm1(gap))
    n = logp_on.size
    z = np.zeros(n, bool)
    if np.log(rng.uniform()) < w_empty - np.logaddexp(w_empty, w_some):
        return z
    log_p1 = -np.logaddexp(0.0, -d)
    log_p0 = -np.logaddexp(0.0, d)
    before = np.concatenate([[0.0], np.cumsum(log_p0)[:-1]])
    lw = before + log_p1
    w = np.exp(lw - lw.max())
    first = rng.choice(n, p=w / w.sum())
    z[first] = True
    tail = np.arange(n) > first
    z[tail] = rng.uniform(size=n)[tail] < np.exp(log_p1[tail])
    return z


def ibp_slice_sweep(Z, pi, alpha, rng, column_loglik=None, on_new=None):
    """One slice-sampler sweep over Z (equations 17-19), then the active weights (18).

    Parameters
    ----------
    Z : ndarray of bool, shape (n, K)
        Current matrix; every column active.
    pi : ndarray, shape (K,)
        Weights of the columns.
    alpha : float
        IBP concentration.
    rng : numpy.random.Generator
    column_loglik : callable, optional
        ``column_loglik(k, Z) -> (ll_off, ll_on)``, per-row log likelihoods of the data with
        ``z_ik`` set to 0 and to 1 (all other entries as in ``Z``). ``None`` means no data.
    on_new : callable, optional
        ``on_new(n_new)`` is called when new columns are instantiated (appended at the end), so
        that the caller can draw their parameters from the priors before the columns are updated.

    Returns
    -------
    Z : ndarray of bool, shape (n, K_new)
    pi : ndarray, shape (K_new,)
    keep : ndarray of bool
        Which columns of the extended matrix (old then new) survived.
    """
    n = Z.shape[0]
    Z = np.asarray(Z, bool)
    pi = np.asarray(pi, float)
    pi_star = pi.min() if pi.size else 1.0
    s = rng.uniform(0.0, pi_star)
    new = sample_new_sticks(pi_star, s, alpha, n, rng)
    if new.size:
        Z = np.hstack([Z, np.zeros((n, new.size), bool)])
        pi = np.concatenate([pi, new])
        if on_new is not None:
            on_new(new.size)
    for k in range(Z.shape[1]):
        others = Z.any(axis=0)
        others[k] = False
        pi_star_rest = min(1.0, pi[others].min()) if others.any() else 1.0
        if column_loglik is None:
            ll_off = ll_on = np.zeros(n)
        else:
            ll_off, ll_on = column_loglik(k, Z)
        Z[:, k] = sample_z_column(
            np.log(pi[k]) + ll_on, np.log1p(-pi[k]) + ll_off, pi[k], pi_star_rest, rng
        )
    keep = Z.any(axis=0)
    Z = Z[:, keep]
    return Z, sample_active_sticks(Z.sum(axis=0), n, rng), keep
