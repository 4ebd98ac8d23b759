"""Paper 004's disease-gene protocol (section 5.1): associations held out by fold, every model
fitted on the training positives plus sampled negatives (scores averaged over negative sets),
test rows ranked over every column; P@k and R@k, and the top candidates of every test row.

``known_rows`` folds the associations (known diseases); ``new_rows`` folds the rows, whose
associations are all held out and which get no sampled negative (new diseases, scored through
the row kernel only). A model's hyperparameters "auto" (or a config ``grid``, which is the same
thing, :func:`estimator_of`) are chosen in every fold by the estimator's own inner validation
(:mod:`omicsbayes.models.mvgp.selection`), by its one ``selection_metric``: the P@k and R@k curves
of a fold come from the same fit (section 5 chooses separately per metric).
"""

import collections
import logging

import numpy as np
import pandas as pd
from sklearn.base import clone

from ..evaluate import splitters
from ..evaluate.ranking import ranking_curves
from ..evaluate.splitters import sample_negatives
from ..models.mvgp import as_kernel, check_shape
from ..models.mvgp.selection import SELECTED, chosen_params
from . import entries
from ._common import check_model
from .entries import EntryFoldKind, estimator_of

logger = logging.getLogger("omicsbayes")

N_CANDIDATES = 20


class DiseaseGene(EntryFoldKind):
    """Associations held out by fold (``known_rows``: folds of the associations; ``new_rows``:
    folds of the rows, new diseases), each model fitted on the training positives and
    ``n_negative_sets`` sampled negative sets (scores averaged; ``side_information: diffusion``
    takes the diffusion kernel of the row graph); P@k and R@k of every test row over the columns
    it has no training association with, and its top candidates (paper 004, section 5.1)."""

    name = "disease_gene"
    requires = frozenset({"matrix_completion"})
    split_counts = {t: splitters.SPLIT_COUNTS[t] for t in ("known_rows", "new_rows")}
    metrics = ("precision", "recall")
    summary_by = ("k",)

    def fit_fold(self, adata, splits, params, wildcards, checkpoint=None):
        """One fold (:func:`ranking_fold`), the candidates named by their row and column ids:
        ``{"curves": P@k / R@k table, "candidates": table}``.

        ``params``: ``experiment``, ``model``, ``protocol`` (its ``type`` and
        ``n_negative_sets``) and ``seed``.
        """
        args, kwargs = self.fold_arguments(adata, splits, params, wildcards)
        n_negative_sets = params["protocol"].get("n_negative_sets", 5)
        curves, candidates = ranking_fold(*args, n_negative_sets=n_negative_sets, **kwargs)
        logger.info(
            "fold %s: R@20 %.4f over %d rows",
            wildcards["split"],
            curves["recall"].iloc[-1],
            curves["n_rows"].iloc[0],
        )
        candidates.insert(1, "row_id", adata.obs_names.to_numpy()[candidates["row"]])
        candidates.insert(4, "col_id", adata.var_names.to_numpy()[candidates["col"]])
        return {"curves": curves, "candidates": candidates}

    def primary_metric(self, experiment):
        """The metric the experiment is judged on and whether higher is better: R@k at the
        largest k (paper 004's Tables 1-2)."""
        return "recall", True

    def figure(self, metrics, title, experiment, specs):
        """P@k and R@k curves, one line per model (paper 004, Figure 3)."""
        from ..pl.mvgp import ranking_curves_figure

        return ranking_curves_figure(metrics, title=title)


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
    return_params=False,
):
    """Scores averaged over fits with different sampled negative sets (section 5.1).

    Each fit sees every positive (value 1) plus one set of ``ratio`` x positives unknown entries
    labelled 0 (drawn by :func:`omicsbayes.evaluate.splitters.sample_negatives`, never from
    ``exclude_rows``); the scores of ``score_rows`` for every column are averaged over the
    ``n_negative_sets`` fits. An estimator that selects its hyperparameters ("auto" or lists)
    does so on the first negative set; the other sets are fitted with its choice. A dense
    kernel is decomposed once for all fits. :func:`running_averaged_scores` yields the mean
    after each set.

    Returns
    -------
    scores : ndarray, shape (len(score_rows), N)
    chosen : dict
        Only with ``return_params``: :func:`omicsbayes.models.mvgp.selection.chosen_params` of the
        first fit (empty when nothing was selected).
    """
    running = running_averaged_scores(
        estimator,
        rows,
        cols,
        shape,
        score_rows,
        row_kernel,
        col_kernel,
        n_negative_sets,
        ratio,
        exclude_rows,
        random_state,
    )
    _, scores, chosen = collections.deque(running, maxlen=1)[0]
    return (scores, chosen) if return_params else scores


def running_averaged_scores(
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
    """:func:`averaged_scores` one negative set at a time: yields ``(k, scores, chosen)`` after
    the k-th fit, ``scores`` the mean over the first k sets, which is what
    :func:`averaged_scores` returns with ``n_negative_sets=k`` and the same ``random_state``
    (the sets and the fits' seeds are drawn in the same order), ``chosen`` as it returns with
    ``return_params``. The yielded array is the caller's to keep."""
    if int(n_negative_sets) != n_negative_sets or n_negative_sets < 1:
        raise ValueError(f"n_negative_sets must be a positive integer; got {n_negative_sets!r}")
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    M, N = check_shape(shape)
    kernels = dict(
        row_kernel=None if row_kernel is None else as_kernel(row_kernel, M, "row_kernel"),
        col_kernel=None if col_kernel is None else as_kernel(col_kernel, N, "col_kernel"),
    )
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
    score_rows = np.asarray(score_rows)
    total, chosen, fixed = np.zeros((score_rows.size, N)), {}, {}
    for i, (nr, nc) in enumerate(sets):
        model = clone(estimator).set_params(**fixed)
        if "random_state" in model.get_params():
            model.set_params(random_state=int(rng.integers(2**31)))
        model.fit(
            np.concatenate([rows, nr]),
            np.concatenate([cols, nc]),
            np.concatenate([np.ones(rows.size), np.zeros(nr.size)]),
            shape,
            **kernels,
        )
        if i == 0:
            chosen = chosen_params(model)
            fixed = {p: chosen[f"chosen_{p}"] for p in SELECTED if f"chosen_{p}" in chosen}
        # summed in place a block of rows at a time: one score matrix in memory
        for start in range(0, score_rows.size, 512):
            total[start : start + 512] += model.predict_rows(score_rows[start : start + 512])
        last = i + 1 == len(sets)
        yield i + 1, np.divide(total, i + 1, out=total if last else None), chosen


def fold_curves(estimator, train, test, fold, shape, kernels, n_negative_sets, ks, random_state):
    """P@k and R@k of one outer fold, and the averaged scores of its test rows.

    ``train`` and ``test`` are (rows, cols) of the training and test positives. The estimator
    is fitted as given by :func:`averaged_scores`: with ``lam`` / ``sigma2`` "auto" (or lists)
    it chooses them by its own inner validation on the fold's training entries and first
    negative set, and the table gets the choice (``chosen_lam``, ``chosen_sigma2``,
    ``selection_metric``, :func:`omicsbayes.models.mvgp.selection.chosen_params`).

    Returns
    -------
    curves : pandas.DataFrame
        :func:`omicsbayes.evaluate.ranking.ranking_curves`'s table.
    scores : ndarray of shape (len(fold.score_rows), n_cols)
        Averaged scores.
    """
    scores, chosen = averaged_scores(
        estimator,
        *train,
        shape,
        fold.score_rows,
        row_kernel=kernels[0],
        col_kernel=kernels[1],
        n_negative_sets=n_negative_sets,
        exclude_rows=fold.new_rows,
        random_state=random_state,
        return_params=True,
    )
    curves = ranking_curves(dict(zip(fold.score_rows.tolist(), scores)), test, train, ks=ks)
    for column, value in chosen.items():
        curves[column] = value
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
        sigma^2 20 values, or a list of parameter dicts) makes the estimator choose its
        hyperparameters in this fold (:func:`estimator_of`, :func:`fold_curves`).
    row_kernel : ndarray or LowRankKernel, optional
        Row covariance (``diffusion_kernel`` of the row graph); identity when None.

    Returns
    -------
    curves : pandas.DataFrame
        P@k and R@k for k = 1..20 averaged over the test rows, with the number of rows scored and
        excluded (no test positive), and the chosen parameters when the model selected them.
    candidates : pandas.DataFrame
        For every test row, its top ``n_candidates`` columns after removing training positives:
        row, rank, col, score and whether the column is a held-out (test) positive.
    """
    check_model(DiseaseGene.name, DiseaseGene.requires, spec)
    rows, cols, _ = entries.matrix_entries(matrix)
    fold = entries.fold_of(protocol, split_table, rows)
    train = (rows[~fold.is_test], cols[~fold.is_test])
    test = (rows[fold.is_test], cols[fold.is_test])
    curves, scores = fold_curves(
        estimator_of(spec),
        train,
        test,
        fold,
        matrix.shape,
        (row_kernel, None),
        n_negative_sets,
        list(range(1, 21)),
        random_state,
    )
    return curves, _candidates(scores, fold.score_rows, train, test, n_candidates)


def ranking_fold_curves(
    matrix, split_table, protocol, spec, row_kernel=None, n_negative_sets=(5,), random_state=0
):
    """The P@k / R@k curves of :func:`ranking_fold` for several negative-set counts from one
    pass over the sets (:func:`running_averaged_scores`): the curves for k sets are
    :func:`ranking_fold`'s with ``n_negative_sets=k`` and the same ``random_state``.

    Returns
    -------
    dict
        ``{k: curves}`` for every k of ``n_negative_sets``.
    """
    check_model(DiseaseGene.name, DiseaseGene.requires, spec)
    counts = sorted({int(k) for k in n_negative_sets})
    rows, cols, _ = entries.matrix_entries(matrix)
    fold = entries.fold_of(protocol, split_table, rows)
    train = (rows[~fold.is_test], cols[~fold.is_test])
    test = (rows[fold.is_test], cols[fold.is_test])
    out = {}
    for k, scores, chosen in running_averaged_scores(
        estimator_of(spec),
        *train,
        matrix.shape,
        fold.score_rows,
        row_kernel=row_kernel,
        n_negative_sets=counts[-1],
        exclude_rows=fold.new_rows,
        random_state=random_state,
    ):
        if k in counts:
            scored = dict(zip(fold.score_rows.tolist(), scores))
            out[k] = ranking_curves(scored, test, train, ks=list(range(1, 21))).assign(**chosen)
    return out


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
    n_splits=splitters.SPLIT_COUNTS["known_rows"][1],
    n_negative_sets=5,
    ks=range(1, 21),
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
    estimator : estimator
        Fitted as given; with ``lam`` / ``sigma2`` "auto" (section 5's grid) or lists it chooses
        them in every fold by its own inner validation (:func:`fold_curves`).
    rows, cols : array_like of int
        The positive entries (value 1).

    Returns
    -------
    pandas.DataFrame
        ``ranking_curves`` columns plus ``split``, and the chosen parameters when the estimator
        selected them (``chosen_lam``, ``chosen_sigma2``, ``selection_metric``).
    """
    if protocol not in ("known", "new"):
        raise ValueError(f"protocol must be 'known' or 'new'; got {protocol!r}")
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    M, _ = check_shape(shape)
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
            random_state + split + 1,
        )
        table.insert(0, "split", split)
        tables.append(table)
    return pd.concat(tables, ignore_index=True)
