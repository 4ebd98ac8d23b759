"""Metrics of one test split, and their mean and standard deviation over splits.

The classification metrics wrap scikit-learn. A test split holding a single class has no
AUROC or AUPR: both return NaN there without a warning; warning about it, naming the split, is
the caller's job (and :func:`summarize` counts such splits in ``<metric>_n_nan``).
"""

import numpy as np
import pandas as pd
from sklearn.metrics import (
    accuracy_score,
    average_precision_score,
    roc_auc_score,
    root_mean_squared_error,
)


def _binary(y_true, y_score, pos_label, who):
    """Boolean targets for the positive class and float scores, or None for a single class."""
    y_true = np.asarray(y_true)
    y_score = np.asarray(y_score, dtype=float)
    if y_true.shape[0] != y_score.shape[0]:
        raise ValueError(
            f"{who}: y_true has {y_true.shape[0]} samples but y_score has {y_score.shape[0]}"
        )
    if not np.isfinite(y_score).all():
        raise ValueError(
            f"{who}: y_score has {int((~np.isfinite(y_score)).sum())} non-finite values"
        )
    classes = np.unique(y_true)
    if classes.size < 2:
        return None, y_score
    if y_score.ndim != 1:
        raise ValueError(f"{who}: y_score must be 1-D (the positive-class score) for two classes")
    if classes.size > 2:
        raise ValueError(
            f"{who}: y_true has {classes.size} classes; pass a binary task (one class against "
            "the rest)"
        )
    positive = classes[1] if pos_label is None else pos_label
    if positive not in classes:
        raise ValueError(f"{who}: pos_label={pos_label!r} is not among the labels {list(classes)}")
    return y_true == positive, y_score


def auroc(y_true, y_score, pos_label=None):
    """Area under the ROC curve (scikit-learn ``roc_auc_score``).

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Two class labels; the positive one is ``pos_label`` or else the larger (``classes_[1]``
        of a scikit-learn classifier).
    y_score : array-like of shape (n,)
        Higher means more positive (``decision_function`` or positive-class probability).
    pos_label : label, optional

    Returns
    -------
    float
        NaN when ``y_true`` holds a single class.
    """
    target, score = _binary(y_true, y_score, pos_label, "auroc")
    return np.nan if target is None else float(roc_auc_score(target, score))


def aupr(y_true, y_score, pos_label=None):
    """Area under the precision-recall curve as average precision (``average_precision_score``).

    Same arguments as :func:`auroc`; NaN when ``y_true`` holds a single class.
    """
    target, score = _binary(y_true, y_score, pos_label, "aupr")
    return np.nan if target is None else float(average_precision_score(target, score))


def accuracy(y_true, y_pred):
    """Fraction of correct predictions (``accuracy_score``)."""
    return float(accuracy_score(y_true, y_pred))


def error_rate(y_true, y_pred):
    """Fraction of wrong predictions, ``1 - accuracy``."""
    return 1.0 - accuracy(y_true, y_pred)


def rmse(y_true, y_pred):
    """Root mean squared error, ``sqrt(mean((y - y_hat)^2))`` (``root_mean_squared_error``)."""
    return float(root_mean_squared_error(y_true, y_pred))


def heldout_log_likelihood(logp_entries):
    """Mean log predictive density per held-out entry (paper 002, Table 1).

    Parameters
    ----------
    logp_entries : array-like
        Log predictive density of each held-out entry (already averaged over posterior draws in
        probability space by the model). ``-inf`` (a zero-probability entry) is allowed and
        propagates; NaN is an error.

    Returns
    -------
    float
    """
    values = np.asarray(logp_entries, dtype=float).ravel()
    if values.size == 0:
        raise ValueError("heldout_log_likelihood needs at least one held-out entry")
    n_nan = int(np.isnan(values).sum())
    if n_nan:
        raise ValueError(f"logp_entries has {n_nan} NaN values")
    return float(values.mean())


def perplexity(total_log_likelihood, n_tokens):
    """Perplexity ``exp(-total_log_likelihood / n_tokens)`` of held-out counts (paper 002, Table 2).

    Parameters
    ----------
    total_log_likelihood : float
        Sum of the held-out log likelihood over all held-out tokens (counts).
    n_tokens : float > 0
        Total held-out count.
    """
    if not n_tokens > 0:
        raise ValueError(f"n_tokens={n_tokens!r} must be > 0")
    if np.isnan(total_log_likelihood):
        raise ValueError("total_log_likelihood is NaN")
    return float(np.exp(-total_log_likelihood / n_tokens))


def summarize(df, by, metrics):
    """Mean and standard deviation (ddof=1) of metrics over splits, per group.

    Parameters
    ----------
    df : pandas.DataFrame
        One row per split (and group), one column per metric.
    by : str or list of str
        Grouping columns (e.g. ``["experiment", "model"]``); empty for one overall row.
    metrics : list of str
        Metric columns present in ``df`` (absent names are an error).

    Returns
    -------
    pandas.DataFrame
        Columns ``by``, then ``<metric>_mean`` and ``<metric>_sd`` per metric, ``n_splits`` (rows
        in the group) and ``<metric>_n_nan`` per metric (splits where the metric is NaN, e.g. a
        single-class test split; mean and sd are over the other splits). The sd of one split is
        NaN; the standard error is ``sd / sqrt(n_splits - n_nan)``.
    """
    by = [by] if isinstance(by, str) else list(by)
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    missing = [c for c in by + metrics if c not in df.columns]
    if missing:
        raise ValueError(f"summarize: columns {missing} are not in the table ({list(df.columns)})")
    grouped = df.assign(_all=0).groupby(by or ["_all"], sort=True, dropna=False)
    values = grouped[metrics]
    out = pd.concat(
        [
            values.mean().add_suffix("_mean"),
            values.std(ddof=1).add_suffix("_sd"),
            grouped.size().rename("n_splits"),
            values.agg(lambda s: int(s.isna().sum())).add_suffix("_n_nan"),
        ],
        axis=1,
    )
    columns = [f"{m}_{s}" for m in metrics for s in ("mean", "sd")]
    columns += ["n_splits"] + [f"{m}_n_nan" for m in metrics]
    out = out[columns].reset_index()
    return out.drop(columns="_all") if not by else out
