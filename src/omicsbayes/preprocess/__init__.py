"""Preprocessing: sample-wise and fold-fitted transformers, pipelines from config step lists.

Transformers (``transforms``): BackgroundCorrect, NormalizeTotal, MedianOfRatios, Log,
QuantileNormalize, TopGenes, MaxZeroFraction, RankTransform, RoundCounts, ZScore, UnitLength;
``build_pipeline`` and ``split_pipeline`` turn config step lists into scikit-learn Pipelines.
Kernels: EmpiricalKernelMap (``kernels``; config step ``empirical_kernel_map``), and
diffusion_kernel and normalized_laplacian for side-information graphs (``graph``).
"""

from .graph import diffusion_kernel, normalized_laplacian
from .kernels import EmpiricalKernelMap
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

STEPS["empirical_kernel_map"] = EmpiricalKernelMap  # paper 001's representation (section 4)

__all__ = [
    "STEPS",
    "BackgroundCorrect",
    "EmpiricalKernelMap",
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
    "diffusion_kernel",
    "normalized_laplacian",
    "split_pipeline",
]
