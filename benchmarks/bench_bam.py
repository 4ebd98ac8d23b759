"""BAM (paper 001): the 100-split protocol on a cohort the size of TCGA UCEC (330 x 20,530).

A few stratified 75/25 splits are run in full (empirical kernel map, then BPROBIT, BAM_P and
BAM_L with the default stopping rule, for both kernels); the time of the whole grid of
100 splits x 3 methods x 2 kernels is extrapolated from their mean, on one core and on two
(the workflow runs the fits as independent jobs).

Floor of one VB iteration with N training samples and D = N kernel features (the dual
q(b, w) of eqs. 6-7): Z A^-1 Z^T (N^2 (D+1) flops, symmetric), its Cholesky factor and
triangular inverse (N^3 / 3 each), L^-1 Z for diag Sigma (N^2 (D+1)); the q(f) steps are O(N)
(listwise) or O(|P| |N|) (pairwise). Floor of the kernel map: the training Gram matrix and the
test-by-training products, N^2 G + N N_test 2 G flops for G genes.
"""

import time

import numpy as np
from sklearn.model_selection import StratifiedShuffleSplit

from benchmarks.common import matmul_rate, row
from omicsbayes.models import BAMClassifier, BayesianProbitClassifier
from omicsbayes.preprocess.kernels import EmpiricalKernelMap

METHODS = {
    "bprobit": lambda seed: BayesianProbitClassifier(random_state=seed),
    "bam_p": lambda seed: BAMClassifier(ranking="pairwise", random_state=seed),
    "bam_l": lambda seed: BAMClassifier(ranking="listwise", random_state=seed),
}
KERNELS = ("linear", "gaussian")


def _cohort(n, genes, n_pos, rng):
    """Log-expression-like matrix with an MSI-H-like signature in 200 genes."""
    y = np.zeros(n, dtype=int)
    y[:n_pos] = 1
    X = rng.standard_normal((n, genes))
    X[:n_pos, :200] += 0.6
    return X, y


def _iteration_flops(n_train):
    d1 = n_train + 1
    return 2 * n_train**2 * d1 + 2 * n_train**3 / 3


def run(quick: bool) -> list[dict]:
    rng = np.random.default_rng(0)
    rate = matmul_rate()
    n, genes, n_pos = (330, 2000, 108) if quick else (330, 20530, 108)
    n_splits = 1 if quick else 3
    X, y = _cohort(n, genes, n_pos, rng)
    splits = StratifiedShuffleSplit(n_splits=n_splits, test_size=0.25, random_state=0).split(X, y)
    per_split, cpu_per_split = [], []
    rows = []
    iters = {m: [] for m in METHODS}
    fit_seconds = {m: [] for m in METHODS}
    for split, (train, test) in enumerate(splits):
        start_split, cpu_split = time.perf_counter(), time.process_time()
        for kernel in KERNELS:
            start = time.perf_counter()
            km = EmpiricalKernelMap(kernel).fit(X[train])
            K_train, K_test = km.transform(X[train]), km.transform(X[test])
            kernel_seconds = time.perf_counter() - start
            n_tr, n_te = len(train), len(test)
            rows.append(
                row(
                    f"bam_kernel_map_{kernel}_{n}x{genes}",
                    kernel_seconds,
                    2 * n_tr**2 * genes + 2 * n_te * n_tr * genes,
                    rate,
                    f"split {split}: z-score, fit and transform train ({n_tr}) and test ({n_te})",
                )
            )
            for method, make in METHODS.items():
                start = time.perf_counter()
                model = make(split).fit(K_train, y[train])
                model.decision_function(K_test)
                seconds = time.perf_counter() - start
                iters[method].append(model.n_iter_)
                fit_seconds[method].append(seconds)
                rows.append(
                    row(
                        f"bam_iteration_{method}_{kernel}_N{n_tr}",
                        seconds / model.n_iter_,
                        _iteration_flops(n_tr),
                        rate,
                        f"split {split}: {model.n_iter_} iterations, fit {seconds:.2f} s",
                    )
                )
        per_split.append(time.perf_counter() - start_split)
        cpu_per_split.append(time.process_time() - cpu_split)
    mean_split = float(np.mean(per_split))
    mean_cpu = float(np.mean(cpu_per_split))
    total = 100 * mean_split
    fits = ", ".join(
        f"{m} {np.mean(fit_seconds[m]):.2f} s / {np.mean(iters[m]):.0f} it" for m in METHODS
    )
    rows.append(
        row(
            f"bam_protocol_100x3x2_{n}x{genes}",
            total,
            100
            * len(KERNELS)
            * sum(np.mean(iters[m]) for m in METHODS)
            * _iteration_flops(len(train)),
            rate,
            f"EXTRAPOLATED from {n_splits} measured split(s) ({mean_split:.2f} s each, one "
            f"process; {mean_cpu:.2f} s CPU): 100 x that = {total:.0f} s on one core "
            f"({100 * mean_cpu:.0f} s CPU), ~{total / 2:.0f} s on two as independent jobs; "
            f"mean fit per method: {fits}",
        )
    )
    return rows


if __name__ == "__main__":
    import sys

    for r in run(quick="--quick" in sys.argv):
        print(r)
