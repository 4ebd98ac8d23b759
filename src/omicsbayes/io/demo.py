"""Bundled demo cohorts, shipped inside the package (``omicsbayes/data``) and read offline
through ``read_matrix``."""

from __future__ import annotations

from importlib import resources

import pandas as pd

from ._common import CohortError
from .delimited import read_matrix

# name -> (label column, layer); files <name>.tsv.gz and <name>.samples.tsv in DATA, written by
# resources/extract_demo.py (provenance in resources/PROVENANCE.md)
DEMOS = {
    "tissue_gene_expression": ("tissue", "intensity"),
    "gse7390": ("er", "intensity"),
    "digits": ("digit", "intensity"),
    "breast_cancer_wisconsin": ("diagnosis", "intensity"),
}

DATA = resources.files("omicsbayes") / "data"
"""The package-data folder holding the demo files (found through ``importlib.resources``, so
it works from a checkout, an editable install and a wheel alike)."""


def load_demo(name):
    """Load a bundled demo cohort.

    Parameters
    ----------
    name : {"tissue_gene_expression", "gse7390", "digits", "breast_cancer_wisconsin"}
        tissue_gene_expression: dslabs tissue set, 189 x 500 genes, ``.obs["tissue"]`` (7).
        gse7390: breast cancer, 198 x 76 probes, ``.obs`` "er", "grade" (2 missing), "age",
        "size", "distant_metastasis", "time_to_distant_metastasis".
        digits: scikit-learn digits, 1797 x 64 pixels, ``.obs["digit"]``.
        breast_cancer_wisconsin: scikit-learn WDBC, 569 x 30, ``.obs["diagnosis"]``.

    Returns
    -------
    anndata.AnnData
        Samples x features, raw values in ``layers["intensity"]``, labels categorical;
        ``uns["label_column"]`` names the default label.
    """
    if name not in DEMOS:
        raise CohortError(f"unknown demo cohort {name!r}; expected one of {sorted(DEMOS)}")
    label, layer = DEMOS[name]
    matrix, sheet = DATA / f"{name}.tsv.gz", DATA / f"{name}.samples.tsv"
    for f in (matrix, sheet):
        if not f.is_file():
            raise CohortError(
                f"{f}: demo file not found; expected it in the installed package's data folder "
                "(reinstall omicsbayes; in a checkout, run resources/extract_demo.py)"
            )
    with resources.as_file(matrix) as m, resources.as_file(sheet) as s:
        adata = read_matrix(m, sample_sheet=s, orientation="samples_as_rows", layer=layer)
    col = adata.obs[label]
    if not isinstance(col.dtype, pd.CategoricalDtype):
        adata.obs[label] = col.map(lambda v: v if pd.isna(v) else str(v)).astype("category")
    adata.uns["label_column"] = label
    adata.uns["demo"] = name
    return adata


def read_demo_obs(name):
    """The ``.obs`` of a bundled demo cohort (:func:`load_demo`), from its sample sheet alone.

    Returns
    -------
    pandas.DataFrame
        Indexed by sample ID; the label column as strings (categorical), as :func:`load_demo`
        gives it.
    """
    from .delimited import read_sample_sheet

    if name not in DEMOS:
        raise CohortError(f"unknown demo cohort {name!r}; expected one of {sorted(DEMOS)}")
    label = DEMOS[name][0]
    with resources.as_file(DATA / f"{name}.samples.tsv") as sheet:
        obs = read_sample_sheet(sheet)
    col = obs[label]
    if not isinstance(col.dtype, pd.CategoricalDtype):
        obs[label] = col.map(lambda v: v if pd.isna(v) else str(v)).astype("category")
    return obs
