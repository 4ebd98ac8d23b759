"""Tests of the Polson-Scott augmentation block and the Bayesian SVM (paper 000, eq. 8)."""

import numpy as np
import pytest
from scipy import integrate, special, stats

from omicsbayes.inference.bsvm import (
    bsvm_coef_posterior,
    expected_hinge,
    expected_inv_lambda,
    sample_inv_lambda,
)
from omicsbayes.inference.tpbn import TPBNShrinkage
from omicsbayes.models.bsvm import BayesianSVM


def _mixture_density(lam, u):
    return np.exp(-((u + lam) ** 2) / (2 * lam)) / np.sqrt(2 * np.pi * lam)


@pytest.mark.parametrize("u", [-2.5, -0.7, -1e-3, 0.0, 0.4, 1.3, 3.0])
def test_augmentation_identity(u):
    value, _ = integrate.quad(_mixture_density, 0, np.inf, args=(u,), limit=200)
    assert value == pytest.approx(np.exp(-2 * max(0.0, u)), rel=1e-6)


@pytest.mark.parametrize("u", [-1.5, 0.3, 2.0])
def test_inv_lambda_conditional_matches_quadrature(u):
    # p(lambda | u) is proportional to the mixture integrand; its E[1/lambda] by quadrature.
    z, _ = integrate.quad(_mixture_density, 0, np.inf, args=(u,))
    m, _ = integrate.quad(lambda t: _mixture_density(t, u) / t, 0, np.inf)
    rng = np.random.default_rng(0)
    draws = sample_inv_lambda(np.full(40000, u), rng)
    assert m / z == pytest.approx(1 / abs(u), rel=1e-5)
    assert draws.mean() == pytest.approx(m / z, rel=0.03)
    # IG(mean mu, shape 1) has variance mu^3
    assert draws.var() == pytest.approx(1 / abs(u) ** 3, rel=0.15)


def test_expected_inv_lambda_is_gig_moment():
    # q(lambda) propto lambda^(-1/2) exp(-(lambda + m2/lambda)/2): E[1/lambda] by quadrature
    for m2 in (0.05, 1.0, 7.0):
        dens = lambda t, m2=m2: t**-0.5 * np.exp(-(t + m2 / t) / 2)  # noqa: E731
        z, _ = integrate.quad(dens, 0, np.inf)
        m, _ = integrate.quad(lambda t, d=dens: d(t) / t, 0, np.inf)
        assert expected_inv_lambda(m2) == pytest.approx(m / z, rel=1e-6)
    assert np.isfinite(expected_inv_lambda(0.0))


def test_expected_hinge_against_quadrature():
    for mu, var in [(-1.0, 0.3), (0.2, 2.0), (1.5, 0.01)]:
        val, _ = integrate.quad(
            lambda u, mu=mu, var=var: max(u, 0) * stats.norm.pdf(u, mu, np.sqrt(var)),
            -20,
            20,
            points=[0],
        )
        assert expected_hinge(mu, var) == pytest.approx(val, rel=1e-6, abs=1e-10)


def test_coef_conditional_against_grid():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(6, 1))
    y = np.array([1, -1, 1, 1, -1, -1.0])
    inv_lam = rng.gamma(2.0, 1.0, size=6)
    prior = np.array([0.7])
    mean, cov = bsvm_coef_posterior(x, y, inv_lam, prior)
    grid = np.linspace(-15, 15, 200001)
    lam = 1 / inv_lam
    u = 1 - y[:, None] * x[:, :1] * grid[None, :]
    logp = -0.5 * prior[0] * grid**2 + np.sum(
        -0.5 * np.log(2 * np.pi * lam[:, None]) - (u + lam[:, None]) ** 2 / (2 * lam[:, None]),
        axis=0,
    )
    w = np.exp(logp - logp.max())
    w /= w.sum()
    grid_mean = np.sum(w * grid)
    grid_var = np.sum(w * (grid - grid_mean) ** 2)
    assert mean[0] == pytest.approx(grid_mean, rel=1e-6, abs=1e-8)
    assert cov[0, 0] == pytest.approx(grid_var, rel=1e-5)


def test_coef_conditional_multivariate_against_direct_solve():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(30, 3))
    y = np.sign(rng.normal(size=30))
    inv_lam = rng.gamma(2.0, 1.0, size=30)
    prior = np.array([0.5, 2.0, 1.0])
    mean, cov = bsvm_coef_posterior(X, y, inv_lam, prior)
    # gradient of the log conditional vanishes at the mean; Hessian is -precision
    lam = 1 / inv_lam

    def grad(b):
        u = 1 - y * (X @ b)
        return -prior * b + X.T @ (y * (u + lam) / lam)

    assert np.allclose(grad(mean), 0, atol=1e-9)
    eps = 1e-5
    hess = np.stack([(grad(mean + eps * e) - grad(mean - eps * e)) / (2 * eps) for e in np.eye(3)])
    assert np.allclose(-np.linalg.inv(hess), cov, rtol=1e-5)


def test_tpbn_gibbs_xi_conditional_against_grid():
    # xi | theta, eta is proportional to N(theta; 0, xi) Ga(xi; r, eta): compare E[1/xi] on a grid.
    shrink = TPBNShrinkage((1, 1, 1), 0.5, 0.5)
    theta, eta = 0.8, 1.7
    shrink.eta[:] = eta
    rng = np.random.default_rng(3)
    draws = []
    for _ in range(3000):
        shrink.eta[:] = eta
        shrink.update_gibbs(np.array([[[theta]]]), rng)
        draws.append(shrink.prior_precision.ravel()[0])
    grid = np.linspace(1e-6, 60, 400001)
    logp = stats.norm.logpdf(theta, 0, np.sqrt(grid)) + stats.gamma.logpdf(grid, 0.5, scale=1 / eta)
    w = np.exp(logp - logp.max())
    assert np.mean(draws) == pytest.approx(np.sum(w / grid) / w.sum(), rel=0.05)


def test_tpbn_vb_matches_bessel_ratio():
    # ERRATA 000 section 8: <1/xi> = sqrt(2<eta>/<a^2>) K_{r-1.5}(u) / K_{r-0.5}(u), r = 1/2
    shrink = TPBNShrinkage((1, 2, 3), 0.5, 0.5)
    m2 = np.array([[[0.1, 1.0, 4.0], [0.01, 0.5, 2.0]]])
    eta = shrink.eta.copy()
    prec = shrink.update_vb(m2)
    w = np.sqrt(2 * eta * m2)
    expected = np.sqrt(2 * eta / m2) * special.kv(0.5 - 1.5, w) / special.kv(0.5 - 0.5, w)
    assert np.allclose(prec, expected, rtol=1e-8)


def _toy(n, rng, gap=1.0):
    y = np.where(rng.random(n) < 0.5, 1, 0)
    X = rng.normal(size=(n, 5))
    X[:, 0] += np.where(y == 1, 2 + gap, -2 - gap)
    return X, y


@pytest.mark.parametrize("inference", ["vb", "gibbs"])
def test_bayesian_svm_separates_toy_problem(inference):
    rng = np.random.default_rng(4)
    X, y = _toy(80, rng)
    Xt, yt = _toy(200, rng)
    y_lab = np.array(["neg", "pos"])[y]
    clf = BayesianSVM(inference=inference, n_samples=200, burn_in=100, random_state=0)
    clf.fit(X, y_lab)
    assert list(clf.classes_) == ["neg", "pos"]
    assert np.mean(clf.predict(Xt) == np.array(["neg", "pos"])[yt]) > 0.97
    # the informative coefficient dominates the shrunk noise coefficients
    assert abs(clf.coef_[0]) > 2.5 * np.abs(clf.coef_[1:]).max()
    if inference == "gibbs":
        assert clf.idata_.posterior["coef"].shape == (1, 200, 5)
    else:
        assert np.all(np.isfinite(clf.lower_bound_))


def test_bayesian_svm_rejects_bad_input():
    X = np.zeros((4, 2))
    with pytest.raises(ValueError, match="exactly 2"):
        BayesianSVM().fit(X, [0, 1, 2, 1])
    with pytest.raises(ValueError, match="inference"):
        BayesianSVM(inference="mcmc").fit(X, [0, 1, 0, 1])
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        BayesianSVM().fit(X, [0, 1, 0, 1])


@pytest.mark.parametrize("p", [0.0, 0.5, -1.5, 2.0])
def test_vectorised_gig_draws_match_bessel_moments(p):
    from omicsbayes.inference import gig_moments
    from omicsbayes.inference.gig import sample_gig_vectorised

    rng = np.random.default_rng(5)
    # one value from each regime: small omega, omega in the plain ratio-of-uniforms range, large
    a = np.repeat([2.0, 0.8, 20.0], 30000)
    b = np.repeat([1e-3, 0.6, 30.0], 30000)
    x = sample_gig_vectorised(a, b, p, rng).reshape(3, -1)
    mean, mean_inv, _ = gig_moments(a[::30000], b[::30000], p)
    assert np.allclose(x.mean(axis=1), mean, rtol=0.05)
    # E[1/x] within 4 standard errors: with small omega 1/x is heavy-tailed (about 2.7 % for
    # p = 0.5), too wide for a fixed 5 % (E[x^-2] = (a / b) K_{p-2}(w) / K_p(w))
    a0, b0 = a[::30000], b[::30000]
    w = np.sqrt(a0 * b0)
    second_inv = (a0 / b0) * special.kve(p - 2, w) / special.kve(p, w)
    se = np.sqrt((second_inv - mean_inv**2) / x.shape[1])
    assert np.all(np.abs((1 / x).mean(axis=1) - mean_inv) < 4 * se)


def test_gig_mean_and_inverse_mean_matches_shared_moments():
    from omicsbayes.inference import gig_moments
    from omicsbayes.inference.gig import gig_mean_and_inverse_mean

    a = np.array([0.1, 2.0, 30.0, 1e-3])
    b = np.array([1e-8, 0.7, 50.0, 4.0])
    for p in (0.0, 0.5, -0.5, 1.7):
        m, mi = gig_mean_and_inverse_mean(a, b, p)
        m_ref, mi_ref, _ = gig_moments(a, b, p)
        assert np.allclose(m, m_ref, rtol=1e-10) and np.allclose(mi, mi_ref, rtol=1e-10)
    # p = 0 is a compiled K1 / K0 (series below 2, continued fraction above): scipy's along
    # omega = sqrt(ab) from 1e-150 to 1e8, across the switch at 2
    omega = np.concatenate([np.logspace(-150, 8, 3000), [2.0 - 1e-12, 2.0, 2.0 + 1e-12]])
    m, mi = gig_mean_and_inverse_mean(omega, omega, 0.0)  # eta = 1: both are the ratio
    ratio = special.k1e(omega) / special.k0e(omega)
    np.testing.assert_allclose(m, ratio, rtol=1e-13)
    np.testing.assert_allclose(mi, ratio, rtol=1e-13)


@pytest.mark.parametrize("p", [0.0, 0.3, -0.5, 1.5])
def test_compiled_gig_draws_against_scipy_in_each_regime(p):
    """KS tests of sample_gig_vectorised against scipy's geninvgauss, omega in each of the
    three regimes of the compiled per-entry sampler (small omega, plain ratio of uniforms,
    mode shift), and a scale sqrt(b / a) != 1."""
    from omicsbayes.inference.gig import sample_gig_vectorised

    rng = np.random.default_rng(11)
    for omega in (0.05, 0.8, 4.0):
        if abs(p) >= 1 and omega < 1:
            continue  # q >= 1 always takes the mode shift
        a, b = omega / 2.0, omega * 2.0  # sqrt(ab) = omega, sqrt(b / a) = 2
        x = sample_gig_vectorised(np.full(20000, a), np.full(20000, b), p, rng) / 2.0
        assert stats.kstest(x, stats.geninvgauss(p, omega).cdf).pvalue > 1e-3, omega


def test_compiled_gig_draws_mixed_regimes_in_one_array():
    """One call over entries of all three regimes interleaved (each entry runs its own rejection
    loop on the shared Generator): KS per regime against scipy, and the same seed gives the same
    draws."""
    from omicsbayes.inference.gig import sample_gig_vectorised

    omegas = np.array([0.03, 0.7, 3.0])
    w = np.tile(omegas, 15000)
    x = sample_gig_vectorised(w, w, 0.0, np.random.default_rng(3))  # sqrt(b / a) = 1
    for j, omega in enumerate(omegas):
        assert stats.kstest(x[j::3], stats.geninvgauss(0.0, omega).cdf).pvalue > 1e-3, omega
    again = sample_gig_vectorised(w, w, 0.0, np.random.default_rng(3))
    np.testing.assert_array_equal(x, again)


def test_tpbn_gibbs_eta_draw_is_numpys_gamma():
    """With r + s = 1 the eta draw takes numpy's exponential path: the same numbers as
    rng.gamma(1, scale) from the same state (eta and Phi start at 1)."""
    from omicsbayes.inference.gig import sample_gig_vectorised
    from omicsbayes.inference.tpbn import TPBNShrinkage

    theta = np.random.default_rng(0).normal(size=(1, 3, 50))
    shrink = TPBNShrinkage((1, 3, 50))
    shrink.update_gibbs(theta, np.random.default_rng(7))
    rng = np.random.default_rng(7)
    xi = np.maximum(sample_gig_vectorised(2.0, np.maximum(theta**2, 1e-12), 0.0, rng), 1e-12)
    np.testing.assert_array_equal(shrink.xi, xi)
    np.testing.assert_array_equal(shrink.eta, rng.gamma(1.0, 1.0 / (xi + 1.0)))
