"""The paper-003 and day-one baselines on scikit-learn's bundled digits data."""

import numpy as np
import pytest
from sklearn.covariance import ledoit_wolf_shrinkage
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.preprocessing import StandardScaler

from omicsbayes.models._capabilities import capabilities_of
from omicsbayes.models.baselines import (
    LDASVM,
    PCASVM,
    FullSVM,
    LinearSVMBaseline,
    LogisticBaseline,
)

ALL = [FullSVM, PCASVM, LDASVM, LogisticBaseline, LinearSVMBaseline]


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))[:900]
    return X[order[:600]], y[order[:600]], X[order[600:]], y[order[600:]]


@pytest.mark.parametrize("cls", ALL)
def test_multiclass_digits(cls, digits):
    X, y, X_test, y_test = digits
    model = cls(random_state=0).fit(X, y)
    np.testing.assert_array_equal(model.classes_, np.arange(10))
    dec = model.decision_function(X_test)
    assert dec.shape == (len(y_test), 10)
    np.testing.assert_array_equal(model.predict(X_test), model.classes_[np.argmax(dec, axis=1)])
    floor = 0.8 if cls is not LDASVM else 0.75
    assert np.mean(model.predict(X_test) == y_test) > floor


@pytest.mark.parametrize("cls", ALL)
def test_binary_string_labels(cls, digits):
    X, y, X_test, y_test = digits
    keep, keep_test = np.isin(y, (3, 8)), np.isin(y_test, (3, 8))
    names = np.where(y[keep] == 8, "eight", "three")
    model = cls(random_state=0).fit(X[keep], names)
    dec = model.decision_function(X_test[keep_test])
    assert dec.shape == (keep_test.sum(),)
    pred = model.predict(X_test[keep_test])
    np.testing.assert_array_equal(pred, np.where(dec > 0, model.classes_[1], model.classes_[0]))
    truth = np.where(y_test[keep_test] == 8, "eight", "three")
    assert np.mean(pred == truth) > 0.85


def test_projection_dimensions_and_unlabelled_rows(digits):
    X, y, X_test, _ = digits
    lda = LDASVM(n_components=20).fit(X, y)
    assert lda.projection_.transform(X_test).shape[1] == 9  # at most n_classes - 1
    y_partial = y.astype(float)
    y_partial[100:] = np.nan  # the SVM sees the labelled rows only
    inductive = PCASVM(n_components=10).fit(X, y_partial)
    assert inductive.projection_.n_samples_ == 100  # PCA on the labelled rows
    transductive = PCASVM(n_components=10, transductive=True).fit(X, y_partial)
    assert transductive.projection_.n_samples_ == len(X)  # PCA on every row
    assert transductive.classifier_.n_features_in_ == 10
    few = PCASVM(n_components=10).fit(X[:6], y[:6])  # fewer rows than components
    assert few.projection_.n_components_ <= 6


def test_transductive_pca_is_the_pca_of_labelled_and_test_rows(digits):
    """The paper's PCA baseline: components from the labelled and the test samples together;
    the inductive one's from the labelled samples only."""
    X, y, X_test, _ = digits
    labelled = np.concatenate([np.flatnonzero(y == c)[:3] for c in range(10)])  # 3 per class
    rows = np.vstack([X[labelled], X_test])
    y_rows = np.concatenate([y[labelled].astype(float), np.full(len(X_test), np.nan)])
    model = PCASVM(n_components=5, transductive=True, random_state=0).fit(rows, y_rows)
    on_all = PCA(n_components=5, random_state=0).fit(rows)
    np.testing.assert_allclose(model.projection_.transform(X_test), on_all.transform(X_test))
    inductive = PCASVM(n_components=5, random_state=0).fit(rows, y_rows)
    on_labelled = PCA(n_components=5, random_state=0).fit(X[labelled])
    np.testing.assert_allclose(
        inductive.projection_.transform(X_test), on_labelled.transform(X_test)
    )
    assert not np.allclose(np.abs(on_all.components_), np.abs(on_labelled.components_), atol=0.05)
    assert model.classifier_.n_features_in_ == 5


def test_transductive_capability_follows_the_parameter():
    assert "transductive" in capabilities_of(PCASVM(transductive=True))
    assert "transductive" not in capabilities_of(PCASVM())
    assert "transductive" not in capabilities_of(LDASVM(shrinkage="auto"))


def test_lda_shrinkage_is_the_eigen_solver_with_shrinkage(digits):
    X, y, X_test, y_test = digits
    few = np.concatenate([np.flatnonzero(y == c)[:3] for c in range(10)])  # 30 rows, 64 features
    model = LDASVM(shrinkage="auto", random_state=0).fit(X[few], y[few])
    lda = LinearDiscriminantAnalysis(n_components=9, solver="eigen", shrinkage="auto")
    expected = lda.fit(X[few], y[few]).transform(X_test)
    np.testing.assert_allclose(model.projection_.transform(X_test), expected)
    fixed = LDASVM(shrinkage=0.5).fit(X[few], y[few])
    assert fixed.projection_.shrinkage == 0.5 and fixed.projection_.solver == "eigen"
    assert LDASVM().fit(X[few], y[few]).projection_.shrinkage is None  # the paper's LDA
    with pytest.raises(ValueError, match="shrinkage"):
        LDASVM(shrinkage=2.0).fit(X[few], y[few])


def test_lda_shrinkage_at_two_samples_per_class(digits):
    """Ledoit-Wolf's per-class amount is zero for two samples, so scikit-learn's eigen solver
    met a singular within-class covariance; the pooled amount keeps it positive definite."""
    X, y, X_test, y_test = digits
    two = np.concatenate([np.flatnonzero(y == c)[:2] for c in range(10)])  # 20 rows, 64 features
    model = LDASVM(shrinkage="auto", random_state=0).fit(X[two], y[two])
    within = model.projection_.covariance_
    assert np.linalg.eigvalsh(within).min() > 1e-4
    residuals = X[two] - np.stack([X[two][y[two] == c].mean(axis=0) for c in range(10)])[y[two]]
    expected = ledoit_wolf_shrinkage(StandardScaler().fit_transform(residuals))
    assert model.projection_.covariance_estimator.amount == pytest.approx(expected)
    assert 0.1 < expected < 0.9
    assert np.mean(model.predict(X_test) == y_test) > 0.5  # chance is 0.1
    mixed = np.concatenate([two, np.flatnonzero(y == 0)[2:5]])  # one class of 5, nine of 2
    assert LDASVM(shrinkage="auto").fit(X[mixed], y[mixed]).projection_.shrinkage is None
    one = np.concatenate([np.flatnonzero(y == c)[:1] for c in range(10)])
    with pytest.raises(ValueError, match="two distinct labelled samples"):
        LDASVM(shrinkage="auto").fit(X[one], y[one])


def test_bad_input(digits):
    X, y, _, _ = digits
    X_nan = X.copy()
    X_nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="1 NaN"):
        FullSVM().fit(X_nan, y)
    with pytest.raises(ValueError, match="two classes"):
        LogisticBaseline().fit(X, np.zeros(len(y)))
    model = LinearSVMBaseline().fit(X, y)
    with pytest.raises(ValueError, match="64 features"):
        model.predict(X[:, :10])
