"""Convergence checks and numerical guards shared by every iterative fit."""

import numpy as np


class NumericalError(FloatingPointError):
    """A fit produced a non-finite quantity; the message names the update and the iteration."""


def check_finite(value, what, iteration):
    """Raise :class:`NumericalError` unless every entry of ``value`` is finite.

    Parameters
    ----------
    value : float or array_like
        The quantity just computed (a lower bound, a log likelihood, an updated parameter).
    what : str
        Which update produced it, for the message (e.g. ``"q(beta) update"``).
    iteration : int
        The iteration at which it was produced.
    """
    arr = np.asarray(value)
    if not np.all(np.isfinite(arr)):
        n_bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise NumericalError(
            f"{what} produced {n_bad} non-finite value(s) at iteration {iteration}; "
            "check the input for extreme values or raise the floor on variances"
        )
    return value


def relative_improvement(previous, current):
    """Relative change of a lower bound, ``(current - previous) / |previous|``.

    Returns ``inf`` when there is no previous value, so that a first iteration never stops a fit.
    """
    if previous is None or not np.isfinite(previous):
        return np.inf
    return (current - previous) / max(abs(previous), np.finfo(float).tiny)
