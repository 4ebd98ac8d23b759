"""What every estimator shares, written once.

- **Parameter validation.** Each estimator declares scikit-learn's ``_parameter_constraints``
  (``Interval``, ``StrOptions``, ... from ``sklearn.utils._param_validation``) and calls
  ``self._validate_params()`` first thing in ``fit``: one message style for every model
  ("The 'n_iter' parameter of RFLVM must be an int in the range [1, inf). Got 0 instead.").
  Checks that relate two parameters live in the estimator's own ``fit``, after that call.
- **Fitted checks.** :func:`check_fitted` raises scikit-learn's ``NotFittedError``.
- **BLAS threads.** :func:`blas_threads` is the number of BLAS threads a problem of a given size
  can use; :func:`blas_limit` runs a block with that many and :func:`limit_blas` wraps a method
  in it (every estimator's fit / predict / transform goes through one of the two). Tiny matrix
  products on several threads spin when the cores are busy (36x slower for BPROBIT on a 129 x 129
  kernel with another process on the other core, issue 17), so small problems run on one.
  :func:`map_blocks` runs independent blocks of work on Python threads instead (an estimator
  with ``_worker_blocks = True``: as many as its caller allowed, :func:`worker_threads`).
- **Input checks.** :func:`check_X` (scikit-learn's ``validate_data``: DataFrames keep
  ``feature_names_in_``, the feature count is checked at predict time; then finiteness),
  :func:`check_count_X` (non-negative integer counts, NaN = missing), :func:`heldout_values`
  (the held-out entries of a full matrix, for ``log_likelihood(X, mask)``), :func:`split_labels`
  (NaN / None labels = unlabelled rows) and :func:`check_rng` (one numpy ``Generator`` from any
  ``random_state``).
- **Capabilities.** Each estimator class declares ``capabilities``, a frozenset of the names in
  :data:`CAPABILITIES`; :func:`models_with` lists the model classes that have one, so the config
  schema and the protocols never keep their own lists.
"""

import contextlib
import contextvars
import functools
import importlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from numbers import Integral, Real

import numpy as np
import pandas as pd
from sklearn.exceptions import NotFittedError
from sklearn.utils._param_validation import Interval
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data
from threadpoolctl import threadpool_info, threadpool_limits

from ..preprocess.transforms import check_matrix

__all__ = [
    "CAPABILITIES",
    "MCMC_CONSTRAINTS",
    "NotFittedError",
    "POSITIVE",
    "RANDOM_STATE",
    "VB_CONSTRAINTS",
    "blas_limit",
    "blas_threads",
    "capabilities_of",
    "check_X",
    "check_count_X",
    "check_count_values",
    "check_fitted",
    "check_rng",
    "heldout_values",
    "limit_blas",
    "map_blocks",
    "models_with",
    "split_labels",
    "worker_threads",
]

CAPABILITIES = {
    "classifier": "fit(X, y) with class labels; decision_function and predict",
    "regressor": "fit(X, y) with real-valued targets; predict",
    "multi_task": "fit(X, Y) with one column of binary labels per task, all tasks in one model",
    "heldout_scoring": "fit(X) with NaN entries missing; log_likelihood(X, mask) scores them",
    "counts": "takes non-negative integer counts (perplexity is defined on held-out counts)",
    "matrix_completion": (
        "fit(rows, cols, values, shape, row_kernel, col_kernel); predict(rows, cols)"
    ),
    "mcmc": "draws kept as ArviZ InferenceData in idata_, log_likelihood_ trace, n_chains",
    "vb": "variational Bayes: lower_bound_ trace, tol, n_iter_",
}

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

# Below this many elements (2048 x 2048) in the largest matrix a product touches, one BLAS thread.
# benchmarks/bench_threads.py on the 2-core machine, two threads against one, other core busy:
# a Cholesky factorisation (BAM's dual q(b, w) step) 35x slower at 724^2, 10x at 1024^2, 5x at
# 1448^2, 3x at 2048^2; a matrix product 1.3-1.6x faster from 724^2 up; BAM-like iterations
# (4 N^3 of products, 2 N^3 / 3 of factorisations) are therefore still slower on two threads at
# 2048^2. 1 << 20 (1024^2) let BPROBIT on a 1100 x 1100 kernel run on two threads. Above 2048^2
# it is not measured; the process keeps its threads (a Snakemake job's `threads`).
SMALL_PROBLEM = 1 << 22


def blas_threads(*shapes):
    """BLAS threads worth using for matrices of the given shapes: 1 when all are small.

    Returns ``None`` (no limit: threadpoolctl keeps what the process was given, e.g. a Snakemake
    job's ``threads``) when the largest has at least :data:`SMALL_PROBLEM` elements.
    """
    largest = max((int(np.prod(s)) for s in shapes), default=0)
    return 1 if largest < SMALL_PROBLEM else None


def blas_limit(*shapes):
    """Context manager: BLAS and OpenMP limited to :func:`blas_threads` of ``shapes``.

    The one place an estimator's thread policy is applied (:func:`limit_blas` wraps a method in
    it; code whose largest matrices are not its arguments' calls it with their shapes). OpenMP
    too, as scikit-learn does: its loss functions (``LogisticBaseline``) run OpenMP loops that
    stall like BLAS on a small problem. On a large problem the process keeps its threads.
    """
    limit = blas_threads(*shapes)
    if limit is None:
        return contextlib.nullcontext()
    return threadpool_limits(limits=limit)


# Python threads for independent blocks of work (map_blocks), set by limit_blas for the call
_WORKERS = contextvars.ContextVar("omicsbayes_worker_threads", default=1)
_EXECUTORS = {}
_IN_WORKER = threading.local()


def _allowed_threads():
    """Threads the caller allows: the smallest BLAS / OpenMP pool (a ``threadpool_limits`` of
    the caller, a Snakemake job's ``threads`` through ``jobs.py``), at most the CPUs this
    process may run on."""
    pools = [i["num_threads"] for i in threadpool_info() if i["user_api"] in ("blas", "openmp")]
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min([cpus or 1, *pools]))


def worker_threads():
    """Threads :func:`map_blocks` uses: within a method wrapped by :func:`limit_blas` of an
    estimator declaring ``_worker_blocks = True``, the threads its caller allowed (measured
    before BLAS is limited); 1 everywhere else."""
    return _WORKERS.get()


def map_blocks(fn, *iterables):
    """``list(map(fn, *iterables))``, the calls spread over :func:`worker_threads` Python threads.

    For blocks that are independent and spend their time in code that releases the GIL (numpy,
    BLAS on one thread, ``polyagamma``, numba ``nogil`` kernels). Unlike BLAS's and OpenMP's
    workers, which spin while they wait (36x stalls with the other core busy, issue 17), a
    waiting Python thread sleeps, so a busy core costs time but does not stall. Each call takes
    the next block, so a slow thread takes fewer. The results are in block order and do not
    depend on the number of threads when every block draws from its own generator. Called
    from within a block it runs serially.
    """
    args = list(zip(*iterables))
    workers = min(worker_threads(), len(args))
    if workers <= 1 or getattr(_IN_WORKER, "flag", False):  # nested: serial, never a deadlock
        return [fn(*a) for a in args]
    key = (os.getpid(), workers)  # a forked child cannot use its parent's threads
    if key not in _EXECUTORS:
        _EXECUTORS[key] = ThreadPoolExecutor(
            workers, thread_name_prefix="omicsbayes", initializer=_mark_worker
        )
    return list(_EXECUTORS[key].map(fn, *zip(*args)))


def _mark_worker():
    _IN_WORKER.flag = True


def limit_blas(method):
    """Run ``method(self, X, ...)`` with :func:`blas_threads` of ``X``'s shape (and the fit's).

    For predict-time methods the fitted size matters too (``n_features_in_`` x ``n_samples``
    of the training data, when the estimator records ``_fit_shape``). An estimator whose
    products never touch a matrix as large as its input (BM2PCA multiplies X by N x k and
    d x k factors, then works on k x k blocks) maps each shape to the largest matrix its
    iterations work on with a ``_blas_shape(shape)`` method. An estimator whose iterations are
    factorisations and solves rather than large products declares ``_blas_sequential = True``
    and runs on one thread at every size: ``benchmarks/bench_threads.py`` found a Cholesky
    factorisation on two threads slower than on one at every size up to 2048^2 with the other
    core busy, and BAM / BPROBIT on a 2100 x 2100 kernel, the Bayesian SVM and the baselines
    2-5x slower. An estimator declaring ``_worker_blocks = True`` gets, for the call, the
    threads its caller allowed for :func:`map_blocks` (:func:`worker_threads`).
    """

    @functools.wraps(method)
    def wrapped(self, *args, **kwargs):
        shapes = [np.shape(a) for a in args[:1] if hasattr(a, "shape")]
        shapes.append(getattr(self, "_fit_shape", ()))
        if hasattr(self, "_blas_shape"):
            shapes = [self._blas_shape(s) if len(s) == 2 else s for s in shapes]
        if getattr(self, "_blas_sequential", False):
            shapes = []  # one thread
        workers = _allowed_threads() if getattr(self, "_worker_blocks", False) else 1
        token = _WORKERS.set(workers)
        try:
            with blas_limit(*shapes):
                return method(self, *args, **kwargs)
        finally:
            _WORKERS.reset(token)

    return wrapped


def check_fitted(estimator, attributes=None):
    """Raise ``NotFittedError`` (a ValueError) unless ``estimator`` has been fitted."""
    check_is_fitted(estimator, attributes)


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
    """``(X, missing)``: :func:`check_X`, then non-negative integer counts (NaN = missing)."""
    X = check_X(estimator, X, reset=reset, allow_nan=allow_nan)
    missing = np.isnan(X)
    check_count_values(X[~missing], type(estimator).__name__)
    return X, missing


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


def capabilities_of(cls):
    """The capability names a model class declares (a frozenset, empty if none)."""
    unknown = set(getattr(cls, "capabilities", frozenset())) - set(CAPABILITIES)
    if unknown:
        raise ValueError(f"{cls.__name__} declares unknown capabilities {sorted(unknown)}")
    return frozenset(getattr(cls, "capabilities", frozenset()))


def models_with(capability):
    """Names of the model classes in ``omicsbayes.models`` that declare ``capability``."""
    if capability not in CAPABILITIES:
        raise ValueError(f"unknown capability {capability!r}; known: {sorted(CAPABILITIES)}")
    models = importlib.import_module("omicsbayes.models")
    return frozenset(
        name for name in models.__all__ if capability in capabilities_of(getattr(models, name))
    )
