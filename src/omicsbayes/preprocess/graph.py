"""Graph Laplacians and diffusion kernels used as prior covariances (paper 004, section 5).

The diffusion prior covariance of Smola and Kondor (2003) is ``C = exp(-a L) + b I`` with
``L = I - D^{-1/2} A D^{-1/2}`` the normalised Laplacian of a weighted undirected graph.
Small graphs get the exact dense matrix; large graphs get a :class:`LowRankKernel`, which the
matrix-variate GP models of :mod:`omicsbayes.models.mvgp` accept wherever a dense covariance is
accepted.
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import eigsh

#: Graphs with at most this many nodes get a dense eigendecomposition when ``rank`` is None.
DENSE_MAX_NODES = 2000
#: Number of eigenpairs kept for larger graphs when ``rank`` is None.
DEFAULT_RANK = 200


def _check_adjacency(adjacency):
    A = sp.csr_matrix(adjacency, dtype=float)
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"adjacency must be square; got shape {A.shape}")
    if A.nnz and not np.all(np.isfinite(A.data)):
        raise ValueError("adjacency has non-finite weights; expected finite non-negative weights")
    n_negative = int(np.count_nonzero(A.data < 0))
    if n_negative:
        raise ValueError(
            f"adjacency has {n_negative} negative weights; "
            "a graph Laplacian needs non-negative weights"
        )
    asym = abs(A - A.T)
    if asym.nnz and asym.max() > 1e-10 * max(1.0, abs(A).max()):
        raise ValueError("adjacency is not symmetric; symmetrise it first, e.g. (A + A.T) / 2")
    return A


def normalized_laplacian(adjacency):
    """Normalised graph Laplacian ``L = I - D^{-1/2} A D^{-1/2}`` as a sparse CSR matrix.

    Parameters
    ----------
    adjacency : array_like or scipy.sparse matrix, shape (n, n)
        Symmetric non-negative edge weights.

    Returns
    -------
    scipy.sparse.csr_matrix
        ``D^{-1/2} (D - A) D^{-1/2}``; an isolated node (degree 0) has a zero row, so it forms a
        component of its own (the networkx convention; the formula of section 5 needs D > 0).

    Raises
    ------
    ValueError
        If the adjacency is not square, not symmetric, or has negative or non-finite weights.
    """
    A = _check_adjacency(adjacency)
    deg = np.asarray(A.sum(axis=1)).ravel()
    inv_sqrt = np.zeros_like(deg)
    inv_sqrt[deg > 0] = 1.0 / np.sqrt(deg[deg > 0])
    Dh = sp.diags(inv_sqrt)
    return sp.csr_matrix(Dh @ (sp.diags(deg) - A) @ Dh)


@dataclass(frozen=True)
class LowRankKernel:
    """A covariance ``K = W diag(d) W^T + diag(t) (I - W W^T)`` with orthonormal columns ``W``.

    ``W`` holds the leading eigenvectors, ``d`` their eigenvalues and ``t`` the value that stands
    in for every eigenvalue that was not computed (per node, so that isolated nodes can keep their
    exact value). ``t`` must be constant on the rows where ``W`` is non-zero, so that ``diag(t)``
    commutes with ``W W^T``. Nothing of size n x n is stored unless ``W`` is square (the exact form
    of a dense matrix, see :meth:`from_dense`).

    Parameters
    ----------
    eigvecs : ndarray, shape (n, r)
    eigvals : ndarray, shape (r,)
    tail : ndarray, shape (n,)
    """

    eigvecs: np.ndarray
    eigvals: np.ndarray
    tail: np.ndarray

    def __post_init__(self):
        W, d, t = self.eigvecs, self.eigvals, self.tail
        if W.ndim != 2 or d.shape != (W.shape[1],) or t.shape != (W.shape[0],):
            raise ValueError(
                f"LowRankKernel needs eigvecs (n, r), eigvals (r,), tail (n,); got "
                f"{W.shape}, {d.shape}, {t.shape}"
            )
        if np.any(d < 0) or np.any(t < 0):
            raise ValueError("LowRankKernel eigenvalues and tail must be non-negative")
        support = np.any(W != 0, axis=1)
        t_w = t[support]
        if t_w.size and np.ptp(t_w) > 1e-12 * max(t_w.max(), 1.0):
            raise ValueError("LowRankKernel tail must be constant on the rows where eigvecs != 0")
        # the tail value on the span of W: diag(t) W W^T = t_w W W^T
        object.__setattr__(self, "_t_w", float(t_w[0]) if t_w.size else 0.0)

    @property
    def n(self):
        """Number of nodes."""
        return self.eigvecs.shape[0]

    @classmethod
    def identity(cls, n):
        """The identity covariance of size n (no eigenvectors, tail 1)."""
        return cls(np.zeros((n, 0)), np.zeros(0), np.ones(n))

    @classmethod
    def from_dense(cls, K, name="kernel"):
        """Exact form of a dense symmetric positive semi-definite matrix (full eigendecomposition).

        Eigenvalues down to ``-1e-8 * max eigenvalue`` are treated as round-off and set to 0;
        anything more negative raises ValueError naming ``name``.
        """
        K = np.asarray(K, dtype=float)
        if K.ndim != 2 or K.shape[0] != K.shape[1]:
            raise ValueError(f"{name} must be a square matrix; got shape {K.shape}")
        if not np.all(np.isfinite(K)):
            raise ValueError(f"{name} has non-finite entries; expected a covariance matrix")
        if not np.allclose(K, K.T, atol=1e-10 * max(1.0, np.abs(K).max())):
            raise ValueError(f"{name} is not symmetric; expected a covariance matrix")
        d, W = np.linalg.eigh((K + K.T) / 2)
        if d.size and d[0] < -1e-8 * max(abs(d[-1]), 1e-300):
            raise ValueError(
                f"{name} is not positive semi-definite (smallest eigenvalue {d[0]:.3g})"
            )
        return cls(W, np.clip(d, 0.0, None), np.zeros(K.shape[0]))

    def _apply(self, X, d, t, t_w):
        """``(W diag(d) W^T + diag(t)(I - W W^T)) X`` as ``W diag(d - t_w) W^T X + t * X``."""
        X = np.asarray(X, dtype=float)
        t = t if X.ndim == 1 else t[:, None]
        if self.eigvecs.shape[1] == 0:
            return t * X
        Wx = self.eigvecs.T @ X
        dd = d - t_w if X.ndim == 1 else (d - t_w)[:, None]
        return self.eigvecs @ (dd * Wx) + t * X

    def matmat(self, X):
        """``K @ X`` for a dense array X of shape (n,) or (n, k)."""
        return self._apply(X, self.eigvals, self.tail, self._t_w)

    def sqrt_matmat(self, X):
        """``G @ X`` with ``G = W diag(sqrt d) W^T + diag(sqrt t)(I - W W^T)``, so ``G G^T = K``.

        G is the symmetric square root, used as the basis G_M / G_N of paper 004 section 4.1.
        """
        return self._apply(X, np.sqrt(self.eigvals), np.sqrt(self.tail), np.sqrt(self._t_w))

    def rows(self, index):
        """Rows ``K[index, :]`` as a dense array of shape (len(index), n)."""
        index = np.asarray(index)
        Wi = self.eigvecs[index]
        out = (Wi * (self.eigvals - self.tail[index][:, None])) @ self.eigvecs.T
        out[np.arange(index.size), index] += self.tail[index]
        return out

    def to_dense(self):
        """The full n x n matrix (for small graphs and tests)."""
        return self.rows(np.arange(self.n))


def diffusion_kernel(adjacency, a=1.0, b=1.0, rank=None):
    """Diffusion prior covariance ``exp(-a L) + b I`` of paper 004, section 5.

    Parameters
    ----------
    adjacency : array_like or scipy.sparse matrix, shape (n, n)
        Symmetric non-negative edge weights.
    a, b : float
        Diffusion rate (> 0) and ridge (>= 0); the paper uses a = b = 1.
    rank : int or None
        None: the exact dense matrix when n <= ``DENSE_MAX_NODES``, else ``DEFAULT_RANK``
        eigenpairs. An int: a :class:`LowRankKernel` with that many eigenpairs (exact when rank
        reaches the number of non-isolated nodes).

    Returns
    -------
    ndarray of shape (n, n) or LowRankKernel

    Notes
    -----
    Low-rank approximation: isolated nodes are exact (their Laplacian row is zero, so their kernel
    is ``(1 + b) e_i``). On the other nodes the ``rank`` smallest eigenvalues ``mu_k`` of L (the
    leading eigenpairs of ``-L``, found by ``eigsh`` as the largest of ``D^{-1/2} A D^{-1/2}``)
    are kept exactly, with kernel eigenvalues ``exp(-a mu_k) + b``. Every other eigenvalue is
    replaced by ``exp(-a mu_bar) + b`` with ``mu_bar`` the exact mean of the remaining Laplacian
    eigenvalues, from ``trace(L) - sum_k mu_k``. The error in spectral norm is therefore
    ``max_j |exp(-a mu_j) - exp(-a mu_bar)|`` over the dropped ``mu_j`` in ``[mu_rank, 2]``,
    at most ``exp(-a mu_rank) - exp(-2 a)``; the kernel stays positive definite when b > 0.
    """
    if not a > 0:
        raise ValueError(f"a must be > 0 (the diffusion rate); got {a}")
    if not b >= 0:
        raise ValueError(f"b must be >= 0 (the ridge added to exp(-a L)); got {b}")
    L = normalized_laplacian(adjacency)
    n = L.shape[0]
    if rank is None and n <= DENSE_MAX_NODES:
        mu, W = np.linalg.eigh(L.toarray())
        return (W * np.exp(-a * np.clip(mu, 0.0, 2.0))) @ W.T + b * np.eye(n)
    if rank is None:
        rank = DEFAULT_RANK
    if int(rank) != rank or rank < 1:
        raise ValueError(f"rank must be a positive integer; got {rank}")
    rank = int(rank)
    deg = np.asarray(abs(L).sum(axis=1)).ravel()
    conn = np.flatnonzero(deg > 0)
    n_c = conn.size
    tail = np.full(n, 1.0 + b)
    W = np.zeros((n, min(rank, n_c)))
    if n_c == 0:
        return LowRankKernel(W, np.zeros(0), tail)
    Lc = L[conn][:, conn]
    if rank >= n_c - 1:
        mu, Wc = np.linalg.eigh(Lc.toarray())
        mu, Wc = mu[:rank], Wc[:, :rank]
    else:
        v0 = np.full(n_c, 1.0 / np.sqrt(n_c))
        nu, Wc = eigsh(sp.identity(n_c, format="csr") - Lc, k=rank, which="LA", v0=v0)
        order = np.argsort(-nu)
        mu, Wc = 1.0 - nu[order], Wc[:, order]
    n_tail = n_c - mu.size
    mu_bar = (Lc.diagonal().sum() - mu.sum()) / n_tail if n_tail else 1.0
    mu = np.clip(mu, 0.0, 2.0)
    W[conn] = Wc
    tail[conn] = np.exp(-a * np.clip(mu_bar, 0.0, 2.0)) + b
    return LowRankKernel(W, np.exp(-a * mu) + b, tail)
