"""Elliptical slice sampling leaves a conjugate Gaussian posterior invariant."""

import numpy as np
import pytest

from omicsbayes.inference import NumericalError
from omicsbayes.inference.ess import elliptical_slice, elliptical_slice_rows

SIGMA0 = np.array([[1.0, 0.6], [0.6, 2.0]])
L0 = np.linalg.cholesky(SIGMA0)
DATA = np.array([[0.8, -0.4], [1.3, 0.2], [0.5, 0.1]])
S2 = 0.5


def _posterior(mean0=(0.0, 0.0)):
    """x ~ N(mean0, SIGMA0), y_k ~ N(x, S2 I): closed-form posterior."""
    prec = np.linalg.inv(SIGMA0) + len(DATA) / S2 * np.eye(2)
    cov = np.linalg.inv(prec)
    mean = cov @ (np.linalg.solve(SIGMA0, np.asarray(mean0)) + DATA.sum(0) / S2)
    return mean, cov


def _loglik_rows(X, idx):
    return -0.5 * np.sum((X[:, None, :] - DATA[None]) ** 2, axis=(1, 2)) / S2


def test_rows_ess_matches_conjugate_posterior():
    rng = np.random.default_rng(0)
    chains = 4000
    X = rng.standard_normal((chains, 2)) @ L0.T
    for _ in range(40):
        X, _, _ = elliptical_slice_rows(
            X, rng.standard_normal((chains, 2)) @ L0.T, _loglik_rows, rng
        )
    mean, cov = _posterior()
    se = np.sqrt(np.diag(cov) / chains)
    assert np.all(np.abs(X.mean(0) - mean) < 4 * se)
    assert np.allclose(np.cov(X.T), cov, atol=0.12 * cov.max())


def test_whole_ess_with_mean_matches_conjugate_posterior():
    rng = np.random.default_rng(1)
    mean0 = np.array([1.0, -2.0])
    x = mean0.copy()
    draws = []
    for _ in range(4000):
        x, _, _ = elliptical_slice(
            x,
            L0 @ rng.standard_normal(2),
            lambda v: _loglik_rows(v[None], None)[0],
            rng,
            mean=mean0,
        )
        draws.append(x)
    draws = np.asarray(draws[500:])
    mean, cov = _posterior(mean0)
    # batch means for the Monte Carlo error of a correlated chain
    batches = draws[: len(draws) // 50 * 50].reshape(50, -1, 2).mean(1)
    se = batches.std(0, ddof=1) / np.sqrt(50)
    assert np.all(np.abs(draws.mean(0) - mean) < 4 * se + 1e-3)
    assert np.allclose(np.cov(draws.T), cov, atol=0.15 * cov.max())


def test_bounded_shrinkage_raises_clear_error():
    rng = np.random.default_rng(2)

    def ll(v):  # only the current point is admissible
        return 0.0 if np.all(v == 1.0) else -np.inf

    with pytest.raises(NumericalError, match="bracket shrinks"):
        elliptical_slice(np.ones(2), rng.standard_normal(2), ll, rng, max_shrink=20)

    def ll_rows(X, idx):
        return np.where(np.all(X == 1.0, axis=1), 0.0, -np.inf)

    with pytest.raises(NumericalError, match="row"):
        elliptical_slice_rows(
            np.ones((3, 2)), rng.standard_normal((3, 2)), ll_rows, rng, max_shrink=20
        )
