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
ProDiGe            hinge loss, product kernel C_M(m, m') C_N(n, n'): multitask SVM (section 5.1)
=================  =========================================================================

Every estimator has ``fit(rows, cols, values, shape, row_kernel=None, col_kernel=None)``: the
observed entries as index and value arrays (sampled negatives are explicit zeros) and optional
prior covariances over all rows / all columns of ``shape`` (a dense array or the
:class:`~omicsbayes.preprocess.graph.LowRankKernel` that ``diffusion_kernel`` returns; None is the
identity). ``predict(rows, cols)`` scores any entries and ``predict_rows(rows)`` returns whole rows
(every column), which is what a per-disease gene ranking needs.

These are not scikit-learn ``X`` estimators (``fit`` takes entries, not a samples x features
matrix) and do not go into a ``Pipeline``; ``omicsbayes.tl.mvgp`` fits them on an AnnData.

Modules: one per estimator (``_constrained``, ``_trace_gp``, ``_gp_regression``, ``_kpmf``,
``_pmf``), their shared base (``_estimator``), the input checks and fitted problem
(``_problem``; :func:`check_shape` and :func:`as_kernel` are public for the protocols), the
shared solver of objective (11) (``_solver``) and the hyperparameter selection
(:mod:`.selection`, public).

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
with L-BFGS. Adding several pairs per step needs about half the L-BFGS iterations of
one at a time for the same objective. Memory is O((rows + columns) r + L), never rows x columns.

Hyperparameters: ``lam="auto"`` and ``sigma2="auto"`` (the defaults) choose them inside ``fit`` by
inner validation over section 5's grid along a warm-started path, by ``selection_metric``
(:mod:`omicsbayes.models.mvgp.selection`); a list of values is searched the same way; numbers
are used as given.

Protocols (section 5) are in :mod:`omicsbayes.protocols.disease_gene` (grid, inner validation,
averaged scores over sampled negatives, P@k and R@k) and :mod:`omicsbayes.protocols.rating`
(RMSE and R@k); ``LAMBDA_GRID`` and ``SIGMA2_GRID`` (from :mod:`.selection`) are the paper's grid.

Notes on the paper. Section 5 uses the Cholesky factor as the basis; the symmetric square root
used here gives the same mean (the tests compare against a dense solution in the Cholesky basis).
The density in section 2.1 should read ``|Sigma|^{1/2}``, not ``|Sigma|^{P/2}``; it plays no
part in the mean problem. Equation (4) is twice the negative log posterior of the factor GP
(no 1/2 in front of the loss), which changes nothing at its minimum.
"""

from ._constrained import ConstrainedMVGP
from ._gp_regression import MVGP
from ._kpmf import KPMF
from ._pmf import PMF
from ._problem import as_kernel, check_shape
from ._prodige import ProDiGe
from ._trace_gp import TraceGP
from .selection import C_GRID, LAMBDA_GRID, SIGMA2_GRID

__all__ = [
    "C_GRID",
    "KPMF",
    "LAMBDA_GRID",
    "MVGP",
    "PMF",
    "SIGMA2_GRID",
    "ProDiGe",
    "ConstrainedMVGP",
    "TraceGP",
    "as_kernel",
    "check_shape",
]
