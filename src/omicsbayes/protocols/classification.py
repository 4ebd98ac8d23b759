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

The workflow's ``fit`` rule fits one (transform, model) on every split of the fold table in one
process (:meth:`Classification.fit_fold`, :func:`fit_splits`, :func:`fit_split` each); the
functions are plain functions of arrays and tables.
"""

import logging
import time

import numpy as np
import pandas as pd
from sklearn.base import clone

from .. import models
from ..evaluate import metrics, splitters
from ..evaluate.splitters import classification_splits
from ..models._capabilities import capabilities_of
from ..preprocess import build_pipeline, split_pipeline
from ..preprocess.transforms import dense_matrix
from ._base import ExperimentKind
from ._common import ExperimentError, make_estimator

logger = logging.getLogger("omicsbayes")
TASK_KINDS = ("binary", "one_vs_rest", "multiclass")
CLASS_SIZE_KEYS = {"stratified_kfold": "n_splits", "few_shot": "n_per_class"}
"""Protocol type -> the protocol key that sets how many labelled samples each class needs."""


class Classification(ExperimentKind):
    """Tasks from the cohort's ``label`` column, one model fitted per training split, its
    predictions of the test samples scored (AUROC, AUPR, accuracy, error rate). The ``task`` is
    ``binary`` (its ``positive`` labels against the rest), ``one_vs_rest`` (one task per class; a
    model with the ``multi_task`` capability learns all of them with one factor model) or
    ``multiclass``; ``few_shot`` trains on ``n_per_class`` samples per class,
    ``repeated_subsampling`` tests a ``test_size`` fraction."""

    name = "classification"
    requires = frozenset({"classifier"})
    split_counts = {t: splitters.SPLIT_COUNTS[t] for t in splitters.PROTOCOLS}
    transforms = True
    metrics = ("auroc", "aupr", "accuracy", "error_rate")
    summary_by = ("task",)
    reads_labels = True
    model_figures = True
    sweeps = True

    def make_splits(self, adata, protocol, random_state, label=None):
        """Stratified train/test splits of the labelled samples
        (:func:`~omicsbayes.evaluate.splitters.classification_splits`), with their sample ids."""
        if label not in adata.obs:
            raise ExperimentError(
                f"label column {label!r} is missing; columns are {list(adata.obs.columns)}"
            )
        params = {k: v for k, v in protocol.items() if k != "type"}
        key, default = self.split_counts[protocol["type"]]
        params[key] = params.get(key, default)
        table = classification_splits(
            label_values(adata.obs[label], "split"),
            protocol["type"],
            random_state=random_state,
            **params,
        )
        table.insert(2, "sample_id", adata.obs_names.to_numpy()[table["sample"].to_numpy()])
        return table

    def fits(self, name, experiment, splits):
        """One fit job per transform x model, holding every split (:func:`fit_splits`)."""
        return [
            {"experiment": name, "transform": t, "model": m}
            for t in experiment["transforms"]
            for m in experiment["models"]
        ]

    def fit_fold(self, adata, splits, params, wildcards, checkpoint=None):
        """The test-split predictions of every split of the fold table (:func:`fit_splits`,
        each split seeded by :meth:`seed`), with the samples' ids: ``{"predictions": table}``.

        ``params``: ``experiment`` (its ``task``), ``cohort`` (its ``label``), ``model``,
        ``steps`` (the transform's steps; those that learn from samples are fitted on each
        training split) and ``seed``.
        """
        targets = task_targets(adata.obs[params["cohort"]["label"]], params["experiment"]["task"])
        _, fold_steps = split_pipeline(params["steps"])
        seeds = {s: self.seed(params["seed"], wildcards, s) for s in splits["split"].unique()}
        predictions = fit_splits(adata.X, targets, splits, params["model"], fold_steps, seeds)
        predictions.insert(2, "sample_id", adata.obs_names.to_numpy()[predictions["sample"]])
        return {"predictions": predictions}

    def check(self, name, experiment, config):
        """The cohort has a label column, the experiment a task (a binary one lists its
        positive labels) and a few_shot protocol its ``n_per_class``."""
        key, cohort = f"experiments.{name}", experiment["cohort"]
        if "label" not in config["cohorts"][cohort]:
            raise ExperimentError(
                f"config key cohorts.{cohort}.label is required: experiment "
                f"{name!r} classifies that cohort's samples"
            )
        task = experiment.get("task")
        if task is None:
            raise ExperimentError(
                f"config key {key}.task is required for a classification experiment"
            )
        if task["kind"] == "binary" and not task.get("positive"):
            raise ExperimentError(
                f"config key {key}.task.positive: a binary task lists its positive labels"
            )
        protocol = config["protocols"][experiment["protocol"]]
        if protocol["type"] == "few_shot" and protocol.get("n_per_class") is None:
            raise ExperimentError(
                f"config key protocols.{experiment['protocol']}.n_per_class: a few_shot protocol "
                "sets its training samples per class"
            )

    def check_labels(self, name, experiment, config, labels):
        """Every positive label occurs and leaves a negative one, and the cohort has two classes
        and, in its smallest, the labelled samples the protocol needs (``n_splits`` folds,
        ``n_per_class`` plus one test sample)."""
        cohort = experiment["cohort"]
        label = config["cohorts"][cohort]["label"]
        protocol = config["protocols"][experiment["protocol"]]
        counts = labels.value_counts()
        task = experiment["task"]
        missing = sorted({str(v) for v in task.get("positive", [])} - set(counts.index))
        key = f"config key experiments.{name}.task.positive"
        if task["kind"] == "binary" and missing:
            raise ExperimentError(
                f"{key}: {missing} never occur in the {label!r} labels of cohort "
                f"{cohort!r} (values: {sorted(counts.index)})"
            )
        if task["kind"] == "binary" and set(counts.index) <= set(map(str, task["positive"])):
            raise ExperimentError(
                f"{key}: {sorted(counts.index)} are every class of cohort {cohort!r}, so every "
                "training split would hold a single class; expected at least one negative label"
            )
        settings = {k: protocol.get(k) for k in ("n_splits", "n_per_class")}
        need, what = splitters.min_class_size(protocol["type"], **settings)
        where = f"cohort {cohort!r} (experiment {name!r})"
        if len(counts) < 2:
            raise ExperimentError(
                f"config key cohorts.{cohort}.label: {label!r} holds "
                f"{sorted(counts.index)} in {where}; a classification experiment needs at "
                "least 2 classes"
            )
        if counts.min() < need:
            raise ExperimentError(
                f"config key protocols.{experiment['protocol']}."
                f"{CLASS_SIZE_KEYS.get(protocol['type'], 'type')}: {what} needs at least {need} "
                f"labelled samples per class; class {counts.idxmin()!r} of {where} has "
                f"{counts.min()}"
            )

    def primary_metric(self, experiment):
        """The metric the experiment is judged on and whether higher is better: accuracy for a
        multiclass task (paper 003's Tables 2-4), else AUROC (paper 000's Tables 2-5, paper
        001's Figure 3)."""
        if experiment.get("task", {}).get("kind") == "multiclass":
            return "accuracy", True
        return "auroc", True

    def metric_table(self, joined):
        """Per-split metrics (:func:`score_predictions`), the summary columns and ``task``."""
        return score_predictions(joined), self.metrics, list(self.summary_by)

    def figure_labels(self, adata, experiment, cohort):
        """The label column itself for a multiclass task (``tl`` makes its classes the tasks);
        otherwise one ``.obs`` column ``task:<name>`` per task of :func:`task_targets`
        (0.0/1.0, NaN unlabelled), added to ``adata.obs``, and the task names."""
        label = _label_column(adata.obs, cohort)
        targets = task_targets(adata.obs[label], experiment["task"])
        if list(targets.columns) == ["multiclass"]:
            return label, None
        tasks = list(targets.columns)
        keys = [f"task:{t}" for t in tasks]
        for task, key in zip(tasks, keys):
            adata.obs[key] = targets[task].to_numpy(dtype=float)
        return keys, tasks

    def figure_groups(self, obs, experiment, cohort, task):
        """``task`` for its positive samples; for the others their label when they share one,
        else ``"rest"`` (a class of a multiclass task against the other classes); None for
        unlabelled samples and those outside a binary task."""
        label = _label_column(obs, cohort)
        spec = experiment["task"]
        if spec["kind"] == "multiclass":  # the fit's tasks are the classes, one against the rest
            spec = {**spec, "kind": "one_vs_rest"}
        target = task_targets(obs[label], spec)[task].to_numpy()
        negatives = set(obs[label].astype(str).to_numpy()[target == 0])
        rest = negatives.pop() if len(negatives) == 1 else "rest"
        groups = np.full(len(target), None, dtype=object)
        groups[target == 1] = str(task)
        groups[target == 0] = rest
        return groups

    def figure(self, metrics, title, experiment, specs):
        """Box plots of AUROC, AUPR and accuracy per split; paper 001's layout (one panel per
        cohort x kernel x metric) when every model is one of paper 001's (``models.bam``)."""
        from ..pl.bam import bam_boxplots
        from ..pl.metrics import metric_boxplots

        bam = f"{models.__name__}.bam"
        if all(getattr(models, s["class"]).__module__ == bam for s in specs):
            return bam_boxplots(metrics.assign(cohort=experiment["cohort"]))
        return metric_boxplots(metrics, title=title, columns=self.metrics[:3])


def _label_column(obs, cohort):
    """The cohort's ``label`` column name, which ``obs`` must hold (ExperimentError)."""
    label = cohort.get("label")
    if label not in obs:
        raise ExperimentError(f"label column {label!r} is missing; columns are {list(obs.columns)}")
    return label


def _check_task_classes(labels, values, labelled, kind, allow_many_classes):
    """``check_classes`` of ``tl`` on a label column about to become tasks (ExperimentError)."""
    from ..tl._checks import check_classes

    strings = values.astype(object).where(labelled.to_numpy(), None).to_numpy()
    classes = sorted(set(values[labelled]))
    try:
        check_classes(
            labels, strings, classes, labels.name, f"task {kind}", bool(allow_many_classes)
        )
    except ValueError as error:
        message = str(error).replace("allow_many_classes=True", "task.allow_many_classes: true")
        raise ExperimentError(message) from None


def label_values(labels, who):
    """A label column as an object array with None where a label is missing: NaN, None and the
    strings that mean missing (:func:`omicsbayes.tl._checks.missing_labels`, with its warning)."""
    from ..tl._checks import missing_labels

    missing = missing_labels(labels, labels.name, who, stacklevel=3)
    return labels.astype(object).where(~missing, None).to_numpy()


def task_targets(labels, task):
    """Turn a label column into task targets.

    Parameters
    ----------
    labels : pandas.Series
        One label per sample; missing values (NaN, None, and the strings "nan", "None", "<NA>"
        and "", with a warning) mean unlabelled.
    task : dict
        ``{"kind": "binary", "positive": [...]}``, ``{"kind": "one_vs_rest"}`` or
        ``{"kind": "multiclass"}``. For the last two the label column must be classes
        (:func:`omicsbayes.tl._checks.check_classes`: not continuous or mostly unique unless
        ``"allow_many_classes": True``, at least two samples per class), as ``tl`` requires.

    Returns
    -------
    targets : pandas.DataFrame
        Samples x tasks; binary tasks hold 0.0/1.0 and NaN for unlabelled samples, a multiclass
        task holds the label strings (None for unlabelled).
    """
    kind = task.get("kind", "binary")
    if kind not in TASK_KINDS:
        raise ExperimentError(f"task kind {kind!r} is unknown; expected one of {TASK_KINDS}")
    values = pd.Series(label_values(labels, f"task {kind}"), index=labels.index, dtype="string")
    labelled = values.notna()
    if kind != "binary":
        _check_task_classes(labels, values, labelled, kind, task.get("allow_many_classes", False))
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


def _fit(template, X_train, y_train, X_test):
    """A clone of ``template`` fitted on the training rows; one with the ``transductive``
    capability also gets the test rows, their labels missing (NaN, or None for labels of object
    dtype), so that its unsupervised part learns from them."""
    estimator = clone(template)
    if "transductive" not in capabilities_of(estimator):
        return estimator.fit(X_train, y_train)
    if y_train.dtype.kind in "biu":
        y_train = y_train.astype(float)
    missing = np.full(len(X_test), None if y_train.dtype == object else np.nan, y_train.dtype)
    return estimator.fit(np.vstack([X_train, X_test]), np.concatenate([y_train, missing]))


def fit_split(X, targets, train, test, spec, fold_pipeline=None, random_state=None):
    """Fit one model on one training split and predict its test split.

    A model with the ``transductive`` capability (paper 003's PCA baseline) is fitted on the
    training rows and the test rows, the test rows' labels missing.

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
        estimator = _fit(make_estimator(spec, random_state), X_train[keep], y[train][keep], X_test)
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
    template = make_estimator(spec, random_state)
    if "multi_task" in capabilities_of(template) and Y.shape[1] > 1:
        estimator = clone(template).fit(X_train, Y[train])
        scores = np.asarray(estimator.decision_function(X_test), dtype=float)
        predicted = np.asarray(estimator.predict(X_test), dtype=float)
        scores, predicted = scores.reshape(len(test), -1), predicted.reshape(len(test), -1)
    else:
        scores = np.empty((len(test), Y.shape[1]))
        predicted = np.empty((len(test), Y.shape[1]))
        for j in range(Y.shape[1]):  # one fit per task, not a loop inside an iteration
            observed = ~np.isnan(Y[train, j])
            y_task = Y[train, j][observed].astype(int)
            estimator = _fit(template, X_train[observed], y_task, X_test)
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


def fit_splits(X, targets, splits, spec, fold_steps=(), seeds=None):
    """Fit one model on every training split of a fold table and predict each test split.

    Parameters
    ----------
    X, targets, spec
        As for :func:`fit_split`.
    splits : pandas.DataFrame
        Fold table (columns ``split``, ``sample``, ``role``) as the ``split`` rule writes it.
    fold_steps : sequence
        Transform steps that learn from samples, fitted on each training split anew.
    seeds : mapping, optional
        Split number -> ``random_state`` of that split's fit.

    Returns
    -------
    predictions : pandas.DataFrame
        :func:`fit_split`'s rows of every split, with the columns ``split`` first and
        ``seconds`` (wall time of that split's fit) last.
    """
    tables = []
    for split, rows in splits.groupby("split", sort=True):
        train = rows.loc[rows["role"] == "train", "sample"].to_numpy()
        test = rows.loc[rows["role"] == "test", "sample"].to_numpy()
        pipeline = build_pipeline(fold_steps) if fold_steps else None
        seed = None if seeds is None else seeds[split]
        table, seconds = fit_split(X, targets, train, test, spec, pipeline, seed)
        logger.info(
            "split %d: %d train, %d test, seed %s: fitted and predicted in %.2f s",
            split,
            len(train),
            len(test),
            seed,
            seconds,
        )
        table.insert(0, "split", split)
        tables.append(table.assign(seconds=seconds))
    return pd.concat(tables, ignore_index=True)


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
