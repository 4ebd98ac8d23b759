"""Model fits on AnnData, scanpy style: ``omicsbayes.tl.rank_factor(adata, label_key="tissue")``.

Each function fits one model family on ``adata.X`` (or ``adata.layers[layer]``, on the genes of
``mask_var``), takes labels from ``adata.obs[label_key]`` and writes

=================================  =========================================================
``.obsm["X_<key_added>"]``         sample scores (samples x factors)
``.varm["<key_added>_loadings"]``  loadings (genes x factors; NaN for genes outside mask_var)
``.obs["<key_added>_decision"]``   decision values (one column per task when several)
``.uns[key_added]``                model, params, coef, classes, the bound or log-likelihood
                                   trace (``trace``, ``trace_name``) and, for MCMC fits, the
                                   R-hat / ESS table ``diagnostics``
=================================  =========================================================

and returns the fitted estimator (``copy=True``: the new AnnData instead, as in scanpy). Save
the estimator with :func:`omicsbayes.io.save_fit`; :func:`predict` scores a new cohort with it
(or with the estimator itself), matching genes by name.
"""

from ._anndata import mcmc_diagnostics
from ._families import bam, bm2pca, ibp_factor, mvgp, pfa, rank_factor, rflvm
from ._predict import predict

__all__ = [
    "bam",
    "bm2pca",
    "ibp_factor",
    "mcmc_diagnostics",
    "mvgp",
    "pfa",
    "predict",
    "rank_factor",
    "rflvm",
]
