"""Normalised Laplacian, diffusion kernel (dense and low-rank) and the LowRankKernel algebra."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.linalg import expm

from omicsbayes.preprocess.graph import LowRankKernel, diffusion_kernel, normalized_laplacian


def _graph(n=40, density=0.12, seed=0, isolated=(3,)):
    rng = np.random.default_rng(seed)
    A = np.triu(rng.random((n, n)) * (rng.random((n, n)) < density), 1)
    A = A + A.T
    for i in isolated:
        A[i, :] = A[:, i] = 0.0
    return A


def test_laplacian_matches_formula_and_isolated_rows_are_zero():
    A = _graph()
    L = normalized_laplacian(sp.csr_matrix(A)).toarray()
    d = A.sum(axis=1)
    conn = d > 0
    Dh = np.diag(1 / np.sqrt(d[conn]))
    expected = np.eye(conn.sum()) - Dh @ A[np.ix_(conn, conn)] @ Dh
    np.testing.assert_allclose(L[np.ix_(conn, conn)], expected, atol=1e-12)
    assert np.all(L[3] == 0) and np.all(L[:, 3] == 0)
    mu = np.linalg.eigvalsh(L)
    assert mu.min() > -1e-10 and mu.max() < 2 + 1e-10


@pytest.mark.parametrize(
    "A, match",
    [
        (np.array([[0, -1.0], [-1.0, 0]]), "negative"),
        (np.array([[0, 1.0], [0.0, 0]]), "symmetric"),
        (np.ones((2, 3)), "square"),
        (np.array([[0, np.nan], [np.nan, 0]]), "non-finite"),
    ],
)
def test_bad_adjacency_raises(A, match):
    with pytest.raises(ValueError, match=match):
        diffusion_kernel(A)


def test_bad_diffusion_parameters_raise():
    A = _graph(6, 0.5)
    with pytest.raises(ValueError, match="a must be"):
        diffusion_kernel(A, a=0)
    with pytest.raises(ValueError, match="b must be"):
        diffusion_kernel(A, b=-1)
    with pytest.raises(ValueError, match="rank"):
        diffusion_kernel(A, rank=0)


def test_dense_diffusion_kernel_equals_matrix_exponential():
    A = _graph()
    L = normalized_laplacian(A).toarray()
    K = diffusion_kernel(A, a=0.7, b=0.3)
    np.testing.assert_allclose(K, expm(-0.7 * L) + 0.3 * np.eye(len(A)), atol=1e-10)


def test_low_rank_kernel_exact_at_full_rank_and_within_documented_bound():
    A = _graph()
    a, b = 1.0, 1.0
    K = diffusion_kernel(A, a=a, b=b)
    n_conn = int((A.sum(axis=1) > 0).sum())
    full = diffusion_kernel(A, a=a, b=b, rank=n_conn)
    np.testing.assert_allclose(full.to_dense(), K, atol=1e-10)
    # dropped eigenvalues are replaced by one value: spectral error <= exp(-a mu_r) - exp(-2a)
    L = normalized_laplacian(A).toarray()
    conn = A.sum(axis=1) > 0
    mu = np.sort(np.linalg.eigvalsh(L[np.ix_(conn, conn)]))
    for rank in (5, 15):
        lr = diffusion_kernel(A, a=a, b=b, rank=rank)
        err = np.linalg.norm(lr.to_dense() - K, 2)
        assert err <= np.exp(-a * mu[rank - 1]) - np.exp(-2 * a) + 1e-8
        # the kept eigenpairs are exact: K w = (exp(-a mu) + b) w
        W = lr.eigvecs
        np.testing.assert_allclose(K @ W, W * lr.eigvals, atol=1e-7)
        np.testing.assert_allclose(lr.eigvals, np.exp(-a * mu[:rank]) + b, atol=1e-8)
        # isolated node exact
        np.testing.assert_allclose(lr.to_dense()[3], K[3], atol=1e-12)
        assert np.linalg.eigvalsh(lr.to_dense()).min() > 0


def test_low_rank_kernel_algebra():
    rng = np.random.default_rng(1)
    lr = diffusion_kernel(_graph(), rank=8)
    K = lr.to_dense()
    X = rng.standard_normal((K.shape[0], 3))
    np.testing.assert_allclose(lr.matmat(X), K @ X, atol=1e-10)
    np.testing.assert_allclose(lr.matmat(X[:, 0]), K @ X[:, 0], atol=1e-10)
    G = lr.sqrt_matmat(np.eye(K.shape[0]))
    np.testing.assert_allclose(G, G.T, atol=1e-10)
    np.testing.assert_allclose(G @ G, K, atol=1e-10)
    np.testing.assert_allclose(lr.rows([0, 5]), K[[0, 5]], atol=1e-12)
    B = rng.standard_normal((6, 6))
    C = B @ B.T
    np.testing.assert_allclose(LowRankKernel.from_dense(C).to_dense(), C, atol=1e-10)
    np.testing.assert_allclose(LowRankKernel.identity(4).to_dense(), np.eye(4))
    with pytest.raises(ValueError, match="positive semi-definite"):
        LowRankKernel.from_dense(-C, name="row_kernel")
