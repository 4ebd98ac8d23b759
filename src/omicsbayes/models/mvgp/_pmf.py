"""PMF: probabilistic matrix factorisation, KPMF with identity covariances."""

from ._kpmf import KPMF


class PMF(KPMF):
    """Probabilistic matrix factorisation: :class:`KPMF` with identity covariances.

    Not a scikit-learn ``X`` estimator: ``fit(rows, cols, values, shape, row_kernel=None,
    col_kernel=None)`` takes the observed entries of one matrix (not a samples x features
    ``X``), so it does not go into a ``Pipeline``.

    ``fit`` takes the same arguments as every model here so that one call fits a whole
    comparison; ``row_kernel`` and ``col_kernel`` are ignored (PMF has no side information and
    cannot score rows without training entries).
    """

    def _kernels(self, row_kernel, col_kernel):
        return None, None
