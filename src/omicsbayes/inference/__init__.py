"""Pieces several models share, written once: gamma (shape-rate) VB moments, GIG,
inverse-Gaussian, truncated-normal and Polya-gamma moments and draws, convergence and finiteness
guards.

The names below are loaded from their modules on first use (PEP 562), so that importing one
module of the package (``inference.chain`` from ``tl``) does not compile the numba kernels of
the others.
"""

import importlib

#: Public name -> the module of this package that defines it.
_HOME = {
    "NumericalError": "convergence",
    "check_finite": "convergence",
    "relative_improvement": "convergence",
    "gamma_entropy": "gamma",
    "gamma_expected_log_pdf": "gamma",
    "gamma_moments": "gamma",
    "gig_moments": "gig",
    "sample_gig": "gig",
    "sample_invgauss": "gig",
    "polyagamma_mean": "polyagamma",
    "sample_polyagamma": "polyagamma",
    "sample_truncnorm": "truncnorm",
    "truncnorm_moments": "truncnorm",
}

__all__ = list(_HOME)


def __getattr__(name):
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_HOME))
