"""Parameter constraints and input checks every estimator shares.

- **Parameter constraints.** scikit-learn's ``_parameter_constraints`` entries used by several
  estimators: :data:`RANDOM_STATE`, :data:`POSITIVE`, the chain settings of every MCMC estimator
  (:data:`MCMC_CONSTRAINTS`) and the loop settings of every VB estimator (:data:`VB_CONSTRAINTS`).
  :class:`~omicsbayes.models._base.BaseOmicsEstimator` validates them before ``fit`` runs.
- **Input checks.** :func:`check_X` (scikit-learn's ``validate_data``: DataFrames keep
  ``feature_names_in_``, the feature count is checked at predict time; then finiteness),
  :func:`check_count_X` (non-negative integer counts, NaN = missing), :func:`heldout_values`
  (the held-out entries of a full matrix, for ``log_likelihood(X, mask)``), :func:`split_labels`
  (NaN / None labels = unlabelled rows), :func:`binary_labels` (two classes, every row labelled)
  and :func:`check_rng` (one numpy ``Generator`` from any
  ``random_state``).
"""

import os
from numbers import Integral, Real

import numpy as np
import pandas as pd
from sklearn.utils._param_validation import Interval
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import column_or_1d, validate_data

from ..preprocess.transforms import check_matrix, refuse_anndata

__all__ = [
    "MCMC_CONSTRAINTS",
    "POSITIVE",
    "RANDOM_STATE",
    "VB_CONSTRAINTS",
    "binary_labels",
    "check_X",
    "check_count_X",
    "check_count_values",
    "check_rng",
    "heldout_values",
    "split_labels",
]

#: ``_parameter_constraints`` entry of a ``random_state`` read by :func:`check_rng`: None, any
#: non-negative int, a legacy ``RandomState`` or a numpy ``Generator``.
RANDOM_STATE = ["random_state", np.random.Generator, Interval(Integral, 0, None, closed="left")]

#: ``_parameter_constraints`` entry of a positive real (prior shapes, rates, scales).
POSITIVE = Interval(Real, 0, np.inf, closed="neither")

#: ``_parameter_constraints`` of the chain settings every MCMC estimator shares (driven by
#: :func:`omicsbayes.inference.chain.run_chain`; ``burn_in=None`` means ``n_iter // 2``).
MCMC_CONSTRAINTS = {
    "n_iter": [Interval(Integral, 1, None, closed="left")],
    "burn_in": [None, Interval(Integral, 0, None, closed="left")],
    "thin": [Interval(Integral, 1, None, closed="left")],
    "n_chains": [Interval(Integral, 1, None, closed="left")],
    "random_state": RANDOM_STATE,
    "verbose": ["boolean"],
    "checkpoint": [None, str, os.PathLike],
    "checkpoint_every": [Interval(Integral, 1, None, closed="left")],
}

#: ``_parameter_constraints`` of the settings every VB estimator shares (driven by
#: :func:`omicsbayes.inference.chain.run_vb`).
VB_CONSTRAINTS = {
    "max_iter": [Interval(Integral, 1, None, closed="left")],
    "tol": [Interval(Real, 0, np.inf, closed="left")],
    "random_state": RANDOM_STATE,
    "verbose": ["boolean"],
}


def check_rng(random_state):
    """A numpy ``Generator`` from None, an int seed, a ``Generator`` or a legacy ``RandomState``.

    A ``Generator`` is used as it is (draws continue its stream); a ``RandomState`` seeds a new
    ``Generator`` from one of its integers, so a scikit-learn caller's state still decides every
    draw.
    """
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(2**31))
    return np.random.default_rng(random_state)


def check_X(estimator, X, *, reset, allow_nan=False):
    """``X`` as a float64 samples x features array, checked the scikit-learn way.

    ``validate_data`` rejects sparse, complex, empty and 1-D input, records ``n_features_in_``
    and ``feature_names_in_`` (DataFrame columns) when ``reset`` and checks them otherwise; then
    every value must be finite (``allow_nan``: NaN marks a missing entry, infinity is refused).
    """
    who = type(estimator).__name__
    refuse_anndata(X, who)
    X = validate_data(estimator, X, reset=reset, dtype=np.float64, ensure_all_finite=False)
    if not allow_nan:
        return check_matrix(X, who)
    n_inf = int(np.isinf(X).sum())
    if n_inf:
        raise ValueError(
            f"X has {n_inf} infinite values; {who} needs finite values (NaN = missing)"
        )
    if np.isnan(X).all():
        raise ValueError(f"X has only NaN values; {who} needs some observed entries")
    return X


def check_count_X(estimator, X, *, reset, allow_nan=True):
    """``X`` as counts: :func:`check_X`, every value non-negative, rounded to the nearest count.

    The input of a count model: counts, or non-negative intensities it treats as counts (paper
    000 rounds microarray intensities for PFA); NaN marks a missing entry when ``allow_nan``.
    """
    X = check_X(estimator, X, reset=reset, allow_nan=allow_nan)
    n_neg = int((X < 0).sum())
    if n_neg:
        who = type(estimator).__name__
        raise ValueError(
            f"Negative values in data passed to {who}: X has {n_neg} negative values; {who} "
            "needs non-negative counts (or intensities, rounded to the nearest count)"
        )
    return np.rint(X)


def check_count_values(values, who):
    """Raise ValueError unless every one of ``values`` is a non-negative integer (a count)."""
    n_neg = int((values < 0).sum())
    if n_neg:
        raise ValueError(f"X has {n_neg} negative values; {who} needs non-negative integer counts")
    n_frac = int((values != np.round(values)).sum())
    if n_frac:
        raise ValueError(f"X has {n_frac} non-integer values; {who} needs integer counts")


def heldout_values(X, mask, shape, name="X"):
    """``(rows, cols, values)`` of the held-out entries (``mask`` True) of the full matrix ``X``.

    Raises ValueError unless ``X`` and ``mask`` have the training ``shape`` and the held-out
    values are finite (``X`` may hold anything elsewhere).
    """
    X = np.asarray(X, dtype=float)
    mask = np.asarray(mask, dtype=bool)
    if X.shape != shape or mask.shape != shape:
        raise ValueError(
            f"{name} {X.shape} and mask {mask.shape} must have the training shape {shape}"
        )
    rows, cols = np.nonzero(mask)
    values = X[rows, cols]
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} has non-finite values at held-out entries (mask True)")
    return rows, cols, values


def split_labels(y, who, n_samples):
    """``(y, labelled)``: 1-D labels and the mask of rows whose label is not NaN / None.

    Raises ValueError when ``y`` is None, its length differs from ``n_samples``, or the labelled
    part is not class labels (a continuous target).
    """
    if y is None:
        raise ValueError(f"{who} requires y to be passed, but the target y is None")
    y = column_or_1d(y, warn=True)
    if y.dtype.kind in "OUS":
        y = y.astype(object)
    if len(y) != n_samples:
        raise ValueError(f"y has {len(y)} labels but X has {n_samples} rows")
    labelled = ~np.asarray(pd.isna(y), dtype=bool)
    if labelled.any():
        kind = type_of_target(y[labelled], input_name="y")
        if kind not in ("binary", "multiclass"):
            raise ValueError(f"Unknown label type: {kind}; {who} needs class labels")
    return y, labelled


def binary_labels(y, who, n_samples):
    """``(classes, t)``: the two classes of a fully labelled binary ``y`` and ``t`` in {-1, +1}
    (+1 = ``classes[1]``).

    Raises ValueError as :func:`split_labels`, and when a label is NaN / None or ``y`` does not
    hold exactly two classes.
    """
    y, labelled = split_labels(y, who, n_samples)
    if not labelled.all():
        raise ValueError(f"y has {int((~labelled).sum())} NaN labels; expected every label")
    classes = np.unique(y)
    if classes.size != 2:
        raise ValueError(
            f"Only binary classification is supported: y has {classes.size} class(es) "
            f"{classes.tolist()[:5]}; {who} needs exactly 2"
        )
    return classes, np.where(y == classes[1], 1.0, -1.0)
