"""Convergence checks and numerical guards shared by every iterative fit: finiteness guards,
the relative change a VB loop stops on, and the R-hat / ESS diagnostics of MCMC draws with the
warning an unconverged fit raises."""

import os
import sys
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning


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


# ------------------------------------------------------------------ MCMC convergence diagnostics

RHAT_LIMIT = 1.05
"""Largest R-hat of a converged quantity (Vehtari et al. 2021)."""
ESS_LIMIT = 100
"""Smallest bulk effective sample size of a converged quantity."""
IDENTIFIABLE = ("train_decision", "decision", "predictive_mean", "log_likelihood")
"""Vector quantities identified by the data, diagnosed element by element (worst element shown);
every scalar quantity is diagnosed too unless listed in :data:`NOT_IDENTIFIABLE` or
:data:`REPORTED_ONLY`."""
NOT_IDENTIFIABLE = ("theta", "phi", "X", "scores", "loadings", "coef", "intercept", "r", "p")
"""Raw factors and what reads them: identified only up to rotation, sign and scale; left out."""
REPORTED_ONLY = ("n_active", "n_clusters")
"""Numbers of active features and of occupied clusters: features and clusters split and merge
with equally good fits, so chains may settle at different counts; reported (their mean) without
R-hat or ESS and never flagged."""
_COLUMNS = [
    "mean",
    "r_hat",
    "ess_bulk",
    "ess_tail",
    "n_chains",
    "n_draws",
    "identifiable",
    "flagged",
]


class ChainConvergenceWarning(ConvergenceWarning):
    """MCMC chains whose R-hat or bulk ESS says they have not converged or mixed (a
    :class:`UserWarning`, like scikit-learn's ``ConvergenceWarning``)."""


def _worst(values, largest):
    """The largest (or smallest) non-NaN entry, NaN when there is none."""
    values = np.asarray(values, dtype=float).ravel()
    values = values[~np.isnan(values)]
    if values.size == 0:
        return np.nan
    return float(values.max() if largest else values.min())


def split_diagnostics(draws):
    """Rank-normalised split R-hat and bulk / tail ESS of every element of ``draws``.

    Parameters
    ----------
    draws : ndarray, shape (n_chains, n_draws, ...)

    Returns
    -------
    r_hat, ess_bulk, ess_tail : ndarray, shape ``draws.shape[2:]``
        ArviZ's estimates. With one chain R-hat compares the chain's two halves (ArviZ splits
        each again, as it splits every chain). Elements constant over all draws have no
        diagnostic (NaN); numpy's warnings about them are kept inside.
    """
    import arviz as az

    draws = np.asarray(draws, dtype=float)
    n_chains, n_draws = draws.shape[:2]
    halves = draws
    if n_chains == 1:
        half = n_draws // 2
        halves = draws[:, : 2 * half].reshape(2, half, *draws.shape[2:])
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        r_hat = az.rhat(az.convert_to_dataset({"v": halves}))["v"].values
        data = az.convert_to_dataset({"v": draws})
        ess_bulk = az.ess(data, method="bulk")["v"].values
        ess_tail = az.ess(data, method="tail")["v"].values
        spread = np.ptp(draws.reshape(n_chains * n_draws, -1), axis=0).reshape(draws.shape[2:])
    constant = ~(spread > 0)
    return tuple(np.where(constant, np.nan, v) for v in (r_hat, ess_bulk, ess_tail))


def mcmc_diagnostics(idata):
    """R-hat and bulk / tail ESS of the identifiable quantities of an ArviZ InferenceData.

    Every scalar variable of the posterior and sample_stats groups (log likelihood, IBP
    concentration, ...) and the vector variables named in :data:`IDENTIFIABLE` (decision
    functions of the training samples, predictive means); raw factors are left out, and the
    counts of :data:`REPORTED_ONLY` get their mean only. Vector variables report their worst
    element (largest R-hat, smallest ESS). One chain is diagnosed within itself (split R-hat).
    ``flagged`` marks an identifiable quantity with R-hat above :data:`RHAT_LIMIT` or bulk ESS
    below :data:`ESS_LIMIT`.

    Returns
    -------
    pandas.DataFrame
        Indexed by variable; columns mean (scalar variables), r_hat, ess_bulk, ess_tail,
        n_chains, n_draws, identifiable, flagged. Empty when ``idata`` is None.
    """
    import pandas as pd

    rows = {}
    for group in ("posterior", "sample_stats", "log_likelihood"):
        data = None if idata is None else getattr(idata, group, None)
        if data is None:
            continue
        for name, var in data.data_vars.items():
            extra = [d for d in var.dims if d not in ("chain", "draw")]
            if name in NOT_IDENTIFIABLE or (extra and name not in IDENTIFIABLE):
                continue
            n_chains, n_draws = int(var.sizes["chain"]), int(var.sizes["draw"])
            values = np.asarray(var.transpose("chain", "draw", *extra).values, dtype=float)
            identifiable = name not in REPORTED_ONLY
            row = {
                "mean": float(values.mean()) if not extra else np.nan,
                "r_hat": np.nan,
                "ess_bulk": np.nan,
                "ess_tail": np.nan,
                "n_chains": n_chains,
                "n_draws": n_draws,
                "identifiable": identifiable,
            }
            # ArviZ needs 4 draws per chain (per half of a single chain)
            if identifiable and n_draws >= (8 if n_chains == 1 else 4):
                r_hat, ess_bulk, ess_tail = split_diagnostics(values)
                row.update(
                    r_hat=_worst(r_hat, True),
                    ess_bulk=_worst(ess_bulk, False),
                    ess_tail=_worst(ess_tail, False),
                )
            row["flagged"] = bool(
                identifiable and (row["r_hat"] > RHAT_LIMIT or row["ess_bulk"] < ESS_LIMIT)
            )
            rows[str(name)] = row
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=_COLUMNS)
    frame.index.name = "variable"
    return frame


def _stacklevel_outside_package():
    """The ``stacklevel`` of the first caller outside omicsbayes (the user's line)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def warn_unconverged(table):
    """Warn (:class:`ChainConvergenceWarning`) about the flagged rows of a
    :func:`mcmc_diagnostics` table, naming each quantity with its R-hat and bulk ESS."""
    flagged = table[table["flagged"].astype(bool)]
    if flagged.empty:
        return
    parts = [
        f"{name}{' (worst element)' if np.isnan(row['mean']) else ''}: "
        f"R-hat {row['r_hat']:.3g}, bulk ESS {row['ess_bulk']:.3g}"
        for name, row in flagged.astype(
            {"mean": float, "r_hat": float, "ess_bulk": float}
        ).iterrows()
    ]
    first = flagged.iloc[0]
    warnings.warn(
        f"MCMC chains have not converged ({int(first['n_chains'])} chain(s) x "
        f"{int(first['n_draws'])} draws): {'; '.join(parts)}. R-hat should be at most "
        f"{RHAT_LIMIT} and bulk ESS at least {ESS_LIMIT}: run more iterations or chains "
        "(omicsbayes.tl.mcmc_diagnostics(fit.idata_) gives the table)",
        ChainConvergenceWarning,
        stacklevel=_stacklevel_outside_package(),
    )
