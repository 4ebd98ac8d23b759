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


def _split(x):
    """Each chain's first and last halves as chains: (K, M, n) -> (K, 2M, n // 2)."""
    half = x.shape[2] // 2
    return np.concatenate([x[:, :, :half], x[:, :, x.shape[2] - half :]], axis=1)


def _z_scale(x):
    """Rank-normalised values (average ranks over all chains and draws of each element, Blom's
    offset, the normal quantile)."""
    from scipy import stats

    K, M, n = x.shape
    ranks = stats.rankdata(x.reshape(K, M * n), method="average", axis=1)
    return stats.norm.ppf((ranks - 0.375) / (M * n + 0.25)).reshape(x.shape)


def _rhat(x):
    """Gelman-Rubin R-hat of every element: x (K, M, n) -> (K,)."""
    n = x.shape[2]
    between = n * x.mean(axis=2).var(axis=1, ddof=1)
    within = x.var(axis=2, ddof=1).mean(axis=1)
    return np.sqrt((between / within + n - 1) / n)


def _ess(x):
    """Effective sample size of every element with Geyer's initial monotone sequence, as ArviZ
    computes it for one element: x (K, M, n) -> (K,)."""
    from scipy.fft import irfft, next_fast_len, rfft

    K, M, n = x.shape
    constant = np.ptp(x.reshape(K, -1), axis=1) < np.finfo(float).resolution
    m = next_fast_len(2 * n)
    spectrum = rfft(x - x.mean(axis=2, keepdims=True), n=m, axis=2)
    acov = irfft(spectrum * np.conjugate(spectrum), n=m, axis=2)[:, :, :n] / n
    mean_var = acov[:, :, 0].mean(axis=1) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if M > 1:
        var_plus = var_plus + x.mean(axis=2).var(axis=1, ddof=1)
    rho_all = 1.0 - (mean_var[:, None] - acov.mean(axis=1)) / var_plus[:, None]
    rho = np.zeros((K, n))
    rho[:, 0], rho[:, 1] = 1.0, rho_all[:, 1]
    even, odd = np.ones(K), rho_all[:, 1].copy()
    active, t_end = np.ones(K, bool), np.ones(K, int)
    t = 1
    while t < n - 3:  # Geyer's initial positive sequence
        active &= even + odd > 0
        if not active.any():
            break
        even = np.where(active, rho_all[:, t + 1], even)
        odd = np.where(active, rho_all[:, t + 2], odd)
        keep = active & (even + odd >= 0)
        rho[keep, t + 1], rho[keep, t + 2] = even[keep], odd[keep]
        t_end[active] = t + 2
        t += 2
    max_t = t_end - 2
    rows = np.arange(K)
    improve = even > 0
    rho[rows[improve], max_t[improve] + 1] = even[improve]
    for t in range(1, int(max_t.max()) - 1, 2):  # Geyer's initial monotone sequence
        prev = rho[:, t - 1] + rho[:, t]
        lower = (t <= max_t - 2) & (rho[:, t + 1] + rho[:, t + 2] > prev)
        rho[lower, t + 1] = rho[lower, t + 2] = prev[lower] / 2.0
    lags = np.arange(n)
    tau = (
        -1.0
        + 2.0 * np.where(lags <= max_t[:, None], rho, 0.0).sum(axis=1)
        + np.where(lags == max_t[:, None] + 1, rho, 0.0).sum(axis=1)
    )
    ess = M * n / np.maximum(tau, 1.0 / np.log10(M * n))
    ess[np.isnan(rho).any(axis=1)] = np.nan
    ess[constant] = M * n
    return ess


def split_diagnostics(draws):
    """Rank-normalised split R-hat and bulk / tail ESS of every element of ``draws``.

    Parameters
    ----------
    draws : ndarray, shape (n_chains, n_draws, ...)

    Returns
    -------
    r_hat, ess_bulk, ess_tail : ndarray, shape ``draws.shape[2:]``
        The estimates of Vehtari et al. (2021) as ArviZ computes them (``arviz.rhat``,
        ``arviz.ess`` with ``method="bulk"`` and ``"tail"``), for all elements at once. With one
        chain R-hat compares the chain's two halves (each split again, as every chain is).
        Elements constant over all draws have no diagnostic (NaN); numpy's warnings about them
        are kept inside.
    """
    draws = np.asarray(draws, dtype=float)
    n_chains, n_draws = draws.shape[:2]
    x = np.moveaxis(draws.reshape(n_chains, n_draws, -1), 2, 0)  # elements, chains, draws
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        halves = x
        if n_chains == 1:
            half = n_draws // 2
            halves = x[:, :, : 2 * half].reshape(x.shape[0], 2, half)
        split = _split(halves)
        folded = np.abs(split - np.median(split.reshape(len(split), -1), axis=1)[:, None, None])
        r_hat = np.maximum(_rhat(_z_scale(split)), _rhat(_z_scale(folded)))
        ess_bulk = _ess(_z_scale(_split(x)))
        flat = x.reshape(len(x), -1)
        tails = [
            _ess(_split((x <= np.quantile(flat, q, axis=1)[:, None, None]).astype(float)))
            for q in (0.05, 0.95)
        ]
        ess_tail = np.minimum(*tails)
        constant = ~(np.ptp(flat, axis=1) > 0)
    shape = draws.shape[2:]
    return tuple(np.where(constant, np.nan, v).reshape(shape) for v in (r_hat, ess_bulk, ess_tail))


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

    Raises
    ------
    TypeError
        When ``idata`` is neither None nor an InferenceData (an estimator, say, not its
        ``idata_``).

    Examples
    --------
    >>> import numpy as np
    >>> from omicsbayes import tl
    >>> from omicsbayes.models import IBPFactorModel
    >>> Y = np.random.default_rng(0).normal(size=(30, 6))
    >>> model = IBPFactorModel(n_iter=20, n_chains=2, random_state=0).fit(Y)
    >>> table = tl.mcmc_diagnostics(model.idata_)
    >>> {"r_hat", "ess_bulk", "ess_tail", "flagged"} <= set(table.columns)
    True
    >>> "log_likelihood_observed" in table.index
    True
    """
    import pandas as pd

    if idata is not None:
        import arviz as az

        if not isinstance(idata, az.InferenceData):
            raise TypeError(
                f"mcmc_diagnostics: idata is a {type(idata).__name__}; expected an ArviZ "
                "InferenceData (the idata_ of an MCMC fit) or None"
            )
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
