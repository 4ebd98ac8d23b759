"""Poisson factor analysis: each Gibbs conditional against an independent computation, the VB
fold-in of new samples against its closed form and a long Gibbs fold-in, recovery of planted
factors, missing entries, reproducibility and input validation."""

import numpy as np
import pytest
from scipy import integrate, special, stats
from scipy.optimize import linear_sum_assignment

from omicsbayes.models.pfa import (
    PFAClassifier,
    PoissonFactorAnalysis,
    _completed_entries,
    _entry_index,
    _nb_log_r,
    allocate_counts,
    fold_in_scores,
    sample_p,
    sample_phi,
    sample_theta,
    slice_sample,
)


def _simulate(seed, n=100, d=60, k=3):
    rng = np.random.default_rng(seed)
    phi = np.zeros((d, k))
    block = d // k
    for j in range(k):
        phi[j * block : (j + 1) * block, j] = 1.0
    phi = phi * rng.gamma(2.0, 1.0, size=(d, k)) + 1e-3
    phi /= phi.sum(0)
    theta = rng.gamma(1.0, 30.0, size=(n, k))
    return rng.poisson(theta @ phi.T), theta, phi


@pytest.mark.parametrize("unit_max", [0, 16])  # chain of binomials; unit-by-unit inversion
def test_allocation_matches_multinomial_probabilities(unit_max):
    """Counts of 1 fall on factor k with probability phi_jk theta_ik / sum_k' (chi-square)."""
    rng = np.random.default_rng(0)
    theta = np.array([[1.0, 2.0, 0.5], [0.1, 0.1, 3.0]])
    phi = np.array([[0.2, 0.5, 0.3], [0.7, 0.1, 0.2]])
    n_rep = 4000
    # One entry per "sample" so per_sample returns each entry's own allocation.
    groups = [(i, j) for i in range(2) for j in range(2)]
    entry_theta = np.repeat(np.array([theta[i] for i, _ in groups]), n_rep, axis=0)
    cols = np.repeat([j for _, j in groups], n_rep)
    n_entries = cols.size
    per_sample, per_feature = allocate_counts(
        np.ones(n_entries, dtype=int),
        np.arange(n_entries),
        cols,
        entry_theta,
        phi,
        rng,
        unit_max=unit_max,
    )
    assert np.all(per_sample.sum(1) == 1)
    assert per_feature.sum() == n_entries
    for g, (i, j) in enumerate(groups):
        zeta = phi[j] * theta[i] / np.sum(phi[j] * theta[i])
        observed = per_sample[g * n_rep : (g + 1) * n_rep].sum(0)
        assert stats.chisquare(observed, zeta * n_rep).pvalue > 1e-3
    # Larger counts: mean allocation y * zeta and the multinomial variance.
    y = 9
    _, pf = allocate_counts(
        np.full(20000, y),
        np.zeros(20000, int),
        np.arange(20000),
        theta[:1],
        np.tile(phi[:1], (20000, 1)),
        rng,
        unit_max=unit_max,
    )
    zeta = phi[0] * theta[0] / np.sum(phi[0] * theta[0])
    np.testing.assert_allclose(pf.mean(0), y * zeta, atol=4 * np.sqrt(y / 20000))
    np.testing.assert_allclose(pf.var(0), y * zeta * (1 - zeta), rtol=0.08)


def _grid_posterior_mean(log_density, grid):
    w = np.exp(log_density - log_density.max())
    return np.sum(grid * w) / np.sum(w)


def test_theta_conditional_against_grid():
    """theta_ik | y_i.k ~ Gamma(r + y, scale p): Poisson(y | theta) Gamma(theta; r, p/(1-p))."""
    r, p, y = 0.7, 0.8, 5.0
    grid = np.linspace(1e-6, 60, 200001)
    logd = stats.poisson.logpmf(y, grid) + stats.gamma.logpdf(grid, r, scale=p / (1 - p))
    mean_grid = _grid_posterior_mean(logd, grid)
    draws = sample_theta(
        np.full((20000, 1), y), np.array([r]), np.array([p]), np.random.default_rng(1)
    )
    assert abs(draws.mean() - mean_grid) < 4 * draws.std() / np.sqrt(draws.size)


def test_p_conditional_against_grid():
    """p_k | y_.k, r_k, theta integrated: NB(y; r, p) likelihood times the beta prior."""
    y = np.array([[3.0], [0.0], [7.0], [1.0]])
    r, c0, eps0 = 1.3, 1.0, 0.2
    grid = np.linspace(1e-6, 1 - 1e-6, 100001)
    # scipy's nbinom(n, q) has pmf C(k+n-1, k) q^n (1-q)^k: our NB(r, p) is nbinom(r, 1 - p).
    loglik = stats.nbinom.logpmf(y[:, :1], r, 1 - grid[None, :]).sum(0)
    logd = loglik + stats.beta.logpdf(grid, c0 * eps0, c0 * (1 - eps0))
    mean_grid = _grid_posterior_mean(logd, grid)
    draws = np.array(
        [sample_p(y, np.array([r]), c0, eps0, np.random.default_rng(s))[0] for s in range(3000)]
    )
    assert abs(draws.mean() - mean_grid) < 4 * draws.std() / np.sqrt(draws.size)


def test_phi_conditional_is_dirichlet():
    """phi_k | y_.jk: multinomial allocation counts times the Dirichlet prior (conjugate)."""
    counts = np.array([[4.0, 0.0], [1.0, 10.0], [0.0, 2.0]])
    eta = 0.5
    rng = np.random.default_rng(2)
    draws = np.stack([sample_phi(counts, eta, rng) for _ in range(5000)])
    np.testing.assert_allclose(draws.sum(1), 1.0)
    expected = (eta + counts) / (eta + counts).sum(0)
    np.testing.assert_allclose(draws.mean(0), expected, atol=0.01)


def test_r_conditional_is_nb_marginal():
    """_nb_log_r equals log prior(r) + log |dr/du| + sum_i log integral Pois * Gamma d theta."""
    y = np.array([[2.0], [0.0], [5.0]])
    p, a0, b0 = 0.6, 1.5, 2.0

    def by_quadrature(r):
        total = stats.gamma.logpdf(r, a0, scale=1 / b0) + np.log(r)
        for yi in y[:, 0]:

            def f(t, yi=yi):
                return stats.poisson.pmf(yi, t) * stats.gamma.pdf(t, r, scale=p / (1 - p))

            total += np.log(integrate.quad(f, 0, np.inf, limit=200)[0])
        return total

    rs = np.array([0.3, 1.0, 2.5])
    ours = np.array([_nb_log_r(np.log([r]), y, np.array([p]), a0, b0)[0] for r in rs])
    ref = np.array([by_quadrature(r) for r in rs])
    np.testing.assert_allclose(ours - ours[0], ref - ref[0], atol=1e-6)


def test_slice_sampler_targets_density():
    """Lockstep slice sampling of 4000 independent chains reaches a Gamma(3, 1) target."""
    rng = np.random.default_rng(3)
    x = np.full(4000, 0.1)
    for _ in range(15):
        x = slice_sample(
            x,
            lambda v: stats.gamma.logpdf(np.maximum(v, 1e-300), 3.0) + np.where(v > 0, 0, -np.inf),
            rng,
        )
    assert stats.kstest(x, stats.gamma(3.0).cdf).pvalue > 1e-3


def test_recovers_planted_factors():
    X, theta, phi = _simulate(0)
    model = PoissonFactorAnalysis(n_factors=6, n_iter=150, burn_in=75, random_state=1).fit(X)
    corr = np.corrcoef(phi.T, model.components_)[:3, 3:]
    r, c = linear_sum_assignment(-corr)
    assert np.all(corr[r, c] > 0.95)
    score_corr = np.corrcoef(theta.T, model.scores_.T)[:3, 3:]
    assert np.all(score_corr[r, c] > 0.85)
    # The sampler climbs from a random start.
    assert model.log_likelihood_[-1] > model.log_likelihood_[0]
    assert model.components_.shape == (6, 60)
    np.testing.assert_allclose(model.components_.sum(1), 1.0)
    # transform on training rows tracks the fitted scores.
    z = model.transform(X[:30])
    assert np.corrcoef(z.sum(1), model.scores_[:30].sum(1))[0, 1] > 0.95
    post = model.idata_.posterior
    assert post["theta"].shape == (1, 75, 100, 6)


def test_heldout_entries_are_never_seen():
    X, _, _ = _simulate(4, n=60, d=30)
    rng = np.random.default_rng(5)
    mask = rng.uniform(size=X.shape) < 0.2
    Xa = X.astype(float)
    Xa[mask] = np.nan
    kw = dict(n_factors=4, n_iter=60, burn_in=30, random_state=7)
    fit_a = PoissonFactorAnalysis(**kw).fit(Xa)
    # Held-out values poisoned with huge counts before masking: identical fit.
    Xb = X.astype(float)
    Xb[mask] = 1e9
    Xb[mask] = np.nan
    fit_b = PoissonFactorAnalysis(**kw).fit(Xb)
    np.testing.assert_array_equal(fit_a.components_, fit_b.components_)
    assert np.all(np.isfinite(fit_a.components_)) and np.all(np.isfinite(fit_a.log_likelihood_))
    # Missing is not zero: treating the held-out entries as zeros changes the fit.
    Xz = X.astype(float)
    Xz[mask] = 0
    fit_z = PoissonFactorAnalysis(**kw).fit(Xz)
    assert not np.allclose(fit_z.components_, fit_a.components_)
    # The posterior predictive prefers the true held-out values to shuffled ones.
    shuffled = X.copy()
    shuffled[mask] = rng.permutation(X[mask])
    assert fit_a.log_likelihood(X, mask) > fit_a.log_likelihood(shuffled, mask)
    assert fit_a.perplexity(X, mask) < fit_a.perplexity(shuffled, mask)
    # Perplexity is at most the number of features (uniform shares) on informative data.
    assert 1 < fit_a.perplexity(X, mask) < X.shape[1]


def test_fixed_seed_reproducible():
    X, _, _ = _simulate(6, n=40, d=30)
    a = PoissonFactorAnalysis(n_factors=3, n_iter=20, burn_in=10, random_state=11).fit(X)
    b = PoissonFactorAnalysis(n_factors=3, n_iter=20, burn_in=10, random_state=11).fit(X)
    np.testing.assert_array_equal(a.scores_, b.scores_)
    np.testing.assert_array_equal(a.transform(X[:5]), b.transform(X[:5]))


@pytest.mark.parametrize(
    ("X", "match"),
    [
        (np.array([[1.0, -2.0], [0.0, 1.0]]), "negative"),
        (np.array([[1.0, np.inf], [0.0, 1.0]]), "infinite"),
        (np.ones(3), "2D array"),
    ],
)
def test_bad_input(X, match):
    with pytest.raises(ValueError, match=match):
        PoissonFactorAnalysis(n_iter=2, burn_in=1).fit(X)


def test_non_integer_values_are_rounded_to_counts():
    X = np.random.default_rng(4).poisson(3.0, size=(12, 5)).astype(float)
    jittered = X + np.random.default_rng(5).uniform(-0.4, 0.4, size=X.shape) * (X > 0)
    a = PoissonFactorAnalysis(n_factors=2, n_iter=6, burn_in=3, random_state=1).fit(X)
    b = PoissonFactorAnalysis(n_factors=2, n_iter=6, burn_in=3, random_state=1).fit(jittered)
    np.testing.assert_array_equal(a.scores_, b.scores_)


def test_transform_scores_each_sample_on_its_own():
    """A sample's scores do not depend on the samples transformed with it or their order (up to
    the rounding of matrix products over different numbers of rows)."""
    X = np.random.default_rng(6).poisson(3.0, size=(15, 6)).astype(float)
    X[3, 2] = np.nan
    model = PoissonFactorAnalysis(n_factors=2, n_iter=6, burn_in=3, random_state=2).fit(X)
    whole = model.transform(X)
    np.testing.assert_allclose(model.transform(X[[7, 3, 2]]), whole[[7, 3, 2]], rtol=1e-12)
    np.testing.assert_allclose(model.transform(X[::-1]), whole[::-1], rtol=1e-12)
    np.testing.assert_allclose(model.transform(X[5:6]), whole[5:6], rtol=1e-12)
    assert not np.array_equal(whole[0], whole[1])


def test_transform_is_a_function_of_the_loadings_r_and_p():
    """No random numbers: two fits with different seeds given the same loadings, r and p score
    new samples identically."""
    X = np.random.default_rng(7).poisson(4.0, size=(20, 8)).astype(float)
    a = PoissonFactorAnalysis(n_factors=3, n_iter=6, burn_in=3, random_state=0).fit(X)
    b = PoissonFactorAnalysis(n_factors=3, n_iter=6, burn_in=3, random_state=1).fit(X)
    b.components_, b.r_, b.p_ = a.components_.copy(), a.r_.copy(), a.p_.copy()
    np.testing.assert_array_equal(a.transform(X), b.transform(X))


def _one_factor_model(X):
    return PoissonFactorAnalysis(n_factors=1, n_iter=6, burn_in=3, random_state=3).fit(X)


@pytest.mark.parametrize("missing", [False, True])
def test_one_factor_fold_in_is_the_conjugate_posterior(missing):
    """K = 1: theta | y ~ Gamma(r + sum_j y_j, rate (1 - p) / p + sum_{j observed} phi_j)."""
    rng = np.random.default_rng(8)
    X = rng.poisson(rng.gamma(2.0, 4.0, size=(12, 1)) * np.linspace(0.5, 2.0, 7)).astype(float)
    model = _one_factor_model(X)
    new = rng.poisson(6.0, size=(5, 7)).astype(float)
    if missing:
        new[[0, 0, 2, 4], [1, 5, 0, 6]] = np.nan
    phi, r, p = model.components_[0], model.r_[0], model.p_[0]
    observed = ~np.isnan(new)
    expected = (r + np.nansum(new, axis=1)) / ((1 - p) / p + observed @ phi)
    np.testing.assert_allclose(model.transform(new)[:, 0], expected, rtol=1e-10)
    if not missing:  # every entry observed: the rate is 1 / p, as in sample_theta
        np.testing.assert_allclose(expected, (r + new.sum(1)) * p, rtol=1e-12)


def _gibbs_fold_in(x, phi, r, p, n_chains, n_sweeps, rng):
    """Posterior mean of one sample's scores with phi, r, p fixed: ``n_chains`` independent
    Gibbs chains of the module's own allocation and theta steps (missing entries imputed)."""
    X = np.tile(x, (n_chains, 1))
    index = _entry_index(X, np.isnan(X))
    theta = np.tile(r * p / (1 - p), (n_chains, 1))
    total, burn = np.zeros_like(theta), n_sweeps // 5
    for sweep in range(n_sweeps):
        counts, rows, cols = _completed_entries(index, theta, phi, rng)
        per_sample, _ = allocate_counts(counts, rows, cols, theta, phi, rng)
        theta = sample_theta(per_sample, r, p, rng)
        if sweep >= burn:
            total += theta
    return total.mean(0) / (n_sweeps - burn)


@pytest.mark.parametrize(("n_factors", "missing"), [(2, False), (3, False), (3, True)])
def test_fold_in_agrees_with_a_long_gibbs_fold_in(n_factors, missing):
    """Moderate counts (a total of about 100-200): the VB posterior mean of each score lies
    within 3 % of the sample's total of a Gibbs estimate from 200 chains x 400 sweeps (mean-field
    VB's own gap plus Monte Carlo error), and the total score within 1 %. Missing entries:
    imputed by the Gibbs sampler, summed out by VB."""
    rng = np.random.default_rng(20 + n_factors)
    d = 12
    phi = rng.dirichlet(np.full(d, 0.5), size=n_factors).T
    r = rng.uniform(0.5, 2.0, n_factors)
    p = np.full(n_factors, 0.9)
    x = rng.poisson(phi @ rng.uniform(20.0, 60.0, n_factors)).astype(float)
    if missing:
        x[[1, 4, 7]] = np.nan
    gibbs = _gibbs_fold_in(x, phi, r, p, 200, 400, np.random.default_rng(1))
    shape, rate = fold_in_scores(x[None, :], phi, r, p, max_iter=1000)
    vb = (shape / rate)[0]
    assert np.all(np.abs(vb - gibbs) < 0.03 * gibbs.sum()), (vb, gibbs)
    assert abs(vb.sum() - gibbs.sum()) < 0.01 * gibbs.sum(), (vb, gibbs)


def test_fold_in_converges_to_its_fixed_point():
    """The iterations reach a_ik = r_k + sum_j y_ij zeta_ijk (the bound's stationary point), on
    large overlapping counts where the plain update crawls."""
    rng = np.random.default_rng(9)
    d, k = 30, 8
    phi = rng.dirichlet(np.full(d, 1.0), size=k).T
    r, p = rng.uniform(0.3, 1.0, k), np.full(k, 0.999)
    X = rng.poisson(rng.gamma(0.5, 2000.0, size=(6, k)) @ phi.T).astype(float)
    shape, rate = fold_in_scores(X, phi, r, p, max_iter=2000)
    weight = np.exp(special.digamma(shape) - np.log(rate))
    zeta_sum = weight * ((X / (weight @ phi.T)) @ phi)
    np.testing.assert_allclose(shape, r + zeta_sum, rtol=1e-8)
    np.testing.assert_allclose(rate, np.broadcast_to((1 - p) / p + 1.0, rate.shape), rtol=1e-12)


@pytest.mark.parametrize(
    ("param", "value"),
    [("n_factors", 0), ("burn_in", 5), ("a0", -1.0), ("eps0", 1.5), ("eta", 0.0)],
)
def test_bad_hyperparameters(param, value):
    with pytest.raises(ValueError, match=param):
        PoissonFactorAnalysis(**{"n_iter": 5, "burn_in": 1, param: value}).fit(np.ones((3, 3)))


def _labelled_cohort(seed, n=120, d=40):
    rng = np.random.default_rng(seed)
    phi = rng.dirichlet(np.full(d, 0.1), size=4).T
    theta = rng.gamma(1.0, 200.0, size=(n, 4))
    intensities = rng.poisson(theta @ phi.T) + rng.uniform(0, 0.49, size=(n, d))
    return intensities, theta


def test_pfa_classifier_two_steps_multitask():
    """Non-integer intensities are rounded; labels driven by the planted scores are learned."""
    from sklearn.metrics import roc_auc_score

    X, theta = _labelled_cohort(8)
    y = np.where(theta[:, 0] > theta[:, 1], "up", "down")
    second = np.where(theta[:, 2] > np.median(theta[:, 2]), 1.0, 0.0)
    second[:15] = np.nan
    Y = np.column_stack([y.astype(object), second.astype(object)])
    train, test = np.arange(90), np.arange(90, 120)
    kw = dict(n_factors=6, n_iter=60, burn_in=30, random_state=0)
    clf = PFAClassifier(**kw).fit(X[train], y[train])
    assert list(clf.classes_) == ["down", "up"]
    score = clf.decision_function(X[test])
    assert score.shape == (30,)
    assert roc_auc_score(y[test] == "up", score) > 0.9
    assert set(clf.predict(X[test])) <= {"down", "up"}
    # Same as rounding first and fitting PoissonFactorAnalysis with the same seed stream.
    np.testing.assert_array_equal(clf.scores_, clf.pfa_.scores_)

    multi = PFAClassifier(**kw).fit(X[train], Y[train])
    scores = multi.decision_function(X[test])
    assert scores.shape == (30, 2)
    assert roc_auc_score(second[test] == 1.0, scores[:, 1]) > 0.8
    assert multi.predict(X[test]).shape == (30, 2)
    assert multi.svms_[1].classes_.tolist() == [0.0, 1.0]


def test_pfa_classifier_rejects_negative_values():
    with pytest.raises(ValueError, match="negative"):
        PFAClassifier(n_iter=4, burn_in=2).fit(np.array([[1.0, -3.0], [2.0, 1.0]]), [0, 1])


def test_heldout_metrics_against_direct_formulas():
    """Two fixed draws: posterior predictive mixture of Poissons, perplexity from shares."""
    X, _, _ = _simulate(9, n=8, d=6, k=2)
    model = PoissonFactorAnalysis(n_factors=2, n_iter=4, burn_in=2, random_state=0).fit(X)
    rng = np.random.default_rng(10)
    draws = [(rng.gamma(2.0, 5.0, size=(8, 2)), rng.dirichlet(np.ones(6), size=2).T)]
    draws.append((rng.gamma(2.0, 5.0, size=(8, 2)), rng.dirichlet(np.ones(6), size=2).T))
    model._draws["theta"] = np.stack([t for t, _ in draws])
    model._draws["phi"] = np.stack([p for _, p in draws])
    mask = np.zeros(X.shape, dtype=bool)
    mask[[0, 3, 5], [1, 2, 4]] = True
    loglik, logf = 0.0, 0.0
    for i, j in zip(*np.nonzero(mask)):
        dens = [stats.poisson.pmf(X[i, j], t[i] @ p[j]) for t, p in draws]
        loglik += np.log(np.mean(dens))
        logf += X[i, j] * np.log(np.mean([t[i] @ p[j] / t[i].sum() for t, p in draws]))
    np.testing.assert_allclose(model.log_likelihood(X, mask), loglik, rtol=1e-10)
    np.testing.assert_allclose(model.perplexity(X, mask), np.exp(-logf / X[mask].sum()), rtol=1e-10)


def test_joint_distribution_geweke():
    """Successive-conditional simulator (Geweke 2004): alternate y ~ Poisson(theta phi^T) and a
    sweep in fit's order; every quantity must keep its prior (E p = eps0, E r = a0 / b0,
    E theta = E[r] E[p / (1 - p)], E phi = 1 / P)."""
    from omicsbayes.models.pfa import sample_r

    rng = np.random.default_rng(14)
    n, d, k = 4, 3, 2
    a0, b0, c0, eps0, eta = 2.0, 2.0, 6.0, 1 / 3, 1.0
    r = rng.gamma(a0, 1 / b0, size=k)
    p = rng.beta(c0 * eps0, c0 * (1 - eps0), size=k)
    theta = rng.gamma(r, p / (1 - p), size=(n, k))
    phi = rng.dirichlet(np.full(d, eta), size=k).T
    rows, cols = np.nonzero(np.ones((n, d)))
    keep = {"r": [], "p": [], "theta": [], "phi": []}
    for it in range(3000):
        y = rng.poisson(theta @ phi.T)[rows, cols]
        per_sample, per_feature = allocate_counts(y, rows, cols, theta, phi, rng)
        phi = sample_phi(per_feature, eta, rng)
        p = sample_p(per_sample, r, c0, eps0, rng)
        r = sample_r(r, per_sample, p, a0, b0, rng)
        theta = sample_theta(per_sample, r, p, rng)
        if it >= 200:
            for name, value in zip(keep, (r, p, theta, phi)):
                keep[name].append(np.mean(value))

    def close(name, expected):
        trace = np.array(keep[name])
        batches = trace.reshape(40, -1).mean(1)
        se = batches.std(ddof=1) / np.sqrt(40)
        assert abs(trace.mean() - expected) < 4 * se + 1e-9, (name, trace.mean(), expected, se)

    close("r", a0 / b0)
    close("p", eps0)
    close("theta", a0 / b0 * (c0 * eps0) / (c0 * (1 - eps0) - 1))
    close("phi", 1 / d)
