"""Preprocessing: sample-wise and fold-fitted transformers, pipelines from config step lists.

Transformers (``transforms``): BackgroundCorrect, NormalizeTotal, MedianOfRatios, Log,
QuantileNormalize, TopGenes, MaxZeroFraction, RankTransform, RoundCounts, ZScore, UnitLength;
``build_pipeline`` and ``split_pipeline`` turn config step lists into scikit-learn Pipelines.
Kernels (imported lazily): EmpiricalKernelMap (``kernels``), diffusion_kernel and
normalized_laplacian (``graph``).
"""

import importlib
import importlib.util

from .transforms import (
    STEPS,
    BackgroundCorrect,
    Log,
    MaxZeroFraction,
    MedianOfRatios,
    NormalizeTotal,
    QuantileNormalize,
    RankTransform,
    RoundCounts,
    TopGenes,
    UnitLength,
    ZScore,
    build_pipeline,
    check_matrix,
    split_pipeline,
)

_LAZY = {
    "EmpiricalKernelMap": "kernels",
    "diffusion_kernel": "graph",
    "normalized_laplacian": "graph",
}

__all__ = [
    "STEPS",
    "BackgroundCorrect",
    "Log",
    "MaxZeroFraction",
    "MedianOfRatios",
    "NormalizeTotal",
    "QuantileNormalize",
    "RankTransform",
    "RoundCounts",
    "TopGenes",
    "UnitLength",
    "ZScore",
    "build_pipeline",
    "check_matrix",
    "split_pipeline",
    # lazy names whose module is present (so that ``import *`` works while one is missing)
    *sorted(n for n, m in _LAZY.items() if importlib.util.find_spec(f"{__name__}.{m}")),
]


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
