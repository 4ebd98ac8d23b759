"""A peer side by side: mofapy2's Gaussian factor model against RankFactorClassifier.

mofapy2 (MOFA+, Argelaguet et al. 2020) is the Bayesian factor model people use on omics data.
On the cohort of ``bench_rank_factor`` (334 x 4,732 log-expression, 4 tasks; 120 x 400 with
``quick``) and the same number of factors, each model runs in its own fresh process, which
reports seconds per iteration, wall and process CPU (a fit of ``n`` iterations minus a fit of
2, over ``n - 2``, so set-up is left out) and the process's peak resident memory.  The rows give
the rank factor model's seconds per iteration and peak memory as ratios to mofapy2's (below 1:
faster / smaller).  mofapy2 runs with its defaults (lower bound every 5 iterations), ``nostop``
so that both do the same number of iterations; RankFactorClassifier with ``tol=0`` for the
same reason.
"""

import json
import subprocess
import sys

import numpy as np

from benchmarks.common import row

SIZES = {"quick": (120, 400, 5, 10), "full": (334, 4732, 20, 30)}


def _data(n, d):
    from benchmarks.bench_rank_factor import simulate

    X, Y = simulate(n, d, 8, 4)
    return np.log(X), Y


def _fit_mofa(X, k, n_iter):
    from mofapy2.run.entry_point import entry_point

    ent = entry_point()
    ent.set_data_options(scale_views=False)
    ent.set_data_matrix([[X]])
    ent.set_model_options(factors=k)
    ent.set_train_options(iter=n_iter, nostop=True, seed=0, quiet=True, verbose=False)
    ent.build()
    ent.run()


def _fit_rank(variant, X, Y, k, n_iter):
    from omicsbayes.models import RankFactorClassifier

    RankFactorClassifier.from_variant(
        variant, n_factors=k, max_iter=n_iter, tol=0.0, random_state=0
    ).fit(X, Y)


def worker(model, size):
    """Run in a fresh process: seconds per iteration and peak memory of one model, as JSON."""
    import contextlib
    import io
    import time

    from benchmarks.common import count_peak_mb

    n, d, k, n_iter = SIZES[size]
    X, Y = _data(n, d)
    if model == "mofapy2":
        fit = lambda it: _fit_mofa(X, k, it)  # noqa: E731
    else:
        fit = lambda it: _fit_rank(model, X, Y, k, it)  # noqa: E731
    wall, cpu = {}, {}
    for it in (2, 2, n_iter):  # the first fit loads libraries and compiled kernels
        with contextlib.redirect_stdout(io.StringIO()):
            start, start_cpu = time.perf_counter(), time.process_time()
            fit(it)
            wall[it], cpu[it] = time.perf_counter() - start, time.process_time() - start_cpu
    per_iter = (wall[n_iter] - wall[2]) / (n_iter - 2)
    per_iter_cpu = (cpu[n_iter] - cpu[2]) / (n_iter - 2)
    print(
        json.dumps({"per_iter": per_iter, "per_iter_cpu": per_iter_cpu, "peak_mb": count_peak_mb()})
    )


def _measure(model, size):
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_mofa", "--worker", model, size],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(quick: bool) -> list[dict]:
    size = "quick" if quick else "full"
    n, d, k, n_iter = SIZES[size]
    try:
        import mofapy2  # noqa: F401
    except ImportError:
        return [row("mofa peer", np.nan, 0, np.nan, "mofapy2 is not installed: no comparison")]
    peer = _measure("mofapy2", size)
    rows = []
    for model in ("G-L-Probit", "R-L-BSVM"):
        ours = _measure(model, size)
        r = row(
            f"mofa peer {model} vs mofapy2 {n}x{d} K={k}",
            ours["per_iter"],
            0,
            np.nan,
            f"seconds per iteration: {model} {ours['per_iter']:.3f}, mofapy2 "
            f"{peer['per_iter']:.3f} (ratio {ours['per_iter'] / peer['per_iter']:.2f}); CPU "
            f"{ours['per_iter_cpu']:.3f} against {peer['per_iter_cpu']:.3f} (ratio "
            f"{ours['per_iter_cpu'] / peer['per_iter_cpu']:.2f}); peak memory of the process: "
            f"{ours['peak_mb']:.0f} MB against {peer['peak_mb']:.0f} MB "
            f"(ratio {ours['peak_mb'] / peer['peak_mb']:.2f}); {n_iter} iterations, each model "
            "in a fresh process",
        )
        r["ratio"] = ours["per_iter"] / peer["per_iter"]
        r["peak_mb"] = ours["peak_mb"]
        rows.append(r)
    return rows


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3])
    else:
        for r in run(quick="--quick" in sys.argv):
            print(r["benchmark"], f"{r['ratio']:.2f}", r["note"], flush=True)
