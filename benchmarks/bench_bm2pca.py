"""BM2PCA (paper 003): seconds per VB iteration against the floating-point floor.

One iteration (a sweep of every factor plus the lower bound) does two ``N x d x k`` products,
``X E[W]`` (q(Z)) and ``X^T E[Z]`` (q(W)), i.e. ``4 N d k`` flops, plus ``O(d k^2)`` for
``E[W^T W]`` and the q(W) mean and ``O(N k^2 + k^3)`` for everything else.  The floor counts
``4 N d k + 4 d k^2``; the paper's O(N d k^2) bound is therefore met with room to spare.
"""

import time

import numpy as np

from benchmarks.common import matmul_rate, row
from omicsbayes.models import BM2PCAClassifier
from omicsbayes.models.bm2pca import _BinaryVB, _pca_start

HYPER = dict(a_r=1e-3, b_r=1e-3, a_tau=1e-2, b_tau=1e-5, a_nu=1e-1, b_nu=1e-5, delta=1e-5)


def _data(n, d, rng, n_signal=20):
    """Unit-length samples with a low-rank class signal in ``n_signal`` features."""
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    X = rng.standard_normal((n, d))
    X[:, :n_signal] += 1.5 * y[:, None]
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X, y


def _per_iteration(n, d, k, iters, rate, rng):
    X, y = _data(n, d, rng)
    start = time.perf_counter()
    vb = _BinaryVB(X, y, k, 10.0, HYPER, _pca_start(X, k, rng))
    setup = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(iters):
        vb.sweep()
        vb.lower_bound()
    seconds = (time.perf_counter() - start) / iters
    start = time.perf_counter()
    for _ in range(iters):
        X @ vb.W_mean
        X.T @ vb.Zm
    products = (time.perf_counter() - start) / iters
    flops = 4 * n * d * k + 4 * d * k**2
    return row(
        f"bm2pca_iteration_N{n}_d{d}_k{k}",
        seconds,
        flops,
        rate,
        f"mean of {iters} sweeps + bound; the two skinny products X E[W], X^T E[Z] alone take "
        f"{products:.3f} s (each streams X, {n * d * 8 / 1e6:.0f} MB); "
        f"start (PCA of the Gram matrix) {setup:.2f} s",
    )


def run(quick: bool) -> list[dict]:
    rng = np.random.default_rng(0)
    rate = matmul_rate()
    rows = []
    sizes = [(100, 2000)] if quick else [(300, 7500), (300, 15000)]
    for n, d in sizes:
        rows.append(_per_iteration(n, d, 10, 3 if quick else 5, rate, rng))
    # the workflow's demo size: one full binary fit with the default stopping rule
    X, y = _data(150, 100, rng)
    start = time.perf_counter()
    model = BM2PCAClassifier(n_components=10, random_state=0).fit(X, y)
    seconds = time.perf_counter() - start
    flops = model.n_iter_ * (4 * 150 * 100 * 10 + 4 * 100 * 10**2)
    rows.append(
        row(
            "bm2pca_fit_N150_d100_k10",
            seconds,
            flops,
            rate,
            f"whole fit, {model.n_iter_} iterations, default max_iter/tol",
        )
    )
    return rows


if __name__ == "__main__":
    import sys

    for r in run(quick="--quick" in sys.argv):
        print(r)
