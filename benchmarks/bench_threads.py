"""BLAS threads and a busy machine: no stall on small problems, and the size below
which one BLAS thread is used (``models._threads.SMALL_PROBLEM``).

Every ratio is measured in one run, side by side, while a competing process keeps the other
core busy (as on a workstation or a cluster node running several jobs):

- **Estimators.** Every family (BPROBIT, BAM_L, BAM_P, BM2PCA, the rank factor model R-L-BSVM,
  PFA, the IBP factor model, RFLVM Gaussian and negative binomial, Con. MV-GP, PMF, the Bayesian
  SVM and the baselines) on a small and a large problem: the fit with the estimator's own
  thread policy (the process keeps its default BLAS and OpenMP threads, one per core) against
  the same fit limited to one thread
  (``threadpool_limits(1)``, which the estimators' policy extends to numba's parallel loops),
  the two alternated and each the best of 5 fits (3 on the large problems). Goal: the ratio is
  at most 1.5 (no stall). The note says what the policy chose (recorded from
  ``_threads.blas_threads`` during the fit): one thread, or the process's threads. Before
  ``limit_blas`` BPROBIT on a 129 x 129 kernel took 36x longer with two threads than with one.
- **The threshold.** A matrix product and a Cholesky factorisation of n x n matrices, one thread
  against two, with the other core idle (what two threads can gain) and busy (what they can
  lose). ``SMALL_PROBLEM`` should sit where two threads stop stalling on a busy machine and start
  paying on an idle one.

``python -m benchmarks.bench_threads [--quick] [--only NAME ...]`` prints one line per case.
"""

import contextlib
import functools
import os
import subprocess
import sys
import time
import warnings

import numpy as np
from scipy import linalg
from threadpoolctl import threadpool_limits

from benchmarks.common import row
from omicsbayes import models
from omicsbayes.models import _threads
from omicsbayes.models._threads import SMALL_PROBLEM
from omicsbayes.models.bsvm import BayesianSVM

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
    """Best wall time of ``fn()`` over ``repeats``, with BLAS and OpenMP limited to ``threads``
    if given (as the estimators' policy limits both)."""
    best = np.inf
    for _ in range(repeats):
        ctx = threadpool_limits(threads) if threads else contextlib.nullcontext()
        with ctx, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # few iterations: ConvergenceWarning by design
            start = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - start)
    return best


# ------------------------------------------------------------------------------ problems
def _classification(n, d, rng):
    X = rng.standard_normal((n, d))
    y = (X[:, 0] + 0.5 * rng.standard_normal(n) > 0.8).astype(int)
    return X, y


def _kernel(X):
    """The linear empirical kernel map's shape and scale: cosine similarities to the samples."""
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    return U @ U.T


def _counts(n, d, rng):
    """Counts from a rank-5 Poisson factor model and labels from its first factor."""
    theta, phi = rng.gamma(1.0, 1.0, (n, 5)), rng.gamma(0.3, 1.0, (d, 5))
    X = rng.poisson(theta @ phi.T).astype(float)
    return X, (theta[:, 0] > np.median(theta[:, 0])).astype(int)


def _entries(side, n_entries, rng):
    """A ``side`` x ``side`` matrix completion problem with a planted rank-5 mean."""
    flat = rng.choice(side * side, n_entries, replace=False)
    rows, cols = flat // side, flat % side
    U, V = rng.standard_normal((side, 5)), rng.standard_normal((side, 5))
    values = np.einsum("lk,lk->l", U[rows], V[cols]) + 0.5 * rng.standard_normal(n_entries)
    return rows, cols, values, (side, side)


# Sizes: "small" is the size that stalled (a 129-sample cohort); "large" puts the input above
# SMALL_PROBLEM (4.2 M elements) where a fit of a few iterations takes seconds, so a policy that
# follows the input's size keeps the process's threads there.
_SIZES = {
    "kernel": (129, 2100),  # N x N kernel; 2100^2 = 4.4 M
    "dense": ((129, 500), (1100, 4000)),  # samples x features; 4.4 M
    "tall": ((129, 50), (42_000, 100)),  # the Bayesian SVM's d x d posterior: many samples
    "counts": ((129, 500), (1000, 4300)),
    "rflvm": ((129, 30), (300, 60)),  # its policy: one thread always (N x 2M features)
    # count likelihoods: one BLAS thread, feature and row blocks on the process's threads
    # (map_blocks); 500 x 2,000 is the negative-binomial problem
    "rflvm_counts": ((129, 500), (500, 2000)),
    "entries": ((150, 3000), (1000, 220_000)),  # side, entries (policy: side x rank)
}


def _problems(rng, large):
    i = int(large)
    n = _SIZES["kernel"][i]
    X, y = _classification(n, 500, rng)
    yield "kernel", (_kernel(X), y)
    yield "dense", _classification(*_SIZES["dense"][i], rng)
    yield "tall", _classification(*_SIZES["tall"][i], rng)
    yield "counts", _counts(*_SIZES["counts"][i], rng)
    n, d = _SIZES["rflvm"][i]
    yield "rflvm", (rng.standard_normal((n, 2)) @ rng.standard_normal((2, d)),)
    yield "rflvm_counts", _counts(*_SIZES["rflvm_counts"][i], rng)
    yield "entries", _entries(*_SIZES["entries"][i], rng)


def _estimators(large):
    """``(name, problem kind, estimator, how to fit it)`` of every family; few iterations."""
    it = 3 if large else 30
    rank = models.RankFactorClassifier.from_variant
    xy = "fit(X, y)"
    yield "BPROBIT", "kernel", models.BayesianProbitClassifier(max_iter=it, tol=0), xy
    yield "BAM_L", "kernel", models.BAMClassifier(max_iter=it, tol=0), xy
    yield "BAM_P", "kernel", models.BAMClassifier(ranking="pairwise", max_iter=it, tol=0), xy
    k = 10 if large else 5
    yield "BM2PCA", "dense", models.BM2PCAClassifier(n_components=k, max_iter=it, tol=0), xy
    yield "R-L-BSVM", "dense", rank("R-L-BSVM", n_factors=k, max_iter=it - 1, tol=0), xy
    yield "BayesianSVM", "tall", BayesianSVM(max_iter=it, tol=0), xy
    yield "PCASVM", "dense", models.PCASVM(n_components=k), xy
    yield "LogisticBaseline", "dense", models.LogisticBaseline(), xy
    mc = dict(n_iter=2 if large else 10, burn_in=1 if large else 5, random_state=0)
    yield "PFA", "counts", models.PFAClassifier(n_factors=k, **mc), xy
    yield "IBP", "counts", models.IBPFactorModel(**mc), "fit(X)"
    mc.update(n_iter=2 if large else 4, burn_in=1 if large else 2)
    yield "RFLVM", "rflvm", models.RFLVM(n_random_features=50, **mc), "fit(X)"
    nb = models.RFLVM(likelihood="negative_binomial", n_random_features=50, **mc)
    yield "RFLVM_NB", "rflvm_counts", nb, "fit(X)"
    mv = dict(sigma2=1.0, max_iter=2 if large else 50, random_state=0)
    yield "ConMVGP", "entries", models.ConstrainedMVGP(lam=1.0, max_rank=20, **mv), "entries"
    yield "PMF", "entries", models.PMF(rank=20, **mv), "entries"


def _fit_call(model, how, data):
    if how == "entries":
        return functools.partial(model.fit, *data)
    if how == "fit(X)":
        return functools.partial(model.fit, data[0])
    return functools.partial(model.fit, data[0], data[1])


@contextlib.contextmanager
def _recorded_policy(answers):
    """Record what ``_threads.blas_threads`` answers during the block (1, or None: no limit)."""
    real = _threads.blas_threads

    def spy(*shapes):
        answers.append(real(*shapes))
        return answers[-1]

    _threads.blas_threads = spy
    try:
        yield
    finally:
        _threads.blas_threads = real


def _policy_note(answers, model):
    blocks = ""
    if getattr(model, "_worker_blocks", False):
        blocks = "; its blocks on the process's threads (map_blocks)"
    if not answers:
        return "policy: one thread (the estimator's own limit)" + blocks
    if None in answers:
        return "policy: the process's threads" + blocks
    return "policy: one BLAS thread" + blocks


def _interleaved(fit, answers, repeats):
    """Best one-thread and own-policy times of ``fit``, the two alternated ``repeats`` times so
    that a slow moment of the machine (the competing process starting, the clock changing)
    does not fall on one side only."""
    one = policy = np.inf
    for _ in range(repeats):
        one = min(one, best_time(fit, threads=1, repeats=1))
        with _recorded_policy(answers):
            policy = min(policy, best_time(fit, repeats=1))
    return one, policy


def _estimator_rows(quick, only=None):
    rows = []
    rng = np.random.default_rng(0)
    sizes = (False,) if quick else (False, True)
    with busy_cores():
        for large in sizes:
            problems = dict(_problems(rng, large))
            for name, kind, model, how in _estimators(large):
                if only and name not in only:
                    continue
                data = problems[kind]
                fit = _fit_call(model, how, data)
                answers = []
                one, policy = _interleaved(fit, answers, repeats=3 if large else 5)
                ratio = policy / one
                shape = "x".join(map(str, data[3] if kind == "entries" else data[0].shape))
                r = row(
                    f"threads_{name}_{shape}",
                    policy,
                    0,
                    np.nan,
                    f"{CORES - 1} core(s) busy: own policy {policy:.3f} s, one thread "
                    f"{one:.3f} s, ratio {ratio:.2f} (goal <= {GOAL}) "
                    f"{'OK' if ratio <= GOAL else 'STALL'}; {_policy_note(answers, model)}",
                )
                r["ratio"] = ratio
                rows.append(r)
                print(r["benchmark"], f"{ratio:.2f}", r["note"], flush=True)
    return rows


# ------------------------------------------------------------------------------ threshold
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
        print(r["benchmark"], f"{r['ratio']:.2f}", r["note"], flush=True)
    return rows


def run(quick: bool, only=None) -> list[dict]:
    if CORES < 2:
        return [row("threads", np.nan, 0, np.nan, "one core: nothing to compare")]
    rows = _estimator_rows(quick, only)
    return rows if only else rows + _threshold_rows(quick)


if __name__ == "__main__":
    names = sys.argv[sys.argv.index("--only") + 1 :] if "--only" in sys.argv else None
    run(quick="--quick" in sys.argv, only=names)
