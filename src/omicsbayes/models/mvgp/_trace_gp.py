"""Trace GP: equation (11) with the nuclear norm only."""

from ._constrained import ConstrainedMVGP
from ._estimator import _AUTO, _POSITIVE


class TraceGP(ConstrainedMVGP):
    """Trace GP: equation (11) with the nuclear norm only (no Frobenius / Hilbert-norm term).

    Not a scikit-learn ``X`` estimator: ``fit(rows, cols, values, shape, row_kernel=None,
    col_kernel=None)`` takes the observed entries of one matrix (not a samples x features
    ``X``), so it does not go into a ``Pipeline``.

    Same parameters and attributes as :class:`ConstrainedMVGP`; a numeric ``lam`` must be > 0
    (with lam = 0 the problem has no regulariser at all).

    Examples
    --------
    >>> import numpy as np
    >>> from omicsbayes.models import TraceGP
    >>> rows, cols = np.nonzero(np.eye(6, 5, dtype=bool) | np.eye(6, 5, k=1, dtype=bool))
    >>> fits = [TraceGP(lam=lam, sigma2=0.1, random_state=0)
    ...         .fit(rows, cols, np.ones(rows.size), shape=(6, 5)) for lam in (0.1, 3.0)]
    >>> bool(fits[1].nuclear_norm_ < fits[0].nuclear_norm_)  # a larger lam, a smaller norm
    True
    >>> fits[1].predict(np.array([0, 5]), np.array([4, 0])).shape
    (2,)
    """

    _frobenius = False
    _name = "Trace GP"
    _parameter_constraints = {
        **ConstrainedMVGP._parameter_constraints,
        "lam": [_POSITIVE, _AUTO, "array-like"],
    }
