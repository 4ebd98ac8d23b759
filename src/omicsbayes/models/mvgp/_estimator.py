"""The base of the paper-004 estimators: parameters shared by all five, ``fit`` (checks, BLAS
threads, ``"auto"`` selection, refit) and prediction from fitted factors."""

import logging
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._base import BaseOmicsEstimator
from .._threads import blas_limit
from .._validation import RANDOM_STATE, check_rng
from . import selection
from ._problem import _check_index, _Problem

logger = logging.getLogger("omicsbayes")

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


class _Estimator(BaseOmicsEstimator):
    """``fit`` shared by the five estimators: checks, BLAS threads, ``"auto"`` selection, refit.

    Not a scikit-learn ``X`` estimator: ``fit(rows, cols, values, shape)`` takes the observed
    entries of one partly observed matrix, so these estimators do not go into a ``Pipeline``
    (``omicsbayes.tl.mvgp`` fits them on an AnnData). The estimator base validates the
    parameters before ``fit`` and raises ``NotFittedError`` from ``predict`` before it; the BLAS
    threads are chosen inside ``fit`` from the problem (the ranks of the kernels).

    A subclass implements ``_path()`` (the grid in visiting order, see
    :func:`omicsbayes.models.mvgp.selection.select`) and ``_fit_problem(problem, sigma2, rng,
    warm=None[, lam])``, which fits one setting and returns the warm start of the next.
    """

    capabilities = frozenset({"matrix_completion", "entry_values"})
    _blas_limited_inside = True  # the largest products depend on the kernels' ranks (_blas_limit)

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
        candidates = self._candidates()
        search = any(v.size > 1 for v in candidates.values())
        if search:
            selection.parse_metric(self.selection_metric)
        problem = _Problem(rows, cols, values, shape, *self._kernels(row_kernel, col_kernel))
        rng = check_rng(self.random_state)
        with _blas_limit(problem, getattr(self, "max_rank", getattr(self, "rank", 1))):
            params = {p: float(v[0]) for p, v in candidates.items()}
            self.selection_ = None
            if search:
                best, self.selection_ = selection.select(self, problem, rng.spawn(1)[0])
                params.update(best)
                name, metric = type(self).__name__, self.selection_metric
                logger.info("%s chose %s by validation %s", name, best, metric)
            self._fit_problem(problem, rng=rng, **params)
        return self

    def _candidates(self):
        """``{"lam": values, "sigma2": values}`` (the parameters the estimator has), each from
        large to small: section 5's grid for "auto", the given values for a list, one value for
        a number. More than one value for either means inner validation."""
        grids = {
            "lam": selection.LAMBDA_GRID,
            "sigma2": selection.SIGMA2_GRID,
            "C": selection.C_GRID,
        }
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
    """One BLAS thread when the largest product of a fit is small (threads spin)."""
    q = max(problem.Km.eigvecs.shape[1], problem.Kn.eigvecs.shape[1], 1)
    return blas_limit((max(problem.shape), q), (max(problem.shape), rank))  # entries: no BLAS


class _FactorModel(_Estimator):
    """Shared prediction from the fitted row and column factors ``P = G_M U``, ``Q = G_N V``."""

    def _check_fitted(self):
        check_is_fitted(self, "row_factors_")

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
