"""Baselines without a library implementation: PFA (Zhou et al. 2012) and the linear IBP factor
model (Knowles & Ghahramani 2011).  Seconds per Gibbs sweep against the floating-point floor.

PFA sweep floor: the rate matrix ``theta phi^T`` for the observed log likelihood (``2 N P K``
flops, ``3 N P`` more for the Poisson terms) and the allocation arithmetic, about ``8 nnz K``
(rates gathered, multiplied, accumulated and compared per factor).  The allocation draws random
variates, which no flop count sees; the note reports the time of drawing the same number of
uniforms, a second floor.

PFA transform: the VB fold-in of new samples (``fold_in_scores``) against its floor, one update
being two products over samples, features and factors (``4 N P K`` flops) and ``3 N P`` for the
ratio and the bound, and against a peer: a Gibbs fold-in of the same samples (the module's
allocation and theta steps, 40 sweeps), one sample at a time as a per-sample generator needs.

IBP sweep floor: the (z, x) sweep ``4 N K J`` (two inner products and a residual update per
(sample, feature)), loadings ``J N K^2`` (Gram matrices) ``+ J K^3 / 3`` (Cholesky) ``+ 2 J K^2``
(solves), residual ``2 N K J``.
"""

import time

import numpy as np

from benchmarks.common import matmul_rate, row
from omicsbayes.models import IBPFactorModel, PFAClassifier, PoissonFactorAnalysis
from omicsbayes.models.pfa import _entry_index, allocate_counts, fold_in_scores, sample_theta


def _nb_counts(n, d, rng):
    """A negative-binomial count matrix (dispersion 2) with sample and gene effects."""
    mu = rng.gamma(1.0, 5.0, size=(n, 1)) * rng.gamma(0.5, 2.0, size=(1, d))
    return rng.negative_binomial(2, 2.0 / (2.0 + mu))


def _pfa(n, d, k, sweeps, rate, rng):
    X = _nb_counts(n, d, rng)
    nnz = int(np.count_nonzero(X))
    start = time.perf_counter()
    PoissonFactorAnalysis(n_factors=k, n_iter=sweeps, burn_in=sweeps - 1, random_state=0).fit(X)
    seconds = (time.perf_counter() - start) / sweeps
    start = time.perf_counter()
    np.random.default_rng(1).uniform(size=int(X.sum()))
    draw_floor = time.perf_counter() - start
    flops = 2 * n * d * k + 3 * n * d + 8 * nnz * k
    return row(
        f"pfa_sweep_N{n}_P{d}_K{k}",
        seconds,
        flops,
        rate,
        f"NB counts, {nnz} nonzero, total {int(X.sum())}; one uniform per count takes "
        f"{draw_floor:.3f} s; mean of {sweeps} sweeps incl. set-up",
    )


def _pfa_rounded_intensities(sweeps, rate, rng):
    """Paper 000's PFA-L-BSVM input: rounded intensities of the tuberculosis study's size."""
    n, d, k = 334, 4732, 20
    X = np.rint(rng.lognormal(6.0, 1.5, size=(1, d)) * rng.lognormal(0.0, 0.3, size=(n, d)))
    start = time.perf_counter()
    PoissonFactorAnalysis(n_factors=k, n_iter=sweeps, burn_in=sweeps - 1, random_state=0).fit(X)
    seconds = (time.perf_counter() - start) / sweeps
    flops = 2 * n * d * k + 3 * n * d + 8 * n * d * k
    return row(
        f"pfa_sweep_rounded_intensities_N{n}_P{d}_K{k}",
        seconds,
        flops,
        rate,
        f"median count {np.median(X):.0f}: nearly all entries take the binomial chain "
        f"({(n * d * (k - 1)) / 1e6:.0f} M binomial draws per sweep)",
    )


def _gibbs_fold_in(x, phi, r, p, sweeps, rng):
    """One sample's scores from ``sweeps`` Gibbs sweeps with phi, r and p fixed (mean of the
    second half)."""
    counts, rows, cols, _, _ = _entry_index(x[None, :], np.isnan(x[None, :]))
    theta, total = (r * p / (1 - p))[None, :], np.zeros((1, r.size))
    for sweep in range(sweeps):
        per_sample, _ = allocate_counts(counts, rows, cols, theta, phi, rng)
        theta = sample_theta(per_sample, r, p, rng)
        total += theta if sweep >= sweeps // 2 else 0.0
    return total / (sweeps - sweeps // 2)


def _pfa_transform(n_train, n_new, d, k, rate, rng):
    """Rows ``pfa_fold_in_update_*`` (one VB update, all samples, against the flop floor) and
    ``pfa_transform_*`` (``transform`` at its defaults, against the per-sample Gibbs peer)."""
    X = _nb_counts(n_train + n_new, d, rng)
    model = PoissonFactorAnalysis(n_factors=k, n_iter=3, burn_in=2, random_state=0, verbose=False)
    model.fit(X[:n_train])
    new = X[n_train:].astype(float)
    phi, r, p = model.components_.T, model.r_, model.p_
    iterations = 20  # tol 0: every sample runs 3 * iterations + 1 updates
    start = time.perf_counter()
    fold_in_scores(new, phi, r, p, iterations, tol=0.0)
    per_update = (time.perf_counter() - start) / (3 * iterations + 1)
    update = row(
        f"pfa_fold_in_update_N{n_new}_P{d}_K{k}",
        per_update,
        4 * n_new * d * k + 3 * n_new * d,
        rate,
        "one VB update of every sample's q(theta) (mean of 61)",
    )
    start = time.perf_counter()
    model.transform(new)
    seconds = time.perf_counter() - start
    gibbs_rng = np.random.default_rng(1)
    start = time.perf_counter()
    for x in new:
        _gibbs_fold_in(x, phi, r, p, 40, gibbs_rng)
    gibbs = time.perf_counter() - start
    transform = row(
        f"pfa_transform_N{n_new}_P{d}_K{k}",
        seconds,
        0,
        rate,
        f"VB fold-in to tol or {model.n_transform_iter} iterations; the per-sample Gibbs "
        f"fold-in (40 sweeps) takes {gibbs:.2f} s, {gibbs / seconds:.1f} x as long",
    )
    return [update, transform]


def _ibp(sweeps, rate):
    from sklearn.datasets import load_breast_cancer

    Y = load_breast_cancer().data
    Y = (Y - Y.mean(0)) / Y.std(0)
    rng = np.random.default_rng(0)
    mask = rng.uniform(size=Y.shape) < 0.2
    Ytrain = np.where(mask, np.nan, Y)
    IBPFactorModel(n_iter=2, burn_in=1, random_state=0).fit(Ytrain[:20])  # numba compile/cache
    start = time.perf_counter()
    model = IBPFactorModel(n_iter=sweeps, burn_in=sweeps // 2, random_state=0).fit(Ytrain)
    seconds = (time.perf_counter() - start) / sweeps
    n, j = Y.shape
    k = float(np.mean(model.n_active_))
    flops = 4 * n * k * j + j * n * k**2 + j * k**3 / 3 + 2 * j * k**2 + 2 * n * k * j
    return row(
        f"ibp_lfm_sweep_breast_cancer_N{n}_J{j}",
        seconds,
        flops,
        rate,
        f"20% held out, mean K+ {k:.1f}; held-out log lik {model.log_likelihood(Y, mask):.1f} "
        f"after {sweeps} sweeps",
    )


def _pfa_classifier_demo(rate, rng):
    n, d = 200, 100
    X = _nb_counts(n, d, rng).astype(float)
    y = (X[:, :10].sum(1) > np.median(X[:, :10].sum(1))).astype(int)
    start = time.perf_counter()
    PFAClassifier(n_factors=10, n_iter=100, burn_in=50, random_state=0).fit(X, y)
    seconds = time.perf_counter() - start
    return row(
        "pfa_l_bsvm_fit_N200_P100_K10", seconds, 0, rate, "demo settings: 100 sweeps, VB SVM"
    )


def run(quick: bool) -> list[dict]:
    rng = np.random.default_rng(0)
    rate = matmul_rate()
    rows = []
    if quick:
        rows.append(_pfa(200, 500, 10, 3, rate, rng))
        rows.extend(_pfa_transform(200, 60, 500, 10, rate, rng))
    else:
        rows.append(_pfa(500, 2000, 20, 5, rate, rng))
        rows.extend(_pfa_transform(500, 300, 2000, 20, rate, rng))
        rows.append(_pfa_rounded_intensities(2, rate, rng))
    rows.append(_ibp(20 if quick else 100, rate))
    rows.append(_pfa_classifier_demo(rate, rng))
    return rows


if __name__ == "__main__":
    import sys

    for r in run(quick="--quick" in sys.argv):
        print(r)
