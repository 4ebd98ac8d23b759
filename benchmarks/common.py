"""What every benchmark shares: the machine's measured matrix-product rate and peak memory."""

import resource
import time

import numpy as np


def matmul_rate(n=1500, repeats=3):
    """Measured float64 matrix-product rate of this machine in GFLOP/s (best of ``repeats``).

    One product of two n x n matrices is 2 n^3 floating-point operations.
    """
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    a @ b  # warm up the BLAS threads
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9


def floor_seconds(flops, rate_gflops):
    """Seconds that ``flops`` floating-point operations take at ``rate_gflops``."""
    return flops / (rate_gflops * 1e9)


def count_peak_mb():
    """Peak resident memory of this process so far, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def row(benchmark, seconds, flops, rate_gflops, note=""):
    """One row of results/benchmarks.tsv."""
    floor = floor_seconds(flops, rate_gflops) if flops else np.nan
    return {
        "benchmark": benchmark,
        "seconds": seconds,
        "flops_floor_seconds": floor,
        "ratio": seconds / floor if flops else np.nan,
        "peak_mb": count_peak_mb(),
        "note": note,
    }
