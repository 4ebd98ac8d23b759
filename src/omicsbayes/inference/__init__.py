"""Pieces several models share, written once: gamma (shape-rate) VB moments, GIG,
inverse-Gaussian, truncated-normal and Polya-gamma moments and draws, convergence and finiteness
guards."""

from .convergence import NumericalError, check_finite, relative_improvement
from .gamma import gamma_entropy, gamma_expected_log_pdf, gamma_moments
from .gig import gig_moments, sample_gig, sample_invgauss
from .polyagamma import polyagamma_mean, sample_polyagamma
from .truncnorm import sample_truncnorm, truncnorm_moments

__all__ = [
    "NumericalError",
    "check_finite",
    "relative_improvement",
    "gamma_entropy",
    "gamma_expected_log_pdf",
    "gamma_moments",
    "gig_moments",
    "sample_gig",
    "sample_invgauss",
    "polyagamma_mean",
    "sample_polyagamma",
    "sample_truncnorm",
    "truncnorm_moments",
]
