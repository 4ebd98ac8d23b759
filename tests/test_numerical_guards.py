"""Every model on small random and degenerate inputs: finite outputs, or one clear error.

Degenerate inputs: constant features, duplicated samples, all-tied features, huge and tiny
scales, a single feature. A model may refuse an input, but only with a ValueError (or the
NumericalError of omicsbayes.inference) whose message says what is wrong, never with a NaN.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omicsbayes.inference import NumericalError
from omicsbayes.models import (
    MVGP,
    PMF,
    RFLVM,
    BAMClassifier,
    BayesianProbitClassifier,
    BM2PCAClassifier,
    ConstrainedMVGP,
    IBPFactorModel,
    PFAClassifier,
    PoissonFactorAnalysis,
    RankFactorClassifier,
)

CLASSIFIERS = {
    "BPROBIT": lambda: BayesianProbitClassifier(max_iter=20),
    "BAM_L": lambda: BAMClassifier(ranking="listwise", max_iter=20),
    "BAM_P": lambda: BAMClassifier(ranking="pairwise", max_iter=20),
    "BM2PCA": lambda: BM2PCAClassifier(n_components=2, max_iter=20, random_state=0),
    "PFA-L-BSVM": lambda: PFAClassifier(n_factors=2, n_iter=10, burn_in=5, random_state=0),
    "R-L-BSVM": lambda: RankFactorClassifier.from_variant(
        "R-L-BSVM", n_factors=2, max_iter=10, random_state=0
    ),
    "G-L-Probit": lambda: RankFactorClassifier.from_variant(
        "G-L-Probit", n_factors=2, max_iter=10, random_state=0
    ),
}
LATENT = {
    "RFLVM": lambda: RFLVM(
        likelihood="gaussian", n_random_features=6, n_latent=1, n_iter=6, burn_in=3, random_state=0
    ),
    "IBP": lambda: IBPFactorModel(n_iter=6, burn_in=3, random_state=0),
}

SETTINGS = settings(
    max_examples=6, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)  # fmt: skip


@st.composite
def classification_data(draw):
    n = draw(st.integers(8, 16))
    d = draw(st.integers(1, 5))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * draw(st.sampled_from([1e-6, 1.0, 1e6]))
    degenerate = draw(st.sampled_from(["none", "constant", "duplicates", "ties"]))
    if degenerate == "constant":
        X[:, 0] = 3.0
    elif degenerate == "duplicates":
        X[n // 2 :] = X[: n - n // 2]
    elif degenerate == "ties":
        X[:, 0] = np.round(X[:, 0] > 0)
    y = np.arange(n) % 2
    return np.abs(X) if draw(st.booleans()) else X, y


def _finite_or_clear_error(fit_and_score):
    try:
        out = np.asarray(fit_and_score(), dtype=float)
    except (ValueError, NumericalError) as err:
        assert str(err).strip(), "an error must say what is wrong"
        return
    assert np.all(np.isfinite(out)), out


@pytest.mark.parametrize("name", sorted(CLASSIFIERS))
@SETTINGS
@given(data=classification_data())
def test_classifiers_finite_or_clear_error(name, data):
    X, y = data
    _finite_or_clear_error(lambda: CLASSIFIERS[name]().fit(X, y).decision_function(X))


@pytest.mark.parametrize("name", sorted(LATENT))
@SETTINGS
@given(data=classification_data())
def test_latent_models_finite_or_clear_error(name, data):
    Y = data[0].copy()
    mask = np.zeros(Y.shape, dtype=bool)
    mask[0, 0] = True
    model = LATENT[name]()
    _finite_or_clear_error(lambda: model.fit(np.where(mask, np.nan, Y)).log_likelihood(Y, mask))


@SETTINGS
@given(data=classification_data())
def test_poisson_factor_analysis_finite_or_clear_error(data):
    counts = np.round(np.abs(data[0]) % 50)
    mask = np.zeros(counts.shape, dtype=bool)
    mask[0, 0] = True
    model = PoissonFactorAnalysis(n_factors=2, n_iter=6, burn_in=3, random_state=0)
    _finite_or_clear_error(
        lambda: model.fit(np.where(mask, np.nan, counts)).log_likelihood(counts, mask)
    )


@pytest.mark.parametrize("model", [ConstrainedMVGP(lam=0.5, max_rank=3), MVGP(), PMF(rank=2)])
@SETTINGS
@given(seed=st.integers(0, 2**16), n_entries=st.integers(1, 12))
def test_ranking_models_finite_or_clear_error(model, seed, n_entries):
    rng = np.random.default_rng(seed)
    rows, cols = rng.integers(0, 6, n_entries), rng.integers(0, 5, n_entries)
    values = rng.integers(0, 2, n_entries).astype(float)
    _finite_or_clear_error(lambda: model.fit(rows, cols, values, (6, 5)).predict(rows, cols))
