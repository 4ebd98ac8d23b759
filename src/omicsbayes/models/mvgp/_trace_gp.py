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
    >>> model = TraceGP(lam=1.0, sigma2=0.1, random_state=0)
    >>> model = model.fit(rows, cols, np.ones(rows.size), shape=(6, 5))
    >>> model.predict(np.array([0, 5]), np.array([4, 0])).shape
    (2,)
    >>> model.predict_rows().shape  # every row x column entry
    (6, 5)
    """

    _frobenius = False
    _name = "Trace GP"
    _parameter_constraints = {
        **ConstrainedMVGP._parameter_constraints,
        "lam": [_POSITIVE, _AUTO, "array-like"],
    }
