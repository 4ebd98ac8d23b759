"""Input checks of the paper-004 estimators and the problem they fit: observed entries, the two
prior covariances and the sparse maps from entries to rows and columns."""

import numpy as np
import scipy.sparse as sp

from omicsbayes.preprocess.graph import LowRankKernel


def as_kernel(kernel, n, name):
    """A :class:`~omicsbayes.preprocess.graph.LowRankKernel` of size ``n`` from None (the
    identity), a dense covariance or a LowRankKernel (ValueError naming ``name`` otherwise).

    A dense covariance is decomposed here; passing the result to several fits decomposes it
    once."""
    if kernel is None:
        return LowRankKernel.identity(n)
    if isinstance(kernel, LowRankKernel):
        K = kernel
    elif sp.issparse(kernel):
        raise ValueError(
            f"{name} is a sparse matrix; pass a dense covariance or the LowRankKernel that "
            "omicsbayes.preprocess.graph.diffusion_kernel returns"
        )
    else:
        K = LowRankKernel.from_dense(kernel, name=name)
    if K.n != n:
        raise ValueError(f"{name} covers {K.n} entities but shape has {n}; expected {n} x {n}")
    return K


def check_shape(shape):
    """``(rows, columns)`` of a matrix ``shape``: two integers >= 2 (ValueError otherwise)."""
    if len(shape) != 2 or any(int(s) != s or s < 2 for s in shape):
        raise ValueError(f"shape must be two integers >= 2 (rows, columns); got {shape}")
    return int(shape[0]), int(shape[1])


def _check_index(idx, size, name):
    idx = np.asarray(idx)
    if idx.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of indices; got shape {idx.shape}")
    if idx.size and not np.issubdtype(idx.dtype, np.integer):
        if not np.all(np.mod(idx, 1) == 0):
            raise ValueError(f"{name} must hold integer indices")
    idx = idx.astype(np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        raise ValueError(f"{name} has indices outside [0, {size}); expected indices into shape")
    return idx


def _check_entries(rows, cols, values, shape):
    M, N = check_shape(shape)
    rows = _check_index(rows, M, "rows")
    cols = _check_index(cols, N, "cols")
    values = np.asarray(values, dtype=float)
    if not (rows.size == cols.size == values.size) or values.ndim != 1:
        raise ValueError(
            f"rows, cols and values must be 1-D of one length; got {rows.size}, {cols.size}, "
            f"{values.size}"
        )
    if rows.size == 0:
        raise ValueError("no observed entries; expected at least one (row, col, value)")
    n_bad = int(np.size(values) - np.count_nonzero(np.isfinite(values)))
    if n_bad:
        raise ValueError(f"values has {n_bad} non-finite entries; expected finite observations")
    return rows, cols, values, (M, N)


class _Problem:
    """Observed entries, the two covariances and sparse incidence maps (entries -> rows/cols)."""

    def __init__(self, rows, cols, values, shape, row_kernel, col_kernel):
        self.rows, self.cols, self.y, self.shape = _check_entries(rows, cols, values, shape)
        M, N = self.shape
        self.Km = as_kernel(row_kernel, M, "row_kernel")
        self.Kn = as_kernel(col_kernel, N, "col_kernel")
        L = self.rows.size
        ones = np.ones(L)
        self.Rm = sp.csr_matrix((ones, (self.rows, np.arange(L))), shape=(M, L))
        self.Rn = sp.csr_matrix((ones, (self.cols, np.arange(L))), shape=(N, L))

    def subset(self, keep):
        """The problem restricted to the entries ``keep`` (same shape and kernels)."""
        return _Problem(
            self.rows[keep], self.cols[keep], self.y[keep], self.shape, self.Km, self.Kn
        )

    def sparse(self, e):
        """The M x N sparse matrix with e at the observed entries (duplicates summed)."""
        return sp.csr_matrix((e, (self.rows, self.cols)), shape=self.shape)
