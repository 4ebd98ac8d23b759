"""The shared shape-rate gamma VB helpers against scipy (closed forms and quadrature)."""

import numpy as np
import pytest
from scipy import integrate, stats

from omicsbayes.inference.gamma import gamma_entropy, gamma_expected_log_pdf, gamma_moments

CASES = [(0.3, 2.0), (1.0, 1.0), (2.5, 0.1), (40.0, 7.0)]


@pytest.mark.parametrize(("shape", "rate"), CASES)
def test_entropy_matches_scipy(shape, rate):
    expected = stats.gamma(shape, scale=1.0 / rate).entropy()
    assert gamma_entropy(shape, rate) == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_entropy_is_vectorised_over_rates():
    rates = np.array([0.5, 3.0, 9.0])
    expected = [stats.gamma(2.0, scale=1.0 / r).entropy() for r in rates]
    np.testing.assert_allclose(gamma_entropy(2.0, rates), expected, rtol=1e-12)


@pytest.mark.parametrize(("shape", "rate"), CASES)
def test_moments_match_quadrature(shape, rate):
    q = stats.gamma(shape, scale=1.0 / rate)
    e_x, e_log_x = gamma_moments(shape, rate)
    assert e_x == pytest.approx(q.mean(), rel=1e-12)
    assert e_log_x == pytest.approx(q.expect(np.log), rel=1e-7)


@pytest.mark.parametrize(("shape", "rate"), CASES)
def test_expected_log_pdf_matches_quadrature(shape, rate):
    """E_q[log Ga(x | a0, b0)] with q = Ga(shape, rate), by numerical integration."""
    a0, b0 = 1.7, 0.4
    q = stats.gamma(shape, scale=1.0 / rate)
    prior = stats.gamma(a0, scale=1.0 / b0)
    e_x, e_log_x = gamma_moments(shape, rate)
    expected, _ = integrate.quad(
        lambda x: q.pdf(x) * prior.logpdf(x), 0, np.inf, limit=200, epsabs=1e-11
    )
    assert gamma_expected_log_pdf(a0, b0, e_x, e_log_x) == pytest.approx(expected, rel=1e-6)
