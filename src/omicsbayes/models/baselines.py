"""Thin scikit-learn baselines used by the workflow.

Paper 003's competitors (Tables 2-3), each ending in LIBLINEAR's Crammer-Singer multi-class
linear SVM (scikit-learn's ``LinearSVC(multi_class="crammer_singer")``):

- :class:`FullSVM`: the SVM on the original features ("FULL").
- :class:`PCASVM`: PCA to ``n_components`` dimensions (fewer if there are fewer samples or
  features), then the SVM ("PCA").  ``transductive=True`` is the paper's PCA baseline, whose
  components come from all samples, labelled and test ("PCA used both labeled and unlabeled data
  to learn the projection", Table 2's discussion); the default fits them on the labelled samples
  only, as BM2PCA sees its data.
- :class:`LDASVM`: LDA projection, then the SVM ("LDA").  LDA yields at most
  ``n_classes - 1`` directions, so the projection has ``min(n_components, n_classes - 1)``
  dimensions (one for a binary problem), not 10.  ``shrinkage`` regularises the within-class
  covariance (not in the paper), which a few samples per class in many dimensions leave singular.
  Ledoit-Wolf's amount (``shrinkage="auto"``) is zero for a class of two samples (see
  :class:`LDASVM`), so with such a class the amount comes from the pooled within-class residuals.

and the day-one baselines :class:`LogisticBaseline` (L2 logistic regression) and
:class:`LinearSVMBaseline` (one-vs-rest linear SVM).

All take labels like scikit-learn classifiers (``classes_``; ``decision_function`` of shape
(n,) for two classes, positive = ``classes_[1]``, else (n, n_classes)).  Rows whose label is
NaN / None are unlabelled: ``PCASVM(transductive=True)`` fits its PCA on every row, labelled or
not, and declares the ``transductive`` capability, so the classification protocol passes it
the test samples unlabelled at fit time; every other baseline ignores unlabelled rows.
"""

from numbers import Integral, Real

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.covariance import empirical_covariance, ledoit_wolf_shrinkage, shrunk_covariance
from sklearn.decomposition import PCA
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC
from sklearn.utils._param_validation import Interval, StrOptions

from ._base import BaseOmicsEstimator
from ._validation import split_labels

__all__ = ["FullSVM", "PCASVM", "LDASVM", "LogisticBaseline", "LinearSVMBaseline"]

_CONSTRAINTS = {
    "C": [Interval(Real, 0, np.inf, closed="neither")],
    "max_iter": [Interval(Integral, 1, None, closed="left")],
    "random_state": ["random_state"],
}
_N_COMPONENTS = {"n_components": [Interval(Integral, 1, None, closed="left")]}


class _Baseline(ClassifierMixin, BaseOmicsEstimator):
    """Fit ``_projection()`` (optional) and ``_classifier()`` on the labelled rows; ``C``,
    ``max_iter`` and ``random_state`` are the classifier's."""

    capabilities = frozenset({"classifier"})
    _blas_sequential = True  # scikit-learn's iterative solvers (thread policy)
    _parameter_constraints = _CONSTRAINTS

    def __init__(self, C=1.0, max_iter=5000, random_state=None):
        self.C = C
        self.max_iter = max_iter
        self.random_state = random_state

    def _uses_unlabelled(self):
        """Whether the projection is fitted on every row (True) or on the labelled ones."""
        return False

    def _projection(self, Xl, codes, max_dim):
        """The projection before the classifier (None: original features); at most
        ``max_dim`` = min(rows it is fitted on, features) dimensions.  ``Xl`` and ``codes``
        (0 .. n_classes - 1) are the labelled rows and their classes."""
        return None

    def fit(self, X, y):
        """Fit the projection and the classifier; rows whose label is NaN / None are unlabelled.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        """
        who = type(self).__name__
        X = self._check_X(X, reset=True)
        y, labelled = split_labels(y, who, len(X))
        self.classes_ = np.unique(y[labelled])
        if len(self.classes_) < 2:
            raise ValueError(
                f"{who} needs labels of at least two classes, got {len(self.classes_)} class"
            )
        codes = np.searchsorted(self.classes_, y[labelled])
        Xl = X[labelled]
        n_rows = len(X) if self._uses_unlabelled() else len(Xl)
        self.projection_ = self._projection(Xl, codes, min(n_rows, X.shape[1]))
        if self.projection_ is not None:
            if self._uses_unlabelled():
                self.projection_.fit(X)
            else:
                self.projection_.fit(Xl, codes)
            Xl = self.projection_.transform(Xl)
        self.classifier_ = self._classifier().fit(Xl, codes)
        self.n_iter_ = self.classifier_.n_iter_
        return self

    def _features(self, X):
        X = self._check_X(X, reset=False)
        return X if self.projection_ is None else self.projection_.transform(X)

    def decision_function(self, X):
        """The classifier's decision values on the (projected) features."""
        features = self._features(X)
        return self.classifier_.decision_function(features)

    def predict(self, X):
        """The class with the largest decision value."""
        features = self._features(X)
        return self.classes_[self.classifier_.predict(features)]


class _CrammerSingerSVM(_Baseline):
    """Ends in LIBLINEAR's Crammer-Singer multi-class linear SVM (paper 003's competitors)."""

    def _classifier(self):
        return LinearSVC(
            C=self.C,
            multi_class="crammer_singer",
            max_iter=self.max_iter,
            random_state=self.random_state,
        )


class FullSVM(_CrammerSingerSVM):
    """Crammer-Singer linear SVM on the original features (paper 003's FULL).

    Examples
    --------
    >>> import numpy as np
    >>> from omicsbayes.models import FullSVM
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(["liver", "colon", "kidney"], 20)
    >>> X = rng.normal(size=(60, 8))
    >>> X[:20, 0] += 3.0  # gene 0 marks liver, gene 1 colon
    >>> X[20:40, 1] += 3.0
    >>> clf = FullSVM().fit(X, y)  # one Crammer-Singer SVM for the three classes
    >>> clf.decision_function(X[:4]).shape  # a column per class, in classes_ order
    (4, 3)
    >>> clf.classes_.tolist()
    ['colon', 'kidney', 'liver']
    >>> bool((clf.predict(X) == y).mean() > 0.7)
    True
    """


class _ProjectedSVM(_CrammerSingerSVM):
    """A projection to at most ``n_components`` dimensions, then the Crammer-Singer SVM."""

    _parameter_constraints = {**_CONSTRAINTS, **_N_COMPONENTS}

    def __init__(self, n_components=10, C=1.0, max_iter=5000, random_state=None):
        self.n_components = n_components
        self.C = C
        self.max_iter = max_iter
        self.random_state = random_state


class PCASVM(_ProjectedSVM):
    """PCA to ``n_components``, then the Crammer-Singer linear SVM (paper 003's PCA).

    Parameters
    ----------
    n_components : int, default=10
        Dimensions of the projection (fewer if there are fewer rows or features).
    C, max_iter, random_state
        The SVM's.
    transductive : bool, default=False
        False: the components come from the labelled rows only (inductive).  True: from every
        row passed to ``fit``, labelled or not (NaN / None label), as the paper's PCA baseline
        used the test samples; the instance then has the ``transductive`` capability, and the
        classification protocol fits it on the training and the (unlabelled) test samples.

    Examples
    --------
    >>> import numpy as np
    >>> from omicsbayes.models import PCASVM
    >>> X, y = np.random.default_rng(0).normal(size=(60, 8)), np.repeat(["case", "control"], 30)
    >>> X[:30, 0] += 3.0  # gene 0 separates the classes
    >>> y_part = y.astype(object)
    >>> y_part[::3] = None  # a third of the samples unlabelled
    >>> inductive = PCASVM(n_components=3).fit(X, y_part)
    >>> transductive = PCASVM(n_components=3, transductive=True).fit(X, y_part)
    >>> inductive.projection_.n_samples_, transductive.projection_.n_samples_  # PCA's rows
    (40, 60)
    >>> transductive.predict(X[::3]).shape  # predictions for the unlabelled samples
    (20,)
    """

    capabilities = frozenset({"classifier", "transductive"})
    _parameter_constraints = {**_ProjectedSVM._parameter_constraints, "transductive": ["boolean"]}

    def __init__(
        self, n_components=10, C=1.0, max_iter=5000, random_state=None, transductive=False
    ):
        self.n_components = n_components
        self.C = C
        self.max_iter = max_iter
        self.random_state = random_state
        self.transductive = transductive

    def _instance_capabilities(self):
        if self.transductive:
            return type(self).capabilities
        return type(self).capabilities - {"transductive"}

    def _uses_unlabelled(self):
        return self.transductive

    def _projection(self, Xl, codes, max_dim):
        return PCA(n_components=min(self.n_components, max_dim), random_state=self.random_state)


class LDASVM(_ProjectedSVM):
    """LDA projection to ``min(n_components, n_classes - 1)`` dimensions, then the
    Crammer-Singer linear SVM (paper 003's LDA).

    Parameters
    ----------
    n_components : int, default=10
        At most this many LDA directions (LDA has ``n_classes - 1``).
    C, max_iter, random_state
        The SVM's.
    shrinkage : None, "auto" or float in [0, 1], default=None
        None: the paper's LDA (scikit-learn's SVD solver, no shrinkage).  Otherwise the
        within-class covariance is shrunk towards a scaled identity (``"auto"``: the
        Ledoit-Wolf amount) and the directions come from scikit-learn's eigen solver, which
        needs the shrunk covariance positive definite.

    Notes
    -----
    ``shrinkage="auto"`` is scikit-learn's: each class's features are standardised and the
    class covariance shrunk by its own Ledoit-Wolf amount.  For a class of two samples that
    amount is zero by construction (both standardised samples are +-1 in every varying
    feature, so the estimated variance of the covariance entries vanishes), which leaves the
    rank-one sample covariance unshrunk and the pooled one singular.  When a class has fewer
    than three labelled samples, one Ledoit-Wolf amount is therefore estimated from the
    standardised within-class residuals of all classes together (each row minus its class
    mean) and applied to every class in the same standardised way.  With three or more
    samples in every class the result is scikit-learn's ``shrinkage="auto"``.

    Examples
    --------
    >>> import numpy as np
    >>> from omicsbayes.models import LDASVM
    >>> X, y = np.random.default_rng(0).normal(size=(60, 8)), np.repeat(["case", "control"], 30)
    >>> X[:30, 0] += 3.0  # gene 0 separates the classes
    >>> clf = LDASVM().fit(X, y)  # n_components=10, but two classes give one LDA direction
    >>> clf.projection_.transform(X).shape
    (60, 1)
    >>> bool((clf.predict(X) == y).mean() > 0.7)
    True
    """

    _parameter_constraints = {
        **_ProjectedSVM._parameter_constraints,
        "shrinkage": [None, StrOptions({"auto"}), Interval(Real, 0, 1, closed="both")],
    }

    def __init__(self, n_components=10, C=1.0, max_iter=5000, random_state=None, shrinkage=None):
        self.n_components = n_components
        self.C = C
        self.max_iter = max_iter
        self.random_state = random_state
        self.shrinkage = shrinkage

    def _projection(self, Xl, codes, max_dim):
        n_classes = codes.max() + 1
        n_components = min(self.n_components, n_classes - 1, max_dim)
        if self.shrinkage is None:
            return LinearDiscriminantAnalysis(n_components=n_components)
        if self.shrinkage == "auto" and np.bincount(codes).min() < 3:
            amount = _pooled_ledoit_wolf_amount(Xl, codes)
            return LinearDiscriminantAnalysis(
                n_components=n_components,
                solver="eigen",
                covariance_estimator=_StandardisedShrunkCovariance(amount),
            )
        return LinearDiscriminantAnalysis(
            n_components=n_components, solver="eigen", shrinkage=self.shrinkage
        )


def _pooled_ledoit_wolf_amount(X, codes):
    """Ledoit-Wolf shrinkage amount of the standardised within-class residuals (each row
    minus its class mean), pooled over the classes."""
    means = np.stack([X[codes == k].mean(axis=0) for k in range(codes.max() + 1)])
    residuals = X - means[codes]
    if not np.any(residuals):
        raise ValueError(
            "LDASVM(shrinkage='auto') needs two distinct labelled samples in at least one "
            "class; every class has one sample or identical samples"
        )
    return float(ledoit_wolf_shrinkage(StandardScaler().fit_transform(residuals)))


class _StandardisedShrunkCovariance:
    """Covariance of standardised features shrunk by a fixed ``amount`` towards a scaled
    identity, then rescaled: scikit-learn's ``shrinkage="auto"`` class covariance with the
    amount given instead of estimated per class."""

    def __init__(self, amount):
        self.amount = amount

    def fit(self, X, y=None):
        """Set ``covariance_`` from the rows ``X`` of one class."""
        scaler = StandardScaler()
        standardised = scaler.fit_transform(X)
        shrunk = shrunk_covariance(empirical_covariance(standardised), self.amount)
        self.covariance_ = scaler.scale_[:, None] * shrunk * scaler.scale_[None, :]
        return self


class LogisticBaseline(_Baseline):
    """L2-penalised logistic regression (binary, or multinomial for more classes).

    Examples
    --------
    >>> import numpy as np
    >>> from omicsbayes.models import LogisticBaseline
    >>> X, y = np.random.default_rng(0).normal(size=(60, 8)), np.repeat(["case", "control"], 30)
    >>> X[:30, 0] += 3.0  # gene 0 separates the classes
    >>> clf = LogisticBaseline(C=0.5).fit(X, y)
    >>> proba = clf.predict_proba(X[:3])  # columns in classes_ order
    >>> clf.classes_.tolist(), proba.shape
    (['case', 'control'], (3, 2))
    >>> bool(proba[:, 0].min() > 0.5)  # the first three samples are cases
    True
    """

    def __init__(self, C=1.0, max_iter=1000, random_state=None):
        self.C = C
        self.max_iter = max_iter
        self.random_state = random_state

    def _classifier(self):
        return LogisticRegression(C=self.C, max_iter=self.max_iter, random_state=self.random_state)

    def predict_proba(self, X):
        """Class probabilities, shape (n_samples, n_classes)."""
        features = self._features(X)
        return self.classifier_.predict_proba(features)


class LinearSVMBaseline(_Baseline):
    """Linear SVM (squared hinge, one-vs-rest for more than two classes).

    Examples
    --------
    >>> import numpy as np
    >>> from omicsbayes.models import LinearSVMBaseline
    >>> X, y = np.random.default_rng(0).normal(size=(60, 8)), np.repeat(["case", "control"], 30)
    >>> X[:30, 0] += 3.0  # gene 0 separates the classes
    >>> clf = LinearSVMBaseline().fit(X, y)
    >>> decision = clf.decision_function(X[:3])  # positive means classes_[1], 'control'
    >>> decision.shape, bool((decision < 0).all())
    ((3,), True)
    """

    def _classifier(self):
        return LinearSVC(C=self.C, max_iter=self.max_iter, random_state=self.random_state)
