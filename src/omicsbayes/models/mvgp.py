"""Constrained matrix-variate Gaussian process (Koyejo, Lee and Ghosh 2014, paper 004).

Models of a partly observed matrix ``y_{m,n} ~ N(Z(m, n), sigma2)`` with a matrix-variate GP prior
``Z ~ MGP(0, C_M, C_N)``; rows and columns are indexed over the whole ``shape`` and the prior
covariances relate rows (columns) that have no observed entry to those that do, so the fitted
mean scores new rows (the new-disease case) through the kernel.

=================  =========================================================================
estimator          mean problem solved
=================  =========================================================================
ConstrainedMVGP    equation (11): squared loss + 1/2 ||B||_F^2 + lam ||B||_* (Con. MV-GP)
TraceGP            equation (11) without the Frobenius (Hilbert-norm) term (Trace GP)
MVGP               equation (11) with lam = 0: the GP posterior mean of equation (1a)
KPMF               MAP of the factor GP, equation (4), fixed rank (Zhou et al. 2012)
PMF                KPMF with identity covariances (Mnih and Salakhutdinov 2007)
=================  =========================================================================

Every estimator has ``fit(rows, cols, values, shape, row_kernel=None, col_kernel=None)``: the
observed entries as index and value arrays (sampled negatives are explicit zeros) and optional
prior covariances over all rows / all columns of ``shape`` (a dense array or the
:class:`~omicsbayes.preprocess.graph.LowRankKernel` that ``diffusion_kernel`` returns; None is the
identity). ``predict(rows, cols)`` scores any entries and ``predict_rows(rows)`` returns whole rows
(every column), which is what a per-disease gene ranking needs.

Basis and factors (section 4.1). The mean is ``psi(m, n) = G_M(m) B G_N(n)^T`` with ``G`` the
symmetric square root of the covariance (``G G^T = C``; any basis gives the same ``psi`` because
both norms of (11) are invariant to ``B -> Q B`` for orthogonal ``Q``). ``B`` is never formed: it
is kept as ``B = U V^T`` with ``U`` (rows x r) and ``V`` (columns x r), and on the factors

* the Frobenius term is ``||U V^T||_F^2 = sum((U^T U) * (V^T V))`` (r x r matrices only);
* the nuclear norm uses its variational form
  ``||B||_* = min_{U V^T = B} (||U||_F^2 + ||V||_F^2) / 2``, so ``lam ||B||_*`` becomes
  ``lam (||U||_F^2 + ||V||_F^2) / 2``, whose minimum over factorisations of a fixed ``B`` is
  ``lam ||B||_*``.

The rank is grown greedily (Laue 2012; Dudik et al. 2012): at the current factors the gradient of
the smooth part with respect to B, ``G_M S G_N + U V^T`` (S the sparse residual matrix), has its
leading singular pairs found by Lanczos (``eigsh``) on its Gram matrix of the smaller side
(products with sparse S, ``W^T S`` and the factors only). If the largest singular value is at most
``lam`` the optimality condition of (11) holds and the fit stops; otherwise the pairs above
``lam`` (as many as the current rank, at least one: the rank at most doubles per step) are added,
each ``-u_i v_i^T`` with the mean of their exact line-search steps, and all factors are refined
with L-BFGS. Adding several pairs per step (issue 17) needs about half the L-BFGS iterations of
one at a time for the same objective. Memory is O((rows + columns) r + L), never rows x columns.

Hyperparameters: ``lam="auto"`` and ``sigma2="auto"`` (the defaults) choose them inside ``fit`` by
inner validation over section 5's grid along a warm-started path, by ``selection_metric``
(:mod:`omicsbayes.models._mvgp_select`); a list of values is searched the same way; numbers are
used as given.

Protocols (section 5) are in :mod:`omicsbayes.protocols.disease_gene` (grid, inner validation,
averaged scores over sampled negatives, P@k and R@k) and :mod:`omicsbayes.protocols.rating`
(RMSE and R@k); ``LAMBDA_GRID`` and ``SIGMA2_GRID`` (from ``_mvgp_select``) are the paper's grid.

Notes on the paper. Section 5 uses the Cholesky factor as the basis; the symmetric square root
used here gives the same mean (the tests compare against a dense solution in the Cholesky basis).
The density in section 2.1 should read ``|Sigma|^{1/2}``, not ``|Sigma|^{P/2}``; it plays no
part in the mean problem. Equation (4) is twice the negative log posterior of the factor GP
(no 1/2 in front of the loss), which changes nothing at its minimum.
"""

import logging
import time
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize
from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, cg, eigsh
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions
from tqdm.auto import tqdm

from omicsbayes.inference.convergence import check_finite
from omicsbayes.preprocess.graph import LowRankKernel

from ._base import RANDOM_STATE, blas_limit, check_rng
from ._mvgp_select import LAMBDA_GRID, SIGMA2_GRID, parse_metric, select

logger = logging.getLogger("omicsbayes")


# ----------------------------------------------------------------------------- input checks
def _as_kernel(kernel, n, name):
    """A LowRankKernel of size n from None (identity), a dense array or a LowRankKernel."""
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


def _check_shape(shape):
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
    M, N = _check_shape(shape)
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


def _check_count(name, value):
    if int(value) != value or value < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}")


class _Problem:
    """Observed entries, the two covariances and sparse incidence maps (entries -> rows/cols)."""

    def __init__(self, rows, cols, values, shape, row_kernel, col_kernel):
        self.rows, self.cols, self.y, self.shape = _check_entries(rows, cols, values, shape)
        M, N = self.shape
        self.Km = _as_kernel(row_kernel, M, "row_kernel")
        self.Kn = _as_kernel(col_kernel, N, "col_kernel")
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


# ------------------------------------------------------------------- objective of equation (11)
def _factor_objective(U, V, problem, lam, sigma2, frobenius):
    """Objective (11) on factors B = U V^T and its gradient.

    ``f = sum_l (psi_l - y_l)^2 / (2 sigma2) + [frobenius] ||U V^T||_F^2 / 2
    + lam (||U||_F^2 + ||V||_F^2) / 2`` with ``psi_l = (G_M U)_{m_l} . (G_N V)_{n_l}``.

    Returns
    -------
    f : float
    gU, gV : ndarray
        Gradients with respect to U and V.
    e : ndarray
        Residuals ``psi_l - y_l`` at the observed entries.
    """
    P = problem.Km.sqrt_matmat(U)
    Q = problem.Kn.sqrt_matmat(V)
    Pl, Ql = P[problem.rows], Q[problem.cols]
    e = np.einsum("lk,lk->l", Pl, Ql) - problem.y
    w = e / sigma2
    f = 0.5 * e @ w + 0.5 * lam * (np.sum(U * U) + np.sum(V * V))
    gU = problem.Km.sqrt_matmat(problem.Rm @ (w[:, None] * Ql)) + lam * U
    gV = problem.Kn.sqrt_matmat(problem.Rn @ (w[:, None] * Pl)) + lam * V
    if frobenius:
        UtU, VtV = U.T @ U, V.T @ V
        f += 0.5 * np.sum(UtU * VtV)
        gU += U @ VtV
        gV += V @ UtU
    return f, gU, gV, e


def _leading_singular_pairs(problem, U, V, e, sigma2, frobenius, rng, k):
    """The ``k`` leading singular triples ``(s, u, v)`` (largest first; ``u``, ``v`` with ``k``
    columns) of the gradient ``X = G_M S G_N + [frobenius] U V^T`` of (11), S the sparse
    residual matrix: Lanczos on the Gram matrix of the smaller side."""
    S = problem.sparse(e / sigma2)
    if not frobenius:
        U, V = U[:, :0], V[:, :0]
    k = min(k, min(problem.shape) - 1)
    if problem.shape[0] >= problem.shape[1]:
        s, v, u = _top_of_gram(S, problem.Km, problem.Kn, U, V, rng, k)
    else:  # X^T = G_N S^T G_M + V U^T
        s, u, v = _top_of_gram(S.T.tocsr(), problem.Kn, problem.Km, V, U, rng, k)
    return s, u, v


def _top_of_gram(S, Ka, Kb, U, V, rng, k):
    """``(s, v, u)``: the ``k`` leading eigenpairs ``(s^2, v)`` of ``X^T X`` for
    ``X = G_a S G_b + U V^T`` (largest first) and ``u = X v / s``.

    ``X^T X x = G_b [S^T K_a S y + S^T P (V^T x)] + V [P^T S y + U^T U V^T x]`` with ``y = G_b x``
    and ``P = G_a U``; ``K_a = G_a^2 = W diag(d - t_w) W^T + diag(t)`` enters through
    ``B = W^T S`` (q x N, never larger than W), formed once, so no Lanczos step multiplies by
    the M x q eigenvectors (issue 17: those products were the fit's hot spot).
    """
    W, t = Ka.eigvecs, Ka.tail
    dd = Ka.eigvals - Ka._t_w  # K_a = W diag(d - t_w) W^T + diag(t): t = t_w where W != 0
    St = S.T.tocsr()
    B = (St @ W).T
    SP = St @ Ka.sqrt_matmat(U)
    UtU = U.T @ U

    def gram(x):
        x = np.ravel(x)
        y = Kb.sqrt_matmat(x)
        z = B.T @ (dd * (B @ y)) + St @ (t * (S @ y))
        if not U.shape[1]:
            return Kb.sqrt_matmat(z)
        vx = V.T @ x
        return Kb.sqrt_matmat(z + SP @ vx) + V @ (SP.T @ y + UtU @ vx)

    n = S.shape[1]
    v0 = rng.standard_normal(n)
    op = LinearOperator((n, n), matvec=gram, dtype=float)
    try:
        top, vec = eigsh(op, k=k, which="LA", v0=v0, tol=1e-10, maxiter=300)
    except ArpackNoConvergence:
        # a tight cluster of leading values (OMIM at small sigma2: many rows with one or two
        # entries of alike residuals): any vectors of the cluster are directions as good, and
        # values to 1e-7 are far within the stopping rule's tol; a larger Krylov space
        ncv = min(n, max(4 * k, 40))
        top, vec = eigsh(op, k=k, which="LA", v0=v0, tol=1e-7, ncv=ncv, maxiter=2000)
    order = np.argsort(-top)
    v = vec[:, order]
    u = Ka.sqrt_matmat(S @ Kb.sqrt_matmat(v)) + U @ (V.T @ v)
    norm = np.linalg.norm(u, axis=0)
    return np.sqrt(np.maximum(top[order], 0.0)), v, u / np.where(norm > 0, norm, 1.0)


def _progress(name, it, total, start, value):
    elapsed = time.perf_counter() - start
    left = elapsed / max(it, 1) * max(total - it, 0)
    logger.info(
        "%s iteration %d/%d objective %.6g elapsed %.1fs est. left %.1fs",
        name,
        it,
        total,
        value,
        elapsed,
        left,
    )


_POSITIVE = Interval(Real, 0, None, closed="neither")
_COUNT = Interval(Integral, 1, None, closed="left")
_AUTO = StrOptions({"auto"})
_SHARED_CONSTRAINTS = {
    "sigma2": [_POSITIVE, _AUTO, "array-like"],
    "selection_metric": [str],
    "tol": [_POSITIVE],
    "max_iter": [_COUNT],
    "random_state": RANDOM_STATE,
    "verbose": ["boolean"],
}


def _sigma2_path(sigma2s):
    """``(params, chain)`` pairs over the sigma2 candidates, from large to small."""
    return [({"sigma2": float(s2)}, None) for s2 in sigma2s]


class _Estimator(BaseEstimator):
    """``fit`` shared by the five estimators: checks, BLAS threads, ``"auto"`` selection, refit.

    A subclass implements ``_path()`` (the grid in visiting order, see
    :func:`omicsbayes.models._mvgp_select.select`) and ``_fit_problem(problem, sigma2, rng,
    warm=None[, lam])``, which fits one setting and returns the warm start of the next.
    """

    capabilities = frozenset({"matrix_completion"})

    def fit(self, rows, cols, values, shape, row_kernel=None, col_kernel=None):
        """Fit on the observed entries; ``"auto"`` hyperparameters are chosen first by inner
        validation (``selection_``) and the final fit uses all entries with them.

        Parameters
        ----------
        rows, cols : array_like of int
            Row and column index of each observed entry.
        values : array_like of float
            The observed values (sampled negatives are explicit zeros).
        shape : (int, int)
            Rows x columns of the whole matrix (rows without entries are scored through the
            kernel).
        row_kernel, col_kernel : ndarray, LowRankKernel or None
            Prior covariances over all rows / columns (None: identity).
        """
        self._validate_params()
        candidates = self._candidates()
        search = any(v.size > 1 for v in candidates.values())
        if search:
            parse_metric(self.selection_metric)
        problem = _Problem(rows, cols, values, shape, *self._kernels(row_kernel, col_kernel))
        rng = check_rng(self.random_state)
        with _blas_limit(problem, getattr(self, "max_rank", getattr(self, "rank", 1))):
            params = {p: float(v[0]) for p, v in candidates.items()}
            self.selection_ = None
            if search:
                best, self.selection_ = select(self, problem, rng.spawn(1)[0])
                params.update(best)
                name, metric = type(self).__name__, self.selection_metric
                logger.info("%s chose %s by validation %s", name, best, metric)
            self._fit_problem(problem, rng=rng, **params)
        return self

    def _candidates(self):
        """``{"lam": values, "sigma2": values}`` (the parameters the estimator has), each from
        large to small: section 5's grid for "auto", the given values for a list, one value for
        a number. More than one value for either means inner validation."""
        grids = {"lam": LAMBDA_GRID, "sigma2": SIGMA2_GRID}
        out = {}
        for p, value in self.get_params().items():
            if p not in grids:
                continue
            if isinstance(value, str):  # "auto" (the constraints allow no other string)
                out[p] = np.sort(np.asarray(grids[p], dtype=float))[::-1]
                continue
            values = np.atleast_1d(np.asarray(value, dtype=float))
            bound = self._parameter_constraints[p][0]
            bad = [v for v in values.tolist() if not bound.is_satisfied_by(v)]
            if values.ndim != 1 or not values.size or bad:
                raise ValueError(
                    f"{p} must be 'auto', a number or a list of numbers, each in {bound}; got "
                    f"{value!r}"
                )
            out[p] = np.unique(values)[::-1]
        return out

    def _kernels(self, row_kernel, col_kernel):
        return row_kernel, col_kernel


def _blas_limit(problem, rank):
    """One BLAS thread when the largest product of a fit is small (issue 17: threads spin)."""
    q = max(problem.Km.eigvecs.shape[1], problem.Kn.eigvecs.shape[1], 1)
    return blas_limit((max(problem.shape), q), (max(problem.shape), rank))  # entries: no BLAS


class _FactorModel(_Estimator):
    """Shared prediction from the fitted row and column factors ``P = G_M U``, ``Q = G_N V``."""

    def _check_fitted(self):
        if not hasattr(self, "row_factors_"):
            raise ValueError(f"this {type(self).__name__} is not fitted yet; call fit first")

    def predict(self, rows, cols):
        """Posterior-mean scores ``psi(m, n)`` at the entries (rows[i], cols[i])."""
        self._check_fitted()
        rows = _check_index(rows, self.shape_[0], "rows")
        cols = _check_index(cols, self.shape_[1], "cols")
        if rows.size != cols.size:
            raise ValueError(f"rows and cols differ in length ({rows.size} vs {cols.size})")
        return np.einsum("lk,lk->l", self.row_factors_[rows], self.col_factors_[cols])

    def predict_rows(self, rows=None):
        """Scores of every column for the given rows (all rows if None), shape (len(rows), N)."""
        self._check_fitted()
        rows = (
            np.arange(self.shape_[0])
            if rows is None
            else _check_index(rows, self.shape_[0], "rows")
        )
        return self.row_factors_[rows] @ self.col_factors_.T


class ConstrainedMVGP(_FactorModel):
    """Nuclear-norm constrained matrix-variate GP mean (Con. MV-GP), equation (11).

    Parameters
    ----------
    lam : float, list of float or "auto"
        Weight of the nuclear norm (lambda >= 0); see ``sigma2``.
    sigma2 : float, list of float or "auto"
        Observation noise variance (> 0). ``"auto"`` (the default, for both) chooses by inner
        validation on the training entries over section 5's grid (:data:`LAMBDA_GRID` x
        :data:`SIGMA2_GRID`): a seeded fifth of the positive and of the other entries is held
        out, the grid is fitted along a warm-started path (sigma2 descending, each lambda's
        factors carried to the next sigma2) and the best by ``selection_metric`` is refitted on
        all entries (:mod:`omicsbayes.models._mvgp_select`). A list of numbers is searched the
        same way (its values instead of the grid); a number is used as given.
    selection_metric : str
        ``"recall@k"`` (default ``"recall@20"``), ``"precision@k"``, ``"rmse"`` or
        ``"log_likelihood"``: what the ``"auto"`` choice maximises (RMSE: minimises).
    max_rank : int
        Largest rank grown; the fit stops earlier when the optimality condition holds.
    tol : float
        Stop when the leading singular value of the gradient is at most ``lam (1 + tol)`` (the
        optimality condition of (11)) or when a new rank lowers the objective by less than a
        fraction ``tol``; also the relative L-BFGS tolerance of each refinement.
    max_iter : int
        L-BFGS iterations per refinement.
    random_state : int, Generator or None
        Seed of the validation split and of the start vectors of the singular-pair search.
    verbose : bool
        Show a tqdm progress bar over the rank grown.

    Attributes
    ----------
    lam_, sigma2_ : float
        The values used (chosen when "auto").
    selection_ : pandas.DataFrame or None
        With an "auto" (or listed) parameter, one row per grid point: ``lam``, ``sigma2``, the
        validation metric (column named by ``selection_metric``), the fitted ``rank`` and
        ``seconds``.
    row_factors_, col_factors_ : ndarray
        ``G_M U`` (rows x rank) and ``G_N V`` (columns x rank); the mean is their product.
    rank_ : int
        Rank of the fitted ``B`` (factors are kept balanced, singular values below 1e-8 of the
        largest dropped).
    nuclear_norm_ : float
        ``||B||_*`` of the fit.
    objective_ : list of float
        Objective (11) at the start and after each growth step (non-increasing).
    n_iter_ : int
        Total L-BFGS iterations.
    converged_ : bool
        Whether a stopping rule of ``tol`` was met before ``max_rank``.
    gradient_norm_ : float
        Last leading singular value of the gradient (``lam`` at an exact optimum).
    """

    _frobenius = True
    _name = "Con. MV-GP"
    _parameter_constraints = {
        **_SHARED_CONSTRAINTS,
        "lam": [Interval(Real, 0, None, closed="left"), _AUTO, "array-like"],
        "max_rank": [_COUNT],
    }

    def __init__(
        self,
        lam="auto",
        sigma2="auto",
        selection_metric="recall@20",
        max_rank=50,
        tol=1e-6,
        max_iter=200,
        random_state=None,
        verbose=False,
    ):
        self.lam = lam
        self.sigma2 = sigma2
        self.selection_metric = selection_metric
        self.max_rank = max_rank
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state
        self.verbose = verbose

    def _path(self):
        """sigma2 descending, lambda descending within; each lambda is one warm-start chain."""
        values = self._candidates()
        return [
            ({"lam": float(lam), **params}, float(lam))
            for params, _ in _sigma2_path(values["sigma2"])
            for lam in values["lam"]
        ]

    def _fit_problem(self, problem, lam, sigma2, rng, warm=None):
        """Rank growth and L-BFGS refinement of the factors of (11), from ``warm = (U, V)``
        (refined first) or from rank 0; returns the fitted ``(U, V)``."""
        M, N = problem.shape
        frob = self._frobenius
        U, V = warm if warm is not None else (np.zeros((M, 0)), np.zeros((N, 0)))
        self.lam_, self.sigma2_ = lam, sigma2
        self.objective_ = []
        self.n_iter_ = 0
        self.converged_ = False
        self.gradient_norm_ = np.nan
        start = time.perf_counter()
        bar = tqdm(total=self.max_rank, disable=not self.verbose, desc=self._name)

        def fun(x, r):
            Ux, Vx = x[: M * r].reshape(M, r), x[M * r :].reshape(N, r)
            fx, gU, gV, _ = _factor_objective(Ux, Vx, problem, lam, sigma2, frob)
            return fx, np.concatenate([gU.ravel(), gV.ravel()])

        def refine(U, V, step):
            r = U.shape[1]
            res = minimize(
                fun,
                np.concatenate([U.ravel(), V.ravel()]),
                args=(r,),
                jac=True,
                method="L-BFGS-B",
                options={"maxiter": self.max_iter, "ftol": self.tol, "gtol": 1e-3 * self.tol},
            )
            check_finite(res.fun, f"{self._name} L-BFGS refinement of the factors", step)
            self.n_iter_ += int(res.nit)
            return _balanced(res.x[: M * r].reshape(M, r), res.x[M * r :].reshape(N, r))

        if U.shape[1]:
            U, V = refine(U, V, 0)
        f, _, _, e = _factor_objective(U, V, problem, lam, sigma2, frob)
        self.objective_.append(float(f))
        for step in range(1, self.max_rank + 1):
            k = min(max(U.shape[1], 1), self.max_rank - U.shape[1])  # the rank at most doubles
            if k < 1:
                break
            s, u, v = _leading_singular_pairs(problem, U, V, e, sigma2, frob, rng, k)
            self.gradient_norm_ = float(s[0])
            if s[0] <= lam * (1.0 + self.tol) + 1e-12:
                self.converged_ = True
                break
            # along each -u_i v_i^T alone the objective is quadratic in the step (exact line
            # search t_i); the mean of those k steps is, by convexity of (11), no worse than B
            keep = s > lam
            s, u, v = s[keep], u[:, keep], v[:, keep]
            pl = problem.Km.sqrt_matmat(u)[problem.rows] * problem.Kn.sqrt_matmat(v)[problem.cols]
            curv = np.sum(pl * pl, axis=0) / sigma2 + (1.0 if frob else 0.0)
            t = (s - lam) / curv / s.size
            U = np.column_stack([U, np.sqrt(t) * u])
            V = np.column_stack([V, -np.sqrt(t) * v])
            U, V = refine(U, V, step)
            f_prev = f
            f, _, _, e = _factor_objective(U, V, problem, lam, sigma2, frob)
            self.objective_.append(float(f))
            bar.update(s.size)
            _progress(self._name, U.shape[1], self.max_rank, start, f)
            if f_prev - f <= self.tol * abs(f):
                self.converged_ = True
                break
        bar.close()
        self.shape_ = problem.shape
        self.rank_ = U.shape[1]
        self.row_factors_ = problem.Km.sqrt_matmat(U)
        self.col_factors_ = problem.Kn.sqrt_matmat(V)
        self.nuclear_norm_ = float(0.5 * (np.sum(U * U) + np.sum(V * V)))  # balanced factors
        return U, V


def _balanced(U, V, rel=1e-8):
    """Factors of the same ``U V^T`` with orthogonal columns scaled by ``sqrt`` of its singular
    values (so ``(||U||^2 + ||V||^2) / 2`` equals the nuclear norm), singular values below
    ``rel`` times the largest dropped. Uses thin QR of both factors: O((M + N) r^2)."""
    Qu, Ru = np.linalg.qr(U)
    Qv, Rv = np.linalg.qr(V)
    X, s, Yt = np.linalg.svd(Ru @ Rv.T, full_matrices=False)  # r may exceed min(M, N)
    keep = s > rel * s[0] if s.size and s[0] > 0 else np.zeros(s.size, dtype=bool)
    root = np.sqrt(s[keep])
    return Qu @ (X[:, keep] * root), Qv @ (Yt[keep].T * root)


class TraceGP(ConstrainedMVGP):
    """Trace GP: equation (11) with the nuclear norm only (no Frobenius / Hilbert-norm term).

    Same parameters and attributes as :class:`ConstrainedMVGP`; a numeric ``lam`` must be > 0
    (with lam = 0 the problem has no regulariser at all).
    """

    _frobenius = False
    _name = "Trace GP"
    _parameter_constraints = {
        **ConstrainedMVGP._parameter_constraints,
        "lam": [_POSITIVE, _AUTO, "array-like"],
    }


class MVGP(_Estimator):
    """Plain matrix-variate GP regression: equation (11) with lam = 0, i.e. equation (1a).

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
        Show a tqdm progress bar over CG iterations (progress is logged at INFO every 10 %).

    Attributes
    ----------
    sigma2_ : float
    selection_ : pandas.DataFrame or None
    alpha_ : ndarray, shape (L,)
        Dual weights of the observed entries.
    n_iter_ : int
    """

    _parameter_constraints = _SHARED_CONSTRAINTS

    def __init__(
        self,
        sigma2="auto",
        selection_metric="recall@20",
        tol=1e-8,
        max_iter=1000,
        random_state=None,
        verbose=False,
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
        start = time.perf_counter()
        bar = tqdm(total=self.max_iter, disable=not self.verbose, desc="MV-GP CG")

        def callback(xk):
            self.n_iter_ += 1
            bar.update(1)
            if self.n_iter_ % max(1, self.max_iter // 10) == 0:
                _progress(
                    "MV-GP CG (|alpha|)", self.n_iter_, self.max_iter, start, np.linalg.norm(xk)
                )

        op = LinearOperator((L, L), matvec=matvec, dtype=float)
        alpha, info = cg(
            op, problem.y, x0=warm, rtol=self.tol, maxiter=self.max_iter, callback=callback
        )
        bar.close()
        check_finite(alpha, "MV-GP conjugate-gradient solve", self.n_iter_)
        self.converged_ = info == 0
        self.alpha_ = alpha
        self.shape_ = problem.shape
        self._S = problem.sparse(alpha)
        return alpha

    def predict(self, rows, cols):
        """GP posterior mean (1a) at the entries (rows[i], cols[i])."""
        if not hasattr(self, "alpha_"):
            raise ValueError("this MVGP is not fitted yet; call fit first")
        rows = _check_index(rows, self.shape_[0], "rows")
        cols = _check_index(cols, self.shape_[1], "cols")
        if rows.size != cols.size:
            raise ValueError(f"rows and cols differ in length ({rows.size} vs {cols.size})")
        s_at = np.asarray(self._S[rows, cols]).ravel()
        return self._kron_at(self._S, s_at, rows, cols)

    def predict_rows(self, rows=None):
        """GP posterior mean of every column for the given rows, shape (len(rows), N)."""
        if not hasattr(self, "alpha_"):
            raise ValueError("this MVGP is not fitted yet; call fit first")
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


class KPMF(_FactorModel):
    """Kernelised probabilistic matrix factorisation, MAP of equation (4) (Zhou et al. 2012).

    Minimises ``sum_l (y_l - u_m . v_n)^2 / sigma2 + tr(U^T C_M^{-1} U) + tr(V^T C_N^{-1} V)``
    at a fixed rank with L-BFGS from a random start. With ``U = G_M U~`` the trace terms become
    ``||U~||_F^2`` (so C need only be positive semi-definite): half of this objective is the
    factored Trace GP objective with lam = 1 at a fixed rank.

    Parameters
    ----------
    rank : int
        Number of factors (the paper uses 5 and 20).
    sigma2 : float, list of float or "auto"
        Observation noise variance (> 0); ``"auto"`` (default) or a list chooses it by inner
        validation over :data:`SIGMA2_GRID` or the list as in :class:`ConstrainedMVGP` (each fit
        starts from the factors of the previous, larger sigma2).
    selection_metric : str
        What the ``"auto"`` choice optimises (see :class:`ConstrainedMVGP`).
    tol : float
        L-BFGS tolerance.
    max_iter : int
        L-BFGS iterations.
    init_scale : float
        Standard deviation of the random start.
    random_state : int, Generator or None
    verbose : bool
        Show a tqdm progress bar over L-BFGS iterations (progress is logged at INFO every 10 %).

    Attributes
    ----------
    sigma2_ : float
    selection_ : pandas.DataFrame or None
    row_factors_, col_factors_ : ndarray
        ``U`` (rows x rank) and ``V`` (columns x rank) of equation (4).
    objective_ : list of float
        Objective (4) at the start and at the end.
    n_iter_ : int
    """

    _parameter_constraints = {**_SHARED_CONSTRAINTS, "rank": [_COUNT], "init_scale": [_POSITIVE]}

    def __init__(
        self,
        rank=5,
        sigma2="auto",
        selection_metric="recall@20",
        tol=1e-6,
        max_iter=500,
        init_scale=0.1,
        random_state=None,
        verbose=False,
    ):
        self.rank = rank
        self.sigma2 = sigma2
        self.selection_metric = selection_metric
        self.tol = tol
        self.max_iter = max_iter
        self.init_scale = init_scale
        self.random_state = random_state
        self.verbose = verbose

    def _path(self):
        return _sigma2_path(self._candidates()["sigma2"])

    def _fit_problem(self, problem, sigma2, rng, warm=None):
        """Fit equation (4) by L-BFGS on both factors jointly from a random start (plus ``warm``,
        the previous solution's parameter vector); returns the solution vector."""
        M, N = problem.shape
        r = int(self.rank)
        x0 = self.init_scale * rng.standard_normal((M + N) * r)
        if warm is not None:  # the random part moves a collapsed start off the saddle at 0
            x0 += warm
        start = time.perf_counter()
        self.n_iter_ = 0
        self.sigma2_ = sigma2

        def fun(x):
            U, V = x[: M * r].reshape(M, r), x[M * r :].reshape(N, r)
            f, gU, gV, _ = _factor_objective(U, V, problem, 1.0, sigma2, False)
            check_finite(f, "KPMF objective (4)", self.n_iter_)
            return 2.0 * f, 2.0 * np.concatenate([gU.ravel(), gV.ravel()])

        bar = tqdm(total=self.max_iter, disable=not self.verbose, desc="KPMF")

        def callback(xk):
            self.n_iter_ += 1
            bar.update(1)
            if self.n_iter_ % max(1, self.max_iter // 10) == 0:
                _progress("KPMF", self.n_iter_, self.max_iter, start, fun(xk)[0])

        f0 = fun(x0)[0]
        res = minimize(
            fun,
            x0,
            jac=True,
            method="L-BFGS-B",
            callback=callback,
            options={"maxiter": self.max_iter, "ftol": self.tol, "gtol": 1e-3 * self.tol},
        )
        bar.close()
        U, V = res.x[: M * r].reshape(M, r), res.x[M * r :].reshape(N, r)
        self.objective_ = [float(f0), float(res.fun)]
        self.shape_ = problem.shape
        self.row_factors_ = problem.Km.sqrt_matmat(U)
        self.col_factors_ = problem.Kn.sqrt_matmat(V)
        return res.x


class PMF(KPMF):
    """Probabilistic matrix factorisation: :class:`KPMF` with identity covariances.

    ``fit`` takes the same arguments as every model here so that one call fits a whole
    comparison; ``row_kernel`` and ``col_kernel`` are ignored (PMF has no side information and
    cannot score rows without training entries).
    """

    def _kernels(self, row_kernel, col_kernel):
        return None, None
