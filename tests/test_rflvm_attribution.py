"""benchmarks/rflvm_attribution and benchmarks/gplvm_peer: planted matrices, the
nonlinear-structure measure and the GPLVM's held-out score on small problems."""

import importlib
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def attribution(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    return importlib.import_module("benchmarks.rflvm_attribution")


@pytest.mark.parametrize("kind", ["RBF GP map", "linear map"])
def test_planted_matrix_is_z_scored_and_seeded(attribution, kind):
    Y = attribution.planted_matrix(kind, 0.1, np.random.default_rng(0), shape=(50, 7))
    assert Y.shape == (50, 7)
    np.testing.assert_allclose(Y.mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(Y.std(0), 1)
    again = attribution.planted_matrix(kind, 0.1, np.random.default_rng(0), shape=(50, 7))
    np.testing.assert_array_equal(Y, again)
    with pytest.raises(ValueError, match="kind: expected one of"):
        attribution.planted_matrix("quadratic", 0.1, np.random.default_rng(0))


def test_linear_map_has_rank_of_the_latent_dimensions(attribution):
    """Without noise the linear map's matrix has rank n_latent; the RBF map's does not."""
    rng = np.random.default_rng(1)
    linear = attribution.planted_matrix("linear map", 0.0, rng, shape=(60, 10))
    curved = attribution.planted_matrix("RBF GP map", 0.0, rng, shape=(60, 10))
    assert np.linalg.matrix_rank(linear, tol=1e-8) == attribution.PLANTED_LATENT
    assert np.linalg.matrix_rank(curved, tol=1e-8) > 5


def test_measure_finds_the_nonlinear_map_and_not_the_linear_one(attribution):
    """The GP on the components gains R^2 over least squares on the RBF map, none on the
    linear one (both low noise)."""
    gains = {}
    for kind in attribution.PLANTED_MAPS:
        Y = attribution.planted_matrix(kind, 0.05, np.random.default_rng(2), shape=(60, 20))
        r2 = attribution.pc_regression_r2(Y, n_folds=3)
        assert list(r2.columns) == ["fold", "linear", "gp"] and len(r2) == 3
        gains[kind] = (r2["gp"] - r2["linear"]).mean()
    assert gains["RBF GP map"] > 0.1
    assert abs(gains["linear map"]) < 0.05


def test_gplvm_scores_held_out_entries_of_a_smooth_map_above_the_standard_normal(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    peer = importlib.import_module("benchmarks.gplvm_peer")
    rng = np.random.default_rng(3)
    t = rng.uniform(-2, 2, (40, 1))
    Y = np.hstack([np.sin(t), np.cos(t), t, np.sin(2 * t), t**2 / 2])
    Y = Y + 0.05 * rng.standard_normal(Y.shape)
    Y = (Y - Y.mean(0)) / Y.std(0)
    mask = rng.random(Y.shape) < 0.15
    score = peer.gplvm_heldout_loglik(Y, mask, 1, n_inducing=10, max_iters=40, random_state=0)
    standard_normal = -0.5 * np.sum(np.log(2 * np.pi) + Y[mask] ** 2)
    assert score > standard_normal + 0.5 * mask.sum()
    again = peer.gplvm_heldout_loglik(Y, mask, 1, n_inducing=10, max_iters=40, random_state=0)
    assert again == score
    with pytest.raises(ValueError, match="mask: expected a boolean matrix"):
        peer.gplvm_heldout_loglik(Y, np.zeros_like(mask), 1)
