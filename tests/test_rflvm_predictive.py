"""The held-out predictive diagnostics (benchmarks/rflvm_heldout) and the Wisconsin
held-out experiment's log transform."""

import importlib
from pathlib import Path

import numpy as np
import pytest
import yaml

from omicsbayes.io import load_demo
from omicsbayes.models import RFLVM, IBPFactorModel
from omicsbayes.preprocess.transforms import build_pipeline

REPO = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
LOG_STEPS = CONFIG["transforms"]["log_zscore_positive"]["steps"]


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    return importlib.import_module("benchmarks.rflvm_heldout")


def _positive(seed, n=40, p=5):
    rng = np.random.default_rng(seed)
    raw = rng.lognormal(0.0, 1.0, size=(n, p)) * np.array([0.01, 0.1, 1.0, 10.0, 100.0])
    raw[:3, 0] = 0.0  # zeros, as in Wisconsin's concavity columns
    return raw


def test_log_jacobian_matches_finite_differences(bench):
    raw = _positive(0)
    pipe = build_pipeline(LOG_STEPS).fit(raw)
    rows, cols = np.nonzero(np.ones(raw.shape, bool))
    sd = raw.std(axis=0)
    fd = np.empty(rows.size)
    for k, (i, j) in enumerate(zip(rows, cols)):
        h = 1e-6 * sd[j]  # a step of 1e-6 on the z-scored raw scale (x - h + pseudocount > 0)
        up, down = raw.copy(), raw.copy()
        up[i, j] += h
        down[i, j] -= h
        fd[k] = (pipe.transform(up)[i, j] - pipe.transform(down)[i, j]) / 2e-6
    got = bench._log_jacobian(pipe, raw, rows, cols)
    np.testing.assert_allclose(got, np.log(fd), atol=1e-4)
    zscore_only = build_pipeline(["zscore"]).fit(raw)
    np.testing.assert_allclose(bench._log_jacobian(zscore_only, raw, rows, cols), 0.0, atol=1e-12)


@pytest.mark.parametrize(
    "spec",
    [
        {"class": "RFLVM", "params": {"n_random_features": 4, "n_latent": 2, "n_iter": 4}},
        {"class": "IBPFactorModel", "params": {"n_iter": 6, "burn_in": 3}},
    ],
)
def test_entry_predictive_matches_the_estimators_log_likelihood(bench, spec):
    raw = _positive(1)
    mask = np.random.default_rng(2).random(raw.shape) < 0.2
    row = bench.run_one(raw, ["zscore"], mask, spec, seed=5)
    Y = build_pipeline(["zscore"]).fit_transform(raw)
    cls = {"RFLVM": RFLVM, "IBPFactorModel": IBPFactorModel}[spec["class"]]
    est = cls(**spec["params"], random_state=5).fit(np.where(mask, np.nan, Y))
    assert row["loglik"] == pytest.approx(est.log_likelihood(Y, mask) / mask.sum(), rel=1e-10)
    assert row["loglik_zscale"] == pytest.approx(row["loglik"], rel=1e-10)
    logged = bench.run_one(raw, LOG_STEPS, mask, spec, seed=5)
    assert logged["loglik_zscale"] != pytest.approx(logged["loglik"])  # the Jacobian is applied


def test_breast_cancer_heldout_models_logs_of_its_skewed_features():
    experiment = CONFIG["experiments"]["breast_cancer_heldout"]
    assert experiment["transforms"] == ["log_zscore_positive"]
    X = np.asarray(load_demo("breast_cancer_wisconsin").X, dtype=float)
    U = build_pipeline(LOG_STEPS).fit_transform(X)
    Z = build_pipeline(["zscore"]).fit_transform(X)
    assert np.isfinite(U).all()
    # the z-scores reach 12 sds (right tails), the logs stay within 5
    assert np.abs(Z).max() > 10 and np.abs(U).max() < 5
