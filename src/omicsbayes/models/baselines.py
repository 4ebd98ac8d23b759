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
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.decomposition import PCA
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.linear_model import LogisticRegression
from sklearn.svm import LinearSVC
from sklearn.utils.validation import check_is_fitted

__all__ = ["FullSVM", "PCASVM", "LDASVM", "LogisticBaseline", "LinearSVMBaseline"]

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
        X = np.asarray(X, dtype=float)
        y = np.asarray(y, dtype=object if np.asarray(y).dtype.kind in "OUS" else None)
        if X.ndim != 2 or len(y) != len(X):
            raise ValueError(
                f"X must be 2-D with one row per label; got X {X.shape} and y {y.shape}"
            )
        n_bad = int(np.size(X) - np.count_nonzero(np.isfinite(X)))
        if n_bad:
            raise ValueError(
                f"X has {n_bad} NaN or infinite values; {type(self).__name__} "
                "needs a complete matrix"
            )
        labelled = ~np.asarray(pd.isna(y), dtype=bool)
        self.classes_ = np.unique(y[labelled])
        if len(self.classes_) < 2:
            raise ValueError(
                f"{type(self).__name__} needs labels of at least two classes, "
                f"got {len(self.classes_)}"
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
        return self

    def _features(self, X):
        check_is_fitted(self, "classifier_")
        X = np.asarray(X, dtype=float)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X must be 2-D with {self.n_features_in_} features, got shape {X.shape}"
            )
        return X if self.projection_ is None else self.projection_.transform(X)

    def decision_function(self, X):
        return self.classifier_.decision_function(self._features(X))

    def predict(self, X):
        return self.classes_[self.classifier_.predict(self._features(X))]


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
        return self.classifier_.predict_proba(self._features(X))


class LinearSVMBaseline(_Baseline):
    """Linear SVM (squared hinge, one-vs-rest for more than two classes)."""

    def __init__(self, C=1.0, max_iter=5000, random_state=None):
        self.C = C
        self.max_iter = max_iter
        self.random_state = random_state

    def _classifier(self):
        return LinearSVC(C=self.C, max_iter=self.max_iter, random_state=self.random_state)
