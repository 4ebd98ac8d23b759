"""Thread count changes results only by floating-point reassociation (issue 9).

Each model is fitted twice on the same data and seed, with BLAS limited to one thread and to two;
the outputs agree to a relative tolerance far below any statistical difference.
"""

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from omicsbayes.models import BAMClassifier, BM2PCAClassifier, IBPFactorModel, RankFactorClassifier


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
def test_one_and_two_threads_agree(name):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 40))
    y = (X[:, 0] + 0.5 * rng.standard_normal(120) > 0).astype(int)
    with threadpool_limits(limits=1):
        single = _fit(name, X, y)
    with threadpool_limits(limits=2):
        double = _fit(name, X, y)
    np.testing.assert_allclose(single, double, rtol=1e-6, atol=1e-8)
