"""RankFactorClassifier (paper 000) on a cohort the size of the tuberculosis study.

334 samples x 4,732 genes, K = 20 factors, 4 tasks sharing one factor model (R-L-BSVM, VB), as in
Table 4 of the paper (180 s per fold in Matlab).  Reports the fit time, the time of one iteration
against the time its floating-point work takes at the measured matrix-product rate, and the
Gibbs sampler's seconds per 1,000 iterations, measured over a few sweeps and extrapolated (the
note says so).  ``quick=True`` runs the same on 120 x 400 with K = 5.
"""

import os
import time

import numpy as np

from benchmarks.common import matmul_rate, row
from omicsbayes.models import RankFactorClassifier


def simulate(n, d, k_true, n_tasks, seed=0):
    """Planted cohort: sparse loadings, exp-transformed features, tasks from the scores, 5 %
    of labels missing."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, k_true))
    A = rng.normal(size=(d, k_true)) * (rng.random((d, k_true)) < 0.3)
    X = np.exp(Z @ A.T + rng.normal(size=(n, d)))
    Y = (Z[:, :n_tasks] + 0.3 * rng.normal(size=(n, n_tasks)) > 0).astype(float)
    Y[rng.random(Y.shape) < 0.05] = np.nan
    return X, Y


def iteration_flops(n, d, k, n_tasks):
    """Floating-point work of one VB iteration of the latent max-margin model (matrix parts):
    w = Z A^T, A and Z right-hand sides (2 n d K each), per-row K x K Cholesky and inverse of the
    d + n precision matrices (~4/3 K^3 each) and their mean and second-moment products."""
    products = 3 * 2 * n * d * k
    blocks = (d + n) * (4.0 / 3.0 * k**3 + 3 * k**2)
    labels = 2 * n * n_tasks * (k + 1) ** 2 * 3
    return products + blocks + labels


def run(quick: bool) -> list[dict]:
    n, d, k, tasks = (120, 400, 5, 4) if quick else (334, 4732, 20, 4)
    n_iter = 10 if quick else 30
    X, Y = simulate(n, d, 8, tasks)
    rate = matmul_rate()
    flops = iteration_flops(n, d, k, tasks)
    rows = []

    # warm-up on a slice: loads the compiled sweeps (both the serial and the threaded one)
    for cols in (50, d):
        RankFactorClassifier.from_variant("R-L-BSVM", n_factors=2, max_iter=1).fit(X[:, :cols], Y)
    model = RankFactorClassifier.from_variant(
        "R-L-BSVM", n_factors=k, max_iter=n_iter, tol=0.0, random_state=0
    )
    start = time.perf_counter()
    model.fit(X, Y)
    fit_seconds = time.perf_counter() - start
    rows.append(
        row(
            f"rank_factor R-L-BSVM VB fit {n}x{d} K={k} {tasks} tasks",
            fit_seconds,
            flops * model.n_iter_,
            rate,
            f"{model.n_iter_} iterations incl. set-up (ranks, initial PCA); paper: 180 s per "
            f"fold; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
        )
    )

    # one iteration, timed after the set-up: difference of two fits of different length
    short = RankFactorClassifier.from_variant(
        "R-L-BSVM", n_factors=k, max_iter=2, tol=0.0, random_state=0
    )
    start = time.perf_counter()
    short.fit(X, Y)
    short_seconds = time.perf_counter() - start
    per_iter = (fit_seconds - short_seconds) / (n_iter - 2)
    rows.append(
        row(
            f"rank_factor R-L-BSVM VB one iteration {n}x{d} K={k}",
            per_iter,
            flops,
            rate,
            "(fit of n iterations - fit of 2) / (n - 2); floor counts matrix work only, the "
            "rest is elementwise (inverse-Gaussian draws, sorted gathers, Bessel ratios)",
        )
    )

    sweeps = 3 if quick else 5
    seconds = []
    for kept in (1, 1, 1 + sweeps):  # the first fit warms up imports and caches, not used
        gibbs = RankFactorClassifier.from_variant(
            "R-L-BSVM", n_factors=k, inference="gibbs", n_samples=kept, burn_in=0, random_state=0
        )
        start = time.perf_counter()
        gibbs.fit(X, Y)
        seconds.append(time.perf_counter() - start)
    per_sweep = (seconds[2] - seconds[1]) / sweeps
    rows.append(
        row(
            f"rank_factor R-L-BSVM Gibbs per 1000 iterations {n}x{d} K={k}",
            1000 * per_sweep,
            1000 * flops,
            rate,
            f"extrapolated from {sweeps} sweeps: (fit of {1 + sweeps} - fit of 1) / {sweeps}",
        )
    )
    return rows


if __name__ == "__main__":
    import sys

    for r in run(quick="--quick" in sys.argv):
        print(r)
