"""The fitted-attribute vocabulary shared by ``tl``, ``io`` and ``pl``, below all three.

:func:`fitted` reads an estimator's attribute through a list of names (the shared vocabulary first,
then a model's own name for the same thing, such as RFLVM's ``latent_``). :data:`ANNDATA_FIT` names
the record a ``tl`` function leaves on the estimator it fitted: the genes it was fitted on, the gene
selection and the layer, which a fit file keeps so that :func:`omicsbayes.tl.predict` can align a
new cohort's genes by name.
"""

from __future__ import annotations

__all__ = ["ANNDATA_FIT", "IDATA", "SCORES", "TRACES", "fitted"]

SCORES = ("scores_", "latent_", "row_factors_")
TRACES = (
    ("lower_bound_", "lower_bound"),
    ("log_likelihood_", "log_likelihood"),
)
IDATA = ("idata_",)
#: Attribute a ``tl`` function sets on the estimator it fitted: a dict with ``function``,
#: ``key_added``, ``layer``, ``var_names`` (the genes fitted on, in order), ``mask_var`` (the
#: ``.var`` column name of the gene selection, or None) and ``tasks``.
ANNDATA_FIT = "anndata_fit_"


def fitted(estimator, *names, default=None):
    """The first fitted attribute of ``estimator`` among ``names`` (``default`` if none).

    Looks into a nested ``pfa_`` (PFAClassifier) when the estimator lacks them all.
    """
    for name in names:
        value = getattr(estimator, name, None)
        if value is not None:
            return value
    inner = getattr(estimator, "pfa_", None)
    return default if inner is None else fitted(inner, *names, default=default)
