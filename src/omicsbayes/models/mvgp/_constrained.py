"""Con. MV-GP: the nuclear-norm constrained matrix-variate GP mean, equation (11), by greedy rank
growth and L-BFGS refinement of its factors."""

from numbers import Real

import numpy as np
from scipy.optimize import minimize
from sklearn.utils._param_validation import Interval

from omicsbayes.inference.convergence import check_finite
from omicsbayes.inference.progress import Progress

from ._estimator import _AUTO, _COUNT, _SHARED_CONSTRAINTS, _FactorModel, _sigma2_path
from ._solver import _balanced, _factor_objective, _leading_singular_pairs


class ConstrainedMVGP(_FactorModel):
    """Nuclear-norm constrained matrix-variate GP mean (Con. MV-GP), equation (11).

    Not a scikit-learn ``X`` estimator: ``fit(rows, cols, values, shape, row_kernel=None,
    col_kernel=None)`` takes the observed entries of one matrix (not a samples x features
    ``X``), so it does not go into a ``Pipeline``.

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
        all entries (:mod:`omicsbayes.models.mvgp.selection`). A list of numbers is searched the
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
        Show progress over the rank grown (:class:`~omicsbayes.inference.progress.Progress`).

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
    lower_bound_ : list of float
        The monitored objective: objective (11) (minimised) at the start and after each growth
        step (non-increasing).
    n_iter_ : int
        Total L-BFGS iterations.
    converged_ : bool
        Whether a stopping rule of ``tol`` was met before ``max_rank``.
    gradient_norm_ : float
        Last leading singular value of the gradient (``lam`` at an exact optimum).

    Examples
    --------
    >>> import numpy as np
    >>> from omicsbayes.models import ConstrainedMVGP
    >>> from omicsbayes.preprocess import diffusion_kernel
    >>> known = np.eye(6, 5, dtype=bool) | np.eye(6, 5, k=1, dtype=bool)
    >>> known[5] = False  # row 5 has no known entry
    >>> rows, cols = np.nonzero(known)
    >>> path = np.eye(6, k=1) + np.eye(6, k=-1)  # row i is the neighbour of row i + 1
    >>> model = ConstrainedMVGP(lam=1.0, sigma2=0.1, random_state=0)
    >>> model = model.fit(rows, cols, np.ones(rows.size), shape=(6, 5),
    ...                   row_kernel=diffusion_kernel(path))
    >>> int(model.predict_rows()[5].argmax())  # row 5 takes its neighbour row 4's column
    4
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
        verbose=True,
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
        self.lower_bound_ = []
        self.n_iter_ = 0
        self.converged_ = False
        self.gradient_norm_ = np.nan
        progress = Progress(self.max_rank, self._name, self.verbose)

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
        self.lower_bound_.append(float(f))
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
            self.lower_bound_.append(float(f))
            progress.step(U.shape[1] - 1, f, "objective")
            if f_prev - f <= self.tol * abs(f):
                self.converged_ = True
                break
        progress.close()
        self.shape_ = problem.shape
        self.rank_ = U.shape[1]
        self.row_factors_ = problem.Km.sqrt_matmat(U)
        self.col_factors_ = problem.Kn.sqrt_matmat(V)
        self.nuclear_norm_ = float(0.5 * (np.sum(U * U) + np.sum(V * V)))  # balanced factors
        return U, V
