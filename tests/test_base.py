"""The shared estimator conventions of models/_base.py: input checks written once, and DataFrames
with feature names through every estimator that uses them."""

from numbers import Integral

import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.utils import get_tags
from sklearn.utils._param_validation import Interval

from omicsbayes.models import (
    PCASVM,
    BAMClassifier,
    BayesianProbitClassifier,
    BM2PCAClassifier,
    BM2PCARegressor,
    LinearSVMBaseline,
)
from omicsbayes.models._base import POLICY_METHODS, BaseOmicsEstimator
from omicsbayes.models._capabilities import capabilities_of
from omicsbayes.models._validation import (
    check_count_X,
    check_rng,
    check_X,
    heldout_values,
    split_labels,
)


class _Plain(BaseEstimator):
    pass


def test_check_rng_from_every_kind_of_random_state():
    g = np.random.default_rng(3)
    assert check_rng(g) is g  # a Generator's stream continues
    assert check_rng(5).random() == np.random.default_rng(5).random()
    a = check_rng(np.random.RandomState(7)).random()
    b = check_rng(np.random.RandomState(7)).random()
    assert a == b  # a legacy RandomState decides the draws too
    assert isinstance(check_rng(None), np.random.Generator)


def test_check_x_records_and_checks_features():
    est = _Plain()
    frame = pd.DataFrame(np.ones((3, 2)), columns=["g1", "g2"])
    X = check_X(est, frame, reset=True)
    assert X.dtype == np.float64 and est.n_features_in_ == 2
    assert list(est.feature_names_in_) == ["g1", "g2"]
    with (
        pytest.warns(UserWarning, match="does not have valid feature names"),
        pytest.raises(ValueError, match="X has 3 features, but _Plain is expecting 2"),
    ):
        check_X(est, np.ones((2, 3)), reset=False)
    bad = np.ones((3, 2))
    bad[1, 0] = np.nan
    with pytest.raises(ValueError, match=r"1 non-finite values \(1 NaN, 0 inf\).*sample 1"):
        check_X(est, bad, reset=True)
    assert np.isnan(check_X(est, bad, reset=True, allow_nan=True)[1, 0])
    bad[0, 1] = np.inf
    with pytest.raises(ValueError, match="1 infinite values; _Plain"):
        check_X(est, bad, reset=True, allow_nan=True)
    with pytest.raises(TypeError, match="[Ss]parse"):
        from scipy import sparse

        check_X(est, sparse.csr_matrix(np.ones((2, 2))), reset=True)


def test_check_count_x():
    est = _Plain()
    X = check_count_X(est, [[1, np.nan], [0.4, 4.6]], reset=True)
    np.testing.assert_array_equal(X, [[1, np.nan], [0, 5]])  # rounded, NaN = missing
    with pytest.raises(ValueError, match="passed to _Plain: X has 1 negative values"):
        check_count_X(est, [[1, -2]], reset=True)
    with pytest.raises(ValueError, match="NaN"):
        check_count_X(est, [[1, np.nan]], reset=True, allow_nan=False)


def test_heldout_values():
    X = np.array([[1.0, np.nan, 3.0], [np.inf, 5.0, 6.0]])
    mask = np.array([[True, False, False], [False, True, True]])
    rows, cols, values = heldout_values(X, mask, (2, 3))
    assert (rows.tolist(), cols.tolist(), values.tolist()) == ([0, 1, 1], [0, 1, 2], [1, 5, 6])
    with pytest.raises(ValueError, match=r"Y \(2, 3\) and mask \(1, 3\) must have .* \(2, 3\)"):
        heldout_values(X, mask[:1], (2, 3), "Y")
    with pytest.raises(ValueError, match="non-finite values at held-out entries"):
        heldout_values(X, ~mask, (2, 3))


def test_split_labels():
    y, labelled = split_labels(np.array(["a", None, "b"], dtype=object), "who", 3)
    assert labelled.tolist() == [True, False, True]
    with pytest.raises(ValueError, match="Unknown label type: continuous; who"):
        split_labels(np.array([0.5, 1.5, 2.25]), "who", 3)
    with pytest.raises(ValueError, match="y has 2 labels but X has 3 rows"):
        split_labels([0, 1], "who", 3)


def _every_estimator_taking_x():
    from omicsbayes import models
    from omicsbayes.models.bsvm import BayesianSVM

    classes = [getattr(models, name) for name in models.__all__]
    taking_x = [cls() for cls in classes if "matrix_completion" not in capabilities_of(cls)]
    return [*taking_x, BayesianSVM()]


@pytest.mark.parametrize("estimator", _every_estimator_taking_x(), ids=lambda e: type(e).__name__)
def test_every_method_raises_not_fitted_error_before_fit(estimator):
    methods = [m for m in POLICY_METHODS if m != "fit" and hasattr(estimator, m)]
    assert methods
    X = np.ones((3, 4))
    for method in methods:
        args = (X, np.ones_like(X, bool)) if method in ("log_likelihood", "perplexity") else (X,)
        with pytest.raises(NotFittedError):
            getattr(estimator, method)(*args)


class _Counter(BaseOmicsEstimator):
    """A minimal subclass: ``fit`` counts the validations the base ran before it."""

    _parameter_constraints = {"n": [Interval(Integral, 1, None, closed="left")]}
    capabilities = frozenset({"counts"})

    def __init__(self, n=1):
        self.n = n

    def _validate_params(self):
        self.validations_ = getattr(self, "validations_", 0) + 1
        super()._validate_params()

    def fit(self, X, y=None):
        self.X_ = self._check_X(X, reset=True)
        return self

    def transform(self, X):
        return self._check_X(X, reset=False)


def test_the_base_validates_once_checks_input_and_tags_capabilities():
    est = _Counter().fit([[0.4, 2.6], [3.0, 1.0]])
    assert est.validations_ == 1
    np.testing.assert_array_equal(est.X_, [[0, 3], [3, 1]])  # counts: rounded
    with pytest.raises(ValueError, match="The 'n' parameter of _Counter must be an int"):
        _Counter(n=0).fit([[1.0]])
    with pytest.raises(NotFittedError):
        _Counter().transform([[1.0, 2.0]])
    tags = get_tags(_Counter())
    assert tags.capabilities == frozenset({"counts"}) and tags.input_tags.positive_only


def test_capabilities_depend_on_the_instance():
    from omicsbayes.models import RFLVM, RankFactorClassifier

    assert "counts" in capabilities_of(RFLVM(likelihood="poisson"))
    assert "counts" not in capabilities_of(RFLVM(likelihood="bernoulli"))
    assert "counts" in capabilities_of(RFLVM)  # the class: what some parameters give
    assert "mcmc" in capabilities_of(RankFactorClassifier(inference="gibbs"))
    assert "mcmc" not in capabilities_of(RankFactorClassifier(inference="vb"))


@pytest.mark.parametrize(
    "estimator",
    [
        BayesianProbitClassifier(max_iter=5),
        BAMClassifier(max_iter=5),
        BM2PCAClassifier(n_components=2, max_iter=5),
        BM2PCARegressor(n_components=2, max_iter=5),
        LinearSVMBaseline(),
        PCASVM(n_components=2),
    ],
    ids=lambda e: type(e).__name__,
)
def test_dataframe_fit_keeps_feature_names(estimator):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(20, 4)), columns=["TP53", "BRCA1", "MYC", "EGFR"])
    y = np.arange(20) % 2
    estimator.fit(frame, y)
    assert list(estimator.feature_names_in_) == list(frame.columns)
    assert np.all(np.isfinite(np.asarray(estimator.predict(frame), dtype=float)))
    with pytest.raises(ValueError, match="feature names"):
        estimator.predict(frame.rename(columns={"MYC": "MYCN"}))
