"""A Bayesian linear SVM on fixed features (Polson & Scott 2011), fitted by VB or Gibbs.

The augmentation block it iterates is :mod:`omicsbayes.inference.bsvm`;
:class:`~omicsbayes.models.PFAClassifier` fits one per task on PFA's factor scores.
"""

from numbers import Integral, Real

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.utils._param_validation import Interval, StrOptions

from ..inference.bsvm import (
    bsvm_coef_posterior,
    expected_hinge,
    expected_inv_lambda,
    gauss_kl,
    sample_inv_lambda,
)
from ..inference.chain import run_chain
from ..inference.tpbn import TPBNShrinkage
from ._base import MCMCEstimator, VBEstimator
from ._validation import binary_labels

__all__ = ["BayesianSVM"]


class _BSVMGibbs:
    """The Gibbs chain of :class:`BayesianSVM` (Polson & Scott 2011) for
    :func:`~omicsbayes.inference.chain.run_chain`: lambda, beta, then the TPBN scales."""

    def __init__(self, Xd, ypm, shrink, fixed_prec, rng):
        self.Xd, self.ypm, self.shrink, self.fixed_prec, self.rng = Xd, ypm, shrink, fixed_prec, rng
        self.beta = np.zeros(Xd.shape[1])
        self.prior = np.concatenate([shrink.prior_precision.ravel(), fixed_prec])

    def sweep(self, it):
        Xd, ypm, rng = self.Xd, self.ypm, self.rng
        n_coef = Xd.shape[1] - self.fixed_prec.size
        inv_lam = sample_inv_lambda(1.0 - ypm * (Xd @ self.beta), rng)
        mean, cov = bsvm_coef_posterior(Xd, ypm, inv_lam, self.prior)
        self.beta = rng.multivariate_normal(mean, cov, method="cholesky")
        scales = self.shrink.update_gibbs(self.beta[None, None, :n_coef], rng).ravel()
        self.prior = np.concatenate([scales, self.fixed_prec])
        return {"log_likelihood": -2.0 * np.maximum(0.0, 1.0 - ypm * (Xd @ self.beta)).sum()}

    def draw(self):
        return self.beta.copy()

    def state(self):
        """Never called: BayesianSVM has no ``checkpoint`` parameter and runs its chain without
        a checkpoint file, so ``run_chain`` never asks for the sampler's state."""
        raise NotImplementedError("BayesianSVM does not checkpoint its Gibbs chain")

    def final(self):
        return None


class BayesianSVM(ClassifierMixin, VBEstimator, MCMCEstimator):
    """Bayesian linear SVM (Polson & Scott 2011) with a TPBN / horseshoe prior on coefficients.

    Parameters
    ----------
    inference : {"vb", "gibbs"}
    r, s : float
        TPBN shape parameters of the coefficient prior (``r = s = 1/2``: horseshoe).
    fit_intercept : bool
        Add an unshrunk intercept with prior ``N(0, intercept_scale^2)``.
    intercept_scale : float
    max_iter : int
        VB iterations (at most).
    tol : float
        VB stops when the relative change of the monitoring bound is below ``tol``.
    n_samples, burn_in, thin : int
        Gibbs draws kept, discarded and the thinning interval.
    random_state : int, Generator or None
    verbose : bool, default True

    Attributes
    ----------
    classes_, coef_ (n_features,), intercept_ (float), coef_cov_ (VB), n_iter_,
    lower_bound_ (VB: expected log pseudo-likelihood under a Gaussian approximation of the
    residual, minus KL(q(beta) || prior); a monitoring quantity), idata_ and
    log_likelihood_ (Gibbs: draws and the log pseudo-likelihood of every sweep).
    """

    capabilities = frozenset({"classifier", "vb", "mcmc"})

    def _instance_capabilities(self):
        """``mcmc`` when fitted by Gibbs sampling, ``vb`` otherwise."""
        return self.capabilities - {"vb" if self.inference == "gibbs" else "mcmc"}

    _blas_sequential = True  # a Cholesky of the d x d precision each iteration (thread policy)

    def __init__(
        self,
        inference="vb",
        r=0.5,
        s=0.5,
        fit_intercept=True,
        intercept_scale=10.0,
        max_iter=200,
        tol=1e-5,
        n_samples=500,
        burn_in=500,
        thin=1,
        random_state=None,
        verbose=True,
    ):
        self.inference = inference
        self.r = r
        self.s = s
        self.fit_intercept = fit_intercept
        self.intercept_scale = intercept_scale
        self.max_iter = max_iter
        self.tol = tol
        self.n_samples = n_samples
        self.burn_in = burn_in
        self.thin = thin
        self.random_state = random_state
        self.verbose = verbose

    _parameter_constraints = {
        "inference": [StrOptions({"vb", "gibbs"})],
        "r": [Interval(Real, 0, np.inf, closed="neither")],
        "s": [Interval(Real, 0, np.inf, closed="neither")],
        "fit_intercept": ["boolean"],
        "intercept_scale": [Interval(Real, 0, np.inf, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, np.inf, closed="left")],
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "burn_in": [Interval(Integral, 0, None, closed="left")],
        "thin": [Interval(Integral, 1, None, closed="left")],
        "random_state": [None, np.random.Generator, Interval(Integral, 0, None, closed="left")],
        "verbose": ["verbose"],
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def _design(self, X):
        X = self._check_X(X, reset=True)
        if self.fit_intercept:
            X = np.hstack([X, np.ones((len(X), 1))])
        return X

    def fit(self, X, y):
        """Fit by VB or Gibbs; ``y`` holds any two class labels."""
        Xd = self._design(X)
        self.classes_, ypm = binary_labels(y, "BayesianSVM", len(Xd))
        rng = np.random.default_rng(self.random_state)
        n_coef = self.n_features_in_
        shrink = TPBNShrinkage((1, 1, n_coef), self.r, self.s)
        fixed_prec = np.full(int(self.fit_intercept), 1.0 / self.intercept_scale**2)
        if self.inference == "vb":
            self._fit_vb(Xd, ypm, shrink, fixed_prec)
        else:
            self._fit_gibbs(Xd, ypm, shrink, fixed_prec, rng)
        return self

    def _fit_vb(self, Xd, ypm, shrink, fixed_prec):
        n_coef = self.n_features_in_
        prior = np.concatenate([shrink.prior_precision.ravel(), fixed_prec])
        state = {"inv_lam": np.ones(len(Xd)), "prior": prior}

        def step(it):
            mean, cov = bsvm_coef_posterior(Xd, ypm, state["inv_lam"], state["prior"])
            f = Xd @ mean
            var_f = ((Xd @ cov) * Xd).sum(axis=1)  # a BLAS product, not einsum's triple loop (8x)
            second = mean[:n_coef] ** 2 + np.diag(cov)[:n_coef]
            state.update(
                inv_lam=expected_inv_lambda((1.0 - ypm * f) ** 2 + var_f),
                prior=np.concatenate([shrink.update_vb(second[None, None]).ravel(), fixed_prec]),
                mean=mean,
                cov=cov,
            )
            return -2.0 * expected_hinge(1.0 - ypm * f, var_f).sum() - gauss_kl(
                mean, cov, state["prior"]
            )

        self._run_vb(step, name="BayesianSVM VB")
        mean, cov = state["mean"], state["cov"]
        self._set_coef(mean)
        self.coef_cov_ = cov

    def _fit_gibbs(self, Xd, ypm, shrink, fixed_prec, rng):
        n_coef = self.n_features_in_
        total = int(self.burn_in) + int(self.n_samples) * int(self.thin)
        chain = run_chain(
            lambda state: _BSVMGibbs(Xd, ypm, shrink, fixed_prec, rng),
            rng,
            n_iter=total,
            burn_in=int(self.burn_in),
            thin=self.thin,
            name="BayesianSVM Gibbs",
            verbose=self.verbose,
        )
        draws = np.asarray(chain.draws)
        self._set_coef(draws.mean(axis=0))
        posterior = {"coef": [draws[:, :n_coef]]}
        if self.fit_intercept:
            posterior["intercept"] = [draws[:, -1]]
        self._record_chains(
            [chain],
            posterior,
            sample_stats={"log_pseudo_likelihood": [chain.kept("log_likelihood")]},
            n_iter=total,
        )

    def _set_coef(self, mean):
        self.coef_ = mean[: self.n_features_in_]
        self.intercept_ = float(mean[-1]) if self.fit_intercept else 0.0

    def decision_function(self, X):
        """Posterior-mean score ``beta^T x + b``; positive favours ``classes_[1]``."""
        X = self._check_X(X, reset=False)
        return X @ self.coef_ + self.intercept_

    def predict(self, X):
        """Labels ``classes_[1]`` where the decision function is positive."""
        return self.classes_[(self.decision_function(X) > 0).astype(int)]
