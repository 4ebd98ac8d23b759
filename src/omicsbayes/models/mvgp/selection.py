"""``lam="auto"`` / ``sigma2="auto"`` for the paper-004 estimators: inner validation over the grid.

Section 5 of Koyejo, Lee and Ghosh (2014) selects lambda among 5 and sigma^2 among 20
log-spaced values in [1e-3, 1e3] by validation, separately per metric. An estimator with an
``"auto"`` hyperparameter does the same inside ``fit``:

1. a seeded ``VALIDATION_FRACTION`` of the observed entries is held out, drawn separately from
   the positive entries (value > 0: the known associations, or ratings above the centre) and from
   the others (sampled negatives), so both keep their proportion;
2. the estimator is fitted on the rest at every grid point, visited from the most to the least
   regularised (sigma^2 descending; lambda descending within), each fit warm-started from the
   previous one of its chain (the same lambda at the next larger sigma^2 for the nuclear-norm
   models: the path in the regularisation shares its factors and only grows in rank);
3. the grid point with the best validation ``selection_metric`` wins; ``fit`` then refits on all
   entries with it, exactly as a fit with those numbers given.

Metrics: ``"recall@k"`` / ``"precision@k"`` rank every column of each row with a held-out positive
after removing the row's training positives (section 5.1, :func:`top_k_metric`); ``"rmse"``
(lower is better) and ``"log_likelihood"`` (mean Gaussian log density ``N(y; psi, sigma2)``)
score the held-out entries themselves.

The workflow's per-model ``grid`` entry is this same selection: :func:`grid_params`
turns it into the estimator's ``lam`` / ``sigma2`` ("paper" -> "auto"; a list of settings ->
each parameter's values), and :func:`chosen_params` is what the protocols report per fold.
"""

import itertools
import re
import time

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.base import clone

LAMBDA_GRID = np.logspace(-3, 3, 5)
SIGMA2_GRID = np.logspace(-3, 3, 20)
#: Section 5.1's grid of ProDiGe's SVM regularisation C: 1e-3, 1e-2, ..., 1e3.
C_GRID = np.logspace(-3, 3, 7)
#: The hyperparameters "auto" selects, by name (each estimator has some of them).
SELECTED = ("lam", "sigma2", "C")
VALIDATION_FRACTION = 0.2

_METRIC = re.compile(r"^(?:(recall|precision)@([1-9][0-9]*)|(rmse|log_likelihood))$")


def parse_metric(name):
    """``(kind, k)`` of a ``selection_metric`` ("recall@20" -> ("recall", 20); "rmse" -> ("rmse",
    None)); ValueError naming the parameter otherwise."""
    match = _METRIC.match(name) if isinstance(name, str) else None
    if match is None:
        raise ValueError(
            f"selection_metric must be 'recall@k', 'precision@k' (k a positive integer), 'rmse' "
            f"or 'log_likelihood'; got {name!r}"
        )
    if match.group(3):
        return match.group(3), None
    return match.group(1), int(match.group(2))


def validation_split(y, rng, fraction=VALIDATION_FRACTION):
    """Boolean mask of the held-out entries: ``fraction`` of the positives (y > 0) and of the
    others, each drawn without replacement (at least one of a group of two or more)."""
    is_val = np.zeros(y.size, dtype=bool)
    for group in (np.flatnonzero(y > 0), np.flatnonzero(y <= 0)):
        n = int(round(fraction * group.size))
        n = max(n, 1) if group.size >= 2 else 0
        is_val[rng.choice(group, n, replace=False)] = True
    if is_val.all() or not is_val.any():
        raise ValueError(
            f"{y.size} observed entries cannot be split into training and validation parts; "
            "give lam and sigma2 as numbers"
        )
    return is_val


def validation_score(model, kind, k, problem, is_val):
    """Metric ``kind`` (at ``k``) on the ``is_val`` entries of a model fitted on the others."""
    rows, cols, y = problem.rows, problem.cols, problem.y
    if kind in ("recall", "precision"):
        return top_k_metric(model, kind, k, rows, cols, y > 0, is_val)
    e = model.predict(rows[is_val], cols[is_val]) - y[is_val]
    if kind == "rmse":
        return float(np.sqrt(np.mean(e**2)))
    s2 = model.sigma2_
    return float(np.mean(-0.5 * np.log(2 * np.pi * s2) - 0.5 * e**2 / s2))


def top_k_metric(model, kind, k, rows, cols, positive, is_val):
    """P@k or R@k of section 5.1 averaged over the rows with a held-out positive, exactly as
    :func:`omicsbayes.evaluate.ranking.ranking_curves` ranks (training positives removed, ties
    to the lower column index) but without sorting: a held-out positive is in a row's top k
    when fewer than k columns outrank it."""
    M, N = model.shape_
    train = sp.csr_matrix(
        (
            np.ones(int(np.sum(~is_val & positive))),
            (rows[~is_val & positive], cols[~is_val & positive]),
        ),
        shape=(M, N),
    )
    test = sp.csr_matrix(
        (
            np.ones(int(np.sum(is_val & positive))),
            (rows[is_val & positive], cols[is_val & positive]),
        ),
        shape=(M, N),
    )
    test = (test - test.multiply(train) > 0).tocoo()  # distinct, not a training positive
    score_rows, t_row = np.unique(test.row, return_inverse=True)
    S = model.predict_rows(score_rows)
    S[np.nonzero(train[score_rows])] = -np.inf
    s_pos = S[t_row, test.col][:, None]
    ahead = (S[t_row] > s_pos) | ((S[t_row] == s_pos) & (np.arange(N) < test.col[:, None]))
    hit = (ahead.sum(axis=1) < k).astype(float)
    hits = np.bincount(t_row, weights=hit, minlength=score_rows.size)
    per_row = hits / k if kind == "precision" else hits / np.bincount(t_row)
    return float(per_row.mean())


def select(estimator, problem, rng):
    """Choose the ``"auto"`` hyperparameters of ``estimator`` by inner validation.

    ``estimator`` provides ``_path()`` (``(params, chain)`` pairs in visiting order) and
    ``_fit_problem(problem, rng=..., warm=..., **params)``, which fits and returns the warm
    start for the next point of the same chain.

    Returns
    -------
    best : dict
        The chosen parameters.
    table : pandas.DataFrame
        One row per grid point: the parameters, the validation metric (column named by
        ``selection_metric``), the fitted rank where there is one and the seconds of the fit.
    """
    name = estimator.selection_metric
    kind, k = parse_metric(name)
    if kind in ("recall", "precision") and not np.any(problem.y > 0):
        raise ValueError(
            f"selection_metric={name!r} needs positive entries (value > 0) to rank; the "
            "observed values are all <= 0 (use 'rmse' or 'log_likelihood')"
        )
    is_val = validation_split(problem.y, rng)
    inner = problem.subset(~is_val)
    warm, records = {}, []
    for params, chain in estimator._path():
        model = clone(estimator).set_params(verbose=False)
        start = time.perf_counter()
        warm[chain] = model._fit_problem(inner, rng=rng, warm=warm.get(chain), **params)
        seconds = time.perf_counter() - start
        records.append(
            {
                **params,
                name: validation_score(model, kind, k, problem, is_val),
                "rank": getattr(model, "rank_", np.nan),
                "seconds": seconds,
            }
        )
    table = pd.DataFrame.from_records(records)
    values = table[name].to_numpy(dtype=float)
    if np.all(np.isnan(values)):
        raise ValueError(f"the validation {name} is NaN at every grid point")
    best = int(np.nanargmin(values) if kind == "rmse" else np.nanargmax(values))
    return {p: float(table[p][best]) for p in records[0] if p in params}, table


def grid_params(estimator, grid):
    """Estimator parameters for a workflow model's ``grid`` entry.

    ``"paper"``: ``"auto"`` for each of ``lam`` / ``sigma2`` the estimator has (section 5's
    grid). A list of settings (dicts of ``lam`` and/or ``sigma2``): each parameter's values, as
    a list the estimator searches; the settings must be every combination of those values (the
    estimator's path is a product grid), and a parameter no setting names keeps its value.
    """
    own = [p for p in SELECTED if p in estimator.get_params()]
    if grid == "paper":
        return {p: "auto" for p in own}
    settings = isinstance(grid, (list, tuple)) and all(isinstance(g, dict) for g in grid)
    if not settings or not grid:
        raise ValueError(f"grid must be 'paper' or a non-empty list of settings; got {grid!r}")
    unknown = sorted({k for g in grid for k in g} - set(own))
    if unknown:
        raise ValueError(f"grid sets {unknown}; {type(estimator).__name__} searches only {own}")
    names = sorted({k for g in grid for k in g})
    values = {p: sorted({float(g[p]) for g in grid if p in g}) for p in names}
    given = {tuple(float(g.get(p, np.nan)) for p in names) for g in grid}
    product = set(itertools.product(*values.values()))
    if given != product:
        raise ValueError(
            f"grid must list every combination of its values (the selection path is a product "
            f"grid): {values} has {len(product)} combinations, the grid {len(given)} distinct"
        )
    return values


def chosen_params(model):
    """``{"chosen_lam": ..., "chosen_sigma2": ..., "selection_metric": ...}`` of a fitted model
    that selected its hyperparameters (empty when it had them as numbers)."""
    if getattr(model, "selection_", None) is None:
        return {}
    own = [p for p in SELECTED if p in model.get_params()]
    return {
        **{f"chosen_{p}": float(getattr(model, f"{p}_")) for p in own},
        "selection_metric": model.selection_metric,
    }
