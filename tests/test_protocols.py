"""The experiment kinds (omicsbayes.protocols): tasks, one split's fit, held-out entries, the
disease-gene fold, config checks and the registry."""

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from omicsbayes import protocols
from omicsbayes.config import (
    ConfigError,
    check_cohort_labels,
    check_config,
    config_schema,
    validate_config,
)
from omicsbayes.preprocess import build_pipeline
from omicsbayes.protocols import ExperimentError, _base, make_estimator, n_splits
from omicsbayes.protocols.classification import (
    fit_split,
    fit_splits,
    score_predictions,
    task_targets,
)
from omicsbayes.protocols.disease_gene import ranking_fold
from omicsbayes.protocols.heldout_entries import fit_heldout, heldout_mask

REPO = Path(__file__).resolve().parents[1]


def test_task_targets_kinds():
    labels = pd.Series(["a", "b", None, "c", "a", "b", "c"])
    binary = task_targets(labels, {"kind": "binary", "positive": ["a", "c"]})
    np.testing.assert_array_equal(binary.iloc[:, 0], [1, 0, np.nan, 1, 1, 0, 1])
    ovr = task_targets(labels, {"kind": "one_vs_rest"})
    assert list(ovr.columns) == ["a", "b", "c"]
    np.testing.assert_array_equal(ovr["b"], [0, 1, np.nan, 0, 0, 1, 0])
    multi = task_targets(labels, {"kind": "multiclass"})
    assert multi["multiclass"].tolist() == ["a", "b", None, "c", "a", "b", "c"]
    with pytest.raises(ExperimentError, match="not found: \\['z'\\]"):
        task_targets(labels, {"kind": "binary", "positive": ["z"]})


@pytest.mark.parametrize("kind", ["one_vs_rest", "multiclass"])
def test_a_continuous_label_column_is_refused_before_it_becomes_tasks(kind):
    values = np.repeat(np.random.default_rng(0).uniform(0, 10, 15), 2)  # two samples each
    mito = pd.Series(values, name="percent_mito")
    with pytest.raises(
        ExperimentError,
        match=r"task \S+: .obs\['percent_mito'\] looks continuous.*task.allow_many_classes: true",
    ):
        task_targets(mito, {"kind": kind})
    allowed = task_targets(mito, {"kind": kind, "allow_many_classes": True})
    assert allowed.shape == ((30, 15) if kind == "one_vs_rest" else (30, 1))
    singleton = pd.Series(["a"] * 5 + ["b"] * 5 + ["c"], name="group")
    with pytest.raises(ExperimentError, match=r"1 class\(es\) with fewer than 2 .*'c' \(1\)"):
        task_targets(singleton, {"kind": kind})
    binary = task_targets(mito, {"kind": "binary", "positive": [str(mito[0])]})
    assert binary.shape == (30, 1)  # one task whatever the column: not checked


def test_fit_split_matches_direct_sklearn_fit():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 5))
    y = (X[:, 0] + 0.5 * rng.standard_normal(80) > 0).astype(int)
    targets = task_targets(
        pd.Series(np.where(y == 1, "pos", "neg")), {"kind": "binary", "positive": ["pos"]}
    )
    train, test = np.arange(60), np.arange(60, 80)
    pipeline = build_pipeline(["zscore"])
    predictions, _ = fit_split(X, targets, train, test, {"class": "LogisticBaseline"}, pipeline, 1)
    mean, sd = X[train].mean(0), X[train].std(0)  # z-scored with the training split only
    direct = LogisticRegression(max_iter=1000).fit((X[train] - mean) / sd, y[train])
    expected = direct.decision_function((X[test] - mean) / sd)
    np.testing.assert_allclose(predictions["score"], expected, rtol=1e-4, atol=1e-6)
    table = score_predictions(predictions.assign(transform="z", model="lr", split=0, seconds=0.1))
    np.testing.assert_allclose(table["auroc"], roc_auc_score(y[test], expected))


def test_fit_split_passes_the_test_rows_unlabelled_to_a_transductive_model():
    """PCASVM(transductive=True) (paper 003's PCA baseline) learns its components from the
    training and test rows; the inductive PCASVM from the training rows only."""
    from omicsbayes.models import PCASVM

    rng = np.random.default_rng(3)
    X = rng.standard_normal((60, 6))
    X[40:, 1] *= 20  # the test rows' largest variance: a component only they show
    labels = np.where(X[:, 0] > 0, "pos", "neg")
    targets = task_targets(pd.Series(labels), {"kind": "binary", "positive": ["pos"]})
    train, test = np.arange(40), np.arange(40, 60)
    y_train = (labels[train] == "pos").astype(float)
    rows = np.vstack([X[train], X[test]])
    for transductive in (True, False):
        spec = {"class": "PCASVM", "params": {"n_components": 2, "transductive": transductive}}
        predictions, _ = fit_split(X, targets, train, test, spec, None, 5)
        model = PCASVM(n_components=2, transductive=transductive, random_state=5)
        if transductive:
            model.fit(rows, np.concatenate([y_train, np.full(len(test), np.nan)]))
            assert model.projection_.n_samples_ == 60
        else:
            model.fit(X[train], y_train)
        np.testing.assert_allclose(predictions["score"], model.decision_function(X[test]))
    multiclass = task_targets(pd.Series(labels), {"kind": "multiclass"})
    spec = {"class": "PCASVM", "params": {"n_components": 2, "transductive": True}}
    predictions, _ = fit_split(X, multiclass, train, test, spec, None, 5)
    model = PCASVM(n_components=2, transductive=True, random_state=5)
    model.fit(rows, np.concatenate([labels[train], np.full(len(test), None)]).astype(object))
    np.testing.assert_array_equal(predictions["y_pred"], model.predict(X[test]))


def test_fit_splits_equals_one_fit_split_per_split_with_its_seed():
    """Every split of the fold table fitted in one call gives the rows that one fit_split per split
    gives (a fresh fold pipeline and that split's seed each), the split column in front."""
    import anndata as ad

    rng = np.random.default_rng(3)
    X = rng.standard_normal((40, 6))
    labels = pd.Series(np.where(X[:, 0] + rng.standard_normal(40) > 0, "pos", "neg"))
    adata = ad.AnnData(X=X, obs=pd.DataFrame({"y": labels.to_numpy()}))
    protocol = {"type": "stratified_kfold", "n_splits": 3}
    splits = protocols.get("classification").make_splits(adata, protocol, 0, label="y")
    targets = task_targets(labels, {"kind": "binary", "positive": ["pos"]})
    spec = {"class": "RankFactorClassifier", "params": {"n_factors": 2, "max_iter": 3}}
    seeds = {0: 11, 1: 12, 2: 13}
    table = fit_splits(X, targets, splits, spec, ["zscore"], seeds)
    assert table["split"].tolist() == sorted(table["split"]) and set(table["split"]) == {0, 1, 2}
    for s in range(3):
        rows = splits[splits["split"] == s]
        train = rows.loc[rows["role"] == "train", "sample"].to_numpy()
        test = rows.loc[rows["role"] == "test", "sample"].to_numpy()
        one, _ = fit_split(X, targets, train, test, spec, build_pipeline(["zscore"]), seeds[s])
        got = table[table["split"] == s].drop(columns=["split", "seconds"]).reset_index(drop=True)
        pd.testing.assert_frame_equal(got, one)
    reseeded = fit_splits(X, targets, splits, spec, ["zscore"], {0: 11, 1: 12, 2: 99})
    assert not np.array_equal(reseeded["score"], table["score"])  # each split's seed is used


def test_fit_split_refuses_single_class_training_task():
    X = np.random.default_rng(1).standard_normal((10, 3))
    targets = task_targets(pd.Series(["a"] * 5 + ["b"] * 5), {"kind": "one_vs_rest"})
    with pytest.raises(ExperimentError, match="single class in the training data"):
        fit_split(X, targets, np.arange(5), np.arange(5, 10), {"class": "LogisticBaseline"})


def test_make_estimator_errors_name_the_problem():
    with pytest.raises(ExperimentError, match="Nope"):
        make_estimator({"class": "Nope"})
    with pytest.raises(ExperimentError, match="n_factor"):
        make_estimator({"class": "PFAClassifier", "params": {"n_factor": 3}})
    assert (
        make_estimator({"class": "PFAClassifier", "params": {"n_factors": 3}}, 5).random_state == 5
    )


def test_fit_heldout_never_sees_heldout_entries():
    rng = np.random.default_rng(2)
    Y = rng.standard_normal((40, 6)) @ rng.standard_normal((6, 8))
    mask = np.zeros_like(Y, dtype=bool)
    mask[rng.random(Y.shape) < 0.2] = True
    spec = {"class": "IBPFactorModel", "params": {"n_iter": 30, "burn_in": 15}}
    poisoned = np.where(mask, 1e6, Y)
    row, latent = fit_heldout(Y, mask, spec, random_state=3)
    row_poisoned, _ = fit_heldout(poisoned, mask, spec, random_state=3)
    assert row["n_heldout"] == mask.sum() and latent.shape[0] == 40
    np.testing.assert_allclose(row["log_likelihood"] / mask.sum(), row["log_likelihood_per_entry"])
    # the fit is identical; only the scored values differ (the huge ones score far worse)
    assert row_poisoned["log_likelihood"] < row["log_likelihood"] - 1e3
    table = pd.DataFrame(
        {"split": 0, "row": np.nonzero(mask)[0], "col": np.nonzero(mask)[1], "role": "test"}
    )
    np.testing.assert_array_equal(heldout_mask(Y.shape, table), mask)


def _default_config():
    return yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def test_default_config_checks_and_split_counts():
    config = _default_config()
    check_config(config)
    assert n_splits({"type": "repeated_subsampling"}) == 100
    assert n_splits({"type": "few_shot", "n_repeats": 4}) == 4
    assert n_splits({"type": "heldout_entries"}) == 5


def test_check_config_names_the_key():
    config = _default_config()
    first = next(iter(config["experiments"]))
    config["experiments"][first]["models"] = ["nonexistent"]
    with pytest.raises(ConfigError, match=f"experiments.{first}.models"):
        check_config(config)
    config = _default_config()
    config["experiments"][first]["kind"] = "heldout_entries"
    with pytest.raises(ConfigError, match="protocol"):
        check_config(config)


@pytest.mark.parametrize(
    "path", sorted((REPO / "config" / "examples").glob("*.yaml")), ids=lambda p: p.name
)
def test_example_configs_are_valid(path):
    """Every ready config validates against the schema and passes the cross-checks."""
    config = yaml.safe_load(path.read_text())
    validate_config(config, REPO / "workflow" / "schemas" / "config.schema.yaml")
    check_config(config)


def test_fit_heldout_with_checkpoint_equals_plain_fit_and_cleans_up(tmp_path):
    rng = np.random.default_rng(5)
    Y = rng.standard_normal((30, 5))
    mask = rng.random(Y.shape) < 0.2
    spec = {
        "class": "IBPFactorModel",
        "params": {"n_iter": 20, "burn_in": 10, "checkpoint_every": 5},
    }
    plain, _ = fit_heldout(Y, mask, spec, random_state=1)
    checkpointed, _ = fit_heldout(Y, mask, spec, random_state=1, checkpoint=tmp_path / "fit.ckpt")
    assert plain["log_likelihood"] == checkpointed["log_likelihood"]
    assert not list(tmp_path.iterdir())  # removed after the fit succeeded


def test_atomic_write_gives_umask_permissions_and_leaves_no_temp(tmp_path):
    import os

    from omicsbayes.jobs import write_table

    write_table(pd.DataFrame({"a": [1.5]}), tmp_path / "t.tsv")
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "t.tsv").stat().st_mode & 0o777 == 0o666 & ~umask
    assert [p.name for p in tmp_path.iterdir()] == ["t.tsv"]


def test_ranking_fold_inner_selection_matches_a_fit_with_the_chosen_parameters():
    import scipy.sparse as sp

    from omicsbayes.evaluate.splitters import entry_kfold_splits

    rng = np.random.default_rng(3)
    n_rows, n_cols = 30, 25
    truth = (rng.standard_normal((n_rows, 2)) @ rng.standard_normal((2, n_cols))) > 1.0
    matrix = sp.csr_matrix(truth.astype(float))
    coo = matrix.tocoo()
    order = np.lexsort((coo.col, coo.row))
    splits = entry_kfold_splits(coo.row[order], coo.col[order], 3, random_state=0)
    fold = splits[splits["split"] == 0]
    grid = [{"lam": 0.1, "sigma2": 0.1}, {"lam": 1000.0, "sigma2": 0.1}]
    spec = {"class": "ConstrainedMVGP", "params": {"max_rank": 3}, "grid": grid}
    curves, _ = ranking_fold(matrix, fold, "known_rows", spec, n_negative_sets=1, random_state=4)
    chosen = {p: curves[f"chosen_{p}"].iloc[0] for p in ("lam", "sigma2")}
    assert chosen in grid
    assert chosen["lam"] == 0.1  # lam = 1000 zeroes every score: useless, never chosen
    plain = {"class": "ConstrainedMVGP", "params": {"max_rank": 3, **chosen}}
    direct, _ = ranking_fold(matrix, fold, "known_rows", plain, n_negative_sets=1, random_state=4)
    np.testing.assert_allclose(curves["precision"], direct["precision"])


@pytest.mark.parametrize("protocol", ["known_rows", "new_rows"])
def test_ranking_fold_curves_of_several_set_counts_are_ranking_folds_of_each(protocol):
    """One pass over 3 negative sets gives the curves of ranking_fold with 1 and with 3 sets."""
    import scipy.sparse as sp

    from omicsbayes.evaluate.splitters import entry_kfold_splits, row_kfold_splits
    from omicsbayes.protocols.disease_gene import ranking_fold_curves

    rng = np.random.default_rng(5)
    truth = (rng.standard_normal((30, 2)) @ rng.standard_normal((2, 25))) > 1.0
    matrix = sp.csr_matrix(truth.astype(float))
    coo = matrix.tocoo()
    order = np.lexsort((coo.col, coo.row))
    splits = (
        row_kfold_splits(30, 3, random_state=0)
        if protocol == "new_rows"
        else entry_kfold_splits(coo.row[order], coo.col[order], 3, random_state=0)
    )
    fold = splits[splits["split"] == 1]
    kernel = truth @ truth.T / 25.0 + np.eye(30)  # rows with shared columns covary
    spec = {"class": "MVGP", "grid": [{"sigma2": 0.1}, {"sigma2": 10.0}]}
    both = ranking_fold_curves(matrix, fold, protocol, spec, kernel, (3, 1), random_state=4)
    assert sorted(both) == [1, 3]
    for k in (1, 3):
        alone, _ = ranking_fold(
            matrix, fold, protocol, spec, kernel, n_negative_sets=k, random_state=4
        )
        pd.testing.assert_frame_equal(both[k], alone)
    assert not both[1]["recall"].equals(both[3]["recall"])  # the sets differ


def test_registry_maps_every_protocol_type_to_one_kind_with_its_split_count():
    for name in protocols.KINDS:
        kind = protocols.get(name)
        assert isinstance(kind, protocols.ExperimentKind) and kind.name == name
        for protocol_type, (key, default) in kind.split_counts.items():
            assert protocols.of_protocol({"type": protocol_type}) is kind
            assert n_splits({"type": protocol_type}) == default
            assert n_splits({"type": protocol_type, key: 3}) == 3
            for bad in ("3", 2.5, 0, None, True):
                with pytest.raises(
                    ExperimentError,
                    match=re.escape(
                        f"{protocol_type} protocol: {key}={bad!r}; expected an integer"
                    ),
                ):
                    n_splits({"type": protocol_type, key: bad})
    for unknown in ("nope", ["classification"]):
        with pytest.raises(ExperimentError, match=re.escape(f"kind {unknown!r} is unknown")):
            protocols.get(unknown)
    with pytest.raises(ExperimentError, match="belongs to no experiment kind"):
        n_splits({"type": "nope"})


def test_kinds_are_the_subclasses_of_the_package_modules():
    """KINDS is derived: one registered ExperimentKind subclass per kind module."""
    import inspect
    import pkgutil

    defined = []
    for info in pkgutil.iter_modules(protocols.__path__):
        if info.name.startswith("_"):
            continue
        module = __import__(f"omicsbayes.protocols.{info.name}", fromlist=["_"])
        defined += [
            c.name
            for _, c in inspect.getmembers(module, inspect.isclass)
            if issubclass(c, protocols.ExperimentKind)
            and c.__module__ == module.__name__
            and "name" in vars(c)  # a shared base that sets no name is no kind
        ]
    assert sorted(defined) == sorted(protocols.KINDS) and len(defined) >= 4


@pytest.mark.parametrize("kind", protocols.KINDS)
def test_every_kind_names_the_metric_its_winner_is_judged_on(kind):
    """The report's winner metric is the kind's own (evaluate.winners asks the kind)."""
    from omicsbayes.evaluate.winners import primary_metric

    experiment_kind = protocols.get(kind)
    for task in ("binary", "multiclass"):
        experiment = {"kind": kind, "task": {"kind": task}}
        metric, higher = experiment_kind.primary_metric(experiment)
        assert metric in experiment_kind.metrics and isinstance(higher, bool)
        assert primary_metric(experiment) == (metric, higher)
    assert primary_metric({"task": {"kind": "multiclass"}}) == ("accuracy", True)
    assert primary_metric({"kind": "rating"}) == ("rmse", False)


def test_every_kind_has_its_rule_file_and_schema_entry():
    """Adding a kind: its protocol class, workflow/rules/<kind>.smk (which the Snakefile includes
    for every kind, and which registers its fit outputs) and the schema's kind enum; no rule file
    without a kind."""
    rules = {p.stem for p in (REPO / "workflow" / "rules").glob("*.smk")}
    shared = {"common", "data", "downloads", "preprocess", "split", "evaluate", "model_figures"}
    assert rules - shared - {"sweeps", "report"} == set(protocols.KINDS)
    for kind in protocols.KINDS:
        text = (REPO / "workflow" / "rules" / f"{kind}.smk").read_text()
        assert f'register_kind(\n    "{kind}"' in text or f'register_kind("{kind}"' in text, kind
        assert '"../scripts/fit.py"' in text, kind
    schema = config_schema(REPO / "workflow" / "schemas" / "config.schema.yaml")
    experiment = schema["properties"]["experiments"]["additionalProperties"]["properties"]
    assert experiment["kind"]["enum"] == list(protocols.KINDS)
    assert "for _kind in protocols.KINDS:" in (REPO / "workflow" / "Snakefile").read_text()


def test_protocols_name_no_workflow_path():
    """The rule files own every output path; the protocols give wildcard values only."""
    package = REPO / "src" / "omicsbayes" / "protocols"
    typed = [p.name for p in package.glob("*.py") if "results/" in p.read_text()]
    assert typed == []
    for name in protocols.KINDS:
        experiment = {"models": ["m1", "m2"], "transforms": ["t"], "cohort": "c"}
        for values in protocols.get(name).fits("e", experiment, range(2)):
            assert values["experiment"] == "e" and values["model"] in ("m1", "m2")
            assert not any("/" in str(v) for v in values.values())


@pytest.fixture
def registry(monkeypatch):
    """The kinds' registry, restored after the test (a kind defined in a test stays there)."""
    monkeypatch.setattr(_base, "_REGISTRY", dict(_base._REGISTRY))
    return _base._REGISTRY


def _toy_kind():
    class Survival(protocols.ExperimentKind):
        """A kind defined outside the package: registered by being defined."""

        name = "survival"
        requires = frozenset({"classifier"})
        split_counts = {"survival_folds": ("n_splits", 4)}
        metrics = ("c_index",)
        reads_labels = True
        sweeps = True

        def check_labels(self, name, experiment, config, labels):
            if labels.nunique() < 2:
                raise ExperimentError(
                    f"config key cohorts.{experiment['cohort']}.label: a survival experiment "
                    f"needs an event and a censored class, not {sorted(set(labels))}"
                )

        def make_splits(self, adata, protocol, random_state, label=None):
            return pd.DataFrame({"split": [0, 0], "sample": [0, 1], "role": ["train", "test"]})

        def fit_fold(self, adata, splits, params, wildcards, checkpoint=None):
            return {"scores": pd.DataFrame({"c_index": [0.5]})}

        def primary_metric(self, experiment):
            return "c_index", True

    return Survival


def test_a_new_kind_is_registered_and_in_the_schema_without_touching_another_module(
    registry, tiny_config
):
    survival = _toy_kind()
    assert "survival" in protocols.KINDS and protocols.KINDS[-1] == "survival"
    kind = protocols.get("survival")
    assert isinstance(kind, survival)
    assert protocols.of_protocol({"type": "survival_folds"}) is kind
    assert n_splits({"type": "survival_folds"}) == 4
    schema = config_schema(REPO / "workflow" / "schemas" / "config.schema.yaml")
    properties = schema["properties"]
    experiment = properties["experiments"]["additionalProperties"]["properties"]
    protocol = properties["protocols"]["additionalProperties"]["properties"]
    assert experiment["kind"]["enum"][-1] == "survival"
    assert protocol["type"]["enum"][-1] == "survival_folds"
    # a config naming it passes the schema and the kind's checks; its defaults are the base's
    tiny_config["protocols"]["folds"] = {"type": "survival_folds"}
    tiny_config["experiments"]["malignant"].update(kind="survival", protocol="folds")
    validate_config(tiny_config, REPO / "workflow" / "schemas" / "config.schema.yaml")
    protocols.check_experiment("malignant", tiny_config)
    assert kind.fits("e", {"models": ["m"]}, range(2)) == [
        {"experiment": "e", "model": "m", "split": 0},
        {"experiment": "e", "model": "m", "split": 1},
    ]
    joined = pd.DataFrame({"c_index": [0.5], "transform": ["none"], "model": ["m"], "split": [0]})
    table, metrics, by = kind.metric_table(joined)
    assert list(table.columns) == ["transform", "model", "split", "c_index"]
    assert metrics == ("c_index",) and by == []
    assert protocols.kinds_with("sweeps")[-1] == "survival"
    assert "survival" not in protocols.kinds_with("model_figures")
    # the config check, the sample sheet's labels included, asks the kind
    check_config(tiny_config)
    check_cohort_labels(tiny_config)
    tiny_config["cohorts"]["breast_cancer"]["label_map"] = {"benign": "malignant"}
    with pytest.raises(ConfigError, match=r"cohorts.breast_cancer.label: a survival experiment"):
        check_cohort_labels(tiny_config)


def test_a_new_kind_joins_the_generated_docs_tables(registry, tmp_path, monkeypatch):
    """The kinds tables of docs/usage.md and docs/workflow.md list a kind defined elsewhere, its
    rule file's rules and outputs included, with no other file edited."""
    monkeypatch.syspath_prepend(str(REPO / "docs"))
    import registry_tables

    for path in (REPO / "workflow" / "rules").glob("*.smk"):
        (tmp_path / path.name).write_text(path.read_text())
    (tmp_path / "survival.smk").write_text(
        "rule fit_survival:\n"
        "    output:\n"
        '        scores="results/{experiment}/survival/{model}/split{split}.tsv",\n'
        '    script:\n        "../scripts/fit.py"\n'
    )
    monkeypatch.setattr(registry_tables, "RULES", tmp_path)
    _toy_kind()
    assert registry_tables.kind_rows()["kind"].iloc[-1] == "survival"
    row = registry_tables.kind_workflow_rows().iloc[-1]
    assert row["kind"] == "``survival``"
    assert row["protocol types (split count key, default)"] == (
        "``survival_folds`` (``n_splits``, default 4)"
    )
    assert (
        row["what it measures"]
        == "A kind defined outside the package: registered by being defined."
    )
    assert row["figures/metrics.png"] == "Box plots of c_index per split."
    assert row["optional sections"] == "``sweeps``"
    assert row["rule file: rules and outputs (under results/{experiment}/)"] == (
        "rule ``fit_survival``: ``survival/{model}/split{split}.tsv``"
    )


def test_a_sweep_of_a_new_kind_groups_by_its_own_summary_keys(registry, tmp_path, workflow_script):
    """sweep_figure.py draws a kind's summaries by the kind's ``summary_by`` keys (none for the
    toy kind; ``task`` for classification), which the sweeps rule gives it."""
    kind = _toy_kind()()
    paths = {}
    for experiment, shift in (("e1", 0.0), ("e2", 0.1)):
        summary = pd.DataFrame(
            {
                "experiment": experiment,
                "transform": "none",
                "model": ["m1", "m2"],
                "c_index_mean": [0.6 + shift, 0.7 + shift],
                "c_index_sd": [0.05, 0.04],
                "n_splits": 4,
            }
        )
        paths[experiment] = str(tmp_path / f"{experiment}.tsv")
        summary.to_csv(paths[experiment], sep="\t", index=False)
    sweep = {"experiments": ["e1", "e2"], "values": [1, 2], "x": "follow-up", "metric": "c_index"}
    table = tmp_path / "sweep.tsv"
    log = workflow_script(
        "sweep_figure.py",
        "sweep_figure",
        tmp_path,
        input=paths,
        output={"figure": str(tmp_path / "sweep.png"), "table": str(table)},
        params={"sweep": sweep, "by": list(kind.summary_by)},
        wildcards={"sweep": "follow_up"},
    )
    assert "ERROR" not in log, log
    drawn = pd.read_csv(table, sep="\t")
    assert list(drawn.columns[:6]) == ["sweep", "x", "line", "experiment", "transform", "model"]
    assert drawn["c_index_mean"].tolist() == pytest.approx([0.6, 0.7, 0.7, 0.8])
    assert (tmp_path / "sweep.png").read_bytes()[:4] == b"\x89PNG"


def test_registry_fixture_leaves_no_test_kind_behind():
    assert "survival" not in protocols.KINDS


def test_a_kind_missing_a_method_or_taking_a_known_name_is_refused(registry):
    with pytest.raises(TypeError, match=r"'half' \(Half\) lacks \['fit_fold', 'primary_metric'\]"):

        class Half(protocols.ExperimentKind):
            name = "half"

            def make_splits(self, adata, protocol, random_state, label=None):
                return None

    assert "half" not in protocols.KINDS
    with pytest.raises(TypeError, match="experiment kind 'rating' is already .*Rating"):

        class Ratings(protocols.ExperimentKind):
            name = "rating"
            make_splits = fit_fold = primary_metric = None

    assert type(protocols.get("rating")).__name__ == "Rating"


@pytest.mark.parametrize("protocol", ["known", "new"])
def test_entry_folds_test_every_entry_once(protocol):
    from omicsbayes.protocols import entries

    rng = np.random.default_rng(2)
    rows, cols = np.divmod(np.sort(rng.choice(12 * 9, 40, replace=False)), 9)
    tested = np.zeros(rows.size, dtype=int)
    for _, fold in entries.folds(protocol, rows, cols, 12, 3, random_state=0):
        tested += fold.is_test
        if protocol == "new":  # a test row's entries are all tested; it is scored and new
            np.testing.assert_array_equal(fold.is_test, np.isin(rows, fold.new_rows))
            np.testing.assert_array_equal(fold.score_rows, fold.new_rows)
        else:
            assert fold.new_rows is None
            np.testing.assert_array_equal(fold.score_rows, np.unique(rows[fold.is_test]))
    np.testing.assert_array_equal(tested, 1)


def test_workflow_fold_is_one_fold_of_disease_gene_cv():
    """The workflow's per-job fold (split table from make_splits) and the library's
    cross-validation give the same curves on the same fold and seed."""
    import anndata as ad
    import scipy.sparse as sp

    from omicsbayes.models import ConstrainedMVGP
    from omicsbayes.protocols import disease_gene

    rng = np.random.default_rng(3)
    truth = (rng.standard_normal((20, 2)) @ rng.standard_normal((2, 15))) > 1.0
    adata = ad.AnnData(sp.csr_matrix(truth.astype(float)))
    table = protocols.get("disease_gene").make_splits(
        adata, {"type": "known_rows", "n_splits": 3}, 7
    )
    params = {"max_rank": 3, "lam": 0.1, "sigma2": 0.1}
    rows, cols = np.nonzero(truth)  # row-major, as the split table's entry ids
    cv = disease_gene.disease_gene_cv(
        ConstrainedMVGP(**params), rows, cols, truth.shape, "known", n_splits=3,
        n_negative_sets=1, random_state=7,
    )  # fmt: skip
    for split in range(3):
        curves, candidates = disease_gene.ranking_fold(
            adata.X,
            table[table["split"] == split],
            "known_rows",
            {"class": "ConstrainedMVGP", "params": params},
            n_negative_sets=1,
            random_state=7 + split + 1,
        )
        expected = cv[cv["split"] == split].drop(columns="split").reset_index(drop=True)
        pd.testing.assert_frame_equal(curves, expected)
        # candidates never list a training positive
        train = table[(table["split"] == split) & (table["role"] == "train")]["entry"]
        known = set(zip(rows[train], cols[train]))
        assert not known & set(zip(candidates["row"], candidates["col"]))
    with pytest.raises(ExperimentError, match=r"lacks \['matrix_completion'\]"):
        disease_gene.ranking_fold(adata.X, table, "known_rows", {"class": "LogisticBaseline"})


@pytest.mark.parametrize("name", ["disease_gene", "rating"])
def test_a_matrix_kind_fits_one_fold_as_its_fold_function(name):
    """DiseaseGene.fit_fold and Rating.fit_fold pass their fold function the split's rows of the
    split table, the protocol type, the model entry, the diffusion kernel of the row graph
    (``side_information: diffusion``) and the seed of the job's wildcards."""
    import anndata as ad
    import scipy.sparse as sp

    from omicsbayes._seed import derive_seed
    from omicsbayes.preprocess import diffusion_kernel
    from omicsbayes.protocols.rating import rating_fold_metrics

    rng = np.random.default_rng(8)
    known = (rng.standard_normal((14, 2)) @ rng.standard_normal((2, 10))) > 0.3
    values = known * rng.integers(1, 6, known.shape) if name == "rating" else known
    adata = ad.AnnData(sp.csr_matrix(values.astype(float)))
    graph = sp.csr_matrix(np.triu(rng.random((14, 14)) < 0.3, 1).astype(float))
    adata.obsp["graph"] = graph + graph.T
    kind = protocols.get(name)
    protocol = {"type": "known_rows" if name == "disease_gene" else "known_users", "n_splits": 3}
    protocol |= {"n_negative_sets": 2} if name == "disease_gene" else {"relevant_above": 3, "k": 5}
    splits = kind.make_splits(adata, protocol, 4)
    spec = {
        "class": "ConstrainedMVGP",
        "side_information": "diffusion",
        "params": {"max_rank": 3, "lam": 0.1, "sigma2": 0.1},
    }
    params = {"experiment": {"cohort": "c"}, "model": spec, "protocol": protocol, "seed": 11}
    wildcards = {"experiment": "e", "model": "m", "split": "1"}
    tables = kind.fit_fold(adata, splits, params, wildcards)
    fold = (adata.X, splits[splits["split"] == 1], protocol["type"], spec)
    common = {
        "row_kernel": diffusion_kernel(adata.obsp["graph"]),
        "random_state": derive_seed(11, "e", "m", "1"),
    }
    if name == "disease_gene":
        curves, candidates = ranking_fold(*fold, n_negative_sets=2, **common)
        pd.testing.assert_frame_equal(tables["curves"], curves)
        pd.testing.assert_frame_equal(
            tables["candidates"].drop(columns=["row_id", "col_id"]), candidates
        )
        assert (tables["candidates"]["row_id"] == adata.obs_names[candidates["row"]]).all()
    else:
        row = rating_fold_metrics(*fold, relevant_above=3, k=5, **common)
        row.pop("seconds")
        pd.testing.assert_frame_equal(
            tables["metrics"].drop(columns="seconds"), pd.DataFrame([row])
        )


def test_workflow_grid_paper_is_the_estimators_auto_selection(monkeypatch):
    """A fold with ``grid: paper`` chooses exactly what the estimator's own
    lam="auto", sigma2="auto" fit chooses on that fold's training entries (the positives and
    the first sampled negative set, drawn as averaged_scores draws them)."""
    import anndata as ad
    import scipy.sparse as sp

    import omicsbayes.models.mvgp as mvgp
    from omicsbayes.evaluate.splitters import sample_negatives
    from omicsbayes.protocols import disease_gene, entries

    monkeypatch.setattr(mvgp.selection, "SIGMA2_GRID", np.logspace(-3, 3, 20)[::4])  # 5 x 5 points
    rng = np.random.default_rng(3)
    truth = (rng.standard_normal((20, 2)) @ rng.standard_normal((2, 15))) > 0.8
    adata = ad.AnnData(sp.csr_matrix(truth.astype(float)))
    table = protocols.get("disease_gene").make_splits(
        adata, {"type": "known_rows", "n_splits": 3}, 7
    )
    fold_table = table[table["split"] == 1]
    params = {"max_rank": 3, "lam": 1.0, "sigma2": 0.1, "tol": 1e-4}
    spec = {"class": "ConstrainedMVGP", "grid": "paper", "params": params}
    curves, _ = disease_gene.ranking_fold(
        adata.X, fold_table, "known_rows", spec, n_negative_sets=2, random_state=9
    )
    rows, cols = np.nonzero(truth)
    fold = entries.fold_of("known_rows", fold_table, rows)
    train_rows, train_cols = rows[~fold.is_test], cols[~fold.is_test]
    draw = np.random.default_rng(9)
    ((nr, nc), _) = sample_negatives(
        train_rows, train_cols, truth.shape, 2, random_state=int(draw.integers(2**31))
    )
    auto = mvgp.ConstrainedMVGP(max_rank=3, tol=1e-4, random_state=int(draw.integers(2**31))).fit(
        np.concatenate([train_rows, nr]),
        np.concatenate([train_cols, nc]),
        np.concatenate([np.ones(train_rows.size), np.zeros(nr.size)]),
        truth.shape,
    )
    assert len(auto.selection_) == 25
    assert (curves["chosen_lam"] == auto.lam_).all()
    assert (curves["chosen_sigma2"] == auto.sigma2_).all()
    assert (curves["selection_metric"] == "recall@20").all()
    # numbers in params and no grid: no selection, no chosen columns
    plain, _ = disease_gene.ranking_fold(
        adata.X, fold_table, "known_rows", {**spec, "grid": None}, n_negative_sets=1
    )
    assert "chosen_lam" not in plain.columns


@pytest.mark.parametrize("kind", ["disease_gene", "rating"])
def test_bad_grid_is_refused_at_config_check(kind):
    check = protocols.get(kind).check
    config = {"models": {"m": {"class": "PMF", "grid": [{"lam": 1.0}]}}}
    with pytest.raises(ExperimentError, match=r"models\.m\.grid: grid sets \['lam'\]"):
        check("e", {"models": ["m"]}, config)
    config["models"]["m"] = {"class": "KPMF", "grid": [{"sigma2": 1.0}, {"sigma2": 0.1}]}
    check("e", {"models": ["m"]}, config)


def test_bernoulli_rflvm_scores_heldout_entries_without_perplexity(caplog):
    """A Bernoulli RFLVM in a held-out experiment gets its held-out log likelihood
    (negative, finite) and a NaN perplexity with the reason logged (``perplexity`` is asked only
    of count models)."""
    rng = np.random.default_rng(0)
    Y = (rng.standard_normal((25, 2)) @ rng.standard_normal((2, 6)) > 0).astype(float)
    mask = rng.random(Y.shape) < 0.2
    spec = {
        "class": "RFLVM",
        "params": {"likelihood": "bernoulli", "n_latent": 2, "n_random_features": 6, "n_iter": 6},
    }
    with caplog.at_level("INFO", logger="omicsbayes"):
        row, latent = fit_heldout(Y, mask, spec, random_state=0)
    assert row["n_heldout"] == mask.sum()
    assert np.isfinite(row["log_likelihood"]) and row["log_likelihood"] < 0
    assert row["log_likelihood_per_entry"] == row["log_likelihood"] / mask.sum()
    assert np.isnan(row["perplexity"])
    assert "perplexity skipped: RFLVM is not a model of counts (likelihood 'bernoulli')" in (
        caplog.text
    )
    assert latent.shape[0] == 25 and np.isfinite(latent).all()
