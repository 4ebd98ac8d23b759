"""RFLVM's HMC trajectory length: held-out fit and mixing per CPU second against ``hmc_leapfrog``.

    OMP_NUM_THREADS=1 PYTHONPATH=src python -m benchmarks.rflvm_leapfrog [--leapfrog 50 150]

The HMC step size on (X, W) is found at the chain's first move and dual-averaged to an
acceptance probability of 0.7 during burn-in; the trajectory is ``hmc_leapfrog`` steps of it. Each
setting is fitted with the default sampler (IBP RFLVM, M = 50, 100 iterations, burn-in 50) on
the same data, 20 % held-out mask and chain seed:

- Wisconsin (569 x 30, log2(x + 0.001) then z-scored, as the workflow's ``breast_cancer_heldout``),
  Gaussian, masks / chain seeds 0-2;
- simulated negative-binomial counts (200 x 500, three latent dimensions through random Fourier
  features, dispersion 5), masks / chain seeds 0-1.

Prints, per fit: held-out log likelihood per entry (the workflow's metric), CPU seconds, HMC
acceptance and step size, and the effective sample size (ArviZ, bulk) of the retained draws' two
identifiable traces: the observed-entry log likelihood and the samples' mean linear predictor
(the smallest ESS over samples), per CPU second. docs/models.md (paper 002) reports one run.
"""

import argparse
import time

import arviz as az
import numpy as np
from sklearn.datasets import load_breast_cancer
from threadpoolctl import threadpool_limits

from omicsbayes.models import RFLVM


def wisconsin(seed):
    X = np.log2(load_breast_cancer().data + 0.001)
    X = (X - X.mean(0)) / X.std(0)
    return X, np.random.default_rng(seed).uniform(size=X.shape) < 0.2, "gaussian"


def counts(seed):
    rng = np.random.default_rng(100 + seed)
    G = rng.standard_normal((200, 3)) @ rng.standard_normal((20, 3)).T
    Phi = np.hstack([np.cos(G), np.sin(G)]) / np.sqrt(20)
    psi = Phi @ rng.standard_normal((40, 500)) - 0.5
    Y = rng.negative_binomial(5.0, 1.0 / (1.0 + np.exp(psi))).astype(float)
    return Y, rng.uniform(size=Y.shape) < 0.2, "negative_binomial"


def fit(data, seed, leapfrog):
    Y, mask, likelihood = data(seed)
    est = RFLVM(likelihood=likelihood, hmc_leapfrog=leapfrog, random_state=seed)
    t = time.process_time()
    est.fit(np.where(mask, np.nan, Y))
    cpu = time.process_time() - t
    stats = est.idata_.sample_stats
    ess_ll = float(az.ess(stats[["log_likelihood_observed"]]).to_array().min())
    ess_mean = float(az.ess(stats[["predictive_mean"]]).to_array().min())
    return {
        "heldout": est.log_likelihood(Y, mask) / mask.sum(),
        "cpu": cpu,
        "accept": est.hmc_acceptance_,
        "step": est.hmc_step_size_,
        "ess_ll_per_s": ess_ll / cpu,
        "ess_mean_per_s": ess_mean / cpu,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leapfrog", nargs="+", type=int, default=[50, 150])
    parser.add_argument(
        "--data", nargs="+", choices=["wisconsin", "nb"], default=["wisconsin", "nb"]
    )
    args = parser.parse_args()
    seeds = {"wisconsin": (wisconsin, range(3)), "nb": (counts, range(2))}
    runs = [(name, seeds[name][0], s) for name in args.data for s in seeds[name][1]]
    with threadpool_limits(1):
        for name, data, seed in runs:
            for leapfrog in args.leapfrog:
                r = fit(data, seed, leapfrog)
                print(
                    f"{name} seed {seed} leapfrog {leapfrog}: "
                    f"held-out {r['heldout']:+.4f} / entry, CPU {r['cpu']:.1f} s, "
                    f"accept {r['accept']:.2f}, step {r['step']:.4f}, ESS/s log lik "
                    f"{r['ess_ll_per_s']:.2f}, mean predictor {r['ess_mean_per_s']:.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
