"""Estimators, one module per paper (scikit-learn conventions).

=====================  ==========================================================
module                 estimators
=====================  ==========================================================
``rank_factor``        RankFactorClassifier (paper 000)
``pfa``                PoissonFactorAnalysis, PFAClassifier (baseline of 000, 002)
``bam``                BayesianProbitClassifier, BAMClassifier (paper 001)
``rflvm``              RFLVM (paper 002)
``ibp_factor``         IBPFactorModel (baseline of 002)
``bm2pca``             BM2PCAClassifier, BM2PCARegressor (paper 003)
``mvgp``               ConstrainedMVGP, TraceGP, MVGP, KPMF, PMF, ProDiGe (paper 004)
``baselines``          FullSVM, PCASVM, LDASVM, LogisticBaseline, LinearSVMBaseline
=====================  ==========================================================

Every class subclasses :class:`omicsbayes.models._base.BaseOmicsEstimator` (or its VB / MCMC
bases) and declares ``capabilities`` (:data:`omicsbayes.models._capabilities.CAPABILITIES`);
an instance's capabilities are its scikit-learn tags, and
``_capabilities.models_with(capability)`` lists the classes that have one, for the config schema
and the experiment kinds.

Names are imported lazily so that importing one family does not load the others.
"""

import importlib

_WHERE = {
    "RankFactorClassifier": "rank_factor",
    "PoissonFactorAnalysis": "pfa",
    "PFAClassifier": "pfa",
    "BayesianProbitClassifier": "bam",
    "BAMClassifier": "bam",
    "RFLVM": "rflvm",
    "IBPFactorModel": "ibp_factor",
    "BM2PCAClassifier": "bm2pca",
    "BM2PCARegressor": "bm2pca",
    "ConstrainedMVGP": "mvgp",
    "TraceGP": "mvgp",
    "MVGP": "mvgp",
    "KPMF": "mvgp",
    "PMF": "mvgp",
    "ProDiGe": "mvgp",
    "FullSVM": "baselines",
    "PCASVM": "baselines",
    "LDASVM": "baselines",
    "LogisticBaseline": "baselines",
    "LinearSVMBaseline": "baselines",
}

__all__ = sorted(_WHERE)


def __getattr__(name):
    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
