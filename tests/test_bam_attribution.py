"""benchmarks/bam_attribution: the scorers and checks of run b_bam_attr (not its numbers)."""

import importlib
from itertools import product
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import optimize

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def attribution(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    return importlib.import_module("benchmarks.bam_attribution")


@pytest.fixture
def fidelity(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    return importlib.import_module("benchmarks.fidelity")


def _brute_loss(beta, A, y, ranking):
    """Minus the log posterior of ranking_map, one ranking variable at a time."""
    s = beta[0] + A @ beta[1:]
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    total = 0.5 * beta @ beta
    if ranking == "pairwise":
        for n, o in product(pos, neg):
            total -= s[n] - np.log(np.exp(s[n]) + np.exp(s[o]))
    else:
        for n in pos:
            total -= s[n] - np.log(np.exp(s[n]) + np.exp(s[neg]).sum())
    return total


@pytest.mark.parametrize("ranking", ["pairwise", "listwise"])
def test_ranking_map_is_the_posterior_mode(attribution, ranking):
    rng = np.random.default_rng(0)
    A = rng.normal(size=(14, 2))
    y = (A[:, 0] + rng.normal(size=14) > 0.8).astype(int)
    beta = attribution.ranking_map(A, y, ranking)
    options = {"xatol": 1e-9, "fatol": 1e-12, "maxiter": 20000}
    brute = optimize.minimize(
        _brute_loss, np.zeros(3), args=(A, y, ranking), method="Nelder-Mead", options=options
    )
    assert np.allclose(beta, brute.x, atol=1e-4)
    assert _brute_loss(beta, A, y, ranking) <= brute.fun + 1e-9
    assert beta[1] > 0  # the informative feature ranks the positives up
    if ranking == "listwise":
        with pytest.raises(ValueError, match="label the smaller class 1"):
            attribution.ranking_map(A, 1 - y, ranking)


def test_linearly_separable(attribution):
    rng = np.random.default_rng(1)
    A = rng.normal(size=(30, 2))
    assert attribution.linearly_separable(A, (A[:, 0] - A[:, 1] > 0.2).astype(int))
    xor = np.array([[0, 0], [1, 1], [0, 1], [1, 0]], dtype=float)
    assert not attribution.linearly_separable(xor, np.array([0, 0, 1, 1]))


def test_planted_misranking_puts_a_tenth_of_the_positives_far_away(attribution):
    X, y = attribution.planted_misranking(np.random.default_rng(2), **attribution.PLANTED)
    assert X.shape == (200, 2) and y.sum() == 40
    far = X[:, 0] < -4
    assert far.sum() == 4 and np.all(y[far] == 1)
    # on the first feature alone the far positives rank below almost every negative
    assert np.mean(X[far, 0][:, None] > X[y == 0, 0][None, :]) < 0.01


def test_real_rows_use_the_claims_splits_and_fit_seeds(attribution, fidelity):
    """Held-out AUROCs of run b_bam_attr equal claim b_bam's (default rows) on the same cohort."""
    rng = np.random.default_rng(3)
    labels = pd.Series(np.where(rng.random(48) < 0.3, "case", "control"))
    X = rng.normal(size=(48, 12)) + 0.8 * (labels == "case").to_numpy()[:, None]
    models = fidelity.MODELS["b_bam"]["default"]
    claim = fidelity._classification(
        "b_bam", "toy", X, labels, {"kind": "binary", "positive": ["case"]},
        "repeated_subsampling", models,
        [{"name": "empirical_kernel_map", "kernel": "gaussian"}], 7, n_splits=2,
    )  # fmt: skip
    rows = pd.DataFrame(
        attribution.real_rows(
            {"toy": (X, labels, ["case"])}, lambda c: "gaussian", models, {"n_splits": 2}, 7
        ),
        columns=["cohort", "model", "metric", "split", "value"],
    )
    ours = rows[rows["metric"] == "auroc"].set_index(["model", "split"])["value"]
    theirs = claim.set_index(["model", "split"])["value"]
    assert np.allclose(ours.loc[theirs.index], theirs)
    assert set(rows["model"]) == {*models, attribution.LISTWISE_MAP, attribution.PAIRWISE_MAP,
                                  attribution.SEPARATOR}  # fmt: skip


def test_run_summarises_into_contrasts(fidelity, attribution, monkeypatch):
    """``--only b_bam_attr --cohorts planted``: the planted part alone (here on 60 samples),
    summarised with its contrasts against BPROBIT (training metrics described, not judged)."""
    monkeypatch.setitem(attribution.PLANTED, "n", 60)
    monkeypatch.setattr(fidelity, "_bam_cohorts", lambda: {"GSE7390 ER": None})
    settings = {**fidelity.SETTINGS["quick"], "cohorts": ["planted"]}
    per_split = fidelity.claim_b_attr(settings, seed=4)
    assert list(per_split.columns) == fidelity.SPLIT_COLUMNS
    assert per_split["cohort"].str.startswith("planted").all()
    assert per_split["split"].nunique() == settings["n_planted"]
    table = fidelity.summarize(per_split)
    paired = table[table["rival"].notna()]
    assert set(paired["model"]) == {"BAM_L", "BAM_P", "listwise MAP, no link",
                                    "pairwise MAP, no link"}  # fmt: skip
    fixed = {"BAM_L, precision fixed at 1", "BAM_P, precision fixed at 1"}
    assert set(paired["rival"]) == {"BPROBIT", *fixed}
    assert set(paired.loc[paired["metric"] == "train_auroc", "verdict"]) <= {
        "higher",
        "lower",
        "tied",
    }


def test_fixed_precision_holds_the_precisions_at_one(attribution, fidelity):
    from omicsbayes.protocols._common import make_estimator

    specs = attribution.fixed_precision(fidelity.MODELS["b_bam"]["default"])
    assert set(specs) == {"BAM_L, precision fixed at 1", "BAM_P, precision fixed at 1"}
    assert specs["BAM_P, precision fixed at 1"]["params"]["ranking"] == "pairwise"
    rng = np.random.default_rng(5)
    X = rng.normal(size=(30, 40))
    y = (X[:, 0] > 0.5).astype(int)
    model = make_estimator(specs["BAM_P, precision fixed at 1"], 0).fit(X, y)
    assert np.allclose(model.eta_shape_ * model.eta_scale_, 1.0, atol=1e-3)
    assert model.gamma_shape_ * model.gamma_scale_ == pytest.approx(1.0, abs=1e-3)
