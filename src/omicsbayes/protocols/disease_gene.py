"""Paper 004's disease-gene protocol (section 5.1): associations held out by fold, every model
fitted on the training positives plus sampled negatives (scores averaged over negative sets),
test rows ranked over every column; P@k and R@k, and the top candidates of every test row.

``known_rows`` folds the associations (known diseases); ``new_rows`` folds the rows, whose
associations are all held out and which get no sampled negative (new diseases, scored through
the row kernel only). With a ``grid`` the hyperparameters are chosen in every fold by inner
validation, separately for P@k and R@k (:func:`select_for_fold`).
"""

import numpy as np
import pandas as pd
from sklearn.base import clone

from ..evaluate import splitters
from ..evaluate.ranking import ranking_curves
from ..evaluate.splitters import sample_negatives
from ..models.mvgp import LAMBDA_GRID, SIGMA2_GRID, _check_count, _check_shape
from . import entries
from ._common import check_model, make_estimator, split_count

KIND = "disease_gene"
REQUIRES = frozenset({"matrix_completion"})
SPLIT_COUNTS = {t: splitters.SPLIT_COUNTS[t] for t in ("known_rows", "new_rows")}
TRANSFORMS = False
METRICS = ("precision", "recall")
N_CANDIDATES = 20


def make_splits(adata, protocol, random_state, label=None):
    """K-fold over the associations (``known_rows``, row-major order) or over the rows."""
    n = split_count(protocol, SPLIT_COUNTS)
    return entries.make_splits(adata, protocol["type"], n, random_state)


def fold_tables(name, experiment, splits):
    """The P@k / R@k table of every model x split."""
    return [
        f"results/{name}/ranking/{m}/split{s}.tsv" for m in experiment["models"] for s in splits
    ]


def candidate_tables(name, experiment, splits):
    """The candidates table of every model x split."""
    return [
        f"results/{name}/ranking/{m}/candidates{s}.tsv"
        for m in experiment["models"]
        for s in splits
    ]


def targets(name, experiment):
    """The ranked candidates of every row, all models."""
    return [f"results/{name}/candidates.tsv"]


def check(name, experiment, config):
    """Nothing beyond the shared checks."""


def metric_table(joined):
    """The fold tables as they are (P@k and R@k per k); summarised per ``k``."""
    keys = ["transform", "model", "split"]
    return joined[[*keys, *joined.columns[:-3]]], METRICS, ["k"]


def figure(metrics, title, experiment, specs):
    """P@k and R@k curves, one line per model (paper 004, Figure 3)."""
    from ..plotting.mvgp import ranking_curves_figure

    return ranking_curves_figure(metrics, title=title)


def hyperparameter_grid(estimator):
    """Section 5 grid: lam from 5 log-spaced values in [1e-3, 1e3] (if the estimator has lam),
    sigma2 from 20 log-spaced values in [1e-3, 1e3]; a list of parameter dicts."""
    params = estimator.get_params()
    lams = LAMBDA_GRID if "lam" in params else [None]
    return [
        {k: float(v) for k, v in (("lam", lam), ("sigma2", s2)) if v is not None}
        for lam in lams
        for s2 in SIGMA2_GRID
    ]


def select_hyperparameters(estimator, fit_kwargs, score, grid=None):
    """Choose hyperparameters by inner validation, separately for each metric (section 5).

    Parameters
    ----------
    estimator : estimator
        Cloned and refitted for every grid point.
    fit_kwargs : dict
        Arguments of ``fit`` on the inner training part (rows, cols, values, shape, kernels).
    score : callable
        ``score(fitted_estimator) -> dict`` of validation metrics, higher is better (for an
        error such as RMSE return its negative).
    grid : list of dict or None
        Parameter settings; None is :func:`hyperparameter_grid`.

    Returns
    -------
    best : dict
        metric -> parameter dict with the highest validation value of that metric.
    table : pandas.DataFrame
        One row per grid point: the parameters and every metric.
    """
    grid = hyperparameter_grid(estimator) if grid is None else list(grid)
    if not grid:
        raise ValueError("grid is empty; expected at least one parameter setting")
    records = []
    for params in grid:
        model = clone(estimator).set_params(**params).fit(**fit_kwargs)
        records.append({**params, **{k: float(v) for k, v in score(model).items()}})
    table = pd.DataFrame.from_records(records)
    metrics = [c for c in table.columns if c not in grid[0]]
    empty = [m for m in metrics if table[m].isna().all()]
    if empty:
        raise ValueError(
            f"metrics {empty} are NaN for every grid point; the validation part has nothing "
            "to score (for example no held-out positive)"
        )
    best = {m: grid[int(np.nanargmax(table[m].to_numpy()))] for m in metrics}
    return best, table


def averaged_scores(
    estimator,
    rows,
    cols,
    shape,
    score_rows,
    row_kernel=None,
    col_kernel=None,
    n_negative_sets=5,
    ratio=1.0,
    exclude_rows=None,
    random_state=0,
):
    """Scores averaged over fits with different sampled negative sets (section 5.1).

    Each fit sees every positive (value 1) plus one set of ``ratio`` x positives unknown entries
    labelled 0 (drawn by :func:`omicsbayes.evaluate.splitters.sample_negatives`, never from
    ``exclude_rows``); the scores of ``score_rows`` for every column are averaged over the
    ``n_negative_sets`` fits.

    Returns
    -------
    ndarray, shape (len(score_rows), N)
    """
    _check_count("n_negative_sets", n_negative_sets)
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    rng = np.random.default_rng(random_state)
    sets = sample_negatives(
        rows,
        cols,
        shape,
        n_negative_sets,
        ratio,
        random_state=int(rng.integers(2**31)),
        exclude_rows=exclude_rows,
    )
    total = None
    for nr, nc in sets:
        model = clone(estimator)
        if "random_state" in model.get_params():
            model.set_params(random_state=int(rng.integers(2**31)))
        model.fit(
            np.concatenate([rows, nr]),
            np.concatenate([cols, nc]),
            np.concatenate([np.ones(rows.size), np.zeros(nr.size)]),
            shape,
            row_kernel=row_kernel,
            col_kernel=col_kernel,
        )
        s = model.predict_rows(score_rows)
        total = s if total is None else total + s
    return total / n_negative_sets


def _union(a, b):
    if a is None or b is None:
        return b if a is None else a
    return np.union1d(a, b)


def select_for_fold(estimator, rows, cols, shape, protocol, kernels, grid, new_rows, k, seed):
    """Section 5 model selection for one outer fold: one inner fold of the training positives
    (same ``protocol``, "known" or "new"), one negative set, separately for P@k and R@k.

    Returns
    -------
    dict
        ``{"precision": params, "recall": params}``, each one entry of ``grid``.
    """
    _, (is_val, val_rows, val_new) = next(entries.folds(protocol, rows, cols, shape[0], 5, seed))
    exclude = _union(new_rows, val_new)
    ((nr, nc),) = sample_negatives(
        rows[~is_val], cols[~is_val], shape, 1, random_state=seed, exclude_rows=exclude
    )
    fit_kwargs = dict(
        rows=np.concatenate([rows[~is_val], nr]),
        cols=np.concatenate([cols[~is_val], nc]),
        values=np.concatenate([np.ones(int((~is_val).sum())), np.zeros(nr.size)]),
        shape=shape,
        row_kernel=kernels[0],
        col_kernel=kernels[1],
    )

    def score(model):
        table = ranking_curves(
            dict(zip(val_rows.tolist(), model.predict_rows(val_rows))),
            (rows[is_val], cols[is_val]),
            (rows[~is_val], cols[~is_val]),
            ks=[k],
        )
        return {"precision": table["precision"][0], "recall": table["recall"][0]}

    best, _ = select_hyperparameters(estimator, fit_kwargs, score, grid)
    return best


def resolve_grid(estimator, grid):
    """A grid of parameter dicts: None stays None, ``"paper"`` is :func:`hyperparameter_grid`."""
    if grid is None:
        return None
    return hyperparameter_grid(estimator) if grid == "paper" else list(grid)


def fold_curves(
    estimator, train, test, fold, shape, kernels, n_negative_sets, ks, grid, random_state
):
    """P@k and R@k of one outer fold, and the averaged scores of its test rows.

    ``train`` and ``test`` are (rows, cols) of the training and test positives. Without a grid
    the estimator is fitted as given. With a grid the hyperparameters are chosen by
    :func:`select_for_fold` (at P@max(ks) and R@max(ks)); the precision columns come from the
    precision-selected model and the recall columns from the recall-selected one, and the
    table gets the chosen parameters as ``params_precision`` and ``params_recall``.

    Returns
    -------
    curves : pandas.DataFrame
        :func:`omicsbayes.evaluate.ranking.ranking_curves`'s table.
    scores : ndarray of shape (len(fold.score_rows), n_cols)
        Averaged scores of the (precision-selected) model.
    """

    def scored(model):
        scores = averaged_scores(
            model,
            *train,
            shape,
            fold.score_rows,
            row_kernel=kernels[0],
            col_kernel=kernels[1],
            n_negative_sets=n_negative_sets,
            exclude_rows=fold.new_rows,
            random_state=random_state,
        )
        by_row = dict(zip(fold.score_rows.tolist(), scores))
        return ranking_curves(by_row, test, train, ks=ks), scores

    if grid is None:
        return scored(estimator)
    protocol = "new" if fold.new_rows is not None else "known"
    chosen = select_for_fold(
        estimator, *train, shape, protocol, kernels, grid, fold.new_rows, max(ks), random_state
    )
    curves, scores = scored(clone(estimator).set_params(**chosen["precision"]))
    if chosen["recall"] != chosen["precision"]:
        curves["recall"] = scored(clone(estimator).set_params(**chosen["recall"]))[0]["recall"]
    curves["params_precision"] = repr(chosen["precision"])
    curves["params_recall"] = repr(chosen["recall"])
    return curves, scores


def ranking_fold(
    matrix,
    split_table,
    protocol,
    spec,
    row_kernel=None,
    n_negative_sets=5,
    random_state=0,
    n_candidates=N_CANDIDATES,
):
    """One outer fold of the workflow's disease-gene protocol.

    Parameters
    ----------
    matrix : scipy.sparse matrix of shape (n_rows, n_cols)
        Known associations (nonzero = positive); every other entry is unknown.
    split_table : pandas.DataFrame
        This fold's rows of the split table: ``entry`` ids (``known_rows``: k-fold over the
        positive entries in row-major order) or ``row`` ids (``new_rows``: k-fold over rows).
    protocol : {"known_rows", "new_rows"}
    spec : dict
        Model entry of the config; a ``grid`` key (``"paper"`` for section 5's grid, lambda 5 x
        sigma^2 20 values, or a list of parameter dicts) chooses the hyperparameters in this fold
        (:func:`fold_curves`).
    row_kernel : ndarray or LowRankKernel, optional
        Row covariance (``diffusion_kernel`` of the row graph); identity when None.

    Returns
    -------
    curves : pandas.DataFrame
        P@k and R@k for k = 1..20 averaged over the test rows, with the number of rows scored and
        excluded (no test positive), and with a grid the chosen parameters.
    candidates : pandas.DataFrame
        For every test row, its top ``n_candidates`` columns after removing training positives:
        row, rank, col, score and whether the column is a held-out (test) positive.
    """
    check_model(KIND, REQUIRES, spec)
    rows, cols, _ = entries.matrix_entries(matrix)
    fold = entries.fold_of(protocol, split_table, rows)
    train = (rows[~fold.is_test], cols[~fold.is_test])
    test = (rows[fold.is_test], cols[fold.is_test])
    estimator = make_estimator(spec)
    curves, scores = fold_curves(
        estimator,
        train,
        test,
        fold,
        matrix.shape,
        (row_kernel, None),
        n_negative_sets,
        list(range(1, 21)),
        resolve_grid(estimator, spec.get("grid")),
        random_state,
    )
    return curves, _candidates(scores, fold.score_rows, train, test, n_candidates)


def _candidates(scores, score_rows, train, test, n_candidates):
    """Top ``n_candidates`` columns of every scored row, its training positives removed."""
    position = {r: i for i, r in enumerate(score_rows.tolist())}
    train_rows = np.array([position.get(r, -1) for r in train[0].tolist()], dtype=np.int64)
    keep = train_rows >= 0
    masked = scores.copy()
    masked[train_rows[keep], train[1][keep]] = -np.inf  # training positives are not candidates
    top = np.argsort(-masked, axis=1, kind="stable")[:, :n_candidates]
    test_positive = np.zeros(masked.shape, dtype=bool)
    test_rows = np.array([position[r] for r in test[0].tolist()], dtype=np.int64)
    test_positive[test_rows, test[1]] = True
    n, k = top.shape
    candidates = pd.DataFrame(
        {
            "row": np.repeat(score_rows, k),
            "rank": np.tile(np.arange(1, k + 1), n),
            "col": top.ravel(),
            "score": np.take_along_axis(masked, top, axis=1).ravel(),
            "test_positive": np.take_along_axis(test_positive, top, axis=1).ravel(),
        }
    )
    # a row with fewer than n_candidates unknown columns lists only those
    return candidates[np.isfinite(candidates["score"])].reset_index(drop=True)


def disease_gene_cv(
    estimator,
    rows,
    cols,
    shape,
    protocol="known",
    row_kernel=None,
    col_kernel=None,
    n_splits=5,
    n_negative_sets=5,
    ks=range(1, 21),
    grid=None,
    random_state=0,
):
    """Cross-validated P@k / R@k of the disease-gene protocol of section 5.1.

    ``protocol="known"``: 5-fold over the positive entries (known diseases); ``"new"``: 5-fold
    over rows, the test rows keep no training entry and get no sampled negative (new diseases,
    scored through ``row_kernel`` only). Each fold is :func:`fold_curves` with the seed
    ``random_state + split + 1``: scores averaged over ``n_negative_sets`` fits
    (:func:`averaged_scores`), every column of each test row ranked after removing its training
    positives (:func:`omicsbayes.evaluate.ranking.ranking_curves`).

    Parameters
    ----------
    rows, cols : array_like of int
        The positive entries (value 1).
    grid : list of dict or None
        None: fit ``estimator`` as given. Otherwise the hyperparameters are chosen in every
        fold by inner validation (one inner fold of the training positives, same protocol, one
        negative set, P@max(ks) and R@max(ks)), separately per metric as in section 5.
        :func:`hyperparameter_grid` gives the paper's 5 x 20 grid.

    Returns
    -------
    pandas.DataFrame
        ``ranking_curves`` columns plus ``split``, and with a grid the chosen parameters as
        ``params_precision`` and ``params_recall`` (repr of the dicts).
    """
    if protocol not in ("known", "new"):
        raise ValueError(f"protocol must be 'known' or 'new'; got {protocol!r}")
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    M, _ = _check_shape(shape)
    ks = list(ks)
    tables = []
    for split, fold in entries.folds(protocol, rows, cols, M, n_splits, random_state):
        train = (rows[~fold.is_test], cols[~fold.is_test])
        test = (rows[fold.is_test], cols[fold.is_test])
        table, _ = fold_curves(
            estimator,
            train,
            test,
            fold,
            shape,
            (row_kernel, col_kernel),
            n_negative_sets,
            ks,
            grid,
            random_state + split + 1,
        )
        table.insert(0, "split", split)
        tables.append(table)
    return pd.concat(tables, ignore_index=True)
