"""Prediction of the rank factor model (paper 000, section 3, "Predictions"): the Mills ratio
table of the margin-moments kernel and the scores of new samples against a brute-force
maximiser of their concave objective."""

import numpy as np
import pytest
from scipy import optimize, special, stats

from omicsbayes.models import RankFactorClassifier
from omicsbayes.models.rank_factor import _engine, margin_conditional_moments
from omicsbayes.models.rank_factor._kernels import _margin_moments, _mills_ratio


def test_mills_ratio_matches_scipy_erfcx():
    """Table (below 16) and asymptotic series (above) against R(x) = sqrt(pi/2) erfcx(x/sqrt 2),
    including every table interval's ends, the switch at 16 and +inf."""
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            np.arange(0, 16 * 8 + 1) / 8.0,
            np.nextafter(np.arange(1, 16 * 8 + 1) / 8.0, 0.0),
            rng.uniform(0, 16, 20000),
            rng.uniform(16, 1e4, 2000),
            [1e8, 1e300],
        ]
    )
    ours = np.array([_mills_ratio(v) for v in x])
    ref = np.sqrt(np.pi / 2) * special.erfcx(x / np.sqrt(2))
    np.testing.assert_allclose(ours, ref, rtol=5e-15, atol=0)
    assert _mills_ratio(np.inf) == 0.0


def test_margin_moments_log_normaliser_on_long_rows_of_extremes():
    """The log normaliser of a row is a log of products of the mass sums: long rows of means
    far below, far above, between and outside the margins, one neighbour or none, agree with
    the numpy reference (no underflow or overflow of the products)."""
    rng = np.random.default_rng(1)
    n = 4096
    rows = []
    for mu in (-400.0, 400.0, 0.0):
        lo = rng.normal(size=n)
        up = lo + rng.choice([-0.3, 0.02, 1.0], size=n)
        lo[rng.random(n) < 0.2] = -np.inf
        up[rng.random(n) < 0.2] = np.inf
        rows.append((np.full(n, mu) + rng.normal(size=n), lo, up))
    mu, lo, up = (np.array(a) for a in zip(*rows, strict=True))
    mean, var = np.empty_like(mu), np.empty_like(mu)
    log_z = _margin_moments(mu, lo, up, np.arange(3), 0.05, mean, var)
    ref_mean, ref_var, ref_log_z = margin_conditional_moments(mu, lo, up, 0.05)
    np.testing.assert_allclose(log_z, ref_log_z.sum(axis=1), rtol=1e-11)
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-9, atol=1e-8)
    np.testing.assert_allclose(var, ref_var, rtol=1e-6, atol=1e-9)


def _objective(model, lo, up):
    """L(z) = sum_i log Z_i(a_i^T z) - z^T (C + I) z / 2 of one new sample (the docstring of
    ``_newton_scores``), with log Z from scipy: the max-margin normaliser of
    :func:`margin_conditional_moments` or, for the ordinary rank likelihood, log(Phi(u - mu) -
    Phi(l - mu))."""
    means = model._means
    Ea = means["Ea"]
    C = means["EAA"].sum(axis=0) - Ea.T @ Ea

    def neg(z):
        mu = Ea @ z
        if model.likelihood == "maxmargin_rank":
            log_z = margin_conditional_moments(mu, lo, up, model.epsilon)[2]
        else:
            log_z = np.log(stats.norm.cdf(up - mu) - stats.norm.cdf(lo - mu))
        return -(log_z.sum() - 0.5 * z @ (C + np.eye(len(z))) @ z)

    return neg


@pytest.mark.parametrize("name", ["R-L-BSVM", "OR-L-BSVM"])
@pytest.mark.parametrize("zeros", [False, True])
@pytest.mark.parametrize("mapped_start", [False, True])
def test_new_scores_are_the_brute_force_maximiser(name, zeros, mapped_start, monkeypatch):
    """transform's Newton steps (with the unchecked last step) land within the stopping
    tolerance (1e-3 of the mean |z|) of Nelder-Mead run to 1e-10 on the concave objective, on
    continuous data and on zero-inflated counts (large tie groups, as in single cells), and
    also when 16 of the 80 new samples are solved first to map the others' starts (as 128 are
    in batches of at least 512); checked on every fourth sample."""
    if mapped_start:
        monkeypatch.setattr(_engine, "_START_SAMPLES", 4)
    rng = np.random.default_rng(2)
    n, d, k = 120, 25, 3
    Z = rng.normal(size=(n, k))
    A = rng.normal(size=(d, k))
    X = Z @ A.T + 0.5 * rng.normal(size=(n, d))
    if zeros:
        X = np.where(X > 1.0, np.round(np.exp(X)), 0.0)
    y = (Z[:, 0] > 0).astype(int)
    model = RankFactorClassifier.from_variant(name, n_factors=k, max_iter=40, random_state=0)
    model.fit(X[:40], y[:40])
    X_new = X[40:]
    if mapped_start:  # enough new samples for the map (the condition in _newton_scores)
        assert len(X_new) >= 4 * max(_engine._START_SAMPLES, 4 * (k + 1))
    scores = model.transform(X_new)
    tol = 1e-3 * max(1.0, np.abs(scores).mean())
    lo_t, up_t, _ = model._index.new_neighbours(model._means["W"], X_new.T)
    for m in range(0, len(X_new), 4):
        neg = _objective(model, lo_t[:, m], up_t[:, m])
        best = optimize.minimize(
            neg,
            np.zeros(k),
            method="Nelder-Mead",
            options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000, "maxfev": 40000},
        )
        assert best.success
        assert neg(scores[m]) >= best.fun - 1e-9  # the brute force is the better maximum
        np.testing.assert_allclose(scores[m], best.x, rtol=0, atol=tol)
