"""Hamiltonian Monte Carlo (inference/hmc.py) against closed-form targets."""

import arviz as az
import numpy as np

from omicsbayes.inference.hmc import adapt_step_size, hmc_step


def _gaussian_target(prec, mean):
    def log_density(x, y):
        v = np.concatenate([x.ravel(), y.ravel()]) - mean
        g = -prec @ v
        return -0.5 * v @ prec @ v, (g[: x.size].reshape(x.shape), g[x.size :].reshape(y.shape))

    return log_density


def test_hmc_leaves_a_correlated_gaussian_invariant():
    """Two parts (a 2-vector and a scalar) of a correlated 3-D Gaussian: the chain's mean and
    covariance match the closed form within Monte Carlo error."""
    rng = np.random.default_rng(0)
    cov = np.array([[1.0, 0.8, 0.2], [0.8, 1.5, -0.3], [0.2, -0.3, 0.5]])
    mean = np.array([1.0, -2.0, 0.5])
    log_density = _gaussian_target(np.linalg.inv(cov), mean)
    parts = (np.zeros(2), np.zeros(1))
    draws, probs = [], []
    for i in range(6000):
        parts, p = hmc_step(parts, log_density, 0.25 * rng.uniform(0.8, 1.2), 8, rng)
        probs.append(p)
        if i >= 500:
            draws.append(np.concatenate(parts))
    draws = np.asarray(draws)
    se = np.array([float(np.squeeze(az.mcse(draws[None, :, d]))) for d in range(3)])
    assert np.all(np.abs(draws.mean(0) - mean) < 4 * se)
    assert np.allclose(np.cov(draws.T), cov, atol=0.12)
    assert 0.5 < np.mean(probs) < 1.0


def test_hmc_rejects_failed_and_non_finite_proposals():
    rng = np.random.default_rng(1)
    x0 = (np.ones(3),)

    def failing(x):
        if not np.allclose(x, 1.0):
            raise np.linalg.LinAlgError("not positive definite")
        return 0.0, (np.ones(3),)

    def nan_after_move(x):
        return (0.0 if np.allclose(x, 1.0) else np.nan), (np.ones(3),)

    for target in (failing, nan_after_move):
        parts, p = hmc_step(x0, target, 0.1, 5, rng)
        assert p == 0.0 and parts[0] is x0[0]


def test_step_size_adaptation_moves_toward_target_acceptance():
    assert adapt_step_size(0.1, 0.95) > 0.1 > adapt_step_size(0.1, 0.2)
    assert adapt_step_size(0.1, 0.7) == 0.1
