"""Evaluation: fold tables (``splitters``), metrics and their aggregation (``metrics``), and
ranking metrics P@k / R@k (``ranking``, imported lazily)."""

import importlib
import importlib.util

from .metrics import (
    accuracy,
    aupr,
    auroc,
    error_rate,
    heldout_log_likelihood,
    perplexity,
    rmse,
    summarize,
)
from .splitters import (
    PROTOCOLS,
    classification_splits,
    entry_kfold_splits,
    heldout_entry_splits,
    negatives_table,
    read_splits,
    row_kfold_splits,
    sample_negatives,
    write_splits,
)

_LAZY = {
    "precision_at_k": "ranking",
    "recall_at_k": "ranking",
    "ranking_curves": "ranking",
}

__all__ = [
    "PROTOCOLS",
    "accuracy",
    "aupr",
    "auroc",
    "classification_splits",
    "entry_kfold_splits",
    "error_rate",
    "heldout_entry_splits",
    "heldout_log_likelihood",
    "negatives_table",
    "perplexity",
    "read_splits",
    "rmse",
    "row_kfold_splits",
    "sample_negatives",
    "summarize",
    "write_splits",
    # lazy names whose module is present (so that ``import *`` works while one is missing)
    *sorted(n for n, m in _LAZY.items() if importlib.util.find_spec(f"{__name__}.{m}")),
]


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
