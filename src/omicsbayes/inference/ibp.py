"""Indian buffet process utilities: the semi-ordered stick-breaking slice sampler of Teh, Gorur &
Ghahramani (2007) as used by the IBP RFLVM (paper 002, equations 16-20).

State: a binary matrix ``Z`` (n x K, every column active) and the weights ``pi`` of the active
columns. One sweep (:func:`ibp_slice_sweep`) draws the slice ``s ~ U(0, pi*)``, instantiates the
inactive sticks above ``s`` from equation (19), updates each column of ``Z`` given the caller's
per-row log likelihoods with the ``pi_d / pi*`` factor of equation (17), drops columns left empty
and redraws the active weights from equation (18). :func:`sample_ibp_alpha` is equation (20).
"""

import numpy as np
from scipy.special import logsumexp

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


def sample_new_sticks(s, alpha, n, rng, max_new=1000):
    """Inactive sticks above the slice s, in decreasing order (equation 19).

    Equation (19) draws them one after another, each on (0, previous) with density
    exp(alpha sum_i (1 - pi)^i / i) pi^(alpha - 1) (1 - pi)^N. That sequence is the decreasing
    order of a Poisson process with intensity alpha pi^-1 (1 - pi)^N on (0, 1), and it starts at
    pi_0 = 1: the inactive weights of the semi-ordered representation are independent of the
    active ones (eq. 19 leaves pi_0 unstated; starting at pi* undercounts the dimensions, which
    the prior check in the tests detects). Here the points above s are drawn directly: their
    number is Poisson(alpha int_s^1 pi^-1 (1 - pi)^N dpi) with
    int_s^1 = -log s - sum_{i=1}^N (1 - s)^i / i, and their positions are independent, drawn in
    t = log pi by rejection under a step envelope ((1 - e^t)^N decreases in t).
    """
    i = np.arange(1, n + 1)
    mass = max(-np.log(s) - np.sum((1.0 - s) ** i / i), 0.0)
    k = rng.poisson(alpha * mass)
    if k == 0:
        return np.empty(0)
    if k > max_new:
        raise NumericalError(
            f"the IBP slice instantiated more than {max_new} new dimensions; alpha={alpha:.3g} "
            "is implausibly large"
        )
    edges = np.linspace(np.log(s), 0.0, 257)
    top = (-np.expm1(edges[:-1])) ** n
    if not top.sum() > 0:  # all mass below the smallest float: (1 - s)^N underflows
        return np.empty(0)
    cell_p = top / top.sum()
    out = np.empty(0)
    while out.size < k:
        cell = rng.choice(cell_p.size, size=2 * k, p=cell_p)
        t = edges[cell] + rng.uniform(size=2 * k) * (edges[1] - edges[0])
        ok = rng.uniform(size=2 * k) * top[cell] < (-np.expm1(t)) ** n
        out = np.concatenate([out, np.exp(t[ok])])
    return np.sort(out[:k])[::-1]


def sample_slice_sticks(pi, alpha, n, rng):
    """The slice s ~ U(0, pi*) (eq. 16, pi* the smallest active weight, 1 if there is none) and
    the inactive sticks above it (eq. 19), which a sweep instantiates before updating Z."""
    s = rng.uniform(0.0, pi.min() if pi.size else 1.0)
    return sample_new_sticks(s, alpha, n, rng)


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


def ensemble_log_mean(ll):
    """log of the mean likelihood over an ensemble, per row: ``ll`` (K, n) -> (n,).

    For x_ik with prior N(0, 1) and the ensemble {current x_ik, K - 1 prior draws} (Tjelmeland
    2004), the index of the real x_ik is uniform a priori, so summing it out leaves
    p(y_i | z_ik = 1) proportional to the ensemble mean of the likelihood and p(y_i | z_ik = 0)
    to the likelihood with z_ik = 0 (the same for every member).
    """
    return logsumexp(ll, axis=0) - np.log(ll.shape[0])


def ensemble_pick(ll, on, rng):
    """Index of the ensemble member that becomes x_ik, per row: proportional to the likelihood
    (rows of ``ll`` (K, n)) where ``on`` (z_ik = 1), uniform where not (Gumbel-max draws)."""
    lw = np.where(on[None, :], ll, 0.0)
    return np.argmax(lw + rng.gumbel(size=lw.shape), axis=0)


def ibp_slice_sweep(Z, pi, alpha, rng, column_loglik=None, on_new=None, on_column=None):
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
    on_column : callable, optional
        ``on_column(k, z)`` is called with each newly drawn column ``z`` of ``Z`` (for example to
        draw auxiliary variables that ``column_loglik`` integrated out given ``z``).

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
    new = sample_slice_sticks(pi, alpha, n, rng)
    if new.size:
        Z = np.hstack([Z, np.zeros((n, new.size), bool)])
        pi = np.concatenate([pi, new])
        if on_new is not None:
            on_new(new.size)
    # scan order independent of Z (a random permutation): visiting the active columns first, a
    # state-dependent order, biases the sampler
    for k in rng.permutation(Z.shape[1]):
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
        if on_column is not None:
            on_column(k, Z[:, k])
    keep = Z.any(axis=0)
    Z = Z[:, keep]
    return Z, sample_active_sticks(Z.sum(axis=0), n, rng), keep
