"""Bundled demo cohorts, read offline from resources/demo through ``read_matrix``."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from ._common import CohortError
from .delimited import read_matrix

# name -> (label column, layer); files resources/demo/<name>.tsv.gz and <name>.samples.tsv,
# written by resources/extract_demo.py (provenance in resources/PROVENANCE.md)
DEMOS = {
    "tissue_gene_expression": ("tissue", "intensity"),
    "gse7390": ("er", "intensity"),
    "digits": ("digit", "intensity"),
    "breast_cancer_wisconsin": ("diagnosis", "intensity"),
}


def resources_dir():
    """The resources folder: ``$OMICSBAYES_RESOURCES`` if set, else ``<repo>/resources``."""
    env = os.environ.get("OMICSBAYES_RESOURCES")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "resources"


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
    folder = resources_dir() / "demo"
    matrix, sheet = folder / f"{name}.tsv.gz", folder / f"{name}.samples.tsv"
    for f in (matrix, sheet):
        if not f.is_file():
            raise CohortError(
                f"{f}: demo file not found; expected the bundled resources (run "
                "resources/extract_demo.py, or set OMICSBAYES_RESOURCES to the resources folder)"
            )
    adata = read_matrix(matrix, sample_sheet=sheet, orientation="samples_as_rows", layer=layer)
    col = adata.obs[label]
    if not isinstance(col.dtype, pd.CategoricalDtype):
        adata.obs[label] = col.map(lambda v: v if pd.isna(v) else str(v)).astype("category")
    adata.uns["label_column"] = label
    adata.uns["demo"] = name
    return adata
