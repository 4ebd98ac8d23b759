"""ProDiGe: the multitask SVM over (disease, gene) pairs of Mordelet and Vert (2011), the domain
baseline of paper 004, section 5.1.

Why a kernel SMO and not a linear SVM on the feature map: with an identity gene kernel the product
kernel is a linear kernel on sparse features ``phi(m, n) = G_M(m) kron e_n``, which liblinear
(``LinearSVC``) would solve, but liblinear's intercept is a regularised constant feature: a
different SVM from ProDiGe's (libsvm's, unregularised bias), whose fit also changes with the
feature's scale. The same sparsity serves the dual: only entries of one gene interact, so the
Gram matrix has ``sum_n L_n^2`` non-zeros (about 36,000 on an OMIM fold) and libsvm's
own algorithm on it is exact, O(L) per step and never forms an L x L matrix. The scores are
``C_M S_beta C_N + b`` from the kernel's low-rank form, a block of rows at a time.
"""

from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from numba import njit
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted

from omicsbayes.inference.convergence import check_finite

from ._estimator import _AUTO, _SHARED_CONSTRAINTS, _Estimator
from ._problem import _check_index

_TAU = 1e-12  # libsvm's stand-in for a non-positive curvature of a working pair
_BLOCK = 1024  # rows (entries) scored at a time: bounds the (block x columns) scratch


class ProDiGe(_Estimator):
    """ProDiGe, the multitask SVM of Mordelet and Vert (2011): paper 004's domain baseline.

    Not a scikit-learn ``X`` estimator: ``fit(rows, cols, values, shape, row_kernel=None,
    col_kernel=None)`` takes the observed entries of one matrix (not a samples x features
    ``X``), so it does not go into a ``Pipeline``.

    An SVM (hinge loss, unregularised bias) on the observed entries, a pair ``(m, n)`` labelled
    +1 when its value is > 0 (a known association) and -1 otherwise (a sampled negative), with
    the product kernel ``K((m, n), (m', n')) = C_M(m, m') C_N(n, n')`` of the row (disease) and
    column (gene) covariances. Its score is ``f(m, n) = (C_M S_beta C_N)(m, n) + b``, ``S_beta``
    the sparse matrix of the dual coefficients ``beta_l = alpha_l y_l`` at the entries: the
    form of :class:`MVGP`'s posterior mean, with the hinge loss where MV-GP has the squared one.

    The dual (``0 <= alpha <= C``, ``y^T alpha = 0``) is solved by sequential minimal
    optimisation with libsvm's second-order working-set selection (Fan, Chen and Lin 2005), so
    the fit is the one ``sklearn.svm.SVC(kernel="precomputed")`` finds on the Kronecker Gram
    matrix, which is never formed: with a diagonal ``C_N`` (the identity: no gene side
    information, paper 004's case) only entries of one column interact, and the Gram matrix is
    block diagonal with ``sum_n L_n^2`` non-zeros (``L_n`` the entries of column n). Any other
    ``C_N`` makes it dense (L x L, as ProDiGe's own implementation needs), for small problems.

    Parameters
    ----------
    C : float, list of float or "auto"
        SVM regularisation (> 0; larger C, less regularised). ``"auto"`` (the default) chooses it
        by inner validation over section 5.1's grid :data:`C_GRID` (1e-3, ..., 1e3) as
        :class:`ConstrainedMVGP` chooses ``lam`` and ``sigma2`` (a seeded fifth of the positive
        and of the other entries held out, the best by ``selection_metric`` refitted on all
        entries); a list is searched the same way; a number is used as given.
    selection_metric : str
        What the ``"auto"`` choice optimises (see :class:`ConstrainedMVGP`).
    tol : float
        Stop when the largest violation of the dual's optimality conditions (libsvm's
        ``m(alpha) - M(alpha)``) is below ``tol`` (libsvm's ``eps``, default 1e-3).
    max_iter : int
        Largest number of SMO steps (pairs of dual variables updated).
    random_state : int, Generator or None
        Seed of the validation split of ``"auto"``.
    verbose : bool
        Unused by the solver (one compiled loop); kept so every estimator here takes it.

    Attributes
    ----------
    C_ : float
        The C used (chosen when "auto").
    selection_ : pandas.DataFrame or None
        With an "auto" (or listed) C, one row per grid point (see :class:`ConstrainedMVGP`).
    dual_coef_ : ndarray, shape (L,)
        ``alpha_l y_l`` of every observed entry, in the order given.
    intercept_ : float
        The bias ``b`` (libsvm's ``-rho``).
    n_iter_ : int
        SMO steps taken.
    converged_ : bool
        Whether the violation fell below ``tol`` within ``max_iter`` steps.

    References
    ----------
    Mordelet, F. and Vert, J.-P. (2011). ProDiGe: Prioritization Of Disease Genes with multitask
    machine learning from positive and unlabeled examples. BMC Bioinformatics 12, 389.
    Fan, R.-E., Chen, P.-H. and Lin, C.-J. (2005). Working set selection using second order
    information for training support vector machines. JMLR 6, 1889-1918.

    Examples
    --------
    >>> import numpy as np
    >>> from omicsbayes.models import ProDiGe
    >>> from omicsbayes.preprocess import diffusion_kernel
    >>> rows, cols = np.array([0, 1, 2, 3, 4, 0, 2]), np.array([0, 0, 1, 1, 2, 3, 4])
    >>> values = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0])  # two sampled negatives
    >>> path = np.eye(6, k=1) + np.eye(6, k=-1)  # disease i is the neighbour of disease i + 1
    >>> model = ProDiGe(C=1.0).fit(rows, cols, values, shape=(6, 5),
    ...                            row_kernel=diffusion_kernel(path))
    >>> int(model.predict_rows([5])[0].argmax())  # disease 5 takes its neighbour 4's gene
    2
    """

    # a decision value, not an estimate of the entry: no RMSE on held-out ratings
    capabilities = frozenset({"matrix_completion"})
    _parameter_constraints = {
        **{p: _SHARED_CONSTRAINTS[p] for p in ("selection_metric", "random_state", "verbose")},
        "C": [Interval(Real, 0, None, closed="neither"), _AUTO, "array-like"],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        C="auto",
        selection_metric="recall@20",
        tol=1e-3,
        max_iter=10_000_000,
        random_state=None,
        verbose=True,
    ):
        self.C = C
        self.selection_metric = selection_metric
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state
        self.verbose = verbose

    def _path(self):
        """C ascending (the most regularised first), one warm-start chain."""
        return [({"C": float(c)}, 0) for c in self._candidates()["C"][::-1]]

    def _fit_problem(self, problem, C, rng, warm=None):
        """Solve the dual by SMO from ``warm = (alpha, C_warm)`` scaled to ``C`` (still feasible:
        the box scales and ``y^T alpha = 0`` holds) or from 0; returns ``(alpha, C)``."""
        y = np.where(problem.y > 0, 1.0, -1.0)
        if np.all(y == y[0]):
            raise ValueError(
                "ProDiGe needs both classes among the observed values: positives (value > 0) "
                f"and negatives (value <= 0); all {y.size} are "
                f"{'positive' if y[0] > 0 else 'negative'}"
            )
        Q, Qd = _signed_gram(problem, y)
        alpha = np.zeros(y.size) if warm is None else warm[0] * (C / warm[1])
        G, self.n_iter_, self.converged_ = _smo(
            y, Q.indptr, Q.indices, Q.data, Qd, float(C), float(self.tol), int(self.max_iter), alpha
        )
        check_finite(G, "ProDiGe SMO gradient", self.n_iter_)
        self.C_ = C
        self.intercept_ = -_rho(y, G, alpha, C)
        self.dual_coef_ = alpha * y
        self.shape_ = problem.shape
        self._Km, self._Kn = problem.Km, problem.Kn
        # S_beta as (columns x rows): its products with C_M[rows]^T give C_M[rows] S_beta
        self._S_t = sp.csr_matrix(
            (self.dual_coef_, (problem.cols, problem.rows)), shape=problem.shape[::-1]
        )
        return alpha, C

    def _scores(self, rows):
        """``(C_M S_beta C_N)[rows, :] + b`` for a block of rows, shape (len(rows), N)."""
        X = (self._S_t @ self._Km.rows(rows).T).T
        return self._Kn.matmat(X.T).T + self.intercept_

    def predict(self, rows, cols):
        """SVM scores ``f(m, n)`` at the entries (rows[i], cols[i])."""
        check_is_fitted(self, "dual_coef_")
        rows = _check_index(rows, self.shape_[0], "rows")
        cols = _check_index(cols, self.shape_[1], "cols")
        if rows.size != cols.size:
            raise ValueError(f"rows and cols differ in length ({rows.size} vs {cols.size})")
        out = np.empty(rows.size)
        for start in range(0, rows.size, _BLOCK):
            r, c = rows[start : start + _BLOCK], cols[start : start + _BLOCK]
            out[start : start + r.size] = self._scores(r)[np.arange(r.size), c]
        return out

    def predict_rows(self, rows=None):
        """SVM scores of every column for the given rows (all rows if None), shape
        (len(rows), N)."""
        check_is_fitted(self, "dual_coef_")
        rows = (
            np.arange(self.shape_[0])
            if rows is None
            else _check_index(rows, self.shape_[0], "rows")
        )
        out = np.empty((rows.size, self.shape_[1]))
        for start in range(0, rows.size, _BLOCK):
            block = rows[start : start + _BLOCK]
            out[start : start + block.size] = self._scores(block)
        return out


def _kernel_at(K, a, b):
    """``K[a_l, b_l]`` of a LowRankKernel at index pairs, from ``K = A W^T + diag(t)`` with
    ``A = W diag(d) - diag(t) W`` (r products per pair, nothing of size n x n)."""
    W = K.eigvecs
    A = W * K.eigvals - K.tail[:, None] * W
    return np.einsum("lk,lk->l", A[a], W[b]) + np.where(a == b, K.tail[a], 0.0)


def _signed_gram(problem, y):
    """``Q = diag(y) K diag(y)`` on the observed entries as CSR, and its diagonal.

    A diagonal column covariance (no eigenvectors: the identity or a per-column variance) pairs
    only the entries of one column: their pairs are listed column by column (``sum_n L_n^2``
    of them). Any other column covariance pairs every entry with every other (dense L x L)."""
    rows, cols, L = problem.rows, problem.cols, problem.y.size
    if problem.Kn.eigvecs.shape[1] == 0:
        order = np.argsort(cols, kind="stable")
        counts = np.bincount(cols, minlength=problem.shape[1])
        first = np.cumsum(counts) - counts  # where each column's entries start in `order`
        sizes = counts[cols[order]]  # L_n of each entry
        owner = np.repeat(np.arange(L), sizes)  # position in `order`, once per partner
        offset = np.arange(owner.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        i = order[owner]
        j = order[first[cols[i]] + offset]
        k = _kernel_at(problem.Km, rows[i], rows[j]) * problem.Kn.tail[cols[i]]
    else:
        i, j = (a.ravel() for a in np.meshgrid(np.arange(L), np.arange(L), indexing="ij"))
        k = _kernel_at(problem.Km, rows[i], rows[j]) * _kernel_at(problem.Kn, cols[i], cols[j])
    Q = sp.csr_matrix((y[i] * y[j] * k, (i, j)), shape=(L, L))
    Q.sum_duplicates()
    Q.sort_indices()
    return Q, _kernel_at(problem.Km, rows, rows) * _kernel_at(problem.Kn, cols, cols)


@njit(cache=True)
def _smo(y, indptr, indices, data, Qd, C, tol, max_iter, alpha):
    """SMO on ``min 1/2 a^T Q a - 1^T a``, ``0 <= a <= C``, ``y^T a = 0`` from ``alpha``
    (updated in place), Q a sparse symmetric CSR matrix; libsvm's second-order working-set
    selection, no shrinking. Returns the gradient ``Q a - 1``, the steps and convergence."""
    L = y.size
    G = -np.ones(L)
    for t in range(L):
        if alpha[t] != 0.0:
            for p in range(indptr[t], indptr[t + 1]):
                G[indices[p]] += data[p] * alpha[t]
    Qi = np.zeros(L)  # column i of Q, scattered for the selection of j
    for step in range(max_iter):
        # i: the most violating index that may move up (in -y G)
        g_max, i = -np.inf, -1
        for t in range(L):
            if y[t] > 0:
                if alpha[t] < C and -G[t] >= g_max:
                    g_max, i = -G[t], t
            elif alpha[t] > 0 and G[t] >= g_max:
                g_max, i = G[t], t
        if i < 0:
            return G, step, True
        for p in range(indptr[i], indptr[i + 1]):
            Qi[indices[p]] = data[p]
        # j: of the indices that may move down, the largest second-order decrease with i
        g_max2, j, best = -np.inf, -1, np.inf
        for t in range(L):
            if y[t] > 0:
                if alpha[t] > 0:
                    diff = g_max + G[t]
                    g_max2 = max(g_max2, G[t])
                    if diff > 0:
                        quad = Qd[i] + Qd[t] - 2.0 * y[i] * Qi[t]
                        gain = -(diff * diff) / (quad if quad > 0 else _TAU)
                        if gain <= best:
                            j, best = t, gain
            elif alpha[t] < C:
                diff = g_max - G[t]
                g_max2 = max(g_max2, -G[t])
                if diff > 0:
                    quad = Qd[i] + Qd[t] + 2.0 * y[i] * Qi[t]
                    gain = -(diff * diff) / (quad if quad > 0 else _TAU)
                    if gain <= best:
                        j, best = t, gain
        q_ij = Qi[j] if j >= 0 else 0.0
        for p in range(indptr[i], indptr[i + 1]):
            Qi[indices[p]] = 0.0
        if g_max + g_max2 < tol or j < 0:
            return G, step, True
        # the analytic step on the pair, clipped to the box along y_i a_i + y_j a_j = const
        ai, aj = alpha[i], alpha[j]
        if y[i] != y[j]:
            quad = Qd[i] + Qd[j] + 2.0 * q_ij
            delta = (-G[i] - G[j]) / (quad if quad > 0 else _TAU)
            diff = ai - aj
            alpha[i] += delta
            alpha[j] += delta
            if diff > 0:
                if alpha[j] < 0:
                    alpha[j], alpha[i] = 0.0, diff
            elif alpha[i] < 0:
                alpha[i], alpha[j] = 0.0, -diff
            if diff > 0:
                if alpha[i] > C:
                    alpha[i], alpha[j] = C, C - diff
            elif alpha[j] > C:
                alpha[j], alpha[i] = C, C + diff
        else:
            quad = Qd[i] + Qd[j] - 2.0 * q_ij
            delta = (G[i] - G[j]) / (quad if quad > 0 else _TAU)
            total = ai + aj
            alpha[i] -= delta
            alpha[j] += delta
            if total > C:
                if alpha[i] > C:
                    alpha[i], alpha[j] = C, total - C
                if alpha[j] > C:
                    alpha[j], alpha[i] = C, total - C
            else:
                if alpha[j] < 0:
                    alpha[j], alpha[i] = 0.0, total
                if alpha[i] < 0:
                    alpha[i], alpha[j] = 0.0, total
        di, dj = alpha[i] - ai, alpha[j] - aj
        for p in range(indptr[i], indptr[i + 1]):
            G[indices[p]] += data[p] * di
        for p in range(indptr[j], indptr[j + 1]):
            G[indices[p]] += data[p] * dj
    return G, max_iter, False


def _rho(y, G, alpha, C):
    """libsvm's ``rho`` (the bias is ``-rho``): the mean of ``y G`` over the free support
    vectors, or the midpoint of its bounds from the others when none is free."""
    yG = y * G
    free = (alpha > 0) & (alpha < C)
    if np.any(free):
        return float(np.mean(yG[free]))
    upper = alpha >= C
    lower = alpha <= 0
    ub = yG[(upper & (y < 0)) | (lower & (y > 0))]
    lb = yG[(upper & (y > 0)) | (lower & (y < 0))]
    return float((np.min(ub, initial=np.inf) + np.max(lb, initial=-np.inf)) / 2)
