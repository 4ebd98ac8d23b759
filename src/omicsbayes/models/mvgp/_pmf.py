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

    Examples
    --------
    >>> import numpy as np
    >>> from omicsbayes.models import PMF
    >>> known = np.eye(6, 5, dtype=bool) | np.eye(6, 5, k=1, dtype=bool)
    >>> known[5] = False  # row 5 has no known entry
    >>> rows, cols = np.nonzero(known)
    >>> model = PMF(rank=2, sigma2=0.1, random_state=0)
    >>> model = model.fit(rows, cols, np.ones(rows.size), shape=(6, 5))
    >>> # no entries and no side information: row 5's factors stay near the prior mean, 0
    >>> bool(np.abs(model.predict_rows()[5]).max() < 0.01)
    True
    """

    def _kernels(self, row_kernel, col_kernel):
        return None, None
