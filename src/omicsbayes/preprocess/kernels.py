"""Empirical kernel map of paper 001, section 4."""

import numpy as np
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from .transforms import ZScore, _Transform

KERNELS = ("linear", "gaussian")


def _squared_distances(A, B, sq_a, sq_b):
    """|a - b|^2 for all rows of A and B through one matrix product (clipped at 0)."""
    return np.maximum(sq_a[:, None] + sq_b[None, :] - 2.0 * (A @ B.T), 0.0)


class EmpiricalKernelMap(_Transform):
    """Represent each sample by its kernel values against the training samples.

    :meth:`fit` z-scores the training samples with their own mean and standard deviation
    (:class:`ZScore`, constant features only centred) and keeps them; :meth:`transform`
    z-scores new samples with the same moments and returns
    ``[k(x_1, x), ..., k(x_N, x)]`` for the N training samples (the relevance-vector-machine
    representation used in paper 001, section 4).

    Parameters
    ----------
    kernel : {"linear", "gaussian"}, default "linear"
        ``linear``: the cosine ``<x, x'> / (|x| |x'|)``, i.e. the linear kernel normalised to unit
        diagonal (a sample of zero norm after z-scoring gets kernel value 0). ``gaussian``:
        ``exp(-|x - x'|^2 / (2 s^2))`` with width s the mean Euclidean distance over the pairs of
        distinct training samples. Both are unchanged by a common rescaling of all features, so
        the ddof of the standard deviation does not matter.

    Attributes
    ----------
    mean_, scale_ : ndarray of shape ``(n_features_in_,)``
        Training moments used for z-scoring.
    train_ : ndarray of shape ``(n_train, n_features_in_)``
        The z-scored training samples.
    width_ : float
        Gaussian kernel width (``gaussian`` only).
    n_features_in_ : int
    """

    learns_from_samples = True

    def __init__(self, kernel="linear"):
        self.kernel = kernel

    _parameter_constraints = {"kernel": [StrOptions(set(KERNELS))]}

    def _fit(self, X):
        """Learn the z-scoring moments, the training samples and the Gaussian width."""
        if self.kernel == "gaussian" and X.shape[0] < 2:
            raise ValueError(
                "X has 1 sample; the Gaussian EmpiricalKernelMap needs at least two training "
                "samples to set its width"
            )
        scaler = ZScore().fit(X)
        self.mean_, self.scale_ = scaler.mean_, scaler.scale_
        self.train_ = scaler.transform(X)
        self._train_sq = np.einsum("ij,ij->i", self.train_, self.train_)
        if self.kernel == "gaussian":
            d2 = _squared_distances(self.train_, self.train_, self._train_sq, self._train_sq)
            width = float(np.mean(np.sqrt(d2[np.triu_indices_from(d2, k=1)])))
            if width <= 0:
                raise ValueError(
                    "all training samples are identical after z-scoring; the Gaussian "
                    "EmpiricalKernelMap needs a positive mean pairwise distance"
                )
            self.width_ = width

    def _transform(self, X):
        """Kernel values of each sample of ``X`` against the training samples, shape
        (n_samples, n_train)."""
        Xz = (X - self.mean_) / self.scale_
        sq = np.einsum("ij,ij->i", Xz, Xz)
        if self.kernel == "gaussian":
            d2 = _squared_distances(Xz, self.train_, sq, self._train_sq)
            return np.exp(-d2 / (2.0 * self.width_**2))
        denom = np.sqrt(np.outer(sq, self._train_sq))
        gram = Xz @ self.train_.T
        return np.divide(gram, denom, out=np.zeros_like(gram), where=denom > 0)

    def get_feature_names_out(self, input_features=None):
        """``k0``, ``k1``, ... one name per training sample."""
        check_is_fitted(self, "train_")
        return np.asarray([f"k{i}" for i in range(self.train_.shape[0])], dtype=object)
