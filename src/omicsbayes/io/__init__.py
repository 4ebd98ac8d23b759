"""Cohort readers: files to AnnData (samples x features).

Fits: ``save_fit`` / ``load_fit`` round-trip a fitted estimator through a fit file that is data
(JSON and arrays; loading runs no code from the file), ``read_header`` shows what a fit file
holds, ``save_draws`` writes MCMC draws to netCDF (:mod:`.fits`).

``read_cohort_obs`` reads only the ``.obs`` a cohort entry gives (a sample sheet, an h5ad's
``.obs``, a series matrix's header lines, ...), for checks before the data are read.

Every reader returns ``.obs`` indexed by sample ID, ``.var`` indexed by feature ID, X as
float64 and the raw values in ``.layers["intensity"]`` or ``.layers["counts"]`` (int64). Every
bad input raises :class:`CohortError` naming the file and what was expected.
"""

from ._common import CohortError
from .associations import load_omim, load_orphanet, read_associations
from .cohort import read_cohort, read_cohort_obs
from .counts import read_counts
from .delimited import read_matrix, read_sample_sheet
from .demo import load_demo
from .fits import FitFileError, load_fit, read_header, save_draws, save_fit
from .geo import collapse_probes, read_geo_platform, read_geo_series_matrix
from .h5ad import read_h5ad
from .hiv import read_hivdb_phenosense
from .hpo import load_omim_associations
from .movielens import load_movielens_100k, load_movielens_small
from .networks import read_association_list, read_edge_list
from .simulate import simulate_counts
from .tcga import parse_barcode, read_tcga

__all__ = [
    "CohortError",
    "collapse_probes",
    "FitFileError",
    "load_demo",
    "load_fit",
    "load_movielens_100k",
    "load_movielens_small",
    "load_omim",
    "load_orphanet",
    "read_associations",
    "parse_barcode",
    "read_association_list",
    "read_cohort",
    "read_cohort_obs",
    "read_counts",
    "read_edge_list",
    "read_geo_platform",
    "read_geo_series_matrix",
    "read_header",
    "read_h5ad",
    "read_hivdb_phenosense",
    "load_omim_associations",
    "read_matrix",
    "read_sample_sheet",
    "read_tcga",
    "save_draws",
    "save_fit",
    "simulate_counts",
]
