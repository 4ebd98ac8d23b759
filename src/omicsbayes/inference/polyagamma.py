"""Polya-gamma PG(b, c) draws through the ``polyagamma`` package, vectorised, and its mean."""

import numpy as np
from polyagamma import random_polyagamma


def sample_polyagamma(b, c, rng):
    """Draw omega ~ PG(b, c) elementwise with the caller's numpy Generator ``rng``."""
    b, c = np.broadcast_arrays(np.asarray(b, float), np.asarray(c, float))
    return random_polyagamma(b, c, random_state=rng)


def polyagamma_mean(b, c):
    """E[PG(b, c)] = b / (2c) tanh(c / 2), with the c -> 0 limit b / 4."""
    b, c = np.broadcast_arrays(np.asarray(b, float), np.asarray(c, float))
    c = np.abs(c)
    small = c < 1e-6
    safe = np.where(small, 1.0, c)
    return np.where(small, b / 4.0, b / (2 * safe) * np.tanh(safe / 2))
