"""The estimator base every model of ``omicsbayes.models`` subclasses.

:class:`BaseOmicsEstimator` owns the conventions, written once (scikit-learn's ``BaseMixture``
is the model: the base owns validation, the loop and the fitted check; a model supplies its
own steps):

- **Parameter validation.** ``_parameter_constraints`` (scikit-learn's ``Interval``,
  ``StrOptions``, ...; shared entries in :mod:`._validation`) is checked once, by the base,
  before a subclass's ``fit`` runs. Checks that relate two parameters go in an override of
  ``_validate_params`` that calls ``super()._validate_params()`` first.
- **Input checks.** :meth:`BaseOmicsEstimator._check_X` is the one path (scikit-learn's
  ``validate_data``: ``n_features_in_``, ``feature_names_in_``, the feature count at predict
  time; NaN only where the ``allow_nan`` input tag says NaN marks a missing entry; with the
  ``counts`` capability non-negative values rounded to the nearest count).
- **Fitted check.** Every public method in :data:`POLICY_METHODS` other than ``fit`` raises
  scikit-learn's ``NotFittedError`` before the estimator is fitted.
- **Thread policy.** Every public method in :data:`POLICY_METHODS` a subclass defines runs
  under :func:`._threads.limit_blas` (class attributes ``_blas_sequential``, ``_blas_shape``,
  ``_worker_blocks`` and the fitted ``_fit_shape`` tune it).
- **Capabilities.** The class attribute ``capabilities`` (names of
  :data:`._capabilities.CAPABILITIES`) is what the class can do; an instance's are the
  ``capabilities`` field of its scikit-learn tags (``_instance_capabilities`` narrows them by
  parameter).
- **Progress.** ``verbose`` draws a progress bar in the fit loops below.

:class:`VBEstimator` adds the variational loop (:meth:`VBEstimator._run_vb`: ``lower_bound_``,
``n_iter_``, ``converged_``, the ``ConvergenceWarning``) and :class:`MCMCEstimator` the chains
(:meth:`MCMCEstimator._sample_chains`, :meth:`MCMCEstimator._record_chains`:
``log_likelihood_``, ``idata_``, ``n_iter_``). Adding a model means subclassing one of them,
declaring ``_parameter_constraints`` and ``capabilities``, and writing ``fit`` and the predict
methods from the model's own updates.
"""

import functools

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import get_tags
from sklearn.utils._available_if import _AvailableIfDescriptor
from sklearn.utils.validation import check_is_fitted

from ..inference.chain import (
    chains_to_idata,
    check_burn_in,
    run_vb,
    sample_estimator_chains,
    trace_label,
)
from ._capabilities import omics_tags
from ._threads import limit_blas
from ._validation import check_count_X, check_X

__all__ = [
    "POLICY_METHODS",
    "BaseOmicsEstimator",
    "MCMCEstimator",
    "VBEstimator",
]

#: The public methods the base wraps in the thread policy (and, all but ``fit``, the fitted
#: check); ``fit`` also gets the parameter validation.
POLICY_METHODS = (
    "fit",
    "transform",
    "decision_function",
    "predict",
    "predict_proba",
    "log_likelihood",
    "perplexity",
)


def _fit_method(method):
    limited = limit_blas(method)

    @functools.wraps(method)
    def fit(self, *args, **kwargs):
        self._validate_params()
        return limited(self, *args, **kwargs)

    fit._omicsbayes_policy = True
    return fit


def _fitted_method(method):
    limited = limit_blas(method)

    @functools.wraps(method)
    def fitted(self, *args, **kwargs):
        check_is_fitted(self)
        return limited(self, *args, **kwargs)

    fitted._omicsbayes_policy = True
    return fitted


class BaseOmicsEstimator(BaseEstimator):
    """Base of every omicsbayes estimator (see the module docstring for what it owns).

    Subclasses declare ``capabilities`` and ``_parameter_constraints`` and define ``fit`` (which
    calls :meth:`_check_X` with ``reset=True``) and their predict methods (``reset=False``).
    """

    #: Names of :data:`~omicsbayes.models._capabilities.CAPABILITIES` the class can have.
    capabilities = frozenset()

    def __init_subclass__(cls, **kwargs):
        for name in POLICY_METHODS:
            method = cls.__dict__.get(name)
            wrap = _fit_method if name == "fit" else _fitted_method
            if isinstance(method, _AvailableIfDescriptor):  # a method behind available_if
                if not getattr(method.fn, "_omicsbayes_policy", False):
                    method.fn = wrap(method.fn)
            elif method is not None and not getattr(method, "_omicsbayes_policy", False):
                setattr(cls, name, wrap(method))
        super().__init_subclass__(**kwargs)

    def _instance_capabilities(self):
        """The capabilities of this instance: the class's ``capabilities`` unless a parameter
        narrows them (override)."""
        return type(self).capabilities

    def __sklearn_tags__(self):
        tags = omics_tags(super().__sklearn_tags__(), self._instance_capabilities())
        if "counts" in tags.capabilities:
            tags.input_tags.positive_only = True
        return tags

    def _check_X(self, X, *, reset):
        """``X`` as a checked float64 samples x features array (the one input path).

        ``reset=True`` in ``fit`` records ``n_features_in_`` and ``feature_names_in_``;
        ``reset=False`` checks new data against them. NaN is accepted when the ``allow_nan``
        input tag is set (NaN = missing); with the ``counts`` capability the values must be
        non-negative and are rounded to the nearest count.
        """
        tags = get_tags(self)
        check = check_count_X if "counts" in tags.capabilities else check_X
        return check(self, X, reset=reset, allow_nan=tags.input_tags.allow_nan)


class VBEstimator(BaseOmicsEstimator):
    """Base of the variational estimators (parameters ``max_iter``, ``tol``, ``verbose``)."""

    def _run_vb(self, step, *, name=None, initial=None, lag=1, min_iter=1, record=True):
        """Run :func:`~omicsbayes.inference.chain.run_vb` with the estimator's ``max_iter``,
        ``tol`` and ``verbose``.

        ``record`` sets ``lower_bound_``, ``n_iter_`` and ``converged_``. Returns
        ``(lower_bound, n_iter, converged)``; ``name`` (default: the class name) labels the
        progress bar and the ``ConvergenceWarning``.
        """
        result = run_vb(
            step,
            max_iter=int(self.max_iter),
            tol=float(self.tol),
            name=name or type(self).__name__,
            verbose=self.verbose,
            initial=initial,
            lag=lag,
            min_iter=min_iter,
            label=trace_label(self, "lower_bound"),
        )
        if record:
            self.lower_bound_, self.n_iter_, self.converged_ = result
        return result


class MCMCEstimator(BaseOmicsEstimator):
    """Base of the MCMC estimators (the chain settings of
    :data:`~omicsbayes.models._validation.MCMC_CONSTRAINTS`)."""

    def _burn_in(self):
        """The burn-in ``burn_in`` means (None: ``n_iter // 2``), refused unless it leaves a
        kept iteration."""
        return check_burn_in(self.burn_in, self.n_iter, type(self).__name__)

    def _sample_chains(self, make, rng, *, burn_in, fingerprint, name=None):
        """The ``n_chains`` chains (:func:`~omicsbayes.inference.chain.sample_estimator_chains`):
        ``make(rng, state)`` builds one chain's sampler. Returns a list of ``ChainResult``."""
        return sample_estimator_chains(
            self,
            make,
            rng,
            burn_in=burn_in,
            name=name or type(self).__name__,
            fingerprint=fingerprint,
        )

    def _record_chains(
        self, chains, posterior, sample_stats=None, dims=None, coords=None, n_iter=None
    ):
        """Set the trace attributes: ``log_likelihood_`` (the first chain's trace),
        ``log_likelihood_chains_`` (every chain's, shape ``(n_chains, n_iter)``), ``n_iter_``
        (``n_iter``, default the ``n_iter`` parameter) and ``idata_``
        (:func:`~omicsbayes.inference.chain.chains_to_idata` of the per-chain ``posterior`` and
        ``sample_stats``)."""
        self.log_likelihood_ = chains[0].traces["log_likelihood"]
        self.log_likelihood_chains_ = np.stack([c.traces["log_likelihood"] for c in chains])
        self.n_iter_ = self.n_iter if n_iter is None else n_iter
        self.idata_ = chains_to_idata(posterior, sample_stats, dims=dims, coords=coords)
