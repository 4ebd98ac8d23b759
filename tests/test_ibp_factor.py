"""Linear IBP factor model: each conditional against quadrature or closed forms, the IBP prior,
recovery of a planted number of features, missing entries and reproducibility."""

import numpy as np
import pytest
from scipy import integrate, stats

from omicsbayes.models.ibp_factor import (
    IBPFactorModel,
    IBPState,
    _marginal_row,
    _z_conditional,
    sample_alpha,
    sample_loading_precision,
    sample_loadings,
    sample_noise_precision,
    z_step,
)


def test_z_conditional_against_quadrature():
    """p(z=1 | .) / p(z=0 | .) = m/(N-m) * int N(e; x w, 1/lam) N(x; 0, 1) dx / N(e; 0, 1/lam)."""
    rng = np.random.default_rng(0)
    e, w = rng.normal(size=5), rng.normal(size=5)
    lam = rng.gamma(2.0, 1.0, size=5)
    o = np.array([1.0, 1.0, 0.0, 1.0, 1.0])  # the third entry is missing: no term
    m_rest, n = 3, 10

    def joint(x):
        return np.exp(
            stats.norm.logpdf(e, x * w, 1 / np.sqrt(lam))[o > 0].sum()
            + stats.norm.logpdf(x)
            - stats.norm.logpdf(e, 0, 1 / np.sqrt(lam))[o > 0].sum()
        )

    z1 = integrate.quad(joint, -20, 20, limit=200)[0]
    mean_x = integrate.quad(lambda x: x * joint(x), -20, 20, limit=200)[0] / z1
    var_x = integrate.quad(lambda x: (x - mean_x) ** 2 * joint(x), -20, 20, limit=200)[0] / z1
    logit, mean, prec = _z_conditional(e, o, lam, w, m_rest, n)
    np.testing.assert_allclose(logit, np.log(m_rest / (n - m_rest) * z1), rtol=1e-7)
    np.testing.assert_allclose(mean, mean_x, rtol=1e-7)
    np.testing.assert_allclose(1 / prec, var_x, rtol=1e-6)


def test_singleton_marginal_against_quadrature():
    """New features' loadings integrated out: prod_j int N(e_j; v w_j, 1/lam_j) N(w_j; 0, sa2)."""
    e = np.array([0.4, -1.2, 2.0])
    o = np.array([1.0, 0.0, 1.0])
    lam = np.array([2.0, 0.5, 1.5])
    v, sa2 = 1.3, 0.7
    ref = 0.0
    for j in np.flatnonzero(o):

        def f(wj, j=j):
            return stats.norm.pdf(e[j], v * wj, 1 / np.sqrt(lam[j])) * stats.norm.pdf(
                wj, 0, np.sqrt(sa2)
            )

        ref += np.log(integrate.quad(f, -30, 30)[0])
    np.testing.assert_allclose(_marginal_row(e, o, lam, sa2 * v**2), ref, rtol=1e-8)


def test_loadings_conditional_matches_conjugate_formula():
    """Batch sampler against the explicit per-feature Gaussian posterior, with missing entries."""
    rng = np.random.default_rng(1)
    n, d, k = 6, 3, 2
    X = rng.normal(size=(n, k))
    Y = rng.normal(size=(n, d))
    O = (rng.uniform(size=(n, d)) > 0.3).astype(float)
    Yc = Y * O
    lam, tau = np.array([1.0, 2.0, 0.5]), 1.5
    draws = np.stack([sample_loadings(X, Yc, O, lam, tau, rng) for _ in range(6000)])
    for j in range(d):
        obs = O[:, j] > 0
        cov = np.linalg.inv(tau * np.eye(k) + lam[j] * X[obs].T @ X[obs])
        mean = cov @ (lam[j] * X[obs].T @ Y[obs, j])
        np.testing.assert_allclose(draws[:, :, j].mean(0), mean, atol=5 * np.sqrt(cov.max() / 6e3))
        np.testing.assert_allclose(np.cov(draws[:, :, j].T), cov, atol=0.08 * np.abs(cov).max())


def test_ibp_prior_without_data():
    """With every entry missing, the Z sweep samples the IBP prior: K+ ~ Poisson(alpha H_N)."""
    rng = np.random.default_rng(2)
    n, d, alpha = 6, 2, 2.0
    O = np.zeros((n, d))
    E = np.zeros((n, d))
    lam = np.ones(d)
    state = IBPState(
        np.zeros((n, 0), dtype=np.int64), np.zeros((n, 0)), np.zeros((0, d)), np.arange(0), 0
    )
    counts = np.empty(8000)
    for it in range(counts.size):
        state = z_step(state, O, E, lam, 1.0, alpha, rng)
        counts[it] = state.Z.shape[1]
    target = alpha * np.sum(1.0 / np.arange(1, n + 1))
    batches = counts.reshape(40, -1).mean(1)
    se = batches.std(ddof=1) / np.sqrt(batches.size)
    assert abs(counts.mean() - target) < 4 * se
    assert 0.8 < counts.var() / target < 1.2  # Poisson: variance equals the mean
    # Every retained feature is used by some sample.
    assert np.all(state.Z.sum(0) > 0)


def _planted(seed, n=100, d=20, k=3, noise=0.3):
    rng = np.random.default_rng(seed)
    Z = rng.uniform(size=(n, k)) < 0.5
    X = rng.standard_normal((n, k)) * Z
    W = 2 * rng.standard_normal((k, d))
    return X @ W + noise * rng.standard_normal((n, d)), X


def test_recovers_planted_number_of_features():
    Y, X = _planted(3)
    model = IBPFactorModel(n_iter=150, burn_in=75, random_state=0).fit(Y)
    kept = model.n_active_[75:]
    assert np.bincount(kept).argmax() == 3
    # The planted latent columns lie in the span of the fitted ones.
    coef, *_ = np.linalg.lstsq(model.latent_, X, rcond=None)
    r2 = 1 - ((X - model.latent_ @ coef) ** 2).sum(0) / (X**2).sum(0)
    assert np.all(r2 > 0.9)
    assert model.idata_.posterior["alpha"].shape == (1, 75)


def test_heldout_entries_are_never_seen():
    Y, _ = _planted(4, n=50, d=10)
    rng = np.random.default_rng(5)
    mask = rng.uniform(size=Y.shape) < 0.2
    kw = dict(n_iter=40, burn_in=20, random_state=3)
    Ya = Y.copy()
    Ya[mask] = np.nan
    fit_a = IBPFactorModel(**kw).fit(Ya)
    assert np.all(np.isfinite(fit_a.latent_)) and np.all(np.isfinite(fit_a.log_likelihood_))
    # Poisoning the held-out values with huge numbers, then masking: identical fit.
    Yb = Y.copy()
    Yb[mask] = 1e12
    Yb[mask] = np.nan
    np.testing.assert_array_equal(IBPFactorModel(**kw).fit(Yb).latent_, fit_a.latent_)
    # Missing is not zero.
    Yz = Y.copy()
    Yz[mask] = 0.0
    assert not np.allclose(IBPFactorModel(**kw).fit(Yz).log_likelihood_, fit_a.log_likelihood_)
    # The posterior predictive prefers the true held-out values to shuffled ones.
    shuffled = Y.copy()
    shuffled[mask] = rng.permutation(Y[mask])
    assert fit_a.log_likelihood(Y, mask) > fit_a.log_likelihood(shuffled, mask)


def test_fixed_seed_reproducible():
    Y, _ = _planted(6, n=30, d=8)
    a = IBPFactorModel(n_iter=20, burn_in=10, random_state=9).fit(Y)
    b = IBPFactorModel(n_iter=20, burn_in=10, random_state=9).fit(Y)
    np.testing.assert_array_equal(a.latent_, b.latent_)
    np.testing.assert_array_equal(a.n_active_, b.n_active_)


@pytest.mark.parametrize(
    ("param", "value"),
    [("n_iter", 0), ("burn_in", 50), ("alpha", 0.0), ("sigma_x", -1.0), ("noise_prior", (1, 0))],
)
def test_bad_hyperparameters(param, value):
    with pytest.raises(ValueError, match=param):
        IBPFactorModel(**{"n_iter": 10, "burn_in": 1, param: value}).fit(np.ones((4, 3)))


def test_bad_input():
    with pytest.raises(ValueError, match="infinite"):
        IBPFactorModel(n_iter=2, burn_in=0).fit(np.array([[1.0, np.inf], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="only NaN"):
        IBPFactorModel(n_iter=2, burn_in=0).fit(np.full((3, 2), np.nan))


def test_heldout_log_likelihood_against_direct_formula():
    """Two fixed draws (different K): log of the mean over draws of the normal densities."""
    Y, _ = _planted(7, n=6, d=4)
    model = IBPFactorModel(n_iter=4, burn_in=2, random_state=0).fit(Y)
    rng = np.random.default_rng(8)
    model._draws = {
        "latent": [rng.normal(size=(6, 2)), rng.normal(size=(6, 3))],
        "W": [rng.normal(size=(2, 4)), rng.normal(size=(3, 4))],
        "lam": rng.gamma(2.0, 1.0, size=(2, 4)),
    }
    mask = np.zeros(Y.shape, dtype=bool)
    mask[[0, 2, 5], [1, 3, 0]] = True
    ref = 0.0
    for i, j in zip(*np.nonzero(mask)):
        dens = [
            stats.norm.pdf(Y[i, j], X[i] @ W[:, j], 1 / np.sqrt(lam[j]))
            for X, W, lam in zip(model._draws["latent"], model._draws["W"], model._draws["lam"])
        ]
        ref += np.log(np.mean(dens))
    np.testing.assert_allclose(model.log_likelihood(Y, mask), ref, rtol=1e-10)


def _grid_mean(logd, grid):
    w = np.exp(logd - logd.max())
    return np.sum(grid * w) / np.sum(w)


def test_alpha_conditional_against_buffet_construction():
    """P(Z | alpha) from the sequential buffet: customer i takes Poisson(alpha / i) new dishes."""
    new_dishes = np.array([2, 0, 1, 0, 1])  # per customer; K+ = 4, N = 5
    prior = (2.0, 1.5)
    grid = np.linspace(1e-4, 15, 30001)
    logd = stats.gamma.logpdf(grid, prior[0], scale=1 / prior[1])
    for i, k_new in enumerate(new_dishes, start=1):
        logd = logd + stats.poisson.logpmf(k_new, grid / i)
    rng = np.random.default_rng(11)
    draws = np.array([sample_alpha(new_dishes.sum(), 5, prior, rng) for _ in range(20000)])
    assert abs(draws.mean() - _grid_mean(logd, grid)) < 4 * draws.std() / np.sqrt(draws.size)


def test_precision_conditionals_against_grid():
    rng = np.random.default_rng(12)
    E = rng.normal(0, 0.7, size=(9, 2))
    O = np.ones_like(E)
    O[:3, 1] = 0.0
    E = E * O
    prior = (1.5, 0.5)
    grid = np.linspace(1e-4, 20, 40001)
    draws = np.stack([sample_noise_precision(E, O.sum(0), prior, rng) for _ in range(20000)])
    for j in range(2):
        e = E[O[:, j] > 0, j]
        logd = stats.gamma.logpdf(grid, prior[0], scale=1 / prior[1]) + stats.norm.logpdf(
            e[:, None], 0, 1 / np.sqrt(grid)
        ).sum(0)
        se = draws[:, j].std() / np.sqrt(len(draws))
        assert abs(draws[:, j].mean() - _grid_mean(logd, grid)) < 4 * se
    W = rng.normal(0, 2.0, size=(3, 4))
    logd = stats.gamma.logpdf(grid, prior[0], scale=1 / prior[1]) + stats.norm.logpdf(
        W.ravel()[:, None], 0, 1 / np.sqrt(grid)
    ).sum(0)
    tau = np.array([sample_loading_precision(W, prior, rng) for _ in range(20000)])
    assert abs(tau.mean() - _grid_mean(logd, grid)) < 4 * tau.std() / np.sqrt(tau.size)


def test_joint_distribution_geweke():
    """Successive-conditional simulator (Geweke 2004): alternate Y ~ p(Y | Z, X, W) and a sweep.

    If every step leaves the posterior invariant, the parameters keep their prior: K+ ~
    Poisson(alpha H_N), loadings N(0, sigma_a^2), slab values N(0, 1).  This exercises the
    (z, x) updates, the singleton proposals with integrated loadings, and the loadings step.
    """
    rng = np.random.default_rng(13)
    n, d, alpha, lam_value, tau = 5, 3, 1.5, 4.0, 1.0
    lam = np.full(d, lam_value)
    O = np.ones((n, d))
    state = IBPState(
        np.zeros((n, 0), dtype=np.int64), np.zeros((n, 0)), np.zeros((0, d)), np.arange(0), 0
    )
    k_plus, w_sq, s_sq = [], [], []
    for it in range(6000):
        X = state.latent
        Y = X @ state.W + rng.normal(size=(n, d)) / np.sqrt(lam_value)
        E = Y - X @ state.W
        state = z_step(state, O, E, lam, 1.0 / tau, alpha, rng)
        state.W = sample_loadings(state.latent, Y, O, lam, tau, rng)
        if it >= 500:
            k_plus.append(state.Z.shape[1])
            w_sq.extend((state.W**2).ravel())
            s_sq.extend(state.S[state.Z == 1] ** 2)
    k_plus = np.array(k_plus, dtype=float)
    target = alpha * np.sum(1.0 / np.arange(1, n + 1))
    batches = k_plus.reshape(50, -1).mean(1)
    assert abs(k_plus.mean() - target) < 4 * batches.std(ddof=1) / np.sqrt(50)
    assert abs(np.mean(w_sq) - 1.0 / tau) < 0.1
    assert abs(np.mean(s_sq) - 1.0) < 0.1


def test_no_active_features_is_handled():
    """With alpha fixed near zero and no initial features, the model stays empty and still
    predicts (mean zero, fitted noise)."""
    Y, _ = _planted(15, n=20, d=4)
    mask = np.zeros(Y.shape, dtype=bool)
    mask[0, 0] = True
    model = IBPFactorModel(
        n_iter=6, burn_in=3, alpha=1e-12, alpha_prior=None, n_init_features=0, random_state=0
    ).fit(np.where(mask, np.nan, Y))
    assert model.latent_.shape == (20, 0)
    assert np.all(model.n_active_ == 0)
    lam = model._draws["lam"][:, 0]
    expected = np.log(np.mean(stats.norm.pdf(Y[0, 0], 0, 1 / np.sqrt(lam))))
    np.testing.assert_allclose(model.log_likelihood(Y, mask), expected, rtol=1e-10)
