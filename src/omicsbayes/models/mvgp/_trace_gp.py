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
    """

    _frobenius = False
    _name = "Trace GP"
    _parameter_constraints = {
        **ConstrainedMVGP._parameter_constraints,
        "lam": [_POSITIVE, _AUTO, "array-like"],
    }
