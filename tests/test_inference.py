"""Shared inference pieces against independent references (scipy, quadrature, sample moments)."""

import numpy as np
import pytest
from scipy import integrate, stats

from omicsbayes._seed import derive_seed
from omicsbayes.inference import (
    NumericalError,
    check_finite,
    gig_moments,
    polyagamma_mean,
    relative_improvement,
    sample_gig,
    sample_invgauss,
    sample_polyagamma,
    sample_truncnorm,
    truncnorm_moments,
)


def _gig_reference(a, b, p):
    dist = stats.geninvgauss(p, np.sqrt(a * b), scale=np.sqrt(b / a))
    return dist.mean(), dist.expect(lambda x: 1 / x), dist.expect(np.log)


@pytest.mark.parametrize(
    "a,b,p", [(2.0, 3.0, -0.5), (0.5, 0.1, 1.5), (40.0, 0.02, 0.5), (1.0, 1.0, -2.0)]
)
def test_gig_moments_match_scipy(a, b, p):
    mean, mean_inv, mean_log = gig_moments(a, b, p)
    ref = _gig_reference(a, b, p)
    np.testing.assert_allclose([mean, mean_inv, mean_log], ref, rtol=1e-6, atol=1e-8)


def test_gig_moments_large_argument_does_not_underflow():
    mean, mean_inv, _ = gig_moments(1e4, 1e4, 0.5)  # sqrt(ab) = 1e4: K_p(1e4) underflows unscaled
    assert np.isfinite(mean) and np.isfinite(mean_inv)
    np.testing.assert_allclose(mean, 1.0, rtol=1e-3)


def test_gig_gamma_limit():
    a, p = 3.0, 2.5  # b = 0: Gamma(p, rate a/2)
    mean, mean_inv, mean_log = gig_moments(a, 0.0, p)
    g = stats.gamma(p, scale=2 / a)
    np.testing.assert_allclose(
        [mean, mean_inv, mean_log],
        [g.mean(), g.expect(lambda x: 1 / x), g.expect(np.log)],
        rtol=1e-6,
    )


def test_gig_and_invgauss_draws_match_moments():
    rng = np.random.default_rng(1)
    draws = sample_gig(np.full(200_000, 2.0), 3.0, -0.5, rng)
    np.testing.assert_allclose(draws.mean(), gig_moments(2.0, 3.0, -0.5)[0], rtol=0.01)
    ig = sample_invgauss(np.full(200_000, 0.7), 2.0, rng)
    np.testing.assert_allclose([ig.mean(), ig.var()], [0.7, 0.7**3 / 2.0], rtol=0.02)


@pytest.mark.parametrize(
    "mu,sigma,lo,hi",
    [
        (0.5, 2.0, 1.0, np.inf),
        (0.0, 1.0, -np.inf, -3.0),
        (1.0, 0.5, -1.0, 2.0),
        (0.0, 1.0, 8.0, np.inf),
    ],
)
def test_truncnorm_moments_match_scipy(mu, sigma, lo, hi):
    mean, var = truncnorm_moments(mu, sigma, lo, hi)
    ref = stats.truncnorm((lo - mu) / sigma, (hi - mu) / sigma, loc=mu, scale=sigma)
    np.testing.assert_allclose([mean, var], [ref.mean(), ref.var()], rtol=1e-6)


def test_truncnorm_far_tail_is_finite_and_inside():
    mean, var = truncnorm_moments(0.0, 1.0, 40.0, np.inf)
    assert 40.0 < mean < 40.1 and 0 < var < 1e-3


def test_truncnorm_draws_inside_bounds_with_right_mean():
    rng = np.random.default_rng(2)
    x = sample_truncnorm(np.zeros(100_000), 1.0, 0.5, 2.0, rng)
    assert x.min() >= 0.5 and x.max() <= 2.0
    np.testing.assert_allclose(x.mean(), truncnorm_moments(0.0, 1.0, 0.5, 2.0)[0], rtol=0.01)


def test_polyagamma_mean_and_draws():
    rng = np.random.default_rng(3)
    b, c = 2.0, 1.7
    expected = b / (2 * c) * np.tanh(c / 2)
    np.testing.assert_allclose(polyagamma_mean(b, c), expected)
    np.testing.assert_allclose(
        sample_polyagamma(np.full(100_000, b), c, rng).mean(), expected, rtol=0.01
    )
    np.testing.assert_allclose(polyagamma_mean(1.0, 0.0), 0.25)


def test_polyagamma_laplace_transform():
    """E[exp(-omega t^2/2)] = cosh(c/2)^b / cosh(sqrt(c^2+t^2)/2)^b for PG(b, c)."""
    rng = np.random.default_rng(4)
    b, c, t = 1.0, 0.8, 1.3
    draws = sample_polyagamma(np.full(200_000, b), c, rng)
    expected = (np.cosh(c / 2) / np.cosh(np.sqrt(c**2 + t**2) / 2)) ** b
    np.testing.assert_allclose(np.exp(-draws * t**2 / 2).mean(), expected, rtol=5e-3)


def test_check_finite_names_update_and_iteration():
    assert check_finite(1.0, "bound", 3) == 1.0
    with pytest.raises(NumericalError, match=r"q\(W\) update.*iteration 7"):
        check_finite(np.array([1.0, np.nan]), "q(W) update", 7)


def test_relative_improvement():
    assert relative_improvement(None, -10.0) == np.inf
    np.testing.assert_allclose(relative_improvement(-100.0, -99.0), 0.01)


def test_derive_seed_depends_on_every_part():
    base = derive_seed(1, "tissue", "rank", 0)
    assert base == derive_seed(1, "tissue", "rank", 0)
    assert (
        len({base, derive_seed(2, "tissue", "rank", 0), derive_seed(1, "tissue", "rank", 1)}) == 3
    )


def test_truncnorm_moments_against_quadrature():
    mu, sigma, lo, hi = 0.3, 1.2, -0.4, 1.9
    pdf = lambda x: stats.norm.pdf(x, mu, sigma)  # noqa: E731
    z = integrate.quad(pdf, lo, hi)[0]
    m = integrate.quad(lambda x: x * pdf(x), lo, hi)[0] / z
    v = integrate.quad(lambda x: (x - m) ** 2 * pdf(x), lo, hi)[0] / z
    np.testing.assert_allclose(truncnorm_moments(mu, sigma, lo, hi), (m, v), rtol=1e-8)
