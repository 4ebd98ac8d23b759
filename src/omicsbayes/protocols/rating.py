"""Paper 004's rating protocol (section 5.2): ratings held out by fold, RMSE on them and R@k of
the test items rated above a threshold.

``known_users`` folds the ratings (known users); ``new_users`` folds the users, whose ratings
are all held out (new users, scored through the user kernel only). The models have a zero prior
mean, so the ratings are centred at the training mean (:func:`rating_fold`).
"""

import logging
import time

import numpy as np
import pandas as pd
from sklearn.base import clone

from ..evaluate import splitters
from ..evaluate.ranking import ranking_curves
from ..models.mvgp import check_shape
from ..models.mvgp.selection import chosen_params
from . import entries
from ._common import ExperimentError, check_model
from .entries import EntryFoldKind, estimator_of

logger = logging.getLogger("omicsbayes")


class Rating(EntryFoldKind):
    """Ratings held out by fold (``known_users``: folds of the ratings; ``new_users``: folds of
    the users), the row graph being the users' social graph; RMSE on them and R@k (cut-off
    ``k``) of the test items rated above ``relevant_above`` (paper 004, section 5.2)."""

    name = "rating"
    requires = frozenset({"matrix_completion", "entry_values"})
    split_counts = {  # the folds of disease_gene's known_rows / new_rows
        "known_users": splitters.SPLIT_COUNTS["known_rows"],
        "new_users": splitters.SPLIT_COUNTS["new_rows"],
    }
    metrics = ("rmse", "recall", "rmse_training_mean")
    summary_by = ("k",)

    def fit_fold(self, adata, splits, params, wildcards, checkpoint=None):
        """One fold (:func:`rating_fold_metrics`): ``{"metrics": one row}``.

        ``params``: ``experiment``, ``model``, ``protocol`` (its ``type``, ``relevant_above``
        and ``k``) and ``seed``.
        """
        args, kwargs = self.fold_arguments(adata, splits, params, wildcards)
        protocol = params["protocol"]
        row = rating_fold_metrics(
            *args,
            relevant_above=protocol.get("relevant_above", 4.0),
            k=protocol.get("k", 20),
            **kwargs,
        )
        logger.info(
            "fold %s: RMSE %.4f (training mean %.4f), R@%d %.4f over %d users",
            wildcards["split"],
            row["rmse"],
            row["rmse_training_mean"],
            row["k"],
            row["recall"],
            row["n_rows"],
        )
        return {"metrics": pd.DataFrame([row])}

    def primary_metric(self, experiment):
        """The metric the experiment is judged on and whether higher is better: RMSE (paper
        004's Table 3)."""
        return "rmse", False

    def figure(self, metrics, title, experiment, specs):
        """Box plots of RMSE and R@k per split."""
        from ..pl.metrics import metric_boxplots

        names = {"rmse": "RMSE", "recall": f"R@{int(metrics['k'].iloc[0])}"}
        return metric_boxplots(
            metrics.rename(columns=names), title=title, columns=tuple(names.values())
        )


def rating_fold(
    estimator,
    rows,
    cols,
    ratings,
    shape,
    is_test,
    row_kernel=None,
    col_kernel=None,
    relevant_above=4.0,
    k=20,
):
    """RMSE and R@k of one outer fold of the rating protocol of section 5.2.

    The models have a zero prior mean, so the ratings are centred at the training mean and the
    mean is added back to the predictions (a choice the paper does not state). R@k ranks, for
    every test user, all items except the user's training items; the relevant ones are the test
    items rated above ``relevant_above`` (4 in the paper). An estimator with ``lam`` / ``sigma2``
    "auto" (or lists) chooses them by its own inner validation on the training ratings, by its
    one ``selection_metric`` (``"rmse"`` suits this task; section 5 chooses per metric).

    Parameters
    ----------
    rows, cols, ratings : array_like
        Every rating entry (user, item, rating).
    is_test : array_like of bool, shape (n_ratings,)
        The entries held out in this fold (known users: a fold of the entries; new users: every
        entry of the fold's users, who then have no training entry).

    Returns
    -------
    dict
        ``rmse``, ``recall`` (at k), ``n_rows`` (users with a relevant test item), and the chosen
        parameters when the estimator selected them
        (:func:`omicsbayes.models.mvgp.selection.chosen_params`).
    """
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    ratings = np.asarray(ratings, dtype=float)
    is_test = np.asarray(is_test, dtype=bool)
    if not rows.size == cols.size == ratings.size == is_test.size:
        raise ValueError(
            f"rows, cols, ratings and is_test have lengths {rows.size}, {cols.size}, "
            f"{ratings.size} and {is_test.size}; expected one value per rating entry"
        )
    if not is_test.any() or is_test.all():
        raise ValueError(
            f"is_test marks {int(is_test.sum())} of {is_test.size} entries; expected a fold "
            "with both training and test entries"
        )
    check_shape(shape)
    train = ~is_test
    offset = float(ratings[train].mean())
    model = clone(estimator).fit(
        rows[train],
        cols[train],
        ratings[train] - offset,
        shape,
        row_kernel=row_kernel,
        col_kernel=col_kernel,
    )
    pred = model.predict(rows[is_test], cols[is_test]) + offset
    rmse = float(np.sqrt(np.mean((pred - ratings[is_test]) ** 2)))
    score_rows = np.unique(rows[is_test])
    good = is_test & (ratings > relevant_above)
    table = ranking_curves(
        dict(zip(score_rows.tolist(), model.predict_rows(score_rows))),
        (rows[good], cols[good]),
        (rows[train], cols[train]),
        ks=[k],
    )
    return {
        "rmse": rmse,
        "recall": float(table["recall"][0]),
        "n_rows": int(table["n_rows"][0]),
        **chosen_params(model),
    }


def rating_cv(
    estimator,
    rows,
    cols,
    ratings,
    shape,
    protocol="known",
    row_kernel=None,
    col_kernel=None,
    n_splits=splitters.SPLIT_COUNTS["known_rows"][1],
    relevant_above=4.0,
    k=20,
    random_state=0,
):
    """Cross-validated RMSE and R@k of the rating protocol of section 5.2.

    ``protocol="known"``: 5-fold over the rating entries (known users); ``"new"``: 5-fold over
    rows (new users, scored through ``row_kernel``). Each fold is :func:`rating_fold` (ratings
    centred at the training mean, R@k over the test items rated above ``relevant_above``,
    "auto" hyperparameters chosen by the estimator on the fold's training ratings).

    Returns
    -------
    pandas.DataFrame
        One row per split: ``split``, ``rmse``, ``recall`` (at k), ``n_rows`` (users with a
        relevant test item), and the chosen parameters when the estimator selected them.
    """
    if protocol not in ("known", "new"):
        raise ValueError(f"protocol must be 'known' or 'new'; got {protocol!r}")
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    M, _ = check_shape(shape)
    records = []
    for split, fold in entries.folds(protocol, rows, cols, M, n_splits, random_state):
        metrics = rating_fold(
            estimator,
            rows,
            cols,
            ratings,
            shape,
            fold.is_test,
            row_kernel=row_kernel,
            col_kernel=col_kernel,
            relevant_above=relevant_above,
            k=k,
        )
        records.append({"split": split, **metrics})
    return pd.DataFrame.from_records(records)


def rating_fold_metrics(
    matrix,
    split_table,
    protocol,
    spec,
    row_kernel=None,
    relevant_above=4.0,
    k=20,
    random_state=0,
):
    """One outer fold of paper 004's rating protocol (section 5.2): RMSE and R@k.

    Parameters
    ----------
    matrix : scipy.sparse matrix of shape (n_users, n_items)
        The ratings; every stored entry (explicit zeros included) is a rating, every other entry
        is unrated.
    split_table : pandas.DataFrame
        This fold's rows of the split table: ``entry`` ids (``known_users``: k-fold over the
        rating entries in row-major order) or ``row`` ids (``new_users``: k-fold over users,
        whose ratings are all held out).
    protocol : {"known_users", "new_users"}
    spec : dict
        Model entry of the config (a class declaring ``matrix_completion``); a ``grid`` key
        makes the estimator choose its hyperparameters in this fold
        (:func:`omicsbayes.protocols.entries.estimator_of`).
    row_kernel : ndarray or LowRankKernel, optional
        User covariance (``diffusion_kernel`` of the social graph); identity when None.
    relevant_above, k : float, int
        R@k counts the test items rated above ``relevant_above`` (4 in the paper).

    Returns
    -------
    dict
        rmse, recall (R@k), k, n_rows (test users with a relevant test item), n_test (test
        ratings), rmse_training_mean (RMSE of predicting the training mean, for reference),
        seconds, and the chosen parameters when the model selected them; from
        :func:`rating_fold`.
    """
    check_model(Rating.name, Rating.requires, spec)
    if protocol not in Rating.split_counts:
        raise ExperimentError(
            f"protocol {protocol!r} is not a rating protocol; expected known_users or new_users"
        )
    start = time.perf_counter()
    rows, cols, ratings = entries.matrix_entries(matrix)
    is_test = entries.fold_of(protocol, split_table, rows).is_test
    row = rating_fold(
        estimator_of(spec, random_state=random_state),
        rows,
        cols,
        ratings,
        matrix.shape,
        is_test,
        row_kernel=row_kernel,
        relevant_above=relevant_above,
        k=k,
    )
    baseline = float(np.sqrt(np.mean((ratings[is_test] - ratings[~is_test].mean()) ** 2)))
    return {
        "rmse": row["rmse"],
        "recall": row["recall"],
        "k": int(k),
        "n_rows": row["n_rows"],
        "n_test": int(is_test.sum()),
        "rmse_training_mean": baseline,
        "seconds": time.perf_counter() - start,
        **{key: value for key, value in row.items() if key not in ("rmse", "recall", "n_rows")},
    }
