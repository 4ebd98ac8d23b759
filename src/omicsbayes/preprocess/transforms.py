"""Preprocessing transformers (samples x features matrices in and out).

Sparse input (single-cell counts): the steps that map a zero to a zero and learn only per-feature
summaries keep a ``scipy.sparse`` matrix sparse (class attribute ``keeps_sparse``): library-size
scaling, ``log`` with pseudocount 1, rounding, unit length and gene selection by mean, variance or
zero fraction. Every other step expands a sparse input with :func:`dense_matrix`, the one place a
sparse matrix becomes dense; the workflow calls it again on the matrix it hands a model, after
gene selection.

A sparse input may be a scipy sparse matrix or sparse array, in any format; a step that keeps it
sparse returns CSR of the same kind (matrix or array).

Every class is a scikit-learn transformer, checked with scikit-learn's ``check_estimator``, with a
class attribute ``learns_from_samples``:

- ``False``: each sample is transformed on its own, nothing is learned from other samples
  (background correction, library-size scaling to a given total, log, rounding, unit length).
  Such steps may be applied once to a whole cohort.
- ``True``: :meth:`fit` learns something from the training samples (z-score moments, selected
  genes, a reference distribution or reference values). Fit it on the training fold only and
  apply it to the test fold; :func:`split_pipeline` separates the two kinds.

:func:`build_pipeline` turns a config list such as ``["log", {"name": "top_genes", "n": 500},
"zscore"]`` into a :class:`sklearn.pipeline.Pipeline`.
"""

import logging
import sys
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from scipy.stats import rankdata
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import normalize
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.sparsefuncs import mean_variance_axis
from sklearn.utils.validation import _check_feature_names_in, check_is_fitted, validate_data

log = logging.getLogger("omicsbayes")


def dense_matrix(X, who="a model"):
    """``X`` as a dense float64 array: the one place a sparse matrix is expanded.

    A sparse matrix of n x p with z stored entries takes about 12 z bytes (CSR, float64 values
    and int32 column indices); its dense form takes 8 n p bytes, logged at INFO level here.

    Parameters
    ----------
    X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
    who : str
        What needs the dense matrix, named in the log line.

    Returns
    -------
    ndarray of float64
    """
    if not sp.issparse(X):
        return np.asarray(X, dtype=float)
    n, p = X.shape
    log.info(
        "%s: expanding a %d x %d sparse matrix (%.1f%% stored) to %.1f MB dense",
        who, n, p, 100 * X.nnz / max(n * p, 1), 8 * n * p / 2**20,
    )  # fmt: skip
    return X.astype(np.float64, copy=False).toarray()


def _first(X, bad):
    """(row, column) of the first True of ``bad``: a dense mask of X, or a mask of a CSR
    matrix's stored values ``X.data``."""
    if not sp.issparse(X):
        return tuple(int(v) for v in np.argwhere(bad)[0])
    k = int(np.flatnonzero(bad)[0])
    return int(np.searchsorted(X.indptr, k, side="right") - 1), int(X.indices[k])


def refuse_anndata(X, who):
    """Raise TypeError when ``X`` is an AnnData: estimators take a samples x genes matrix or
    DataFrame; :func:`omicsbayes.tl.predict` scores an AnnData, matching genes by name."""
    anndata = sys.modules.get("anndata")  # an AnnData exists only once anndata is imported
    if anndata is not None and isinstance(X, anndata.AnnData):
        raise TypeError(
            f"{who} got an AnnData; it takes a samples x genes matrix or DataFrame. Score an "
            "AnnData with omicsbayes.tl.predict(adata, fit), which matches its genes to the fit's "
            "genes by name"
        )


def check_matrix(X, who, name="X", accept_sparse=False):
    """Return ``X`` as a 2-D float matrix, or raise ValueError naming what is wrong.

    Parameters
    ----------
    X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
    who : str
        The transformer or function asking, named in the message.
    name : str
        What ``X`` is called in the message.
    accept_sparse : bool
        Keep a sparse ``X`` sparse (as CSR float64); otherwise it is expanded by
        :func:`dense_matrix`.
    """
    if sp.issparse(X) and accept_sparse:
        X = X.tocsr().astype(np.float64, copy=False)
        if not X.has_canonical_format:  # one stored value per entry, as the steps assume
            X = X.copy()
            X.sum_duplicates()
        values = X.data
    else:
        try:
            X = dense_matrix(X, who)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{name} must be numeric for {who}: {err}") from None
        values = X
    if X.ndim != 2:
        raise ValueError(
            f"{name} has {X.ndim} dimension(s); {who} expects a 2-D samples x features matrix"
        )
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{name} has shape {X.shape}; {who} needs at least one sample and feature")
    bad = ~np.isfinite(values)
    n_bad = int(bad.sum())
    if n_bad:
        i, j = _first(X, bad)
        n_nan = int(np.isnan(values).sum())
        raise ValueError(
            f"{name} has {n_bad} non-finite values ({n_nan} NaN, {n_bad - n_nan} inf), the first "
            f"at sample {i}, feature {j}; {who} needs a complete finite matrix"
        )
    return X


class _Transform(TransformerMixin, BaseEstimator):
    """Shared fit/transform plumbing: input checks, ``n_features_in_``, parameter checks.

    Subclasses define ``_transform(X)`` on a checked matrix, ``_fit`` when they learn from
    samples and scikit-learn's ``_parameter_constraints`` when they have hyperparameters
    (checked by ``_validate_params``). Those whose ``keeps_sparse`` is True get a sparse input
    as CSR (and must keep it sparse); the others get it expanded."""

    learns_from_samples = False
    keeps_sparse = False
    _parameter_constraints: dict = {}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # kept as CSR or expanded (``_check``)
        return tags

    def _fit(self, X):
        """Learn from checked training data ``X`` (nothing by default)."""

    def _check(self, X, reset=False):
        who = type(self).__name__
        refuse_anndata(X, who)
        if sp.issparse(X) and not self.keeps_sparse:
            X = dense_matrix(X, who)
        X = validate_data(
            self,
            X,
            reset=reset,
            accept_sparse="csr" if self.keeps_sparse else False,
            dtype=float,
            ensure_all_finite=False,
            ensure_2d=True,
        )
        return check_matrix(X, who, accept_sparse=self.keeps_sparse)

    def fit(self, X, y=None):
        """Check the parameters and ``X``; learn from ``X`` if the step learns from samples.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training samples.
        y : ignored

        Returns
        -------
        self
        """
        self._validate_params()
        X = self._check(X, reset=True)
        self._fit(X)
        return self

    def fit_transform(self, X, y=None):
        """:meth:`fit` then :meth:`transform` of the same ``X``, checked (and, when sparse and
        the step does not keep it sparse, expanded) once.

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        ndarray or CSR matrix of shape (n_samples, n_features_out)
        """
        self._validate_params()
        X = self._check(X, reset=True)
        self._fit(X)
        return self._transform(X)

    def transform(self, X):
        """Transform ``X`` (samples x features) with what :meth:`fit` learned.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features_in_)

        Returns
        -------
        ndarray or CSR matrix of shape (n_samples, n_features_out)
            Sparse when ``X`` is sparse and the step ``keeps_sparse``.
        """
        check_is_fitted(self)
        return self._transform(self._check(X))


class _OneToOne(OneToOneFeatureMixin, _Transform):
    """A transform that keeps every feature (output column j comes from input column j)."""


class _Stateless(_OneToOne):
    """A sample-wise transform: nothing is learned, so :meth:`transform` works without fit."""

    learns_from_samples = False

    def __sklearn_is_fitted__(self):
        return True

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = False
        return tags


class _NonNegative:
    """Input check for count transforms: negative values are an error."""

    def _check(self, X, reset=False):
        X = super()._check(X, reset)
        negative = (X.data if sp.issparse(X) else X) < 0
        n_neg = int(negative.sum())
        if n_neg:
            i, j = _first(X, negative)
            raise ValueError(
                f"Negative values in data: X has {n_neg} (the first at sample {i}, feature {j}); "
                f"{type(self).__name__} needs non-negative counts"
            )
        return X

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        return tags


class BackgroundCorrect(_Stateless):
    """Subtract a per-sample background and floor at a small positive value.

    The background of sample i is the ``quantile`` of its own intensities (by default the 5 %
    quantile, an estimate of the unspecific signal of an array). The corrected value is
    ``max(x_ij - b_i, offset)``, as limma's ``backgroundCorrect(method="half")`` floors at 0.5,
    so that a log transform afterwards is defined. Sample-wise: nothing is learned.

    Parameters
    ----------
    quantile : float in [0, 1)
        Quantile of each sample's values taken as its background.
    offset : float > 0
        Floor of the corrected values.
    """

    learns_from_samples = False

    def __init__(self, quantile=0.05, offset=0.5):
        self.quantile = quantile
        self.offset = offset

    _parameter_constraints = {
        "quantile": [Interval(Real, 0, 1, closed="left")],
        "offset": [Interval(Real, 0, None, closed="neither")],
    }

    def _transform(self, X):
        self._validate_params()
        background = np.quantile(X, self.quantile, axis=1, keepdims=True)
        return np.maximum(X - background, self.offset)


class _LearnsWhenTargetSumIsNone:
    """``learns_from_samples`` of NormalizeTotal: True on the class (its default target_sum is
    None) and, on an instance, True exactly when its ``target_sum`` is None."""

    def __get__(self, obj, objtype=None):
        return True if obj is None else obj.target_sum is None


def _scanpy_input(X):
    """A copy of ``X`` for a scanpy step that works in place: a CSR ``X`` (matrix or array) as a
    ``scipy.sparse.csr_matrix``, since scanpy's steps take scipy's sparse matrices, not its
    sparse arrays."""
    return sp.csr_matrix(X, copy=True) if sp.issparse(X) else X.copy()


def _like(result, X):
    """``result`` as a sparse array when ``X`` is one (scipy's ``sparray``), else as it is."""
    return sp.csr_array(result) if isinstance(X, sp.sparray) else result


def _row_sums(X):
    """Sum of each sample (row) of a dense or sparse matrix, shape (n_samples,)."""
    return np.asarray(X.sum(axis=1)).ravel()


class NormalizeTotal(_NonNegative, _OneToOne):
    """Library-size scaling: every sample scaled to the same total (``scanpy.pp.normalize_total``).

    Keeps a sparse input sparse.

    Parameters
    ----------
    target_sum : float > 0 or None
        Total each sample is scaled to. ``None`` (scanpy's default) takes the median total of
        the samples given to :meth:`fit`, which is then a fitted value (``target_sum_``) used
        for every later sample: with ``None`` the step learns from samples and is fitted per
        training fold; with a number it is purely sample-wise.

    Attributes
    ----------
    target_sum_ : float
        The total every transformed sample sums to.
    """

    def __init__(self, target_sum=None):
        self.target_sum = target_sum

    learns_from_samples = _LearnsWhenTargetSumIsNone()
    keeps_sparse = True

    _parameter_constraints = {"target_sum": [None, Interval(Real, 0, None, closed="neither")]}

    def _check(self, X, reset=False):
        X = super()._check(X, reset)
        zero = np.flatnonzero(_row_sums(X) == 0)
        if zero.size:
            raise ValueError(
                f"{zero.size} samples have total 0 (the first is sample {zero[0]}); "
                "NormalizeTotal cannot scale them"
            )
        return X

    def _fit(self, X):
        self.target_sum_ = (
            float(np.median(_row_sums(X))) if self.target_sum is None else float(self.target_sum)
        )

    def _transform(self, X):
        import anndata
        import scanpy as sc

        adata = anndata.AnnData(_scanpy_input(X))
        sc.pp.normalize_total(adata, target_sum=self.target_sum_)
        return _like(adata.X, X)


class MedianOfRatios(_NonNegative, _OneToOne):
    """DESeq2 size factors (Anders & Huber 2010): each sample divided by its size factor.

    The reference is the geometric mean of each gene over the training samples, using the genes
    with no zero count in training. The size factor of a sample (training or new) is the median,
    over reference genes where the sample's count is positive, of count / reference (as
    ``DESeq2::estimateSizeFactorsForMatrix``). New samples use the frozen training reference.

    Attributes
    ----------
    log_geo_means_ : ndarray of shape (n_features,)
        Log geometric means over the training samples (-inf for genes with a zero).
    size_factors_ : ndarray of shape (n_train,)
        Size factors of the training samples.
    """

    learns_from_samples = True

    def _fit(self, X):
        with np.errstate(divide="ignore"):
            self.log_geo_means_ = np.log(X).mean(axis=0)
        if not np.isfinite(self.log_geo_means_).any():
            raise ValueError(
                "every gene has a zero count in some training sample; MedianOfRatios needs at "
                "least one gene with all counts positive"
            )
        self.size_factors_ = self._size_factors(X)

    def _size_factors(self, X):
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = np.log(X) - self.log_geo_means_
        usable = np.isfinite(self.log_geo_means_) & (X > 0)
        empty = np.flatnonzero(~usable.any(axis=1))
        if empty.size:
            raise ValueError(
                f"{empty.size} samples have no positive count on a reference gene (the first is "
                f"sample {empty[0]}); MedianOfRatios cannot size them"
            )
        return np.exp(np.nanmedian(np.where(usable, ratios, np.nan), axis=1))

    def _transform(self, X):
        return X / self._size_factors(X)[:, None]


class Log(_Stateless):
    """``log_base(x + pseudocount)``, sample-wise.

    With pseudocount 1 a zero stays zero, so a sparse input stays sparse (``scanpy.pp.log1p``);
    with another pseudocount it is expanded.

    Parameters
    ----------
    base : float > 0, != 1
    pseudocount : float >= 0
    """

    def __init__(self, base=2, pseudocount=1.0):
        self.base = base
        self.pseudocount = pseudocount

    _parameter_constraints = {
        "base": [Interval(Real, 0, None, closed="neither")],
        "pseudocount": [Interval(Real, 0, None, closed="left")],
    }

    def _validate_params(self):
        """scikit-learn's checks, then ``base != 1``."""
        super()._validate_params()
        if self.base == 1:
            raise ValueError(
                "The 'base' parameter of Log must be a float in the range (0, inf) other than 1. "
                "Got 1 instead."
            )

    @property
    def keeps_sparse(self):
        """True when a zero maps to zero (pseudocount 1)."""
        return self.pseudocount == 1

    def _transform(self, X):
        self._validate_params()
        n_bad = int(((X.data if sp.issparse(X) else X) + self.pseudocount <= 0).sum())
        if n_bad:
            raise ValueError(
                f"X has {n_bad} values <= -pseudocount ({-self.pseudocount}); Log is undefined "
                "there (raise the pseudocount or background-correct first)"
            )
        if sp.issparse(X):
            import scanpy as sc

            return _like(sc.pp.log1p(_scanpy_input(X), base=self.base), X)
        return np.log(X + self.pseudocount) / np.log(self.base)


def _tied_mean_lookup(values, reference):
    """Replace each row's values by ``reference`` at their within-row ranks, ties averaged.

    A block of t tied values occupying sorted positions s..s+t-1 gets the mean of
    ``reference[s:s+t]`` (exact, via a cumulative sum), not an interpolation.
    """
    lo = rankdata(values, method="min", axis=1).astype(np.int64) - 1
    hi = rankdata(values, method="max", axis=1).astype(np.int64)
    cumulative = np.concatenate([[0.0], np.cumsum(reference)])
    return (cumulative[hi] - cumulative[lo]) / (hi - lo)


class QuantileNormalize(_OneToOne):
    """Quantile normalisation (Bolstad et al. 2003) of each sample's distribution over features.

    :meth:`fit` learns the reference distribution, the mean over training samples of each
    sample's sorted values; every sample (training or new) is mapped onto it by rank, tied values
    getting the mean of the reference values their tie block spans. All transformed samples then
    have the same sorted values (exactly, when there are no ties).

    Attributes
    ----------
    reference_ : ndarray of shape (n_features,)
        Sorted reference values.
    """

    learns_from_samples = True

    def _fit(self, X):
        self.reference_ = np.sort(X, axis=1).mean(axis=0)

    def _transform(self, X):
        return _tied_mean_lookup(X, self.reference_)


class _Selector(_Transform):
    """Feature selection: keeps the columns in ``support_`` (a boolean mask); a sparse input
    stays sparse."""

    learns_from_samples = True
    keeps_sparse = True

    def get_support(self, indices=False):
        """Mask (or, with ``indices=True``, sorted integer indices) of the kept features."""
        check_is_fitted(self, "support_")
        return np.flatnonzero(self.support_) if indices else self.support_.copy()

    def get_feature_names_out(self, input_features=None):
        """Names of the kept features (``x0``... when fitted without names)."""
        check_is_fitted(self, "support_")
        return _check_feature_names_in(self, input_features)[self.support_]

    def _transform(self, X):
        return X[:, np.flatnonzero(self.support_)]


class TopGenes(_Selector):
    """Keep the ``n`` features with the largest training mean (or variance).

    Paper 000 keeps its top 4,732 genes by mean intensity. Ties are broken by feature order.
    The kept features stay in their original order.

    Parameters
    ----------
    n : int >= 1
        Number of features kept (at most the number of features).
    by : {"mean", "variance"}

    Attributes
    ----------
    scores_ : ndarray of shape (n_features,)
        Training mean or variance per feature.
    support_ : ndarray of bool
    """

    def __init__(self, n=1000, by="mean"):
        self.n = n
        self.by = by

    _parameter_constraints = {
        "n": [Interval(Integral, 1, None, closed="left")],
        "by": [StrOptions({"mean", "variance"})],
    }

    def _fit(self, X):
        if self.n > X.shape[1]:
            raise ValueError(
                f"TopGenes n={self.n} exceeds the number of features of X (n_features={X.shape[1]})"
            )
        if sp.issparse(X):
            mean, var = mean_variance_axis(X, axis=0)
        else:
            mean, var = X.mean(axis=0), X.var(axis=0)
        self.scores_ = mean if self.by == "mean" else var
        keep = np.argsort(-self.scores_, kind="stable")[: self.n]
        self.support_ = np.zeros(X.shape[1], dtype=bool)
        self.support_[keep] = True


class MaxZeroFraction(_Selector):
    """Drop features whose fraction of zeros in the training samples exceeds ``max_fraction``.

    Paper 000 drops genes with more than 25 % zeros.

    Parameters
    ----------
    max_fraction : float in [0, 1]

    Attributes
    ----------
    zero_fraction_ : ndarray of shape (n_features,)
    support_ : ndarray of bool
    """

    def __init__(self, max_fraction=0.25):
        self.max_fraction = max_fraction

    _parameter_constraints = {"max_fraction": [Interval(Real, 0, 1, closed="both")]}

    def _fit(self, X):
        if sp.issparse(X):  # CSR: count the stored nonzeros of each column
            nonzero = np.bincount(X.indices[X.data != 0], minlength=X.shape[1])
            self.zero_fraction_ = 1 - nonzero / X.shape[0]
        else:
            self.zero_fraction_ = (X == 0).mean(axis=0)
        self.support_ = self.zero_fraction_ <= self.max_fraction
        if not self.support_.any():
            raise ValueError(
                f"every feature has more than {self.max_fraction} zeros in training; "
                "MaxZeroFraction would keep none"
            )


class RankTransform(_OneToOne):
    """Per-feature ranks against the training values, ties averaged, scaled into (0, 1).

    For feature j with n training values, a value x gets ``(L + (E + 1) / 2) / (n + 1)`` with L
    the number of training values below x and E the number equal to it. For the training samples
    this is the average rank (``scipy.stats.rankdata(method="average")``) divided by n + 1; a new
    value between two training values gets the midpoint of their ranks, one equal to training
    values the average rank of that tie block. Invariant to any strictly increasing map of a
    feature (applied to training and new values alike).

    Implementation (vectorised over features): every value is coded by its position among the
    sorted distinct training values (``np.unique``), and feature j's codes are offset by
    j * (number of distinct values + 1). The training codes sorted within each feature then form
    one globally sorted array, and two ``np.searchsorted`` calls (with sorted needles, which keeps
    the search cache-friendly) count for every new value of every feature the training values
    below it and below or equal to it.

    Attributes
    ----------
    values_ : ndarray
        Sorted distinct training values.
    train_codes_ : ndarray of int64, shape (n_features * n_train,)
        Offset codes of the training values, sorted within each feature, features in order.
    n_train_ : int
    """

    learns_from_samples = True

    def _offsets(self, n_features):
        return np.arange(n_features, dtype=np.int64) * (self.values_.size + 1)

    def _fit(self, X):
        self.n_train_ = X.shape[0]
        self.values_, inverse = np.unique(X, return_inverse=True)
        codes = inverse.reshape(X.shape).T + self._offsets(X.shape[1])[:, None]
        self.train_codes_ = np.sort(codes, axis=1).ravel()

    def _transform(self, X):
        m, p = X.shape
        flat = X.ravel()
        order = np.argsort(flat)
        sorted_values = flat[order]
        counts = []
        for side in ("left", "right"):
            code = np.empty(flat.size, dtype=np.int64)
            code[order] = np.searchsorted(self.values_, sorted_values, side=side)
            needles = code.reshape(m, p).T + self._offsets(p)[:, None]  # (p, m)
            within = np.argsort(needles, axis=1)
            found = np.searchsorted(
                self.train_codes_, np.take_along_axis(needles, within, axis=1).ravel()
            ).reshape(p, m)
            below = np.empty_like(found)
            np.put_along_axis(below, within, found, axis=1)
            counts.append(below.T - np.arange(p, dtype=np.int64) * self.n_train_)
        below, below_or_equal = counts
        equal = below_or_equal - below
        return (below + (equal + 1) / 2) / (self.n_train_ + 1)


class RoundCounts(_NonNegative, _Stateless):
    """Round to the nearest integer (int64, half to even) for count models; negative is an error.
    A sparse input stays sparse."""

    keeps_sparse = True

    def _transform(self, X):
        if sp.issparse(X):
            X = X.copy()
            X.data = np.rint(X.data)
            return X.astype(np.int64)
        return np.rint(X).astype(np.int64)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = []
        return tags


class ZScore(_OneToOne):
    """Standardise each feature with the training mean and standard deviation (ddof=0).

    A feature that is constant in training (sd below 10 machine epsilons of its scale) gets
    sd 1, so it is only centred (to 0 in training) and never divided by zero: no NaN.

    Attributes
    ----------
    mean_ : ndarray of shape (n_features,)
    scale_ : ndarray of shape (n_features,)
    """

    learns_from_samples = True

    def _fit(self, X):
        self.mean_ = X.mean(axis=0)
        sd = X.std(axis=0)
        constant = sd <= 10 * np.finfo(float).eps * np.maximum(np.abs(self.mean_), 1.0)
        self.scale_ = np.where(constant, 1.0, sd)

    def _transform(self, X):
        return (X - self.mean_) / self.scale_


class UnitLength(_Stateless):
    """Scale each sample to unit Euclidean norm (paper 003); an all-zero sample stays zero.
    A sparse input stays sparse."""

    keeps_sparse = True

    def _transform(self, X):
        return normalize(X, norm="l2", axis=1)


STEPS = {
    "log": Log,
    "normalize_total": NormalizeTotal,
    "median_of_ratios": MedianOfRatios,
    "background_correct": BackgroundCorrect,
    "quantile_normalize": QuantileNormalize,
    "top_genes": TopGenes,
    "max_zero_fraction": MaxZeroFraction,
    "rank": RankTransform,
    "round_counts": RoundCounts,
    "zscore": ZScore,
    "unit_length": UnitLength,
}
"""Config step name -> transformer class."""


def _normalize_step(step, position):
    """A step spec (name string or dict with "name") as (name, params dict)."""
    if isinstance(step, str):
        name, params = step, {}
    elif isinstance(step, dict):
        if "name" not in step:
            raise ValueError(f"preprocessing step {position} {step!r} has no 'name' key")
        params = {k: v for k, v in step.items() if k != "name"}
        name = step["name"]
    else:
        raise ValueError(
            f"preprocessing step {position} is {step!r}; expected a step name or a dict with "
            "'name' and the step's parameters"
        )
    if name not in STEPS:
        raise ValueError(
            f"unknown preprocessing step {name!r} (step {position}); known steps: "
            f"{', '.join(STEPS)}"
        )
    return name, params


def _make_step(step, position):
    name, params = _normalize_step(step, position)
    cls = STEPS[name]
    allowed = cls._get_param_names()
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(
            f"preprocessing step {name!r} (step {position}) has no parameter {unknown[0]!r}; "
            f"its parameters are {allowed or 'none'}"
        )
    transformer = cls(**params)
    try:
        transformer._validate_params()
    except (TypeError, ValueError) as err:
        raise ValueError(f"preprocessing step {name!r} (step {position}): {err}") from None
    return name, transformer


def build_pipeline(steps):
    """A scikit-learn Pipeline from a list of step specs.

    Parameters
    ----------
    steps : list of str or dict
        Each a step name (see :data:`STEPS`) or a dict ``{"name": ..., **params}``, e.g.
        ``[{"name": "log", "base": 2}, "zscore"]``. An empty list gives a pass-through pipeline.

    Returns
    -------
    sklearn.pipeline.Pipeline
        Step names are the config names (``log``, ``zscore``; a repeated name gets ``_2``...).

    Raises
    ------
    ValueError
        Unknown step name (the message lists the known ones), unknown parameter or a parameter
        value out of range (the message names the step and the parameter).
    """
    if isinstance(steps, str | dict) or not hasattr(steps, "__iter__"):
        raise ValueError(f"steps must be a list of step specs, got {steps!r}")
    named, seen = [], {}
    for position, step in enumerate(steps):
        name, transformer = _make_step(step, position)
        seen[name] = seen.get(name, 0) + 1
        named.append((name if seen[name] == 1 else f"{name}_{seen[name]}", transformer))
    return Pipeline(named or [("identity", "passthrough")])


def split_pipeline(steps):
    """Split step specs into the leading sample-wise run and the fold-fitted rest.

    Parameters
    ----------
    steps : list of str or dict
        Step specs as for :func:`build_pipeline`.

    Returns
    -------
    sample_wise_steps : list of dict
        The leading steps whose transformer has ``learns_from_samples`` False: apply them once
        to the whole cohort.
    fold_steps : list of dict
        The rest, starting at the first step that learns from samples: fit them on each training
        fold and apply them to its test fold.
        Both lists hold ``{"name": ..., **params}`` dicts, ready for :func:`build_pipeline`.
    """
    specs = []
    learns = []
    for position, step in enumerate(steps):
        name, transformer = _make_step(step, position)
        specs.append({"name": name, **_normalize_step(step, position)[1]})
        learns.append(bool(transformer.learns_from_samples))
    cut = learns.index(True) if True in learns else len(specs)
    return specs[:cut], specs[cut:]
