"""BLAS threads: the estimators' thread policy (issue 17) and results that do not depend on it
(issue 9).

Each model is fitted twice on the same data and seed, with BLAS limited to one thread and to two
(the estimators' own one-thread policy for small problems switched off, so two threads really
run); the outputs agree to a relative tolerance far below any statistical difference.
"""

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from omicsbayes.models import (
    BAMClassifier,
    BM2PCAClassifier,
    IBPFactorModel,
    RankFactorClassifier,
    _base,
)


def _fit(name, X, y):
    if name == "BAM_L":
        model = BAMClassifier(ranking="listwise", max_iter=30, random_state=0)
        return model.fit(X, y).decision_function(X)
    if name == "BM2PCA":
        model = BM2PCAClassifier(n_components=3, max_iter=30, random_state=0)
        return model.fit(X, y).decision_function(X)
    if name == "R-L-BSVM":
        model = RankFactorClassifier.from_variant(
            "R-L-BSVM", n_factors=3, max_iter=15, random_state=0
        )
        return model.fit(X, y).decision_function(X)
    return IBPFactorModel(n_iter=20, burn_in=10, random_state=0).fit(X).latent_


@pytest.mark.parametrize("name", ["BAM_L", "BM2PCA", "IBP", "R-L-BSVM"])
def test_one_and_two_threads_agree(name, monkeypatch):
    monkeypatch.setattr(_base, "SMALL_PROBLEM", 0)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 40))
    y = (X[:, 0] + 0.5 * rng.standard_normal(120) > 0).astype(int)
    with threadpool_limits(limits=1):
        single = _fit(name, X, y)
    with threadpool_limits(limits=2):
        double = _fit(name, X, y)
    np.testing.assert_allclose(single, double, rtol=1e-6, atol=1e-8)


def _blas_threads():
    return max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")


class _Probe:
    """Records the BLAS threads its methods run with."""

    @_base.limit_blas
    def fit(self, X):
        self.threads = _blas_threads()
        self._fit_shape = np.shape(X)
        return self

    @_base.limit_blas
    def predict(self, X):
        return _blas_threads()


def test_limit_blas_one_thread_below_small_problem_and_no_limit_above():
    side = int(np.sqrt(_base.SMALL_PROBLEM))
    small, large = np.zeros((side - 1, side - 1)), np.zeros((side + 1, side + 1))
    with threadpool_limits(limits=2, user_api="blas"):
        outer = _blas_threads()
        assert _Probe().fit(small).threads == 1
        assert _Probe().fit(large).threads == outer
        # at predict time the fitted size counts too: a large fit keeps the threads
        assert _Probe().fit(large).predict(small[:2]) == outer
        assert _Probe().fit(small).predict(small[:2]) == 1
        assert _blas_threads() == outer  # restored after each call


def test_blas_threads_of_shapes():
    assert _base.blas_threads((10, 10), (3,)) == 1
    assert _base.blas_threads((_base.SMALL_PROBLEM, 1)) is None
    assert _base.blas_threads() == 1
