"""The input checks every ``tl`` function runs before fitting, written once.

Each check raises one ``ValueError`` naming the ``.obs`` column, the matrix or the parameter at
fault and what was expected, before any long computation:

- :func:`check_matrix`: at least two samples and one gene, no infinite entry, and not every
  gene constant;
  :func:`check_entries`: an association matrix (``tl.mvgp``) of at least 2 x 2 with observed
  entries;
- :func:`missing_labels` (:func:`missing_label_strings`): the strings ``"nan"``, ``"None"``,
  ``"<NA>"`` and ``""`` (what ``astype(str)`` makes of missing values) are missing labels,
  exactly like NaN, with a warning;
- :func:`check_classes`: a label column that looks continuous or mostly unique is refused unless
  ``allow_many_classes=True``; every class needs at least two labelled samples;
- :func:`check_memory`: a lower bound of the fit's largest arrays, from the shapes and the
  estimator's parameters (:data:`FIT_BYTES`), against the memory of the machine.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "FIT_BYTES",
    "MISSING_STRINGS",
    "check_classes",
    "check_entries",
    "check_matrix",
    "check_memory",
    "fit_bytes",
    "machine_memory",
    "missing_label_strings",
    "missing_labels",
]

MISSING_STRINGS = frozenset({"", "nan", "none", "<na>"})  # compared lower-cased, stripped
CONTINUOUS_CLASSES = 10  # a float column with fractional values and more classes is continuous
MIN_CLASS_SIZE = 2


def check_matrix(X, who, source, obs_names, var_names):
    """Refuse a training matrix with fewer than two samples, no gene, an infinite entry, or every
    gene constant.

    ``X`` is dense samples x genes (NaN = missing, left to the model); ``source`` names it in the
    message (e.g. ``"adata.layers['counts']"``) and ``obs_names`` / ``var_names`` its rows and
    columns. Constant genes among varying ones are fine.
    """
    n, p = X.shape
    if n < 2:
        raise ValueError(f"{who}: {source} has {n} sample(s); a fit needs at least 2")
    if p == 0:
        raise ValueError(f"{who}: {source} has 0 genes (after mask_var); a fit needs at least 1")
    infinite = np.isinf(X)
    if infinite.any():
        i, j = np.argwhere(infinite)[0]
        raise ValueError(
            f"{who}: {source} has {int(infinite.sum())} infinite value(s), the first at sample "
            f"{str(obs_names[i])!r}, gene {str(var_names[j])!r}; expected finite values (NaN "
            "where missing)"
        )
    spread = np.fmax.reduce(X, axis=0) - np.fmin.reduce(X, axis=0)  # NaN-skipping, no copy
    if not np.any(spread > 0):
        values = X[~np.isnan(X)]
        if values.size == 0:
            what = "every entry is NaN"
        elif np.all(values == values[0]):
            what = f"every entry is {values[0]:g}"
        else:
            what = f"each of its {p} genes has a single value"
        raise ValueError(
            f"{who}: {source} is constant ({what}); a model needs genes that vary across samples"
        )


def check_entries(shape, n_observed, who, source):
    """Refuse an association matrix with fewer than two rows or columns or no observed entry."""
    if min(shape) < 2:
        raise ValueError(
            f"{who}: {source} has shape {tuple(shape)}; a fit needs at least 2 rows and 2 columns"
        )
    if n_observed == 0:
        raise ValueError(
            f"{who}: {source} has no observed entry (stored entries of a sparse matrix, non-NaN "
            "entries of a dense one); a fit needs some"
        )


def missing_label_strings(column):
    """Boolean mask of the labels that are strings meaning missing (see :data:`MISSING_STRINGS`)."""
    values = pd.Series(column, copy=False).astype(object)
    is_str = values.map(lambda v: isinstance(v, str)).to_numpy(dtype=bool)
    out = np.zeros(len(values), dtype=bool)
    out[is_str] = [v.strip().lower() in MISSING_STRINGS for v in values[is_str]]
    return out


def missing_labels(column, label_key, who, stacklevel=2):
    """Boolean mask of the missing labels of a label column: NaN, None, ``pd.NA`` and the strings
    of :data:`MISSING_STRINGS`, with a ``UserWarning`` saying how many were such strings (the
    one rule for ``tl`` and the workflow's classification tasks).

    ``label_key`` and ``who`` name the column and the caller in the warning; ``stacklevel`` is
    that of the caller's own ``warnings.warn``.
    """
    as_strings = missing_label_strings(column)
    if as_strings.any():
        warnings.warn(
            f"{who}: .obs[{label_key!r}] has {int(as_strings.sum())} labels that are strings "
            "meaning missing ('nan', 'None', '<NA>' or ''); they are missing labels, like NaN",
            UserWarning,
            stacklevel=stacklevel + 1,
        )
    return pd.isna(pd.Series(column, copy=False)).to_numpy(dtype=bool) | as_strings


def check_classes(column, labels, classes, label_key, who, allow_many_classes=False):
    """Refuse labels that are not a set of classes a classifier can learn.

    ``column`` is the ``.obs`` column as stored, ``labels`` the labels as strings with None where
    missing and ``classes`` their sorted distinct values. Refused: a float column with fractional
    values and more than :data:`CONTINUOUS_CLASSES` distinct values (continuous) or with more
    classes than half its labelled samples (mostly unique), unless ``allow_many_classes``; a
    class with fewer than two labelled samples.
    """
    labelled = np.array([v is not None for v in labels], dtype=bool)
    n_labelled, n_classes = int(labelled.sum()), len(classes)
    if not allow_many_classes:
        numeric = pd.api.types.is_float_dtype(column.dtype)
        values = pd.to_numeric(column[labelled], errors="coerce") if numeric else None
        continuous = (
            numeric and n_classes > CONTINUOUS_CLASSES and bool(np.any(np.asarray(values) % 1 != 0))
        )
        if continuous or n_classes > max(n_labelled / 2, 2):
            kind = "looks continuous (fractional values)" if continuous else "is mostly unique"
            raise ValueError(
                f"{who}: .obs[{label_key!r}] {kind}: {n_classes} distinct values among "
                f"{n_labelled} labelled samples, each of which would be one class (one-vs-rest "
                "task); pass a column of class labels (bin a measurement with pandas.cut), or "
                "allow_many_classes=True to fit every distinct value as a class"
            )
    counts = pd.Series(labels[labelled]).value_counts()
    small = counts[counts < MIN_CLASS_SIZE]
    if len(small):
        shown = ", ".join(f"{c!r} ({k})" for c, k in small.head(5).items())
        more = f" and {len(small) - 5} more" if len(small) > 5 else ""
        raise ValueError(
            f"{who}: .obs[{label_key!r}] has {len(small)} class(es) with fewer than "
            f"{MIN_CLASS_SIZE} labelled samples: {shown}{more}; every class needs at least "
            f"{MIN_CLASS_SIZE} (merge the small classes or set their labels to NaN)"
        )


def _rank_factor_bytes(params, n, p):
    k = params["n_factors"]
    return (n + p) * k * k, f"n_factors={k}", "(n_samples + n_genes) x n_factors^2 second moments"


def _rflvm_bytes(params, n, p):
    d, m = params["n_latent"], params["n_random_features"]
    size = d * d + (n + m) * d + 2 * m * (n + p)
    return size, f"n_latent={d}, n_random_features={m}", "latent positions, frequencies, features"


def _pfa_bytes(params, n, p):
    k = params["n_factors"]
    return (n + p) * k, f"n_factors={k}", "(n_samples + n_genes) x n_factors scores and loadings"


def _ibp_bytes(params, n, p):
    k = params["n_init_features"]
    return (n + p) * k, f"n_init_features={k}", "(n_samples + n_genes) x n_init_features"


def _bm2pca_bytes(params, n, p):
    k = min(params["n_components"], p)
    size = (n + p) * k + k * k
    return size, f"n_components={params['n_components']}", "scores, loadings and covariances"


# Estimator class name -> (params, n_samples, n_genes) -> (float64 entries, the parameters that
# set the size, what is allocated): a lower bound of the largest arrays of one fit.
FIT_BYTES = {
    "RankFactorClassifier": _rank_factor_bytes,
    "RFLVM": _rflvm_bytes,
    "PoissonFactorAnalysis": _pfa_bytes,
    "PFAClassifier": _pfa_bytes,
    "IBPFactorModel": _ibp_bytes,
    "BM2PCAClassifier": _bm2pca_bytes,
}


def fit_bytes(estimator, n, p):
    """``(bytes, parameters, what)``: a lower bound of the memory one fit of ``estimator`` on an
    ``n x p`` matrix allocates (:data:`FIT_BYTES`), or None for an estimator not listed or
    parameters that are not integers (the estimator's own validation reports those)."""
    size_of = FIT_BYTES.get(type(estimator).__name__)
    if size_of is None:
        return None
    try:
        entries, params, what = size_of(estimator.get_params(deep=False), int(n), int(p))
        entries = int(entries)  # Python ints: no overflow for absurd factor counts
    except (KeyError, TypeError, ValueError):
        return None
    return 8 * entries, params, what


def _cgroup_limit():
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            return int(text)
    return None


def machine_memory():
    """``(total, available)`` bytes: physical memory (capped by a cgroup limit) and, from
    /proc/meminfo, MemAvailable (None where it cannot be read)."""
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    limit = _cgroup_limit()
    if limit is not None:
        total = min(total, limit)
    available = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = min(int(line.split()[1]) * 1024, total)
    except (OSError, ValueError, IndexError):
        pass
    return total, available


def _size(n_bytes):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n_bytes < 1024 or unit == "PiB":
            return f"{n_bytes:.1f} {unit}" if unit != "B" else f"{n_bytes} B"
        n_bytes /= 1024
    return None  # not reached


def check_memory(who, n_bytes, cause, what, remedy=None, memory=None):
    """Refuse a fit whose estimated memory ``n_bytes`` exceeds the machine's available memory.

    ``cause`` (e.g. ``"n_factors=1000000"``) and ``what`` (the arrays) are named in the message,
    with ``remedy`` (default: lower the first parameter of ``cause``). ``memory`` =
    ``(total, available)`` bytes overrides :func:`machine_memory`.
    """
    total, available = machine_memory() if memory is None else memory
    limit = total if available is None else available
    if n_bytes > limit:
        free = "" if available is None else f", {_size(available)} available"
        remedy = remedy or f"lower {cause.split('=')[0]}"
        raise ValueError(
            f"{who}: {cause} needs at least {_size(n_bytes)} ({what}, float64); this machine "
            f"has {_size(total)}{free}; {remedy}"
        )


def check_estimator_memory(estimator, n, p, who, memory=None):
    """:func:`check_memory` with the estimate of :func:`fit_bytes` (no check if it has none)."""
    estimate = fit_bytes(estimator, n, p)
    if estimate is not None:
        check_memory(who, *estimate, memory=memory)
