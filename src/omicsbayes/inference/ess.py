"""Elliptical slice sampling (Murray, Adams & MacKay 2010) for Gaussian priors.

Two forms: :func:`elliptical_slice` moves a whole array at once (one slice, one angle bracket);
:func:`elliptical_slice_rows` runs an independent elliptical slice step on every row of a matrix
whose rows are a priori independent and whose log likelihood is a sum of per-row terms, all rows
in parallel (each row keeps its own slice height and angle bracket; only the rows still searching
are re-evaluated). Both stop after ``max_shrink`` bracket shrinks with a :class:`NumericalError`
instead of looping forever (a non-finite or discontinuous likelihood is the usual cause).
"""

import numpy as np

from .convergence import NumericalError


def elliptical_slice(x, prior_draw, log_lik, rng, cur_log_lik=None, mean=None, max_shrink=100):
    """One elliptical slice step for ``x`` with prior ``N(mean, Sigma)``.

    Parameters
    ----------
    x : ndarray
        Current state (any shape).
    prior_draw : ndarray
        A fresh draw from ``N(0, Sigma)`` with the shape of ``x``.
    log_lik : callable
        ``log_lik(x) -> float``.
    rng : numpy.random.Generator
    cur_log_lik : float, optional
        ``log_lik(x)`` if already known.
    mean : ndarray or float, optional
        Prior mean (zero by default).
    max_shrink : int
        Largest number of bracket shrinks before giving up.

    Returns
    -------
    x_new : ndarray
    log_lik_new : float
    n_evals : int
        Number of likelihood evaluations.
    """
    mean = 0.0 if mean is None else mean
    f = x - mean
    if cur_log_lik is None:
        cur_log_lik = log_lik(x)
    height = cur_log_lik + np.log(rng.uniform())
    theta = rng.uniform(0.0, 2.0 * np.pi)
    lo, hi = theta - 2.0 * np.pi, theta
    for n_evals in range(1, max_shrink + 1):
        prop = f * np.cos(theta) + prior_draw * np.sin(theta) + mean
        ll = log_lik(prop)
        if ll > height:
            return prop, ll, n_evals
        if theta < 0:
            lo = theta
        else:
            hi = theta
        theta = rng.uniform(lo, hi)
    raise NumericalError(
        f"elliptical slice sampling found no point above the slice after {max_shrink} bracket "
        "shrinks; the log likelihood is probably non-finite or discontinuous at the current state"
    )


def elliptical_slice_rows(X, prior_draw, log_lik_rows, rng, cur_log_lik=None, max_shrink=100):
    """Independent elliptical slice steps on every row of ``X`` (zero-mean Gaussian prior per row).

    Parameters
    ----------
    X : ndarray, shape (n_rows, d)
        Current state; rows are a priori independent.
    prior_draw : ndarray, shape (n_rows, d)
        Fresh prior draws, one per row.
    log_lik_rows : callable
        ``log_lik_rows(X_candidate_rows, row_index) -> ndarray (len(row_index),)``: per-row log
        likelihood of candidate rows ``X_candidate_rows`` placed at rows ``row_index``.
    rng : numpy.random.Generator
    cur_log_lik : ndarray, shape (n_rows,), optional
    max_shrink : int

    Returns
    -------
    X_new : ndarray
    log_lik_new : ndarray, shape (n_rows,)
    n_evals : int
        Number of row evaluations in total (a row counts once per candidate).
    """
    n = X.shape[0]
    rows = np.arange(n)
    if cur_log_lik is None:
        cur_log_lik = log_lik_rows(X, rows)
    height = cur_log_lik + np.log(rng.uniform(size=n))
    theta = rng.uniform(0.0, 2.0 * np.pi, size=n)
    lo, hi = theta - 2.0 * np.pi, theta.copy()
    X_new = X.copy()
    ll_new = np.array(cur_log_lik, dtype=float, copy=True)
    pending = rows
    n_evals = 0
    for _ in range(max_shrink):
        t = theta[pending][:, None]
        prop = X[pending] * np.cos(t) + prior_draw[pending] * np.sin(t)
        ll = log_lik_rows(prop, pending)
        n_evals += pending.size
        ok = ll > height[pending]
        X_new[pending[ok]] = prop[ok]
        ll_new[pending[ok]] = ll[ok]
        pending, tp = pending[~ok], theta[pending[~ok]]
        if pending.size == 0:
            return X_new, ll_new, n_evals
        neg = tp < 0
        lo[pending[neg]] = tp[neg]
        hi[pending[~neg]] = tp[~neg]
        theta[pending] = rng.uniform(lo[pending], hi[pending])
    raise NumericalError(
        f"elliptical slice sampling: {pending.size} row(s) found no point above the slice after "
        f"{max_shrink} bracket shrinks; the log likelihood is probably non-finite there"
    )
