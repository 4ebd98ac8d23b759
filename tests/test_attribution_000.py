"""benchmarks/attribution_000: the planted cohorts hold what they claim, and the attribution runs
refit exactly the fits of the fidelity table's runs a_rank and a_rank_paper."""

import importlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def modules(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    return (
        importlib.import_module("benchmarks.fidelity"),
        importlib.import_module("benchmarks.attribution_000"),
    )


def test_planted_flips_relabel_the_far_side_only(modules):
    _, attr = modules
    x, z, y_true, y_seen = attr.planted_flips(200, 30, 4, 0.1, np.random.default_rng(0))
    assert x.shape == (200, 30) and z.shape == (200, 4)
    assert np.array_equal(y_true, (z[:, 0] > 0).astype(int))
    flipped = np.flatnonzero(y_true != y_seen)
    assert len(flipped) == 20 and (y_true[flipped] == 1).all() and (y_seen[flipped] == 0).all()
    tilted = z[:, 0] + z[:, 1]
    assert tilted[flipped].min() > np.delete(tilted, flipped).max()  # the farthest ones
    residual = x - z @ np.linalg.lstsq(z, x, rcond=None)[0]
    assert 0.8 < residual.std() < 1.2  # the genes are the scores' loadings plus unit noise


def test_planted_subtypes_defeat_every_linear_rule_but_not_two_local_ones(modules):
    _, attr = modules
    x, z, y, y_seen = attr.planted_subtypes(400, 30, 4, 3.0, np.random.default_rng(1))
    assert np.array_equal(y, y_seen) and 0.4 < y.mean() < 0.6
    subtype = z[:, 0] > 0
    assert np.array_equal(y[subtype], (z[subtype, 1] > 0).astype(int))
    assert np.array_equal(y[~subtype], (z[~subtype, 1] < 0).astype(int))
    # the best least-squares linear rule on z (with intercept) is near chance
    design = np.column_stack([z, np.ones(len(z))])
    fitted = design @ np.linalg.lstsq(design, 2.0 * y - 1.0, rcond=None)[0]
    assert np.mean((fitted > 0) == (y == 1)) < 0.65


def test_attribution_refits_the_rank_runs_fits_and_writes_every_metric(modules, monkeypatch):
    """On a tiny cohort: the diagnostic fits are run a_rank's and a_rank_paper's (same held-out
    AUROC split by split), and each run's rows hold the metrics its docstring names."""
    fidelity, attr = modules
    rng = np.random.default_rng(0)
    labels = pd.Series(np.repeat(["pos", "mid", "neg"], 10))
    logs = rng.normal(size=(30, 5)) + 1.5 * (labels == "pos").to_numpy()[:, None]
    tasks = {"toy": (logs, np.exp2, labels, ["pos"])}
    monkeypatch.setattr(fidelity, "_paper000_tasks", lambda: tasks)
    quick = {"n_factors": 2, "max_iter": 12, "verbose": False}
    for run in ("a_rank", "a_rank_paper"):
        specs = {
            name: {**spec, "params": {**spec.get("params", {}), **quick}}
            for name, spec in fidelity.MODELS[run].items()
            if spec["class"] == "RankFactorClassifier"
        }
        monkeypatch.setitem(fidelity.MODELS, run, specs)
    settings = {"n_splits": 2, "cohorts": None}
    table = fidelity.claim_a(settings, 5, "a_rank")
    paper = fidelity.claim_a_paper(settings, 5)
    for run, rows, steps in (("a_rank", table, []), ("a_rank_paper", paper, ["zf"])):
        splits, y, tags = attr.rank_run_splits(run, labels, ["pos"], 2, 5, "toy")
        names = ["G-L-BSVM/log", "OR-L-Probit/intensity"]
        specs = {name: fidelity.MODELS[run][name] for name in names}
        mine = attr._diagnose(
            run, "x", "toy", {"log": logs, "intensity": np.exp2(logs)}, y, splits, specs, [],
            tags, y_true=y, steps=[fidelity.PAPER000_ZERO_FILTER] if steps else [],
        )  # fmt: skip
        mine = mine[mine["metric"] == "auroc"].set_index(["model", "split"])["value"]
        theirs = rows[rows["model"].isin(names)].set_index(["model", "split"])["value"]
        pd.testing.assert_series_equal(mine.sort_index(), theirs.sort_index(), check_names=False)

    monkeypatch.setattr(attr, "PLANTED", {"n_samples": 40, "n_genes": 8, "n_factors": 2})
    fast = {name: {**spec, "params": {**spec.get("params", {}), **quick}} for name, spec in
            attr.NONLINEAR_PLANTED.items()}  # fmt: skip
    monkeypatch.setattr(attr, "NONLINEAR_PLANTED", fast)
    rows = fidelity.claim_a_nonlinear_attr(settings, 5)
    assert list(rows.columns) == fidelity.SPLIT_COLUMNS and rows["value"].notna().all()
    assert set(rows["protocol"]) == {"default", "paper"}
    planted = rows[rows["cohort"].str.startswith("planted")]
    assert set(planted["metric"]) == {
        "auroc", "train_error", "far_side", "train_auroc_gap", "n_active", "top_weight",
        "heldout_spearman",
    }  # fmt: skip
    mixture = rows[rows["metric"].isin(["n_active", "top_weight"])]
    assert mixture["model"].str.startswith("R-NL-BSVM").all()
    assert rows.loc[rows["metric"] == "top_weight", "value"].between(0.2, 1.0).all()
    real = rows[rows["cohort"] == "toy"]
    assert "auroc" not in set(real["metric"])  # the table's a_rank rows hold it
    assert set(real.loc[real["protocol"] == "paper", "model"]) == {
        "R-NL-BSVM project VB/intensity",
        "R-L-BSVM project VB/intensity",
        "R-NL-BSVM/intensity",
    }
    summary = fidelity.summarize(rows)
    paired = summary[summary["rival"].notna()]
    assert set(paired["claim"]) == {"a_nonlinear"}
    assert set(paired.loc[paired["metric"] == "auroc", "verdict"]) <= {"ahead", "behind", "tied"}
    assert set(paired.loc[paired["metric"] != "auroc", "verdict"]) <= {"higher", "lower", "tied"}


def test_nonlinear_attr_lists_the_project_vb_pair_it_refits(modules):
    fidelity, _ = modules
    for name in ("R-NL-BSVM project VB/intensity", "R-L-BSVM project VB/intensity"):
        assert fidelity.MODELS["a_nonlinear_attr"][name] == fidelity.MODELS["a_rank_paper"][name]


def test_planted_overlap_puts_the_wrong_side_share_beyond_the_bayes_rule(modules):
    _, attr = modules
    x, z, y, y_seen = attr.planted_overlap(4000, 10, 3, 0.15, np.random.default_rng(2))
    assert x.shape == (4000, 10) and np.array_equal(y, y_seen) and y.mean() == 0.5
    wrong = (z[:, 0] > 0) != (y == 1)
    assert abs(wrong[y == 1].mean() - 0.15) < 0.03 and abs(wrong[y == 0].mean() - 0.15) < 0.03
    depth = np.abs(z[wrong, 0])  # overlap: the wrong side lies near the boundary
    assert np.median(depth) < 0.5 < np.median(np.abs(z[~wrong, 0]))


def test_overlap_run_reuses_the_planted_flips_and_measures_the_wrong_side_depth(
    modules, monkeypatch
):
    fidelity, attr = modules
    rng = np.random.default_rng(0)
    labels = pd.Series(np.repeat(["pos", "neg"], 12))
    logs = rng.normal(size=(24, 5)) + 1.5 * (labels == "pos").to_numpy()[:, None]
    monkeypatch.setattr(
        fidelity, "_paper000_tasks", lambda: {"toy": (logs, np.exp2, labels, ["pos"])}
    )
    quick = {"n_factors": 2, "max_iter": 10, "verbose": False}
    fast = {name: {**spec, "params": {**spec.get("params", {}), **quick}}
            for name, spec in attr.BSVM_PLANTED.items() if name.startswith("OR-L")}  # fmt: skip
    monkeypatch.setattr(attr, "BSVM_PLANTED", {**attr.BSVM_PLANTED, **fast})
    monkeypatch.setitem(fidelity.MODELS, "a_rank", {**fidelity.MODELS["a_rank"], **fast})
    monkeypatch.setattr(attr, "PLANTED", {"n_samples": 40, "n_genes": 8, "n_factors": 2})
    settings = {"n_splits": 2, "cohorts": None}
    rows = fidelity.claim_a_bsvm_overlap(settings, 3)
    assert list(rows.columns) == fidelity.SPLIT_COLUMNS and set(rows["protocol"]) == {"default"}
    assert set(rows["cohort"]) == {
        "planted: 10% far-side flips", "planted: class overlap, 15% beyond the Bayes rule", "toy",
    }  # fmt: skip
    depth = rows[rows["metric"] == "wrong_side_depth"]
    assert depth["value"].dropna().ge(0).all() and len(depth) == 2 * 4 * 2 + 2 * 2
    tail = rows[rows["metric"] == "wrong_side_tail"]
    assert tail["value"].dropna().ge(0).all() and len(tail) == len(depth)
    assert set(rows.loc[rows["cohort"] == "toy", "model"]) == set(attr.OVERLAP_PAIRS[0])
    # the flips cohort is run a_bsvm_attr's: its draw, splits and fit seeds
    flips = {"planted: 10% far-side flips": lambda g: attr.planted_flips(**attr.PLANTED,
             flip_fraction=0.1, rng=g)}  # fmt: skip
    specs = {name: attr.BSVM_PLANTED[name] for name in attr.OVERLAP_PAIRS[0]}
    theirs = attr._planted("a_bsvm_attr", flips, specs, [], settings, 3)[0]
    mine = rows[rows["cohort"].isin(flips) & rows["model"].isin(specs)]
    mine = mine[mine["metric"].isin(["auroc", "train_error", "far_side"])]
    key = ["model", "metric", "split"]
    pd.testing.assert_series_equal(
        mine.set_index(key)["value"].sort_index(),
        theirs[theirs["metric"].isin(["auroc", "train_error", "far_side"])]
        .set_index(key)["value"]
        .sort_index(),
    )
    paired = fidelity.summarize(rows)
    assert set(paired.loc[paired["rival"].notna(), "claim"]) == {"a_bsvm"}


def test_wrong_side_metrics_measure_depth_in_margins_and_the_tail_against_the_right_side(modules):
    _, attr = modules

    class Fixed:  # a fitted model's label-free training decision, nothing else
        def decision_function(self, X):
            return np.array([2.0, 2.0, 2.0, -0.5, 3.0])

    y = np.array([1, 1, 1, 1, 0])
    metrics = attr._fit_metrics(Fixed(), None, y, depth=True)
    assert metrics["train_error"] == 0.4 and metrics["far_side"] == 0.2
    assert metrics["wrong_side_depth"] == 1.75  # median of 0.5 and 3
    assert np.isclose(metrics["wrong_side_tail"], (0.5 + 0.9 * 2.5) / 2.0)
    assert "wrong_side_depth" not in attr._fit_metrics(Fixed(), None, y)
