"""Gamma-distribution moments for mean-field VB, in one parameterisation: shape-rate.

``Ga(x | a, b) = b^a x^(a-1) exp(-b x) / Gamma(a)``. A model written in shape-scale (paper 001)
passes ``rate = 1 / scale``.
"""

import numpy as np
from scipy import special

__all__ = ["gamma_entropy", "gamma_expected_log_pdf", "gamma_moments"]


def gamma_moments(shape, rate):
    """``(E[x], E[log x])`` under Ga(shape, rate)."""
    return shape / rate, special.digamma(shape) - np.log(rate)


def gamma_expected_log_pdf(shape0, rate0, e_x, e_log_x):
    """``E_q[log Ga(x | shape0, rate0)]`` given ``E_q[x]`` and ``E_q[log x]``."""
    return shape0 * np.log(rate0) - special.gammaln(shape0) + (shape0 - 1.0) * e_log_x - rate0 * e_x


def gamma_entropy(shape, rate):
    """Differential entropy of Ga(shape, rate):
    ``a - log b + log Gamma(a) + (1 - a) psi(a)``."""
    return shape - np.log(rate) + special.gammaln(shape) + (1.0 - shape) * special.digamma(shape)
