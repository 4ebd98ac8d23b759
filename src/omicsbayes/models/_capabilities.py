"""What a model can do, declared once and read as scikit-learn tags.

Each estimator class declares ``capabilities``, a frozenset of the names in
:data:`CAPABILITIES`: everything the class can do with some parameters. An instance's
capabilities are the ``capabilities`` field of its scikit-learn tags (:class:`OmicsTags`,
``sklearn.utils.get_tags(estimator).capabilities``), which may depend on its parameters (a
Bernoulli RFLVM does not take counts). :func:`capabilities_of` reads either;
:func:`models_with` lists the model classes that declare one, so the config schema and the
protocols never keep their own lists.
"""

import importlib
from dataclasses import dataclass, field, fields

from sklearn.utils import Tags, get_tags

__all__ = ["CAPABILITIES", "OmicsTags", "capabilities_of", "models_with", "omics_tags"]

CAPABILITIES = {
    "classifier": "fit(X, y) with class labels; decision_function and predict",
    "regressor": "fit(X, y) with real-valued targets; predict",
    "multi_task": "fit(X, Y) with one column of binary labels per task, all tasks in one model",
    "semi_supervised": (
        "fit(X, y) with NaN / None labels marking unlabelled samples, which the unsupervised part "
        "of the model uses; a y without any label fits that part alone"
    ),
    "transductive": (
        "the classification protocol passes the test samples to fit(X, y) too, labels NaN / None; "
        "only the unsupervised part (PCA) learns from them"
    ),
    "heldout_scoring": "fit(X) with NaN entries missing; log_likelihood(X, mask) scores them",
    "counts": "takes non-negative integer counts (perplexity is defined on held-out counts)",
    "matrix_completion": (
        "fit(rows, cols, values, shape, row_kernel, col_kernel); predict(rows, cols)"
    ),
    "entry_values": (
        "predict(rows, cols) estimates the entries' values (a squared loss), so an error on "
        "held-out values (RMSE) is defined"
    ),
    "model_figures": (
        "one fit on the whole cohort draws the model's own figures (workflow rule file "
        "model_figures.smk: coefficients per task, loadings, top genes, gene network)"
    ),
    "mcmc": "draws kept as ArviZ InferenceData in idata_, log_likelihood_ trace, n_chains",
    "vb": "variational Bayes: lower_bound_ trace, tol, n_iter_",
}


@dataclass(slots=True)
class OmicsTags(Tags):
    """scikit-learn's ``Tags`` plus ``capabilities``: the names of :data:`CAPABILITIES` this
    instance has (the class's declaration, narrowed by its parameters)."""

    capabilities: frozenset = field(default_factory=frozenset)


def omics_tags(tags, capabilities):
    """``tags`` (scikit-learn ``Tags``) as :class:`OmicsTags` with ``capabilities``."""
    unknown = set(capabilities) - set(CAPABILITIES)
    if unknown:
        raise ValueError(f"unknown capabilities {sorted(unknown)}; known: {sorted(CAPABILITIES)}")
    values = {f.name: getattr(tags, f.name) for f in fields(Tags)}
    return OmicsTags(**values, capabilities=frozenset(capabilities))


def capabilities_of(model):
    """The capability names of an estimator instance (its tags) or class (its declaration).

    Returns a frozenset, empty for a class or instance that declares none.
    """
    if not isinstance(model, type):
        return frozenset(getattr(get_tags(model), "capabilities", frozenset()))
    unknown = set(getattr(model, "capabilities", frozenset())) - set(CAPABILITIES)
    if unknown:
        raise ValueError(f"{model.__name__} declares unknown capabilities {sorted(unknown)}")
    return frozenset(getattr(model, "capabilities", frozenset()))


def models_with(capability):
    """Names of the model classes in ``omicsbayes.models`` that declare ``capability``."""
    if capability not in CAPABILITIES:
        raise ValueError(f"unknown capability {capability!r}; known: {sorted(CAPABILITIES)}")
    models = importlib.import_module("omicsbayes.models")
    return frozenset(
        name for name in models.__all__ if capability in capabilities_of(getattr(models, name))
    )
