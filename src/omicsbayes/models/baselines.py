"""Thin scikit-learn baselines used by the workflow.

Paper 003's competitors (Tables 2-3), each ending in LIBLINEAR's Crammer-Singer multi-class
linear SVM (scikit-learn's ``LinearSVC(multi_class="crammer_singer")``):

- :class:`FullSVM`: the SVM on the original features ("FULL").
- :class:`PCASVM`: PCA to ``n_components`` dimensions (fewer if there are fewer samples or
  features), then the SVM ("PCA").
- :class:`LDASVM`: LDA projection, then the SVM ("LDA").  LDA yields at most
  ``n_classes - 1`` directions, so the projection has ``min(n_components, n_classes - 1)``
  dimensions (one for a binary problem), not 10.

and the day-one baselines :class:`LogisticBaseline` (L2 logistic regression) and
:class:`LinearSVMBaseline` (one-vs-rest linear SVM).

All take labels like scikit-learn classifiers (``classes_``; ``decision_function`` of shape
(n,) for two classes, positive = ``classes_[1]``, else (n, n_classes)).  Rows whose label is
NaN / None are unlabelled: PCASVM uses them to learn its projection (as the paper's PCA
baseline, which sees the test samples), the others ignore them.
"""

import numpy as np
import pandas as pd
from scipy import sparse
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.decomposition import PCA
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.linear_model import LogisticRegression
from sklearn.svm import LinearSVC
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_array, check_is_fitted, column_or_1d

__all__ = ["FullSVM", "PCASVM", "LDASVM", "LogisticBaseline", "LinearSVMBaseline"]


def check_matrix(X, who, n_features=None):
    """Dense float64 2-D ``X`` without NaN/inf, with ``n_features`` columns when given."""
    if sparse.issparse(X):
        raise ValueError(f"{who} does not accept sparse input; pass X as a dense array")
    X = check_array(X, dtype=np.float64, ensure_all_finite=False)
    n_bad = int(np.size(X) - np.count_nonzero(np.isfinite(X)))
    if n_bad:
        raise ValueError(f"X has {n_bad} NaN or infinite values; {who} needs a complete matrix")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(
            f"X has {X.shape[1]} features, but {who} is expecting {n_features} features as input"
        )
    return X


def split_labels(y, who, n_samples):
    """``(y, labelled)``: 1-D labels and the mask of rows whose label is not NaN/None.

    Raises ValueError for a length mismatch or a continuous (regression) target.
    """
    if y is None:
        raise ValueError(f"{who} requires y to be passed, but the target y is None")
    y = column_or_1d(y, warn=True)
    if y.dtype.kind in "OUS":
        y = y.astype(object)
    if len(y) != n_samples:
        raise ValueError(f"y has {len(y)} labels but X has {n_samples} rows")
    labelled = ~np.asarray(pd.isna(y), dtype=bool)
    if labelled.any():
        kind = type_of_target(y[labelled], input_name="y")
        if kind not in ("binary", "multiclass"):
            raise ValueError(f"Unknown label type: {kind}; {who} needs class labels")
    return y, labelled


__all__ = ["FullSVM", "PCASVM", "LDASVM", "LogisticBaseline", "LinearSVMBaseline"]


def _crammer_singer(C, max_iter, random_state):
    return LinearSVC(
        C=C, multi_class="crammer_singer", max_iter=max_iter, random_state=random_state
    )


class _Baseline(ClassifierMixin, BaseEstimator):
    """Fit ``_projection()`` (optional) and ``_classifier()`` on the labelled rows."""

    uses_unlabelled = False

    def _projection(self, n_classes, max_dim):
        """The projection before the classifier (None: original features); at most
        ``max_dim`` = min(rows it is fitted on, features) dimensions."""
        return None

    def fit(self, X, y):
        who = type(self).__name__
        X = check_matrix(X, who)
        y, labelled = split_labels(y, who, len(X))
        self.classes_ = np.unique(y[labelled])
        if len(self.classes_) < 2:
            raise ValueError(
                f"{who} needs labels of at least two classes, got {len(self.classes_)} class"
            )
        codes = np.searchsorted(self.classes_, y[labelled])
        self.n_features_in_ = X.shape[1]
        Xl = X[labelled]
        n_rows = len(X) if self.uses_unlabelled else len(Xl)
        self.projection_ = self._projection(len(self.classes_), min(n_rows, X.shape[1]))
        if self.projection_ is not None:
            if self.uses_unlabelled:
                self.projection_.fit(X)
            else:
                self.projection_.fit(Xl, codes)
            Xl = self.projection_.transform(Xl)
        self.classifier_ = self._classifier().fit(Xl, codes)
        self.n_iter_ = self.classifier_.n_iter_
        return self

    def _features(self, X):
        check_is_fitted(self, "classifier_")
        X = check_matrix(X, type(self).__name__, self.n_features_in_)
        return X if self.projection_ is None else self.projection_.transform(X)

    def decision_function(self, X):
        features = self._features(X)
        return self.classifier_.decision_function(features)

    def predict(self, X):
        features = self._features(X)
        return self.classes_[self.classifier_.predict(features)]


class FullSVM(_Baseline):
    """Crammer-Singer linear SVM on the original features (paper 003's FULL)."""

    def __init__(self, C=1.0, max_iter=5000, random_state=None):
        self.C = C
        self.max_iter = max_iter
        self.random_state = random_state

    def _classifier(self):
        return _crammer_singer(self.C, self.max_iter, self.random_state)


class PCASVM(_Baseline):
    """PCA to ``n_components`` (fitted on all rows, labelled or not), then the Crammer-Singer
    linear SVM (paper 003's PCA)."""

    uses_unlabelled = True

    def __init__(self, n_components=10, C=1.0, max_iter=5000, random_state=None):
        self.n_components = n_components
        self.C = C
        self.max_iter = max_iter
        self.random_state = random_state

    def _projection(self, n_classes, max_dim):
        return PCA(n_components=min(self.n_components, max_dim), random_state=self.random_state)

    def _classifier(self):
        return _crammer_singer(self.C, self.max_iter, self.random_state)


class LDASVM(_Baseline):
    """LDA projection to ``min(n_components, n_classes - 1)`` dimensions, then the
    Crammer-Singer linear SVM (paper 003's LDA)."""

    def __init__(self, n_components=10, C=1.0, max_iter=5000, random_state=None):
        self.n_components = n_components
        self.C = C
        self.max_iter = max_iter
        self.random_state = random_state

    def _projection(self, n_classes, max_dim):
        return LinearDiscriminantAnalysis(
            n_components=min(self.n_components, n_classes - 1, max_dim)
        )

    def _classifier(self):
        return _crammer_singer(self.C, self.max_iter, self.random_state)


class LogisticBaseline(_Baseline):
    """L2-penalised logistic regression (binary, or multinomial for more classes)."""

    def __init__(self, C=1.0, max_iter=1000, random_state=None):
        self.C = C
        self.max_iter = max_iter
        self.random_state = random_state

    def _classifier(self):
        return LogisticRegression(C=self.C, max_iter=self.max_iter, random_state=self.random_state)

    def predict_proba(self, X):
        features = self._features(X)
        return self.classifier_.predict_proba(features)


class LinearSVMBaseline(_Baseline):
    """Linear SVM (squared hinge, one-vs-rest for more than two classes)."""

    def __init__(self, C=1.0, max_iter=5000, random_state=None):
        self.C = C
        self.max_iter = max_iter
        self.random_state = random_state

    def _classifier(self):
        return LinearSVC(C=self.C, max_iter=self.max_iter, random_state=self.random_state)
