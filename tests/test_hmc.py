"""Hamiltonian Monte Carlo (inference/hmc.py) against closed-form targets."""

import arviz as az
import numpy as np
import pytest

from omicsbayes.inference.hmc import (
    dual_averaging,
    dual_averaging_final,
    dual_averaging_start,
    find_step_size,
    hmc_step,
)


def _gaussian_target(prec, mean):
    """log N(v; mean, prec^-1) of v = (x, y) up to a constant, and its gradient."""

    def log_density(x, y):
        v = np.concatenate([x.ravel(), y.ravel()]) - mean
        return -0.5 * v @ prec @ v

    def grad(x, y):
        g = -prec @ (np.concatenate([x.ravel(), y.ravel()]) - mean)
        return g[: x.size].reshape(x.shape), g[x.size :].reshape(y.shape)

    return log_density, grad


@pytest.mark.parametrize("force", ["exact", "approximate"])
def test_hmc_leaves_a_correlated_gaussian_invariant(force):
    """Two parts (a 2-vector and a scalar) of a correlated 3-D Gaussian: the chain's mean and
    covariance match the closed form within Monte Carlo error, also when the leapfrog kicks use
    the gradient of another Gaussian (a deterministic force that is not the target's gradient:
    only the acceptance drops)."""
    rng = np.random.default_rng(0)
    cov = np.array([[1.0, 0.8, 0.2], [0.8, 1.5, -0.3], [0.2, -0.3, 0.5]])
    mean = np.array([1.0, -2.0, 0.5])
    log_density, grad = _gaussian_target(np.linalg.inv(cov), mean)
    if force == "approximate":
        _, grad = _gaussian_target(np.linalg.inv(np.diag([1.2, 1.0, 0.6])), mean + 0.2)
    parts = (np.zeros(2), np.zeros(1))
    draws, probs = [], []
    for i in range(6000):
        parts, p = hmc_step(parts, log_density, grad, 0.25 * rng.uniform(0.8, 1.2), 8, rng)
        probs.append(p)
        if i >= 500:
            draws.append(np.concatenate(parts))
    draws = np.asarray(draws)
    se = np.array([float(np.squeeze(az.mcse(draws[None, :, d]))) for d in range(3)])
    assert np.all(np.abs(draws.mean(0) - mean) < 4 * se)
    assert np.allclose(np.cov(draws.T), cov, atol=0.12)
    assert (0.5 if force == "exact" else 0.05) < np.mean(probs) < (1.0 if force == "exact" else 0.5)


def test_hmc_rejects_failed_and_non_finite_proposals():
    rng = np.random.default_rng(1)
    x0 = (np.ones(3),)

    def failing(x):
        if not np.allclose(x, 1.0):
            raise np.linalg.LinAlgError("not positive definite")
        return (np.ones(3),)

    def nan_after_move(x):
        return 0.0 if np.allclose(x, 1.0) else np.nan

    def nan_grad_after_move(x):
        return (np.ones(3) if np.allclose(x, 1.0) else np.full(3, np.nan),)

    def zero(x):
        return 0.0

    def ones(x):
        return (np.ones(3),)

    for log_density, grad in ((zero, failing), (nan_after_move, ones), (zero, nan_grad_after_move)):
        parts, p = hmc_step(x0, log_density, grad, 0.1, 5, rng)
        assert p == 0.0 and parts[0] is x0[0]


def test_dual_averaging_moves_toward_target_acceptance():
    """Above the target the next step grows, below it shrinks (Hoffman & Gelman 2014, eq. 6);
    with no update the final step is the starting one."""
    state = dual_averaging_start(0.1)
    assert dual_averaging(state, 0.95)[1] > dual_averaging(state, 0.2)[1]
    assert dual_averaging_final(state) == pytest.approx(0.1)


@pytest.mark.parametrize("scale", [1e-3, 1.0, 50.0])
def test_find_step_size_scales_with_the_target_and_its_trajectories_accept(scale):
    """On N(0, scale^2 I) in 200 dimensions (leapfrog stable for steps below 2 scale), the
    search lands within a factor 4 of the scale from starts 10^6 times too small or too large,
    and 20-step trajectories at the found step accept (probability 0.3 to 1)."""
    rng = np.random.default_rng(3)
    d = 200

    def log_density(x):
        return -0.5 * float(x @ x) / scale**2

    def grad(x):
        return (-x / scale**2,)

    x = (scale * rng.standard_normal(d),)
    for start in (1e-6 * scale, 1e6 * scale):
        eps = find_step_size(x, log_density, grad, start, rng)
        assert scale / 4 < eps < 4 * scale
    probs = []
    for _ in range(200):
        x, p = hmc_step(x, log_density, grad, eps * rng.uniform(0.8, 1.2), 20, rng)
        probs.append(p)
    assert 0.3 < np.mean(probs) <= 1.0


def test_find_step_size_halves_past_failed_steps():
    """A gradient that raises LinAlgError beyond |x| > 1 (a failed step counts as rejected):
    from a huge start the search halves until one step stays inside."""
    rng = np.random.default_rng(4)

    def grad(x):
        if np.abs(x).max() > 1.0:
            raise np.linalg.LinAlgError("outside")
        return (-x,)

    eps = find_step_size((np.zeros(5),), lambda x: -0.5 * float(x @ x), grad, 1e3, rng)
    assert 0.0 < eps < 1.0


@pytest.mark.parametrize("start", [1e-4, 1.0])
def test_dual_averaging_reaches_target_acceptance_from_the_found_step(start):
    """Found step, 150 dual-averaging transitions, then the averaged step fixed, on a 50-D
    Gaussian of scale 0.1 with searches started 1,000 times too small or 10 times too large:
    the acceptance over the last 75 adapted transitions is within 0.05 of the 0.7 target, and
    over 400 fixed-step transitions between 0.6 and 0.9 (the averaged step is on the small
    side of the last adapted ones)."""
    rng = np.random.default_rng(5)
    scale, d = 0.1, 50

    def log_density(x):
        return -0.5 * float(x @ x) / scale**2

    def grad(x):
        return (-x / scale**2,)

    x = (scale * rng.standard_normal(d),)
    eps = find_step_size(x, log_density, grad, start, rng)
    state = dual_averaging_start(eps)
    adapted, fixed = [], []
    for _ in range(150):
        x, p = hmc_step(x, log_density, grad, eps * rng.uniform(0.8, 1.2), 10, rng)
        state, eps = dual_averaging(state, p)
        adapted.append(p)
    eps = dual_averaging_final(state)
    for _ in range(400):
        x, p = hmc_step(x, log_density, grad, eps * rng.uniform(0.8, 1.2), 10, rng)
        fixed.append(p)
    assert abs(np.mean(adapted[-75:]) - 0.7) < 0.05
    assert 0.6 < np.mean(fixed) < 0.9
