"""MV-GP: the plain matrix-variate GP posterior mean, equation (1a), by conjugate gradients."""

import numpy as np
from scipy.sparse.linalg import LinearOperator, cg
from sklearn.utils.validation import check_is_fitted

from omicsbayes.inference.convergence import check_finite
from omicsbayes.inference.progress import Progress

from ._estimator import _SHARED_CONSTRAINTS, _Estimator, _sigma2_path
from ._problem import _check_index


class MVGP(_Estimator):
    """Plain matrix-variate GP regression: equation (11) with lam = 0, i.e. equation (1a).

    Not a scikit-learn ``X`` estimator: ``fit(rows, cols, values, shape, row_kernel=None,
    col_kernel=None)`` takes the observed entries of one matrix (not a samples x features
    ``X``), so it does not go into a ``Pipeline``.

    The minimiser of (11) without the nuclear norm is ``B = G_M^T S_alpha G_N`` with ``alpha``
    solving ``(C + sigma2 I) alpha = y`` (C the Kronecker covariance on the observed entries), so
    the mean is ``psi = C_M S_alpha C_N``. The system is solved by conjugate gradients with
    products by C computed from the low-rank-plus-diagonal form of the covariances, never the
    L x L matrix.

    Parameters
    ----------
    sigma2 : float, list of float or "auto"
        Observation noise variance (> 0); ``"auto"`` (default) or a list chooses it by inner
        validation over :data:`SIGMA2_GRID` or the list as in :class:`ConstrainedMVGP` (each CG
        solve starts from the previous ``alpha``).
    selection_metric : str
        What the ``"auto"`` choice optimises (see :class:`ConstrainedMVGP`).
    tol : float
        Relative residual tolerance of conjugate gradients.
    max_iter : int
        Largest number of conjugate-gradient iterations.
    random_state : int, Generator or None
        Seed of the validation split of ``"auto"``.
    verbose : bool
        Show progress over the CG iterations (:class:`~omicsbayes.inference.progress.Progress`;
        logged at INFO every 10 % either way).

    Attributes
    ----------
    sigma2_ : float
    selection_ : pandas.DataFrame or None
    alpha_ : ndarray, shape (L,)
        Dual weights of the observed entries.
    n_iter_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from omicsbayes.models import MVGP
    >>> rows, cols = np.nonzero(np.eye(6, 5, dtype=bool) | np.eye(6, 5, k=1, dtype=bool))
    >>> model = MVGP(sigma2=0.1).fit(rows, cols, np.ones(rows.size), shape=(6, 5))
    >>> # identity covariances: the mean is y / (1 + sigma2) on the known entries, 0 elsewhere
    >>> bool(np.allclose(model.predict(rows, cols), 1 / 1.1))
    True
    >>> float(model.predict_rows()[0, 4])
    0.0
    """

    _parameter_constraints = _SHARED_CONSTRAINTS

    def __init__(
        self,
        sigma2="auto",
        selection_metric="recall@20",
        tol=1e-8,
        max_iter=1000,
        random_state=None,
        verbose=True,
    ):
        self.sigma2 = sigma2
        self.selection_metric = selection_metric
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state
        self.verbose = verbose

    @staticmethod
    def _parts(K):
        """``K = A W^T + diag(t)`` with ``A = W diag(d) - diag(t) W``."""
        W = K.eigvecs
        return W, W * K.eigvals - K.tail[:, None] * W, K.tail

    def _kron_at(self, S, s_at, rows, cols):
        """``(C_M S C_N)`` at the pairs (rows, cols); ``s_at`` holds ``S[rows, cols]``."""
        F = S @ self._Wn  # M x r_N
        H = S.T @ self._Wm  # N x r_M
        Z = self._Wm.T @ F
        Am, An = self._Am[rows], self._An[cols]
        return (
            np.einsum("lk,lk->l", Am @ Z, An)
            + np.einsum("lk,lk->l", Am, H[cols]) * self._tn[cols]
            + self._tm[rows] * np.einsum("lk,lk->l", F[rows], An)
            + self._tm[rows] * self._tn[cols] * s_at
        )

    def _path(self):
        return _sigma2_path(self._candidates()["sigma2"])

    def _fit_problem(self, problem, sigma2, rng, warm=None):
        """Solve ``(C + sigma2 I) alpha = y`` by conjugate gradients from ``warm`` (an alpha) or
        zero (equation 1a); returns alpha."""
        self._Wm, self._Am, self._tm = self._parts(problem.Km)
        self._Wn, self._An, self._tn = self._parts(problem.Kn)
        self._Km, self._Kn = problem.Km, problem.Kn
        pair = problem.rows * problem.shape[1] + problem.cols
        _, pair_id = np.unique(pair, return_inverse=True)
        L = problem.y.size
        self.sigma2_ = sigma2

        def matvec(a):
            a = np.ravel(a)
            s_at = np.bincount(pair_id, weights=a)[pair_id]
            S = problem.sparse(a)
            return self._kron_at(S, s_at, problem.rows, problem.cols) + sigma2 * a

        self.n_iter_ = 0
        progress = Progress(self.max_iter, "MV-GP CG", self.verbose)

        def callback(xk):
            self.n_iter_ += 1
            progress.step(self.n_iter_ - 1, np.linalg.norm(xk), "|alpha|")

        op = LinearOperator((L, L), matvec=matvec, dtype=float)
        alpha, info = cg(
            op, problem.y, x0=warm, rtol=self.tol, maxiter=self.max_iter, callback=callback
        )
        progress.close()
        check_finite(alpha, "MV-GP conjugate-gradient solve", self.n_iter_)
        self.converged_ = info == 0
        self.alpha_ = alpha
        self.shape_ = problem.shape
        self._S = problem.sparse(alpha)
        return alpha

    def predict(self, rows, cols):
        """GP posterior mean (1a) at the entries (rows[i], cols[i])."""
        check_is_fitted(self, "alpha_")
        rows = _check_index(rows, self.shape_[0], "rows")
        cols = _check_index(cols, self.shape_[1], "cols")
        if rows.size != cols.size:
            raise ValueError(f"rows and cols differ in length ({rows.size} vs {cols.size})")
        s_at = np.asarray(self._S[rows, cols]).ravel()
        return self._kron_at(self._S, s_at, rows, cols)

    def predict_rows(self, rows=None):
        """GP posterior mean of every column for the given rows, shape (len(rows), N)."""
        check_is_fitted(self, "alpha_")
        rows = (
            np.arange(self.shape_[0])
            if rows is None
            else _check_index(rows, self.shape_[0], "rows")
        )
        out = np.empty((rows.size, self.shape_[1]))
        for start in range(0, rows.size, 1024):  # blocks of rows bound the C_M[rows] memory
            block = rows[start : start + 1024]
            X = (self._S.T @ self._Km.rows(block).T).T  # C_M[block] S
            out[start : start + block.size] = self._Kn.matmat(X.T).T
        return out
