"""AnnData h5ad files."""

from __future__ import annotations

import contextlib

import anndata as ad
import numpy as np
import scipy.sparse as sp

from ._common import CohortError, check_file, check_unique, one_line


@contextlib.contextmanager
def _h5ad_file(path, expected):
    """The checked path of an h5ad file, read in the block: CohortError for a missing or empty
    file and for anything the block cannot read in it (naming ``expected``)."""
    p = check_file(path)
    if p.stat().st_size == 0:
        raise CohortError(f"{path}: file is empty; expected an HDF5 (.h5ad) file")
    try:
        yield p
    except (OSError, KeyError, ValueError, TypeError) as exc:
        raise CohortError(
            f"{path}: not a readable h5ad file ({one_line(exc)}); expected {expected}"
        ) from exc


def read_h5ad(path):
    """Read an h5ad file (samples x features) and bring it to the readers' conventions.

    X becomes float64 and keeps its storage: a dense X stays a dense array, a sparse X (single-cell
    counts) becomes a CSR matrix and is never expanded; layers are kept as stored, sparse or
    dense. An X stored as integers, in a file without a ``"counts"`` layer, is also kept as
    ``.layers["counts"]`` (the integers as read, for the count models); a float X is kept once,
    as X. A non-numeric X or an infinite entry of X is refused; NaN entries are missing values.

    Parameters
    ----------
    path : str or Path
        The .h5ad file.

    Returns
    -------
    anndata.AnnData
    """
    with _h5ad_file(path, "AnnData HDF5") as p:
        adata = ad.read_h5ad(p)
    if adata.n_obs == 0 or adata.n_vars == 0:
        raise CohortError(
            f"{path}: has shape {adata.shape}; expected at least one sample and one feature"
        )
    if adata.X is None:
        raise CohortError(f"{path}: has no X matrix; expected samples x features values in X")
    check_unique(adata.obs_names.tolist(), str(path), "sample")
    check_unique(adata.var_names.tolist(), str(path), "feature")
    X = adata.X
    _check_values(X, adata, path)
    if np.issubdtype(X.dtype, np.integer) and "counts" not in adata.layers:
        adata.layers["counts"] = X  # the array as read; X below is a new float64 one
    if sp.issparse(X):
        adata.X = X.tocsr().astype(np.float64, copy=False)
    else:
        adata.X = np.asarray(X, dtype=np.float64)
    return adata


def _check_values(X, adata, path):
    """CohortError for a non-numeric X or an infinite entry (NaN is a missing value)."""
    if not (np.issubdtype(X.dtype, np.number) or X.dtype == bool):
        raise CohortError(f"{path}: X has dtype {X.dtype}; expected numbers")
    if not np.issubdtype(X.dtype, np.floating):
        return
    if not np.isinf(X.data if sp.issparse(X) else X).any():
        return
    if sp.issparse(X):
        coo = sp.coo_matrix(X)
        bad = np.flatnonzero(np.isinf(coo.data))
        rows, cols = coo.row[bad], coo.col[bad]
    else:
        rows, cols = np.nonzero(np.isinf(np.asarray(X)))
    if len(rows):
        raise CohortError(
            f"{path}: X has {len(rows)} infinite value(s), the first for sample "
            f"{adata.obs_names[rows[0]]!r}, feature {adata.var_names[cols[0]]!r}; expected finite "
            "numbers (missing values as NaN)"
        )


def read_h5ad_obs(path):
    """The ``.obs`` of an h5ad file, read alone (X, layers and the rest stay on disk).

    Returns
    -------
    pandas.DataFrame
        Indexed by sample ID, as :func:`read_h5ad` gives it.
    """
    import h5py
    from anndata.io import read_elem

    with _h5ad_file(path, "AnnData HDF5 with .obs") as p, h5py.File(p, "r") as f:
        obs = read_elem(f["obs"])
    check_unique(obs.index.tolist(), str(path), "sample")
    return obs
