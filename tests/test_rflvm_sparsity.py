"""benchmarks/rflvm_sparsity: the planted latent masks, the fitted mask's density and the rows
of run c_rflvm_sparsity on a small problem."""

import importlib
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def sparsity(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    return importlib.import_module("benchmarks.rflvm_sparsity")


def test_sparse_latent_matrix_masks_as_asked_and_is_seeded(sparsity):
    Y, Z = sparsity.sparse_latent_matrix("sparse latent", np.random.default_rng(0), (2000, 5))
    assert Y.shape == (2000, 5) and Z.shape == (2000, sparsity.SPARSITY_LATENT)
    assert abs(Z.mean() - sparsity.SPARSITY_ON) < 0.02
    np.testing.assert_allclose(Y.mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(Y.std(0), 1)
    again, _ = sparsity.sparse_latent_matrix("sparse latent", np.random.default_rng(0), (2000, 5))
    np.testing.assert_array_equal(Y, again)
    _, dense = sparsity.sparse_latent_matrix("dense latent", np.random.default_rng(0), (50, 5))
    assert dense.all()
    with pytest.raises(ValueError, match="kind: expected one of"):
        sparsity.sparse_latent_matrix("banded", np.random.default_rng(0))


def test_sparse_rows_without_active_dimensions_share_their_signal(sparsity, monkeypatch):
    monkeypatch.setattr(sparsity, "SPARSITY_NOISE", 0.0)
    Y, Z = sparsity.sparse_latent_matrix("sparse latent", np.random.default_rng(1), (300, 6))
    off = ~Z.any(axis=1)
    assert off.sum() >= 2
    np.testing.assert_allclose(Y[off], np.broadcast_to(Y[off][0], Y[off].shape))


def test_mask_density_counts_active_entries_per_draw(sparsity):
    draws = [
        {"XZ": np.array([[0.3, 0.0], [-1.2, 0.5]])},  # 3 of 4 active
        {"XZ": np.array([[0.1, 0.2, -0.4], [0.9, 0.0, 0.0]])},  # 4 of 6
    ]
    assert sparsity.mask_density(draws) == pytest.approx((0.75 + 4 / 6) / 2)
    assert sparsity.mask_density([{"XZ": np.ones((3, 2))}]) == 1.0
    with pytest.raises(ValueError, match="draws: expected at least one"):
        sparsity.mask_density([])


def _short_specs_and_trials(sparsity):
    """Every pair's specs with a few sweeps (the paper's pair 4 sweeps from 2 dimensions, the
    others from 3 dimensions or for 6 sweeps or both) and one real trial."""
    specs = {}
    for pair, (start, n_iter) in {sparsity.PAPER_PAIR: (2, 4), **sparsity.CHAINS}.items():
        start, n_iter = (3 if start > 2 else 2), (6 if n_iter > 100 else 4)
        short = {"n_iter": n_iter, "burn_in": n_iter // 2, "n_random_features": 10}
        short["verbose"] = False
        ibp, dense = pair
        specs[ibp] = {"class": "RFLVM", "params": {"sparse": True, "n_latent": start, **short}}
        specs[dense] = {"class": "RFLVM", "params": {"sparse": False, **short}}
    Y = np.random.default_rng(2).standard_normal((30, 5))
    mask = np.zeros(Y.shape, bool)
    mask[::4, 1] = True
    return specs, [("real", Y, 0, mask, 5)]


def test_sparsity_rows_fit_both_rflvms_and_the_real_trials(sparsity, monkeypatch):
    monkeypatch.setattr(sparsity, "SPARSITY_SHAPE", (40, 6))
    specs, trials = _short_specs_and_trials(sparsity)
    settings = {"n_planted": 1, "cohorts": None}
    rows = sparsity.sparsity_rows(settings, 3, specs, trials)
    again = sparsity.sparsity_rows(settings, 3, specs, trials)
    assert rows == again
    value = {(cohort, model, metric): v for _, _, cohort, model, metric, _, v in rows}
    for kind in sparsity.SPARSITY_KINDS:
        cohort = f"planted {kind}, 40 x 6"
        assert value[(cohort, "RFLVM", "n_active")] == value[(cohort, "IBP RFLVM", "n_active")]
        assert value[(cohort, "RFLVM", "z_density")] == 1.0
        assert 0 < value[(cohort, "IBP RFLVM", "z_density")] <= 1
        assert np.isfinite(value[(cohort, "IBP RFLVM", "heldout_loglik_per_entry")])
        for ibp, dense in sparsity.CHAINS:
            assert value[(cohort, dense, "n_active")] == value[(cohort, ibp, "n_active")]
            assert value[(cohort, dense, "z_density")] == 1.0
    assert value[("planted dense latent, 40 x 6", "planted", "z_density")] == 1.0
    assert value[("planted sparse latent, 40 x 6", "planted", "z_density")] < 1.0
    assert {m for c, _, m in value if c == "real"} == {
        "heldout_loglik_per_entry",
        "n_active",
        "z_density",
    }
    only_dense = sparsity.sparsity_rows({**settings, "cohorts": ["dense"]}, 3, specs, [])
    assert {row[2] for row in only_dense} == {"planted dense latent, 40 x 6"}


def test_models_pick_the_pairs_and_their_rows_are_a_full_runs(sparsity, monkeypatch):
    """``--models`` names IBP models: their pairs are fitted alone, with the rows a full run
    gives them, the real trials' refits of their IBP models included."""
    monkeypatch.setattr(sparsity, "SPARSITY_SHAPE", (30, 5))
    specs, trials = _short_specs_and_trials(sparsity)
    settings = {"n_planted": 1, "cohorts": ["sparse"]}
    full = sparsity.sparsity_rows(settings, 3, specs, trials)
    picked = (*sparsity.START_PAIR, *sparsity.LONG_PAIR)
    ibps = [sparsity.LONG_PAIR[0], sparsity.START_PAIR[0]]
    some = sparsity.sparsity_rows({**settings, "models": ibps}, 3, specs, trials)
    assert {row[3] for row in some} == set(picked)
    assert {row[3] for row in some if row[2] == "real"} == set(ibps)
    assert some == [row for row in full if row[3] in picked]
    with pytest.raises(SystemExit, match=r"--models \['RFLVM'\]"):
        sparsity.sparsity_rows({**settings, "models": ["RFLVM"]}, 3, specs, trials)
