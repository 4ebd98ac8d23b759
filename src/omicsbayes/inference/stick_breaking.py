"""Truncated stick-breaking (Dirichlet process) utilities (Sethuraman 2001; Ishwaran & James 2001).

With ``T`` components, ``q_t = nu_t prod_{l<t} (1 - nu_l)``, ``nu_t ~ Beta(1, alpha)`` for
``t < T`` and ``nu_T = 1``; ``alpha ~ Ga(alpha_s, alpha_r)`` (shape, rate).  Paper 000, section 7,
"DPM parameters".
"""

import numpy as np
from scipy import special


def stick_weights(nu):
    """Mixture weights ``q`` (length T) from the T-1 stick proportions ``nu``."""
    nu = np.asarray(nu, float)
    rest = np.concatenate([[1.0], np.cumprod(1.0 - nu)])
    return np.concatenate([nu, [1.0]]) * rest


def stick_posterior(counts, alpha):
    """Beta parameters of ``nu_t | .`` given (expected) component counts: ``(1 + n_t, alpha +
    sum_{l>t} n_l)`` for ``t < T`` (paper 000, section 7)."""
    counts = np.asarray(counts, float)
    tail = np.cumsum(counts[::-1])[::-1]
    return 1.0 + counts[:-1], alpha + tail[1:]


def expected_log_weights(g1, g2):
    """``E[log q_t]`` under independent ``nu_t ~ Beta(g1_t, g2_t)`` (Blei & Jordan 2005)."""
    g1, g2 = np.asarray(g1, float), np.asarray(g2, float)
    total = special.digamma(g1 + g2)
    e_log_nu = special.digamma(g1) - total
    e_log_1m = special.digamma(g2) - total
    return np.concatenate([e_log_nu, [0.0]]) + np.concatenate([[0.0], np.cumsum(e_log_1m)])


def alpha_posterior(sum_log_1m_nu, n_components, alpha_s, alpha_r):
    """Gamma (shape, rate) of ``alpha | nu``: ``(alpha_s + T - 1, alpha_r - sum log(1 - nu_t))``."""
    return alpha_s + n_components - 1, alpha_r - sum_log_1m_nu


def expected_log_1m_nu(g1, g2):
    """``E[log(1 - nu_t)]`` under ``nu_t ~ Beta(g1, g2)``."""
    return special.digamma(g2) - special.digamma(np.asarray(g1) + g2)


def sample_categorical(log_prob, rng):
    """One draw per row of unnormalised log probabilities (Gumbel-max), vectorised."""
    gumbel = -np.log(-np.log(rng.uniform(size=log_prob.shape)))
    return np.argmax(log_prob + gumbel, axis=-1)
