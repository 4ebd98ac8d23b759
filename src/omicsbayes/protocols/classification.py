"""Classification experiments (papers 000, 001 and 003): tasks from a cohort's label column, one
model fitted per training split, its predictions of the test samples scored.

Tasks
-----
``binary``
    ``positive`` lists the label values of the positive class; every other labelled sample is
    negative. One task.
``one_vs_rest``
    One binary task per class. Models declaring the ``multi_task`` capability fit all tasks
    jointly in one factor model; every other model is fitted once per task.
``multiclass``
    The labels as they are; the model must handle several classes (accuracy and error only).

The workflow calls :func:`fit_split` once per (transform, model, split) and
:func:`metric_table` once per experiment; both are plain functions of arrays and tables.
"""

import time

import numpy as np
import pandas as pd
from sklearn.base import clone

from .. import models
from ..evaluate import metrics, splitters
from ..evaluate.splitters import classification_splits
from ..models._base import capabilities_of
from ..preprocess.transforms import dense_matrix
from ._common import ExperimentError, make_estimator, per_split_tables

KIND = "classification"
REQUIRES = frozenset({"classifier"})
SPLIT_COUNTS = {t: splitters.SPLIT_COUNTS[t] for t in splitters.PROTOCOLS}
TRANSFORMS = True
TASK_KINDS = ("binary", "one_vs_rest", "multiclass")
METRICS = ("auroc", "aupr", "accuracy", "error_rate")
AUC_MODELS = {"BayesianProbitClassifier", "BAMClassifier"}  # paper 001: Figures 3-4 layout


def make_splits(adata, protocol, random_state, label=None):
    """Stratified train/test splits of the labelled samples
    (:func:`~omicsbayes.evaluate.splitters.classification_splits`), with their sample ids."""
    if label not in adata.obs:
        raise ExperimentError(
            f"label column {label!r} is missing; columns are {list(adata.obs.columns)}"
        )
    params = {k: v for k, v in protocol.items() if k != "type"}
    key, default = SPLIT_COUNTS[protocol["type"]]
    params[key] = params.get(key, default)
    table = classification_splits(
        adata.obs[label].to_numpy(), protocol["type"], random_state=random_state, **params
    )
    table.insert(2, "sample_id", adata.obs_names.to_numpy()[table["sample"].to_numpy()])
    return table


def fold_tables(name, experiment, splits):
    """The prediction table of every transform x model x split."""
    return per_split_tables(name, experiment, splits, "fits")


def targets(name, experiment):
    """Nothing beyond the shared tables and figure."""
    return []


def check(name, experiment, config):
    """The cohort has a label column and the experiment a task (a binary one lists its
    positive labels)."""
    key, cohort = f"experiments.{name}", experiment["cohort"]
    if "label" not in config["cohorts"][cohort]:
        raise ExperimentError(
            f"config key cohorts.{cohort}.label is required: experiment "
            f"{name!r} classifies that cohort's samples"
        )
    task = experiment.get("task")
    if task is None:
        raise ExperimentError(f"config key {key}.task is required for a classification experiment")
    if task["kind"] == "binary" and not task.get("positive"):
        raise ExperimentError(
            f"config key {key}.task.positive: a binary task lists its positive labels"
        )


def task_targets(labels, task):
    """Turn a label column into task targets.

    Parameters
    ----------
    labels : pandas.Series
        One label per sample; missing values mean unlabelled.
    task : dict
        ``{"kind": "binary", "positive": [...]}``, ``{"kind": "one_vs_rest"}`` or
        ``{"kind": "multiclass"}``.

    Returns
    -------
    targets : pandas.DataFrame
        Samples x tasks; binary tasks hold 0.0/1.0 and NaN for unlabelled samples, a multiclass
        task holds the label strings (None for unlabelled).
    """
    kind = task.get("kind", "binary")
    if kind not in TASK_KINDS:
        raise ExperimentError(f"task kind {kind!r} is unknown; expected one of {TASK_KINDS}")
    labelled = labels.notna()
    values = labels.astype("string")
    if kind == "multiclass":
        multiclass = values.astype(object).where(labelled.to_numpy(), None)
        return pd.DataFrame({"multiclass": multiclass})
    if kind == "binary":
        positive = [str(v) for v in task.get("positive", [])]
        missing = sorted(set(positive) - set(values[labelled]))
        if not positive or missing:
            raise ExperimentError(
                f"task.positive must list label values present in the cohort; "
                f"not found: {missing or positive}; present: {sorted(set(values[labelled]))}"
            )
        name = "+".join(positive)
        return pd.DataFrame({name: np.where(labelled, values.isin(positive), np.nan)})
    classes = sorted(set(values[labelled]))
    return pd.DataFrame(
        {c: np.where(labelled, (values == c).to_numpy(), np.nan) for c in classes},
        index=labels.index,
    ).astype(float)


def _scores(estimator, X):
    """Decision values for the positive class of a binary estimator, shape (n_samples,)."""
    if hasattr(estimator, "decision_function"):
        return np.asarray(estimator.decision_function(X), dtype=float)
    return np.asarray(estimator.predict_proba(X), dtype=float)[:, 1]


def fit_split(X, targets, train, test, spec, fold_pipeline=None, random_state=None):
    """Fit one model on one training split and predict its test split.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n_samples, n_features)
        The cohort after its sample-wise transforms; a sparse matrix is expanded only after the
        fold transforms (gene selection), by :func:`~omicsbayes.preprocess.transforms.dense_matrix`.
    targets : pandas.DataFrame
        From :func:`task_targets`.
    train, test : ndarray of int
        Row positions of the split.
    spec : dict
        Model entry of the config.
    fold_pipeline : sklearn Pipeline, optional
        Transforms fitted on the training rows only and applied to the test rows.

    Returns
    -------
    predictions : pandas.DataFrame
        One row per test sample and task: sample (position), task, y_true, score, y_pred.
    seconds : float
        Wall time of fitting and predicting.
    """
    start = time.perf_counter()
    X_train, X_test = X[train], X[test]
    if fold_pipeline is not None:
        X_train = fold_pipeline.fit_transform(X_train)
        X_test = fold_pipeline.transform(X_test)
    X_train, X_test = dense_matrix(X_train, spec["class"]), dense_matrix(X_test, spec["class"])
    rows = []
    if list(targets.columns) == ["multiclass"]:
        y = targets["multiclass"].to_numpy()
        keep = pd.notna(y[train])
        estimator = make_estimator(spec, random_state).fit(X_train[keep], y[train][keep])
        rows.append(
            pd.DataFrame(
                {
                    "sample": test,
                    "task": "multiclass",
                    "y_true": y[test],
                    "score": np.nan,
                    "y_pred": estimator.predict(X_test),
                }
            )
        )
        return pd.concat(rows, ignore_index=True), time.perf_counter() - start

    Y = targets.to_numpy(dtype=float)
    for j, name in enumerate(targets.columns):
        observed = ~np.isnan(Y[train, j])
        if len(np.unique(Y[train, j][observed])) < 2:
            raise ExperimentError(
                f"task {name!r} has a single class in the training data of this split; "
                "every task needs both classes in every training split"
            )
    if "multi_task" in capabilities_of(getattr(models, spec["class"])) and Y.shape[1] > 1:
        estimator = make_estimator(spec, random_state).fit(X_train, Y[train])
        scores = np.asarray(estimator.decision_function(X_test), dtype=float)
        predicted = np.asarray(estimator.predict(X_test), dtype=float)
        scores, predicted = scores.reshape(len(test), -1), predicted.reshape(len(test), -1)
    else:
        scores = np.empty((len(test), Y.shape[1]))
        predicted = np.empty((len(test), Y.shape[1]))
        template = make_estimator(spec, random_state)
        for j in range(Y.shape[1]):  # one fit per task, not a loop inside an iteration
            observed = ~np.isnan(Y[train, j])
            estimator = clone(template).fit(X_train[observed], Y[train, j][observed].astype(int))
            scores[:, j] = _scores(estimator, X_test)
            predicted[:, j] = estimator.predict(X_test)
    for j, name in enumerate(targets.columns):
        rows.append(
            pd.DataFrame(
                {
                    "sample": test,
                    "task": name,
                    "y_true": Y[test, j],
                    "score": scores[:, j],
                    "y_pred": predicted[:, j],
                }
            )
        )
    return pd.concat(rows, ignore_index=True), time.perf_counter() - start


def score_predictions(predictions):
    """Metrics per (transform, model, split, task) from the concatenated prediction tables.

    Binary tasks get AUROC, AUPR, accuracy and error rate over the test samples that have a
    label; AUROC and AUPR are NaN for a test split holding a single class (counted in
    ``n_single_class`` by :func:`summarize`). A multiclass task gets accuracy and error rate.
    """
    keys = ["transform", "model", "split", "task"]
    out = []
    for key, group in predictions.groupby(keys, sort=True):
        group = group[group["y_true"].notna()]
        row = dict(zip(keys, key))
        row["n_test"] = len(group)
        if key[-1] == "multiclass":
            y_true, y_pred = group["y_true"].astype(str), group["y_pred"].astype(str)
            row.update(auroc=np.nan, aupr=np.nan)
        else:
            y_true, y_pred = group["y_true"].astype(int), group["y_pred"].astype(int)
            two_classes = y_true.nunique() == 2
            row["auroc"] = metrics.auroc(y_true, group["score"]) if two_classes else np.nan
            row["aupr"] = metrics.aupr(y_true, group["score"]) if two_classes else np.nan
        row["accuracy"] = metrics.accuracy(y_true, y_pred)
        row["error_rate"] = metrics.error_rate(y_true, y_pred)
        out.append(row)
    return pd.DataFrame(out)


def metric_table(joined):
    """Per-split metrics (:func:`score_predictions`), the summary columns and ``task``."""
    return score_predictions(joined), METRICS, ["task"]


def figure(metrics, title, experiment, specs):
    """Box plots of AUROC, AUPR and accuracy per split; paper 001's layout (one panel per
    cohort x kernel x metric) when every model is a BAM or Bayesian probit classifier."""
    from ..plotting import metric_boxplots
    from ..plotting.bam import bam_boxplots

    if {s["class"] for s in specs} <= AUC_MODELS:
        return bam_boxplots(metrics.assign(cohort=experiment["cohort"]))
    return metric_boxplots(metrics, title=title, columns=METRICS[:3])


def fit_summary_tables(
    X, targets, spec, feature_names, sample_ids, fold_pipeline=None, random_state=None
):
    """Fit a RankFactorClassifier on the whole cohort; its fitted structure as three tables.

    Paper 000's figures (Figures 1, 3-5 and 7) are drawn from these tables, never from a live
    model. All tasks are learned jointly by one factor model (samples without a label for a task
    enter that task as missing).

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n_samples, n_features)
        The cohort after its sample-wise transforms; a sparse matrix is expanded only after the
        fold transforms (gene selection), by :func:`~omicsbayes.preprocess.transforms.dense_matrix`.
    targets : pandas.DataFrame
        Binary tasks from :func:`task_targets` (``binary`` or ``one_vs_rest``).
    spec : dict
        Model entry of the config; its class must be RankFactorClassifier.
    feature_names, sample_ids : sequence of str
    fold_pipeline : sklearn Pipeline, optional
        Transforms that learn from samples, here fitted on every sample; they must keep the
        features (a kernel map would not).

    Returns
    -------
    loadings : pandas.DataFrame
        Column ``feature`` then ``factor_1 .. factor_K`` (``loadings_``).
    coef : pandas.DataFrame
        Column ``task`` then the factors (``coef_``, one row per task).
    scores : pandas.DataFrame
        Column ``sample_id`` then the factors (``scores_``).
    seconds : float
        Wall time of the fit.
    """
    if spec["class"] != "RankFactorClassifier":
        raise ExperimentError(
            "fitted-structure tables need a RankFactorClassifier model, "
            f"got class {spec['class']!r}"
        )
    if list(targets.columns) == ["multiclass"]:
        raise ExperimentError(
            "fitted-structure tables need binary tasks (task kind binary or one_vs_rest), "
            "got a multiclass task"
        )
    start = time.perf_counter()
    if fold_pipeline is not None:
        X = fold_pipeline.fit_transform(X)
    X = dense_matrix(X, spec["class"])
    if X.shape[1] != len(feature_names):
        raise ExperimentError(
            f"the transform turned {len(feature_names)} features into {X.shape[1]} columns; "
            "loadings need a transform that keeps the features (not a kernel map)"
        )
    estimator = make_estimator(spec, random_state).fit(X, targets.to_numpy(dtype=float))
    seconds = time.perf_counter() - start
    factors = [f"factor_{k + 1}" for k in range(estimator.n_factors)]

    def table(name, keys, values):
        frame = pd.DataFrame(np.asarray(values, dtype=float), columns=factors)
        frame.insert(0, name, np.asarray(keys, dtype=object))
        return frame

    return (
        table("feature", feature_names, estimator.loadings_),
        table("task", targets.columns, estimator.coef_),
        table("sample_id", sample_ids, estimator.scores_),
        seconds,
    )
