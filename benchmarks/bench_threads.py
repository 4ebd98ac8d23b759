"""BLAS threads and a busy machine (issue 17): no stall on small problems, and the size below
which one BLAS thread is used (``models._base.SMALL_PROBLEM``).

Every ratio is measured in one run, side by side, while a competing process keeps the other
core busy (as on a workstation or a cluster node running several jobs):

- **Estimators.** BPROBIT, BAM_L, BM2PCA and the rank factor model (R-L-BSVM) on a small and a
  large problem: the fit with the estimator's own thread policy (the process keeps its default
  BLAS threads, one per core) against the same fit with BLAS limited to one thread. Goal: the
  ratio is at most 1.5 (no stall). Before ``limit_blas`` BPROBIT on a 129 x 129 kernel took 36x
  longer with two threads than with one.
- **The threshold.** A matrix product and a Cholesky factorisation of n x n matrices, one thread
  against two, with the other core idle (what two threads can gain) and busy (what they can
  lose). ``SMALL_PROBLEM`` should sit where two threads stop stalling on a busy machine and start
  paying on an idle one.
"""

import contextlib
import functools
import os
import subprocess
import sys
import time

import numpy as np
from scipy import linalg
from threadpoolctl import threadpool_limits

from benchmarks.common import row
from omicsbayes.models import (
    BAMClassifier,
    BayesianProbitClassifier,
    BM2PCAClassifier,
    RankFactorClassifier,
)
from omicsbayes.models._base import SMALL_PROBLEM

GOAL = 1.5
CORES = os.cpu_count() or 1


@contextlib.contextmanager
def busy_cores(n=CORES - 1):
    """``n`` processes spinning in a Python loop for the duration of the block."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(max(n, 0))]
    try:
        time.sleep(0.2)
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def best_time(fn, threads=None, repeats=3):
    """Best wall time of ``fn()`` over ``repeats``, with BLAS limited to ``threads`` if given."""
    best = np.inf
    for _ in range(repeats):
        ctx = threadpool_limits(threads, user_api="blas") if threads else contextlib.nullcontext()
        with ctx:
            start = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - start)
    return best


def _classification(n, d, rng):
    X = rng.standard_normal((n, d))
    y = (X[:, 0] + 0.5 * rng.standard_normal(n) > 0.8).astype(int)
    return X, y


def _kernel(X):
    """The linear empirical kernel map's shape and scale: cosine similarities to the samples."""
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    return U @ U.T


def _cases(quick):
    rng = np.random.default_rng(0)
    small_n, large_n = (129, 600) if quick else (129, 1100)
    X_small, y_small = _classification(small_n, 500, rng)
    X_large, y_large = _classification(large_n, 2000, rng)
    K_small, K_large = _kernel(X_small), _kernel(X_large)
    it = 10 if quick else 30
    yield "BPROBIT", K_small, y_small, BayesianProbitClassifier(max_iter=200, tol=0)
    yield "BPROBIT", K_large, y_large, BayesianProbitClassifier(max_iter=it, tol=0)
    yield "BAM_L", K_small, y_small, BAMClassifier(max_iter=200, tol=0)
    yield "BAM_L", K_large, y_large, BAMClassifier(max_iter=it, tol=0)
    yield "BM2PCA", X_small, y_small, BM2PCAClassifier(n_components=5, max_iter=200, tol=0)
    yield "BM2PCA", X_large, y_large, BM2PCAClassifier(n_components=20, max_iter=it, tol=0)
    rank = RankFactorClassifier.from_variant
    yield "R-L-BSVM", X_small, y_small, rank("R-L-BSVM", n_factors=5, max_iter=30, tol=0)
    yield "R-L-BSVM", X_large, y_large, rank("R-L-BSVM", n_factors=20, max_iter=it // 3, tol=0)


def _estimator_rows(quick):
    rows = []
    with busy_cores():
        for name, X, y, model in _cases(quick):
            repeats = 3 if X.size < SMALL_PROBLEM else 1
            fit = functools.partial(model.fit, X, y)
            one = best_time(fit, threads=1, repeats=repeats)
            policy = best_time(fit, repeats=repeats)
            ratio = policy / one
            r = row(
                f"threads_{name}_{X.shape[0]}x{X.shape[1]}",
                policy,
                0,
                np.nan,
                f"{CORES - 1} core(s) busy: own policy {policy:.3f} s, one BLAS thread "
                f"{one:.3f} s, ratio {ratio:.2f} (goal <= {GOAL}) "
                f"{'OK' if ratio <= GOAL else 'STALL'}",
            )
            r["ratio"] = ratio
            rows.append(r)
    return rows


def _kernels(n, rng):
    a = rng.standard_normal((n, n))
    spd = a @ a.T + n * np.eye(n)
    return {
        "matmul": lambda: a @ a,
        "cholesky": lambda: linalg.cholesky(spd, lower=True, check_finite=False),
    }


def threshold_table(sizes, repeats=5):
    """``{(op, n): {"idle": t2/t1, "busy": t2/t1}}``, two BLAS threads against one."""
    rng = np.random.default_rng(1)
    out = {}
    for state in ("idle", "busy"):
        ctx = busy_cores() if state == "busy" else contextlib.nullcontext()
        with ctx:
            for n in sizes:
                for op, fn in _kernels(n, rng).items():
                    reps = repeats if n <= 1024 else 2
                    t1 = best_time(fn, threads=1, repeats=reps)
                    t2 = best_time(fn, threads=CORES, repeats=reps)
                    out.setdefault((op, n), {})[state] = t2 / t1
    return out


def _threshold_rows(quick):
    sizes = (128, 256, 512, 1024) if quick else (128, 256, 384, 512, 724, 1024, 1448, 2048)
    table = threshold_table(sizes)
    rows = []
    for (op, n), ratios in table.items():
        side = "below" if n * n < SMALL_PROBLEM else "at/above"
        r = row(
            f"threads_{op}_{n}x{n}",
            np.nan,
            0,
            np.nan,
            f"{CORES} threads / 1 thread: idle {ratios['idle']:.2f}, other core busy "
            f"{ratios['busy']:.2f}; {n * n} elements, {side} SMALL_PROBLEM={SMALL_PROBLEM}",
        )
        r["ratio"] = ratios["busy"]
        rows.append(r)
    return rows


def run(quick: bool) -> list[dict]:
    if CORES < 2:
        return [row("threads", np.nan, 0, np.nan, "one core: nothing to compare")]
    return _estimator_rows(quick) + _threshold_rows(quick)


if __name__ == "__main__":
    for r in run(quick="--quick" in sys.argv):
        print(r["benchmark"], f"{r['ratio']:.2f}", r["note"], flush=True)
