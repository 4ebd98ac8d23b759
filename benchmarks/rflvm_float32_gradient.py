"""RFLVM's HMC with the float32 gradient against a float64 one: same trajectories, same momenta.

    PYTHONPATH=src python -m benchmarks.rflvm_float32_gradient

For the dense RFLVM on Wisconsin (569 x 30, Gaussian) and on simulated 200 x 500 negative-binomial
counts (M = 50, 2 latent dimensions, 20 % held out): 30 iterations with the step size adapted
(burn-in), then eight 150-step HMC transitions from the chain's state with the float32 gradient
of :meth:`_Chain._grad_xw` and, with the same random numbers, with the float64 gradient written
out below with numpy. Prints the acceptance probabilities and CPU seconds of both.
Both chains are exact (the Metropolis step uses the float64 target); the float32 gradient is only
worth having if it does not lower the acceptance. docs/models.md (paper 002) reports one run.
"""

import time

import numpy as np
from scipy.special import expit
from threadpoolctl import threadpool_limits

from omicsbayes.inference.hmc import hmc_step
from omicsbayes.models import RFLVM
from omicsbayes.models.rflvm import _Chain, rff
from omicsbayes.models.rflvm._updates import chol_inverse


def grad64(ch, X, W, chol_inv):
    """The gradient of :meth:`_Chain._log_target_xw` in float64 (Gaussian and logistic links)."""
    Z = ch.Z
    XZ = X * Z
    Phi = rff(XZ, W)
    if ch.family.name == "gaussian":
        b0 = ch.est.noise_prior[1]
        _, Ainv = chol_inverse(Phi.T @ Phi + np.eye(Phi.shape[1]) / ch.c)
        C = Phi.T @ ch.Yf
        mean = Ainv @ C
        q = np.maximum(ch.yy - np.sum(C * mean, axis=0), 0.0)
        resid = (ch.Yf - Phi @ mean) * (ch.a_n / (b0 + 0.5 * q))
        d_phi = (resid @ C.T - ch.J * Phi) @ Ainv
    else:
        d_psi = ch.Y - ch._logit_weight * expit(Phi @ ch.beta)
        d_phi = d_psi @ ch.beta.T
    M = Phi.shape[1] // 2
    d_g = d_phi[:, M:] * Phi[:, :M] - d_phi[:, :M] * Phi[:, M:]
    white = np.einsum("mij,mj->mi", chol_inv, W - ch.mus[ch.labels])
    return (d_g @ W) * Z - X, d_g.T @ XZ - np.einsum("mji,mj->mi", chol_inv, white)


def _data(which):
    if which == "wisconsin":
        from sklearn.datasets import load_breast_cancer

        X = load_breast_cancer().data
        return (X - X.mean(0)) / X.std(0), "gaussian"
    rng = np.random.default_rng(0)
    N, J = 200, 500
    G = rng.standard_normal((N, 3)) @ rng.standard_normal((20, 3)).T
    Phi = np.hstack([np.cos(G), np.sin(G)]) / np.sqrt(20)
    psi = Phi @ rng.standard_normal((40, J)) - 0.5
    return rng.negative_binomial(5.0, 1.0 / (1.0 + np.exp(psi))).astype(float), "negative_binomial"


def compare(which, iters=30, moves=8):
    Y, lik = _data(which)
    obs = np.random.default_rng(1).uniform(size=Y.shape) >= 0.2
    est = RFLVM(
        likelihood=lik, n_random_features=50, n_iter=iters, burn_in=iters, sparse=False, n_latent=2
    )
    ch = _Chain(est, np.where(obs, Y, 0.0), obs, np.random.default_rng(1))
    ch.secs = dict.fromkeys(("z", "x", "hmc", "dp", "w", "beta"), 0.0)
    for it in range(iters):
        ch.sweep(it)
    chol_inv = np.linalg.inv(np.linalg.cholesky(ch.Sigmas))[ch.labels]
    prep = ch._grad_prep()

    def target(X, W):
        return ch._log_target_xw(X, W, chol_inv)

    forces = {
        "float32": lambda X, W: ch._grad_xw(X, W, chol_inv, prep),
        "float64": lambda X, W: grad64(ch, X, W, chol_inv),
    }
    print(f"{which} ({lik}): adapted step size {ch.hmc_step_size:.4f}")
    for name, grad in forces.items():
        probs, t = [], time.process_time()
        for s in range(moves):
            rng = np.random.default_rng(100 + s)
            probs.append(hmc_step((ch.X, ch.W), target, grad, ch.hmc_step_size, 150, rng)[1])
        cpu = time.process_time() - t
        mean = np.mean(probs)
        print(f"  {name}: acceptance {np.round(probs, 3)} mean {mean:.3f}, CPU {cpu:.2f} s")


if __name__ == "__main__":
    with threadpool_limits(1):
        for which in ("wisconsin", "negative_binomial"):
            compare(which)
