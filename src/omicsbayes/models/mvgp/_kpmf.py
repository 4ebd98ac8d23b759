"""KPMF: kernelised probabilistic matrix factorisation, the MAP of equation (4)."""

import numpy as np
from scipy.optimize import minimize

from omicsbayes.inference.convergence import check_finite
from omicsbayes.inference.progress import Progress

from ._estimator import _COUNT, _POSITIVE, _SHARED_CONSTRAINTS, _FactorModel, _sigma2_path
from ._solver import _factor_objective


class KPMF(_FactorModel):
    """Kernelised probabilistic matrix factorisation, MAP of equation (4) (Zhou et al. 2012).

    Not a scikit-learn ``X`` estimator: ``fit(rows, cols, values, shape, row_kernel=None,
    col_kernel=None)`` takes the observed entries of one matrix (not a samples x features
    ``X``), so it does not go into a ``Pipeline``.

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
        Show progress over the L-BFGS iterations (:class:`~omicsbayes.inference.progress.Progress`;
        logged at INFO every 10 % either way).

    Attributes
    ----------
    sigma2_ : float
    selection_ : pandas.DataFrame or None
    row_factors_, col_factors_ : ndarray
        ``U`` (rows x rank) and ``V`` (columns x rank) of equation (4).
    lower_bound_ : list of float
        The monitored objective: objective (4) (minimised) at the start and at the end.
    n_iter_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from omicsbayes.models import KPMF
    >>> rows, cols = np.nonzero(np.eye(6, 5, dtype=bool) | np.eye(6, 5, k=1, dtype=bool))
    >>> model = KPMF(rank=2, sigma2=0.1, random_state=0)
    >>> model = model.fit(rows, cols, np.ones(rows.size), shape=(6, 5), row_kernel=np.eye(6))
    >>> model.row_factors_.shape, model.col_factors_.shape  # U and V of equation (4)
    ((6, 2), (5, 2))
    >>> bool(model.lower_bound_[-1] < model.lower_bound_[0])  # objective (4), minimised
    True
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
        verbose=True,
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
        self.n_iter_ = 0
        self.sigma2_ = sigma2

        def fun(x):
            U, V = x[: M * r].reshape(M, r), x[M * r :].reshape(N, r)
            f, gU, gV, _ = _factor_objective(U, V, problem, 1.0, sigma2, False)
            check_finite(f, "KPMF objective (4)", self.n_iter_)
            return 2.0 * f, 2.0 * np.concatenate([gU.ravel(), gV.ravel()])

        progress = Progress(self.max_iter, type(self).__name__, self.verbose)

        def callback(intermediate_result):
            self.n_iter_ += 1
            progress.step(self.n_iter_ - 1, intermediate_result.fun, "objective")

        f0 = fun(x0)[0]
        res = minimize(
            fun,
            x0,
            jac=True,
            method="L-BFGS-B",
            callback=callback,
            options={"maxiter": self.max_iter, "ftol": self.tol, "gtol": 1e-3 * self.tol},
        )
        progress.close()
        U, V = res.x[: M * r].reshape(M, r), res.x[M * r :].reshape(N, r)
        self.lower_bound_ = [float(f0), float(res.fun)]
        self.shape_ = problem.shape
        self.row_factors_ = problem.Km.sqrt_matmat(U)
        self.col_factors_ = problem.Kn.sqrt_matmat(V)
        return res.x
