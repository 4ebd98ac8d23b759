"""Experiments as the workflow runs them, usable without Snakemake.

Two kinds: ``classification`` (this page) and ``heldout_entries`` (paper 002's protocol,
:func:`fit_heldout`).

One experiment = a cohort, a label column turned into tasks, transforms, models and an evaluation
protocol. The workflow calls :func:`fit_split` once per (transform, model, split) and
:func:`score_predictions` once per experiment; both are plain functions of arrays and tables.

Tasks
-----
``binary``
    ``positive`` lists the label values of the positive class; every other labelled sample is
    negative. One task.
``one_vs_rest``
    One binary task per class. Models that share one factor model across tasks
    (:attr:`MULTI_TASK_MODELS`) fit all tasks jointly; every other model is fitted once per task.
``multiclass``
    The labels as they are; the model must handle several classes (accuracy and error only).
"""

import inspect
import time

import numpy as np
import pandas as pd
from sklearn.base import clone

from . import models
from .evaluate import metrics
from .models import baselines
from .models.rflvm import COUNT_LIKELIHOODS
from .preprocess.transforms import dense_matrix

MULTI_TASK_MODELS = frozenset({"RankFactorClassifier", "PFAClassifier"})
TASK_KINDS = ("binary", "one_vs_rest", "multiclass")


class ExperimentError(ValueError):
    """A configuration or data problem found while setting up an experiment."""


def model_classes():
    """Names of every estimator class a config may name, mapped to the class's module."""
    names = {name: "omicsbayes.models" for name in models.__all__}
    names.update({name: "omicsbayes.models.baselines" for name in baselines.__all__})
    return names


def make_estimator(spec, random_state=None):
    """Build an estimator from a config model entry.

    Parameters
    ----------
    spec : dict
        ``{"class": name, "variant": optional Table-1 name, "params": {...}}``.
    random_state : int, optional
        Passed to the estimator when it takes a ``random_state``.
    """
    name = spec["class"]
    spec = {k: v for k, v in spec.items() if k not in ("side_information", "grid")}  # workflow keys
    if name not in model_classes():
        known = ", ".join(sorted(model_classes()))
        raise ExperimentError(f"model class {name!r} is unknown; expected one of: {known}")
    cls = getattr(baselines, name) if name in baselines.__all__ else getattr(models, name)
    params = dict(spec.get("params") or {})
    accepted = inspect.signature(cls.__init__).parameters
    if random_state is not None and "random_state" in accepted:
        params["random_state"] = int(random_state)
    if spec.get("variant"):
        return cls.from_variant(spec["variant"], **params)
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ExperimentError(
            f"model class {name!r} has no parameter(s) {unknown}; "
            f"expected some of {sorted(p for p in accepted if p != 'self')}"
        )
    return cls(**params)


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
    if spec["class"] in MULTI_TASK_MODELS and Y.shape[1] > 1:
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


HELDOUT_MODELS = frozenset({"RFLVM", "IBPFactorModel", "PoissonFactorAnalysis"})


def heldout_mask(shape, split_table):
    """Boolean mask (True = held out) of one split from a held-out-entries table."""
    mask = np.zeros(shape, dtype=bool)
    test = split_table[split_table["role"] == "test"]
    mask[test["row"].to_numpy(), test["col"].to_numpy()] = True
    return mask


def fit_heldout(Y, mask, spec, random_state=None, checkpoint=None):
    """Fit a latent variable model with held-out entries hidden and score those entries.

    Paper 002's protocol (Tables 1-2): the held-out entries are set to NaN before fitting, so
    the sampler never sees them, then scored by the posterior predictive log likelihood averaged
    over retained draws; count models also get the perplexity.

    Parameters
    ----------
    Y : ndarray of shape (n_samples, n_features)
    mask : ndarray of bool, same shape, True where an entry is held out
    spec : dict
        Model entry of the config (class RFLVM, IBPFactorModel or PoissonFactorAnalysis).
    checkpoint : str, optional
        Where the sampler saves its chain state every ``checkpoint_every`` iterations; a rerun
        after an interruption resumes from it and gives the same draws.

    Returns
    -------
    row : dict
        n_heldout, log_likelihood (sum over held-out entries), log_likelihood_per_entry,
        perplexity (NaN for real-valued models) and seconds.
    latent : ndarray or None
        The fitted latent representation of the samples (``latent_`` or ``scores_``).
    """
    if spec["class"] not in HELDOUT_MODELS:
        raise ExperimentError(
            f"model class {spec['class']!r} cannot score held-out entries; expected one of "
            f"{sorted(HELDOUT_MODELS)}"
        )
    start = time.perf_counter()
    Y = dense_matrix(Y, spec["class"])
    observed = np.where(mask, np.nan, Y)
    estimator = make_estimator(spec, random_state)
    if checkpoint is not None:
        estimator.set_params(checkpoint=str(checkpoint))
    estimator.fit(observed)
    score = getattr(estimator, "log_likelihood", None) or estimator.heldout_log_likelihood
    total = float(score(Y, mask))
    is_count = spec["class"] == "PoissonFactorAnalysis" or (
        getattr(estimator, "likelihood", None) in COUNT_LIKELIHOODS
    )
    n_heldout = int(mask.sum())
    row = {
        "n_heldout": n_heldout,
        "log_likelihood": total,
        "log_likelihood_per_entry": total / n_heldout,
        "perplexity": float(estimator.perplexity(Y, mask)) if is_count else np.nan,
        "seconds": time.perf_counter() - start,
    }
    latent = getattr(estimator, "latent_", getattr(estimator, "scores_", None))
    return row, None if latent is None else np.asarray(latent, dtype=float)


RANKING_MODELS = frozenset({"ConstrainedMVGP", "TraceGP", "MVGP", "KPMF", "PMF"})


def ranking_fold(
    matrix,
    split_table,
    protocol,
    spec,
    row_kernel=None,
    n_negative_sets=5,
    random_state=0,
    n_candidates=20,
):
    """One outer fold of paper 004's disease-gene protocol (section 5.1).

    Parameters
    ----------
    matrix : scipy.sparse matrix of shape (n_rows, n_cols)
        Known associations (nonzero = positive); every other entry is unknown.
    split_table : pandas.DataFrame
        This fold's rows of the split table: ``entry`` ids (``known_rows``: 5-fold over the
        positive entries in row-major order) or ``row`` ids (``new_rows``: 5-fold over rows, whose
        entries are all held out and which get no sampled negative).
    protocol : {"known_rows", "new_rows"}
    spec : dict
        Model entry of the config (a class of :data:`RANKING_MODELS`).
    row_kernel : ndarray or LowRankKernel, optional
        Row covariance (``diffusion_kernel`` of the row graph); identity when None.

    A ``grid`` key in ``spec`` (``"paper"`` for section 5's grid, lambda 5 x sigma^2 20 values, or
    a list of parameter dicts) chooses the hyperparameters in this fold by inner validation on
    the training positives, separately for P@20 and R@20
    (:func:`omicsbayes.models.mvgp.select_for_fold`); the precision columns then come from the
    precision-selected model, the recall columns from the recall-selected one, and the candidates
    from the precision-selected one.

    Returns
    -------
    curves : pandas.DataFrame
        P@k and R@k for k = 1..20 averaged over the test rows, with the number of rows scored and
        excluded (no test positive), from :func:`omicsbayes.evaluate.ranking.ranking_curves`;
        with a grid also the chosen parameters (``params_precision``, ``params_recall``).
    candidates : pandas.DataFrame
        For every test row, its top ``n_candidates`` columns after removing training positives:
        row, rank, col, score and whether the column is a held-out (test) positive.
    """
    from .evaluate.ranking import ranking_curves
    from .models.mvgp import averaged_scores, hyperparameter_grid, select_for_fold

    if spec["class"] not in RANKING_MODELS:
        raise ExperimentError(
            f"model class {spec['class']!r} does not rank entries; "
            f"expected one of {sorted(RANKING_MODELS)}"
        )
    coo = matrix.tocoo()
    order = np.lexsort((coo.col, coo.row))
    rows, cols = coo.row[order].astype(np.int64), coo.col[order].astype(np.int64)
    test_ids = split_table.loc[
        split_table["role"] == "test", "entry" if protocol == "known_rows" else "row"
    ]
    test_ids = test_ids.to_numpy()
    if protocol == "known_rows":
        is_test = np.zeros(rows.size, dtype=bool)
        is_test[test_ids] = True
        score_rows, new_rows = np.unique(rows[is_test]), None
    else:
        is_test = np.isin(rows, test_ids)
        score_rows = new_rows = np.sort(test_ids)
    train, test = (rows[~is_test], cols[~is_test]), (rows[is_test], cols[is_test])
    estimator = make_estimator(spec)

    def fold_scores(model):
        return averaged_scores(
            model,
            *train,
            matrix.shape,
            score_rows,
            row_kernel=row_kernel,
            n_negative_sets=n_negative_sets,
            exclude_rows=new_rows,
            random_state=random_state,
        )

    grid = spec.get("grid")
    if grid is None:
        scores = fold_scores(estimator)
        curves = ranking_curves(dict(zip(score_rows.tolist(), scores)), test, train)
    else:
        grid = hyperparameter_grid(estimator) if grid == "paper" else list(grid)
        kind = "known" if protocol == "known_rows" else "new"
        chosen = select_for_fold(
            estimator, *train, matrix.shape, kind, (row_kernel, None), grid, new_rows, 20,
            random_state,
        )  # fmt: skip
        scores = fold_scores(clone(estimator).set_params(**chosen["precision"]))
        curves = ranking_curves(dict(zip(score_rows.tolist(), scores)), test, train)
        if chosen["recall"] != chosen["precision"]:
            other = fold_scores(clone(estimator).set_params(**chosen["recall"]))
            curves["recall"] = ranking_curves(dict(zip(score_rows.tolist(), other)), test, train)[
                "recall"
            ]
        curves["params_precision"] = repr(chosen["precision"])
        curves["params_recall"] = repr(chosen["recall"])

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
    return curves, candidates[np.isfinite(candidates["score"])].reset_index(drop=True)


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


RATING_MODELS = RANKING_MODELS


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
        Model entry of the config (a class of :data:`RATING_MODELS`).
    row_kernel : ndarray or LowRankKernel, optional
        User covariance (``diffusion_kernel`` of the social graph); identity when None.
    relevant_above, k : float, int
        R@k counts the test items rated above ``relevant_above`` (4 in the paper).

    Returns
    -------
    dict
        rmse, recall (R@k), k, n_rows (test users with a relevant test item), n_test (test
        ratings), rmse_training_mean (RMSE of predicting the training mean, for reference) and
        seconds; from :func:`omicsbayes.models.mvgp.rating_fold`.
    """
    from .models.mvgp import rating_fold

    if spec["class"] not in RATING_MODELS:
        raise ExperimentError(
            f"model class {spec['class']!r} does not predict ratings; expected one of "
            f"{sorted(RATING_MODELS)}"
        )
    if protocol not in ("known_users", "new_users"):
        raise ExperimentError(
            f"protocol {protocol!r} is not a rating protocol; expected known_users or new_users"
        )
    start = time.perf_counter()
    coo = matrix.tocoo()
    order = np.lexsort((coo.col, coo.row))
    rows, cols = coo.row[order].astype(np.int64), coo.col[order].astype(np.int64)
    ratings = np.asarray(coo.data[order], dtype=float)
    known = protocol == "known_users"
    test_ids = split_table.loc[split_table["role"] == "test", "entry" if known else "row"]
    if known:
        is_test = np.zeros(rows.size, dtype=bool)
        is_test[test_ids.to_numpy()] = True
    else:
        is_test = np.isin(rows, test_ids.to_numpy())
    row = rating_fold(
        make_estimator(spec, random_state),
        rows,
        cols,
        ratings,
        matrix.shape,
        is_test,
        "known" if known else "new",
        row_kernel=row_kernel,
        relevant_above=relevant_above,
        k=k,
        random_state=random_state,
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
    }
