"""Tests of ``RankFactorClassifier(inference="vb_deterministic")``: paper 000's VB (supplement
section 8) with the printed max-margin form (w = a^T z) and the printed closed forms of the scale
variables from means, <1/lambda> = |<u>|^-1."""

import numpy as np
import pytest
from scipy import stats
from test_rank_factor import planted

from omicsbayes.models import RankFactorClassifier


def _decision(m):
    n = len(m.scores_)
    return np.hstack([m.scores_, np.ones((n, 1))]) @ np.r_[m.coef_[0], m.intercept_]


@pytest.fixture(scope="module")
def noisy():
    rng = np.random.default_rng(3)
    W, y, _, _, _ = planted(200, 60, 2, rng, noise=0.5)
    slopes = rng.uniform(0.1, 3, size=W.shape[1])  # a strictly increasing map per feature
    return W, y, np.sign(W) * np.abs(W) ** 1.5 * slopes + np.exp(W / (1 + np.abs(W).max(axis=0)))


def test_no_random_numbers_and_invariant_to_increasing_maps(noisy):
    """Two seeds give the same fit bit for bit (no Monte Carlo step), and a strictly increasing
    map of each feature leaves the fit and the predictions unchanged."""
    W, y, X = noisy
    fits = [
        RankFactorClassifier(
            inference="vb_deterministic", n_factors=2, max_iter=20, random_state=seed
        ).fit(data[:150], y[:150])
        for seed, data in ((0, W), (1, W), (0, X))
    ]
    for other in fits[1:]:
        assert np.array_equal(fits[0].scores_, other.scores_)
        assert np.array_equal(fits[0].coef_, other.coef_)
    assert np.allclose(fits[0].decision_function(W[150:]), fits[2].decision_function(X[150:]))


def test_printed_form_collapses_under_the_papers_vb(noisy):
    """The measured reason ``"vb"`` (Monte Carlo q(w) of the latent form) stays the default: on
    noisy data the paper's deterministic VB shrinks the scale of w = <a>^T <z> towards zero
    (here sd 0.17, 0.047, 1e-5 after 100, 200, 400 iterations against 1.1 for "vb"; on GSE7390
    ER 3e-5 after 50, docs/models.md)."""
    W, y, _ = noisy
    spread = {
        inference: np.std(m.scores_ @ m.loadings_.T)
        for inference in ("vb", "vb_deterministic")
        for m in [
            RankFactorClassifier(
                inference=inference, n_factors=2, max_iter=400, tol=0, random_state=0
            ).fit(W, y)
        ]
    }
    assert spread["vb_deterministic"] < 1e-3 * spread["vb"]


def test_plugin_scale_update_departs_from_gibbs_where_second_moments_agree():
    """The printed <1/lambda^c> = |<u>|^-1 is the update run (not the mean-field E[u^2]^(-1/2) of
    ``"vb"``): on the problem of the "vb" Gibbs test in test_rank_factor.py (G-L-BSVM, 100
    samples, 150 features) "vb" is within 0.3 posterior sd of the Gibbs posterior mean of the
    training decision function on average (measured 0.20), "vb_deterministic" about one sd off
    (measured 1.00; its decisions pinned at the margin), with the same ordering (r > 0.99)."""
    rng = np.random.default_rng(9)
    W, _, _, Z, beta = planted(100, 150, 2, rng)
    y = (rng.random(100) < stats.norm.cdf(Z @ beta)).astype(int)
    gibbs = RankFactorClassifier.from_variant(
        "G-L-BSVM",
        n_factors=2,
        inference="gibbs",
        n_samples=600,
        burn_in=200,
        n_chains=2,
        random_state=0,
    ).fit(W, y)
    draws = gibbs.idata_.posterior["train_decision"].values[..., 0].reshape(1200, 100)
    ratio = {}
    for inference in ("vb", "vb_deterministic"):
        vb = RankFactorClassifier.from_variant(
            "G-L-BSVM", n_factors=2, max_iter=300, tol=1e-7, inference=inference, random_state=0
        ).fit(W, y)
        ratio[inference] = np.abs(_decision(vb) - draws.mean(axis=0)) / draws.std(axis=0)
        assert stats.pearsonr(_decision(vb), draws.mean(axis=0))[0] > 0.99
    assert np.mean(ratio["vb"]) < 0.3
    assert np.mean(ratio["vb_deterministic"]) > 0.6
