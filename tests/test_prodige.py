"""ProDiGe (paper 004's multitask SVM baseline) against scikit-learn's SVC on the explicit
Kronecker Gram matrix, its C handling and its bad inputs."""

import numpy as np
import pytest
from sklearn.svm import SVC
from sklearn.utils._param_validation import InvalidParameterError

from omicsbayes.models import ProDiGe
from omicsbayes.models.mvgp import C_GRID
from omicsbayes.preprocess import diffusion_kernel

M, N = 6, 5


def _psd(rng, n, rank):
    """A random PSD matrix of the given rank plus a small ridge."""
    F = rng.standard_normal((n, rank))
    return F @ F.T / rank + 0.1 * np.eye(n)


def _entries(rng, n_obs=18):
    """Distinct entries of an M x N matrix, about a third labelled positive."""
    flat = rng.choice(M * N, n_obs, replace=False)
    rows, cols = np.divmod(flat, N)
    values = (rng.random(n_obs) < 0.35).astype(float)
    values[:2] = [1.0, 0.0]  # both classes
    return rows, cols, values


def _svc_scores(Km, Kn, rows, cols, values, C):
    """Brute force: SVC on the L x L Gram of the product kernel, scoring every (m, n). libsvm
    keeps its kernel columns in single precision, hence agreement to 1e-6, not 1e-12."""
    gram = Km[np.ix_(rows, rows)] * Kn[np.ix_(cols, cols)]
    svc = SVC(kernel="precomputed", C=C, tol=1e-12, shrinking=False).fit(gram, values > 0)
    all_rows, all_cols = np.divmod(np.arange(M * N), N)
    cross = Km[np.ix_(all_rows, rows)] * Kn[np.ix_(all_cols, cols)]
    return svc.decision_function(cross).reshape(M, N), svc


@pytest.mark.parametrize("C", [0.05, 1.0, 100.0])
@pytest.mark.parametrize("gene_kernel", ["identity", "dense"])
def test_scores_equal_svc_on_the_kronecker_gram(C, gene_kernel):
    rng = np.random.default_rng(int(C * 100) + len(gene_kernel))
    Km = _psd(rng, M, 3)
    Kn = np.eye(N) if gene_kernel == "identity" else _psd(rng, N, 2)
    rows, cols, values = _entries(rng)
    expected, svc = _svc_scores(Km, Kn, rows, cols, values, C)
    model = ProDiGe(C=C, tol=1e-12).fit(
        rows,
        cols,
        values,
        (M, N),
        row_kernel=Km,
        col_kernel=None if gene_kernel == "identity" else Kn,
    )
    assert model.converged_
    np.testing.assert_allclose(model.predict_rows(), expected, rtol=0, atol=1e-6)
    np.testing.assert_allclose(model.predict(rows, cols), expected[rows, cols], atol=1e-6)
    # the bias is libsvm's (unregularised, -rho) and the dual coefficients are alpha * y
    np.testing.assert_allclose(model.intercept_, svc.intercept_[0], atol=1e-6)
    beta = np.zeros(rows.size)
    beta[svc.support_] = svc.dual_coef_[0]
    np.testing.assert_allclose(model.dual_coef_, beta, rtol=1e-5, atol=1e-6)


def test_low_rank_diffusion_kernel_equals_its_dense_form():
    """The claim's disease kernel (a LowRankKernel with a tail) gives the SVC of its dense form."""
    rng = np.random.default_rng(5)
    A = np.triu((rng.random((M, M)) < 0.5).astype(float), 1)
    K = diffusion_kernel(A + A.T, rank=2)
    rows, cols, values = _entries(rng, 20)
    expected, _ = _svc_scores(K.to_dense(), np.eye(N), rows, cols, values, 1.0)
    model = ProDiGe(C=1.0, tol=1e-12).fit(rows, cols, values, (M, N), row_kernel=K)
    np.testing.assert_allclose(model.predict_rows(), expected, atol=1e-6)


def test_c_bounds_the_dual_and_auto_selects_from_the_papers_grid():
    rng = np.random.default_rng(2)
    Km = _psd(rng, M, 3)
    rows, cols, values = _entries(rng, 24)
    small = ProDiGe(C=1e-3, tol=1e-10).fit(rows, cols, values, (M, N), row_kernel=Km)
    assert np.all(np.abs(small.dual_coef_) <= 1e-3 + 1e-15)
    assert abs(small.dual_coef_.sum()) < 1e-12  # y^T alpha = 0
    np.testing.assert_array_equal(C_GRID, 10.0 ** np.arange(-3, 4))
    auto = ProDiGe(random_state=0).fit(rows, cols, values, (M, N), row_kernel=Km)
    assert auto.selection_["C"].tolist() == sorted(C_GRID.tolist())
    assert auto.C_ in C_GRID
    # the final fit is the fit with the chosen C given as a number
    given = ProDiGe(C=auto.C_).fit(rows, cols, values, (M, N), row_kernel=Km)
    np.testing.assert_allclose(auto.predict_rows(), given.predict_rows(), atol=1e-9)
    listed = ProDiGe(C=[0.1, 10.0], random_state=0).fit(rows, cols, values, (M, N), Km)
    assert listed.selection_["C"].tolist() == [0.1, 10.0]


def test_warm_start_along_the_c_path_gives_the_cold_fit():
    rng = np.random.default_rng(4)
    Km = _psd(rng, M, 3)
    rows, cols, values = _entries(rng, 22)
    cold = ProDiGe(C=10.0, tol=1e-12).fit(rows, cols, values, (M, N), Km)
    from omicsbayes.models.mvgp._problem import _Problem

    problem = _Problem(rows, cols, values, (M, N), Km, None)
    warm_model = ProDiGe(tol=1e-12)
    warm = warm_model._fit_problem(problem, C=0.1, rng=None)
    warm_model._fit_problem(problem, C=10.0, rng=None, warm=warm)
    np.testing.assert_allclose(warm_model.predict_rows(), cold.predict_rows(), atol=1e-6)


def test_bad_input_is_one_clear_error():
    rows, cols = np.array([0, 1, 2]), np.array([0, 1, 2])
    with pytest.raises(ValueError, match="needs both classes.*all 3 are positive"):
        ProDiGe(C=1.0).fit(rows, cols, np.ones(3), (M, N))
    with pytest.raises(InvalidParameterError, match="'C' parameter"):
        ProDiGe(C=0.0).fit(rows, cols, [1.0, 0.0, 0.0], (M, N))
    with pytest.raises(ValueError, match=r"C must be 'auto', a number or a list"):
        ProDiGe(C=[1.0, -1.0]).fit(rows, cols, [1.0, 0.0, 0.0], (M, N))
    with pytest.raises(ValueError, match="row_kernel covers 4 entities but shape has 6"):
        ProDiGe(C=1.0).fit(rows, cols, [1.0, 0.0, 0.0], (M, N), row_kernel=np.eye(4))
