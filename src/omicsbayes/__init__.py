"""omicsbayes: Bayesian latent factor models for omics cohorts.

Subpackages: ``io`` (cohort readers), ``preprocess`` (transforms), ``models`` (estimators, one
module per paper), ``inference`` (shared sampling and variational pieces), ``evaluate``
(splitters and metrics), ``tl`` (model fits on AnnData), ``pl`` (figures from AnnData or from
saved results).
"""

__version__ = "0.1.0"
