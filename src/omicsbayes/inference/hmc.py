"""Hamiltonian Monte Carlo (Neal 2011, "MCMC using Hamiltonian dynamics") on a tuple of arrays,
with a unit mass matrix; the step size is found at the start and adapted only while the caller
says so (burn-in)."""

import numpy as np


def _finite(arrays):
    return all(bool(np.all(np.isfinite(a))) for a in arrays)


def hmc_step(parts, log_density, grad, step_size, n_leapfrog, rng):
    """One HMC transition: a fresh N(0, I) momentum, ``n_leapfrog`` leapfrog steps, and a
    Metropolis accept / reject on the change of the Hamiltonian (Neal 2011, eq. 5.17-5.20).

    The leapfrog kicks use ``grad``, which may be any deterministic function of the position,
    e.g. the gradient computed in single precision: a leapfrog map whose kicks depend on the
    position only is volume-preserving and reversible whatever the force, so the Metropolis
    step on the exact ``log_density`` keeps the target invariant; a poor approximation only
    lowers the acceptance. ``log_density`` is evaluated at the two ends only.

    Parameters
    ----------
    parts : tuple of ndarray
        Current position, any number of arrays of any shapes (not modified).
    log_density : callable
        ``log_density(*parts) -> float``, the log target up to a constant.
    grad : callable
        ``grad(*parts) -> tuple of ndarray``, its gradient (or an approximation of it) with
        respect to each part. Raising ``numpy.linalg.LinAlgError`` in either, a non-finite
        gradient or a non-finite value rejects the proposal.
    step_size : float
        Leapfrog step size; draw it afresh (jitter) per call, never from the state.
    n_leapfrog : int
    rng : numpy.random.Generator

    Returns
    -------
    parts : tuple of ndarray
        The new position (the old arrays when rejected).
    accept_prob : float
        min(1, exp(H_old - H_new)); 0 for a non-finite or failed proposal.
    """
    value = log_density(*parts)
    grads = grad(*parts)
    momenta = [rng.standard_normal(p.shape) for p in parts]
    h_old = value - 0.5 * sum(float(np.sum(m * m)) for m in momenta)
    log_u = np.log(rng.uniform())
    pos = [p.copy() for p in parts]
    try:
        # a diverging trajectory overflows (to inf or nan): it is rejected, not warned about
        with np.errstate(over="ignore", invalid="ignore"):
            for step in range(n_leapfrog):
                for m, g in zip(momenta, grads, strict=True):
                    m += (0.5 if step == 0 else 1.0) * step_size * g
                for p, m in zip(pos, momenta, strict=True):
                    p += step_size * m
                grads = grad(*pos)
                if not _finite(grads):
                    return tuple(parts), 0.0
            for m, g in zip(momenta, grads, strict=True):
                m += 0.5 * step_size * g
            h_new = log_density(*pos) - 0.5 * sum(float(np.sum(m * m)) for m in momenta)
    except np.linalg.LinAlgError:
        return tuple(parts), 0.0
    if not np.isfinite(h_new):
        return tuple(parts), 0.0
    accept_prob = float(np.exp(min(0.0, h_new - h_old)))
    if log_u < h_new - h_old:
        return tuple(pos), accept_prob
    return tuple(parts), accept_prob


def _one_leapfrog_log_ratio(parts, log_density, grad, step_size, momenta, h_old):
    """H_new - H_old after one leapfrog step of ``step_size`` from (``parts``, ``momenta``);
    -inf for a failed or non-finite step."""
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # as in hmc_step
            grads = grad(*parts)
            mom = [m + 0.5 * step_size * g for m, g in zip(momenta, grads, strict=True)]
            pos = [p + step_size * m for p, m in zip(parts, mom, strict=True)]
            grads = grad(*pos)
            if not _finite(grads):
                return -np.inf
            for m, g in zip(mom, grads, strict=True):
                m += 0.5 * step_size * g
            h_new = log_density(*pos) - 0.5 * sum(float(np.sum(m * m)) for m in mom)
    except np.linalg.LinAlgError:
        return -np.inf
    return float(h_new - h_old) if np.isfinite(h_new) else -np.inf


def find_step_size(parts, log_density, grad, step_size, rng, max_doublings=40):
    """A starting step size for the current position: Hoffman & Gelman (2014), Algorithm 4
    ("FindReasonableEpsilon"). With one N(0, I) momentum, the step is doubled (halved) while one
    leapfrog step accepts with probability above (below) 1/2; returned is the step on the
    accepting side of the crossing (Algorithm 4 returns the other side when doubling). Run it
    once, at the chain's start: it reads the state, so the chain is Markov only once the step
    is fixed (after burn-in).

    Parameters
    ----------
    parts, log_density, grad, rng
        As in :func:`hmc_step`.
    step_size : float
        Where the search starts.
    max_doublings : int
        At most this many doublings or halvings (a flat target accepts every step).

    Returns
    -------
    float
    """
    momenta = [rng.standard_normal(p.shape) for p in parts]
    h_old = log_density(*parts) - 0.5 * sum(float(np.sum(m * m)) for m in momenta)
    log_half = np.log(0.5)
    first = _one_leapfrog_log_ratio(parts, log_density, grad, step_size, momenta, h_old)
    direction = 1.0 if first > log_half else -1.0
    for _ in range(max_doublings):
        trial = step_size * 2.0**direction
        log_ratio = _one_leapfrog_log_ratio(parts, log_density, grad, trial, momenta, h_old)
        if direction * log_ratio <= direction * log_half:  # crossed 1/2
            return float(trial if direction < 0 else step_size)
        step_size = trial
    return float(step_size)


def dual_averaging_start(step_size):
    """The state of :func:`dual_averaging` from a starting step size (e.g. of
    :func:`find_step_size`): mu = log(10 step_size), no iterations, H_bar = 0 (Hoffman & Gelman
    2014, Algorithm 5); the averaged log step starts at log step_size (its first update
    replaces it), so that a burn-in without transitions keeps the starting step."""
    return (float(np.log(10.0 * step_size)), 0, 0.0, float(np.log(step_size)))


def dual_averaging(state, accept_prob, target=0.7, gamma=0.05, t0=10.0, kappa=0.75):
    """One step of Nesterov dual averaging on log step size toward the target acceptance
    probability (Hoffman & Gelman 2014, section 3.2.1 and Algorithm 5, their defaults): H_bar
    averages target - accept_prob, log step = mu - sqrt(m) H_bar / gamma, and the weighted
    average log step bar (weights m^-kappa) is the step to fix when burn-in ends (a chain whose
    step size still depends on its past is not Markov).

    Returns
    -------
    state : tuple
        (mu, m, H_bar, log step bar).
    step_size : float
        The step for the next transition.
    """
    mu, m, h_bar, log_bar = state
    m += 1
    h_bar += (target - accept_prob - h_bar) / (m + t0)
    log_step = mu - np.sqrt(m) / gamma * h_bar
    weight = m**-kappa
    log_bar = weight * log_step + (1.0 - weight) * log_bar
    return (mu, m, h_bar, log_bar), float(np.exp(log_step))


def dual_averaging_final(state):
    """The step size to fix after burn-in: exp(log step bar) of the :func:`dual_averaging`
    state."""
    return float(np.exp(state[3]))
