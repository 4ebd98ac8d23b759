"""The thread policy every estimator runs under.

:func:`blas_threads` is the number of BLAS threads a problem of a given size can use;
:func:`blas_limit` runs a block with that many and :func:`limit_blas` wraps a method in it
(:class:`~omicsbayes.models._base.BaseOmicsEstimator` wraps every public fit / predict /
transform / scoring method of its subclasses). Tiny matrix products on several threads spin
when the cores are busy (36x slower for BPROBIT on a 129 x 129 kernel with another process on
the other core), so small problems run on one. :func:`map_blocks` runs independent
blocks of work on Python threads instead (an estimator with ``_worker_blocks = True``: as many
as its caller allowed, :func:`worker_threads`).

Finding the loaded BLAS / OpenMP libraries reads ``/proc/self/maps`` (3-30 ms with numba
loaded, longer than a small predict), so the policy keeps one ``ThreadpoolController`` until a
module is imported (:func:`_controller`), and a policy method that another of the same
estimator calls (``predict`` calling ``decision_function``) runs under its caller's policy.
"""

import contextlib
import contextvars
import functools
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from threadpoolctl import ThreadpoolController

__all__ = [
    "SMALL_PROBLEM",
    "blas_limit",
    "blas_threads",
    "limit_blas",
    "map_blocks",
    "worker_threads",
]

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
    return _controller().limit(limits=limit)


_CONTROLLER = (0, None)  # (len(sys.modules) when made, the ThreadpoolController)


def _controller():
    """A ``ThreadpoolController`` of the loaded libraries, made again whenever the number of
    imported modules has changed (a new BLAS or OpenMP library comes with an import; the rule
    of threadpoolctl's own ``get_cached_controller``)."""
    global _CONTROLLER
    n_modules, controller = _CONTROLLER
    if controller is None or n_modules != len(sys.modules):
        n_modules = len(sys.modules)
        controller = ThreadpoolController()
        _CONTROLLER = (n_modules, controller)
    return controller


# Python threads for independent blocks of work (map_blocks), set by limit_blas for the call
_WORKERS = contextvars.ContextVar("omicsbayes_worker_threads", default=1)
# the estimator whose policy method is running (its nested policy methods run under it)
_POLICY_OWNER = contextvars.ContextVar("omicsbayes_policy_owner", default=None)
_EXECUTORS = {}
_IN_WORKER = threading.local()


def _allowed_threads():
    """Threads the caller allows: the smallest BLAS / OpenMP pool (a ``threadpool_limits`` of
    the caller, a Snakemake job's ``threads`` through ``jobs.py``), at most the CPUs this
    process may run on."""
    info = _controller().info()
    pools = [i["num_threads"] for i in info if i["user_api"] in ("blas", "openmp")]
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
    workers, which spin while they wait (36x stalls with the other core busy), a
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
    threads its caller allowed for :func:`map_blocks` (:func:`worker_threads`). An estimator
    whose largest products are known only inside the method (MV-GP: the ranks of the kernels it
    decomposes) declares ``_blas_limited_inside = True`` and calls :func:`blas_limit` itself.
    A wrapped method called from a wrapped method of the same estimator runs under the
    caller's limits and worker threads.
    """

    @functools.wraps(method)
    def wrapped(self, *args, **kwargs):
        if getattr(self, "_blas_limited_inside", False) or _POLICY_OWNER.get() is self:
            return method(self, *args, **kwargs)
        shapes = [np.shape(a) for a in args[:1] if hasattr(a, "shape")]
        shapes.append(getattr(self, "_fit_shape", ()))
        if hasattr(self, "_blas_shape"):
            shapes = [self._blas_shape(s) if len(s) == 2 else s for s in shapes]
        if getattr(self, "_blas_sequential", False):
            shapes = []  # one thread
        workers = _allowed_threads() if getattr(self, "_worker_blocks", False) else 1
        token, owner = _WORKERS.set(workers), _POLICY_OWNER.set(self)
        try:
            with blas_limit(*shapes):
                return method(self, *args, **kwargs)
        finally:
            _POLICY_OWNER.reset(owner)
            _WORKERS.reset(token)

    return wrapped
