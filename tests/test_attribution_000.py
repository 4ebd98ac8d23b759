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


def test_far_side_flips_relabel_the_requested_fraction_deepest_on_the_wrong_side(modules):
    _, attr = modules
    rng = np.random.default_rng(4)
    y = np.repeat([1, 0], [23, 37])
    rng.shuffle(y)
    decision = rng.normal(size=60) + 2.0 * y
    flipped = attr.far_side_flips(decision, y, 0.1)
    changed = np.flatnonzero(flipped != y)
    assert len(changed) == 6 and set(np.unique(flipped)) == {0, 1}
    up, down = changed[y[changed] == 1], changed[y[changed] == 0]
    assert len(up) == 3 and len(down) == 3 and flipped.sum() == y.sum()
    # the positives with the largest decision, the negatives with the smallest
    assert decision[up].min() > decision[(y == 1) & (flipped == 1)].max()
    assert decision[down].max() < decision[(y == 0) & (flipped == 0)].min()
    odd = attr.far_side_flips(decision, y, 0.12)  # 7 flips: the odd one to the positives
    assert (odd != y).sum() == 7 and ((odd != y) & (y == 1)).sum() == 4
    assert np.array_equal(attr.far_side_flips(decision, y, 0.0), y)
    with pytest.raises(ValueError, match="12 far-side flips need 6 positives"):
        attr.far_side_flips(decision, np.r_[np.ones(2, int), np.zeros(58, int)], 0.2)


def _toy_or_l(modules, monkeypatch, cohorts):
    """Paper 000's tasks replaced by ``cohorts`` copies of one tiny cohort, and the OR-L pair
    short (in run a_rank and among the planted models): the tasks and the short specs."""
    fidelity, attr = modules
    rng = np.random.default_rng(0)
    labels = pd.Series(np.repeat(["pos", "mid", "neg"], 10))
    logs = rng.normal(size=(30, 5)) + 1.5 * (labels == "pos").to_numpy()[:, None]
    tasks = {cohort: (logs, np.exp2, labels, ["pos"]) for cohort in cohorts}
    monkeypatch.setattr(fidelity, "_paper000_tasks", lambda: tasks)
    quick = {"n_factors": 2, "max_iter": 12, "verbose": False}
    fast = {name: {**spec, "params": {**spec.get("params", {}), **quick}}
            for name, spec in attr.BSVM_PLANTED.items() if name.startswith("OR-L")}  # fmt: skip
    monkeypatch.setattr(attr, "BSVM_PLANTED", {**attr.BSVM_PLANTED, **fast})
    monkeypatch.setitem(fidelity.MODELS, "a_rank", {**fidelity.MODELS["a_rank"], **fast})
    return tasks, fast


def _assert_run_a_ranks_fits(modules, aurocs, settings):
    """``aurocs`` (indexed by model and split) of the OR-L pair on cohort "toy" are run a_rank's."""
    fidelity, attr = modules
    table = fidelity.claim_a(settings, 5, "a_rank")
    theirs = table[(table["cohort"] == "toy") & table["model"].isin(attr.OVERLAP_PAIRS[0])]
    theirs = theirs.set_index(["model", "split"])["value"]
    pd.testing.assert_series_equal(
        aurocs.loc[list(attr.OVERLAP_PAIRS[0])].sort_index(), theirs.sort_index(), check_names=False
    )


def test_grade_attr_refits_run_a_rank_and_flips_training_labels_only(modules, monkeypatch):
    """On a tiny cohort: the unflipped OR-L fits are run a_rank's (same held-out AUROC split by
    split), the flipped fits see far-side flips of the training labels, the held-out AUROC is
    against the labels as given, and the planted draws are one split each."""
    fidelity, attr = modules
    tasks, _ = _toy_or_l(modules, monkeypatch, ["toy", "other"])
    monkeypatch.setattr(attr, "REAL_FLIP_COHORTS", ("toy",))
    monkeypatch.setattr(attr, "PLANTED", {"n_samples": 40, "n_genes": 8, "n_factors": 2})
    settings = {"n_splits": 2, "n_planted": 3, "cohorts": None}
    rows = fidelity.claim_a_bsvm_grade_attr(settings, 5)
    assert list(rows.columns) == fidelity.SPLIT_COLUMNS and set(rows["claim"]) == {
        "a_bsvm_grade_attr"
    }
    assert set(rows["cohort"]) == {attr.FLIP_DRAWS, "toy"}
    assert set(rows["model"]) == set(fidelity.MODELS["a_bsvm_grade_attr"])
    planted = rows[rows["cohort"] == attr.FLIP_DRAWS]
    assert sorted(planted["split"].unique()) == [0, 1, 2]
    assert set(planted["model"]) == {name for pair in attr.OVERLAP_PAIRS for name in pair}
    real = rows[rows["cohort"] == "toy"]
    assert set(real["metric"]) == {
        "auroc", "train_error", "far_side", "wrong_side_depth", "wrong_side_tail",
        "train_auroc_gap",
    }  # fmt: skip
    ours = real[real["metric"] == "auroc"].set_index(["model", "split"])["value"]
    _assert_run_a_ranks_fits(modules, ours, settings)
    # the flipped fits: the same splits, the training labels flipped on the far side of the
    # pair's rule, scored against the test labels as given
    _, X, y, _, train, test, state = next(attr._a_rank_trials(tasks, settings, 5))
    specs = {name: fidelity.MODELS["a_rank"][name] for name in attr.OVERLAP_PAIRS[0]}
    fits = [attr._estimator(spec, state).fit(X[train], y[train]) for spec in specs.values()]
    rule = np.mean([attr.stats.zscore(m.decision_function(X[train])) for m in fits], axis=0)
    y_flipped = attr.far_side_flips(rule, y[train], attr.FLIP_FRACTION)
    assert (y_flipped != y[train]).sum() == round(0.1 * len(train))
    name = "OR-L-BSVM" + attr.FLIPPED + "/intensity"
    model = attr._estimator(specs["OR-L-BSVM/intensity"], state).fit(X[train], y_flipped)
    expected = attr.auroc(y[test], model.decision_function(X[test]))
    assert ours.loc[(name, 0)] == expected
    paired = fidelity.summarize(rows)
    assert set(paired.loc[paired["rival"].notna(), "claim"]) == {"a_bsvm"}


def test_grade_attr_lists_run_a_ranks_or_l_pair(modules):
    fidelity, attr = modules
    models = fidelity.MODELS["a_bsvm_grade_attr"]
    for name in attr.OVERLAP_PAIRS[0]:
        assert models[name] == fidelity.MODELS["a_rank"][name]
        assert models[name.replace("/", attr.FLIPPED + "/")] == fidelity.MODELS["a_rank"][name]


def test_link_attr_refits_run_a_rank_and_reads_its_scores_out_by_each_link(modules, monkeypatch):
    """On a tiny cohort: the OR-L fits are run a_rank's (same held-out AUROC split by split),
    and each readout is its link fitted alone on the fit's label-free training scores, scored on
    the label-free test scores; every contrast pairs under claim a_bsvm."""
    fidelity, attr = modules
    tasks, fast = _toy_or_l(modules, monkeypatch, ["toy"])
    settings = {"n_splits": 2, "cohorts": None}
    rows = fidelity.claim_a_bsvm_link_attr(settings, 5)
    assert list(rows.columns) == fidelity.SPLIT_COLUMNS
    assert set(rows["claim"]) == {"a_bsvm_link_attr"} and set(rows["metric"]) == {"auroc"}
    assert set(rows["model"]) == set(fidelity.MODELS["a_bsvm_link_attr"]) and len(rows) == 2 * 6
    ours = rows.set_index(["model", "split"])["value"]
    _assert_run_a_ranks_fits(modules, ours, settings)
    _, X, y, split, train, test, state = list(attr._a_rank_trials(tasks, settings, 5))[1]
    model = attr._estimator(fast["OR-L-Probit/intensity"], state).fit(X[train], y[train])
    probit = attr._estimator(attr.BSVM_PLANTED["probit/z"], state)
    probit.fit(model.transform(X[train]), y[train])
    expected = attr.auroc(y[test], probit.decision_function(model.transform(X[test])))
    assert ours.loc[(attr.readout_name("OR-L-Probit/intensity", "probit"), split)] == expected
    paired = fidelity.summarize(rows)
    contrasts = paired[paired["rival"].notna()]
    assert set(contrasts["claim"]) == {"a_bsvm"} and len(contrasts) == len(attr.LINK_ATTR_PAIRS)
