"""Several MCMC chains: ``n_chains=2`` against one chain of the same length, wall
time measured side by side in one run.

``sample_chains`` runs the chains in parallel processes (joblib's loky backend, one BLAS thread
each) when the process may use more than one core. On two idle cores the ratio is near 1 plus
the start-up of the worker processes; on one core (or with the other core busy) near 2. The
note records the cores the process may use.
"""

import os
import time

import numpy as np

from benchmarks.common import row
from omicsbayes.models import PoissonFactorAnalysis


def _seconds(model, X):
    start = time.perf_counter()
    model.fit(X)
    return time.perf_counter() - start


def run(quick=False):
    rng = np.random.default_rng(0)
    n, d, k = (100, 200, 5) if quick else (300, 1000, 10)
    n_iter = 40 if quick else 100
    X = rng.poisson(rng.gamma(1.0, 3.0, size=(n, k)) @ rng.dirichlet(np.ones(d), k)).astype(float)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    _seconds(PoissonFactorAnalysis(n_factors=k, n_iter=4, n_chains=2), X)  # start the workers
    one = _seconds(PoissonFactorAnalysis(n_factors=k, n_iter=n_iter, random_state=0), X)
    two = _seconds(PoissonFactorAnalysis(n_factors=k, n_iter=n_iter, n_chains=2, random_state=0), X)
    note = f"{n}x{d}, K={k}, {n_iter} sweeps; 2 chains / 1 chain wall time = {two / one:.2f}"
    return [
        row("pfa_one_chain", one, 0, 1.0, f"{note}; cores {cores}"),
        row("pfa_two_chains", two, 0, 1.0, f"{note}; cores {cores}"),
    ]
