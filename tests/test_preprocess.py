"""Preprocessing transformers: hand-computed cases, fit-on-train semantics, pipelines."""

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis.extra.numpy import array_shapes, arrays
from scipy.stats import rankdata
from sklearn.base import clone
from sklearn.preprocessing import StandardScaler

from omicsbayes.preprocess import (
    STEPS,
    BackgroundCorrect,
    Log,
    MaxZeroFraction,
    MedianOfRatios,
    NormalizeTotal,
    QuantileNormalize,
    RankTransform,
    RoundCounts,
    TopGenes,
    UnitLength,
    ZScore,
    build_pipeline,
    split_pipeline,
)

RNG = np.random.default_rng(0)
COUNTS = RNG.poisson(5.0, size=(12, 7)).astype(float) + 1.0


def _fitted(name):
    return STEPS[name](n=3) if name == "top_genes" else STEPS[name]()


# ---------------------------------------------------------------- hand-computed cases


def test_background_correct_subtracts_sample_quantile_and_floors():
    X = np.array([[1.0, 2, 3, 4, 5], [10, 20, 30, 40, 50]])
    out = BackgroundCorrect(quantile=0.0, offset=0.5).fit_transform(X)
    np.testing.assert_allclose(out, [[0.5, 1, 2, 3, 4], [0.5, 10, 20, 30, 40]])
    # the 25 % quantile of 1..5 is 2 (linear interpolation)
    out = BackgroundCorrect(quantile=0.25, offset=0.1).fit_transform(X[:1])
    np.testing.assert_allclose(out, [[0.1, 0.1, 1, 2, 3]])


def test_normalize_total_median_target_learned_from_training():
    train = np.array([[1.0, 3], [2, 6], [5, 5]])  # totals 4, 8, 10 -> median 8
    step = NormalizeTotal().fit(train)
    assert step.target_sum_ == 8
    np.testing.assert_allclose(step.transform(train), [[2, 6], [2, 6], [4, 4]])
    np.testing.assert_allclose(step.transform([[1.0, 1]]), [[4, 4]])
    np.testing.assert_allclose(
        NormalizeTotal(target_sum=10).fit_transform([[1.0, 3]]), [[2.5, 7.5]]
    )


def test_median_of_ratios_matches_hand_computed_size_factors():
    # geometric means of genes 0-2: 2, 4, 8; gene 3 has a zero and is no reference gene
    train = np.array([[1.0, 2, 4, 0], [4, 8, 16, 3]])
    step = MedianOfRatios().fit(train)
    np.testing.assert_allclose(step.size_factors_, [0.5, 2.0])
    np.testing.assert_allclose(step.transform(train)[:, :3], [[2, 4, 8], [2, 4, 8]])
    # a new sample: ratios 1.5, 1.5, 1.5 on the reference genes
    np.testing.assert_allclose(step.transform([[3.0, 6, 12, 100]]), [[2, 4, 8, 100 / 1.5]])
    # a zero count on a reference gene is skipped; the median of the log ratios log(4/4) and
    # log(16/8) is their mean, so the size factor is sqrt(2) (as DESeq2, median in log space)
    np.testing.assert_allclose(
        step.transform([[0.0, 4, 16, 1]]), np.array([[0, 4, 16, 1]]) / np.sqrt(2)
    )


def test_log_base_and_pseudocount():
    np.testing.assert_allclose(Log().fit_transform([[0.0, 1, 3]]), [[0, 1, 2]])
    np.testing.assert_allclose(Log(base=10, pseudocount=0).fit_transform([[10.0, 100]]), [[1, 2]])
    with pytest.raises(ValueError, match="pseudocount"):
        Log(pseudocount=0).fit_transform([[0.0, 1]])


def test_quantile_normalize_hand_case_with_ties():
    # the textbook example with arrays as rows; ties get the mean of their reference values
    X = np.array([[5.0, 2, 3, 4], [4, 1, 4, 2], [3, 4, 6, 8]])
    out = QuantileNormalize().fit_transform(X)
    ref = [2, 3, 14 / 3, 17 / 3]
    np.testing.assert_allclose(out[0], [ref[3], ref[0], ref[1], ref[2]])
    np.testing.assert_allclose(
        out[1], [(ref[2] + ref[3]) / 2, ref[0], (ref[2] + ref[3]) / 2, ref[1]]
    )
    np.testing.assert_allclose(out[2], ref)


def test_quantile_normalize_gives_identical_distributions():
    X = RNG.lognormal(size=(9, 30)) * RNG.uniform(0.5, 3, size=(9, 1))
    step = QuantileNormalize().fit(X[:6])
    out = step.transform(X)
    sorted_rows = np.sort(out, axis=1)
    np.testing.assert_allclose(sorted_rows, np.broadcast_to(sorted_rows[0], sorted_rows.shape))
    np.testing.assert_allclose(sorted_rows[0], np.sort(X[:6], axis=1).mean(axis=0))


def test_top_genes_by_mean_and_variance():
    X = np.array([[1.0, 10, 5, 0], [3, 10, 5, 0]])
    step = TopGenes(n=2).fit(X)
    np.testing.assert_array_equal(step.get_support(indices=True), [1, 2])
    np.testing.assert_array_equal(step.get_support(), [False, True, True, False])
    np.testing.assert_allclose(step.transform([[7.0, 8, 9, 10]]), [[8, 9]])
    step = TopGenes(n=1, by="variance").fit(X)
    np.testing.assert_array_equal(step.get_support(indices=True), [0])
    with pytest.raises(ValueError, match=r"TopGenes n=5 exceeds .*\(n_features=4\)"):
        TopGenes(n=5).fit(X)


def test_max_zero_fraction_keeps_features_at_or_below_threshold():
    X = np.array([[0.0, 1, 0], [0, 2, 3], [1, 0, 4], [2, 5, 6]])  # zero fractions .5 .25 .25
    step = MaxZeroFraction(max_fraction=0.25).fit(X)
    np.testing.assert_array_equal(step.get_support(indices=True), [1, 2])
    np.testing.assert_allclose(step.transform([[0.0, 0, 0]]), [[0, 0]])
    assert list(step.get_feature_names_out()) == ["x1", "x2"]


def test_rank_transform_hand_case():
    train = np.array([[3.0], [1], [3], [2]])
    step = RankTransform().fit(train)
    np.testing.assert_allclose(step.transform(train).ravel(), np.array([3.5, 1, 3.5, 2]) / 5)
    # below all, equal to the minimum, between, equal to a tie block, above all
    test = np.array([[0.0], [1], [2.5], [3], [10]])
    np.testing.assert_allclose(step.transform(test).ravel(), [0.1, 0.2, 0.5, 0.7, 0.9])


def test_rank_transform_matches_brute_force_counts():
    train = RNG.integers(0, 6, size=(15, 5)).astype(float)
    test = RNG.integers(-1, 8, size=(11, 5)).astype(float)
    step = RankTransform().fit(train)
    below = (train[None, :, :] < test[:, None, :]).sum(axis=1)
    equal = (train[None, :, :] == test[:, None, :]).sum(axis=1)
    np.testing.assert_allclose(step.transform(test), (below + (equal + 1) / 2) / 16)
    np.testing.assert_allclose(step.transform(train), rankdata(train, axis=0) / 16)


def test_rank_transform_invariant_to_strictly_increasing_maps():
    train = RNG.integers(0, 5, size=(20, 3)).astype(float)  # with ties
    test = RNG.integers(-2, 7, size=(8, 3)).astype(float)
    maps = [np.exp, lambda x: x**3 + x, lambda x: np.arctan(x - 2)]

    def each(X):
        return np.column_stack([f(X[:, j]) for j, f in enumerate(maps)])

    base = RankTransform().fit(train).transform(test)
    mapped = RankTransform().fit(each(train)).transform(each(test))
    np.testing.assert_array_equal(base, mapped)


def test_round_counts():
    out = RoundCounts().fit_transform([[0.4, 1.5, 2.5, 3.6]])
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, [[0, 2, 2, 4]])
    with pytest.raises(ValueError, match="1 .*sample 0, feature 1"):
        RoundCounts().fit_transform([[0.0, -0.2]])


def test_zscore_training_moments_and_constant_feature():
    step = ZScore().fit([[1.0, 5], [3, 5]])
    np.testing.assert_allclose(step.mean_, [2, 5])
    np.testing.assert_allclose(step.scale_, [1, 1])
    np.testing.assert_allclose(step.transform([[1.0, 5], [5, 7]]), [[-1, 0], [3, 2]])
    X = RNG.normal(size=(10, 4))
    np.testing.assert_allclose(ZScore().fit_transform(X), StandardScaler().fit_transform(X))


def test_unit_length():
    np.testing.assert_allclose(UnitLength().fit_transform([[3.0, 4], [0, 0]]), [[0.6, 0.8], [0, 0]])


# ---------------------------------------------------------------- shared behaviour


@pytest.mark.parametrize("name", sorted(STEPS))
def test_fit_on_train_apply_on_test(name):
    """Test-fold values never change what was fitted; test samples are transformed one by one."""
    train, test = COUNTS[:8], COUNTS[8:]
    step = _fitted(name).fit(train)
    out = step.transform(test)
    other = _fitted(name).fit(train)
    other.transform(test * 3 + 1)  # transforming other data does not refit
    np.testing.assert_allclose(other.transform(test), out)
    for i in range(test.shape[0]):
        np.testing.assert_allclose(step.transform(test[i : i + 1])[0], out[i])
    refit = _fitted(name).fit(np.vstack([train, test * 7]))
    if not step.learns_from_samples:  # sample-wise: independent of the training samples
        np.testing.assert_allclose(refit.transform(test), out)


@pytest.mark.parametrize("name", sorted(STEPS))
def test_learns_from_samples_declared(name):
    expected = {
        "log": False,
        "background_correct": False,
        "round_counts": False,
        "unit_length": False,
        "normalize_total": True,  # target_sum=None learns the median training total
    }.get(name, True)
    assert STEPS[name].learns_from_samples is expected
    assert clone(_fitted(name)).learns_from_samples is expected
    assert NormalizeTotal(target_sum=1e4).learns_from_samples is False


@pytest.mark.parametrize("name", sorted(STEPS))
def test_non_finite_input_named(name):
    X = COUNTS.copy()
    X[2, 3] = np.nan
    X[4, 1] = np.inf
    with pytest.raises(ValueError, match=r"2 non-finite values .*sample 2, feature 3"):
        _fitted(name).fit(X)
    step = _fitted(name).fit(COUNTS)
    with pytest.raises(ValueError, match="non-finite"):
        step.transform(X)


def test_feature_count_mismatch():
    step = ZScore().fit(COUNTS)
    with pytest.raises(ValueError, match="features"):
        step.transform(COUNTS[:, :3])


def test_negative_counts_rejected():
    with pytest.raises(ValueError, match="1 .*MedianOfRatios"):
        MedianOfRatios().fit([[1.0, -1], [2, 3]])


# ---------------------------------------------------------------- pipelines


def test_build_pipeline_composes_steps():
    pipe = build_pipeline([{"name": "log", "base": 2}, "zscore", {"name": "top_genes", "n": 3}])
    assert [n for n, _ in pipe.steps] == ["log", "zscore", "top_genes"]
    expected = TopGenes(n=3).fit_transform(ZScore().fit_transform(np.log2(COUNTS + 1)))
    np.testing.assert_allclose(pipe.fit_transform(COUNTS), expected)
    np.testing.assert_array_equal(build_pipeline([]).fit_transform(COUNTS), COUNTS)
    assert [n for n, _ in build_pipeline(["log", "log"]).steps] == ["log", "log_2"]


def test_build_pipeline_errors():
    with pytest.raises(ValueError, match="unknown preprocessing step 'logg'.*log, normalize_total"):
        build_pipeline(["logg"])
    with pytest.raises(ValueError, match="'log'.*no parameter 'bse'"):
        build_pipeline([{"name": "log", "bse": 2}])
    with pytest.raises(ValueError, match="'log'.*'base' parameter of Log.*Got -1"):
        build_pipeline([{"name": "log", "base": -1}])
    with pytest.raises(ValueError, match="'top_genes'.*'n' parameter of TopGenes.*Got 0"):
        build_pipeline([{"name": "top_genes", "n": 0}])
    with pytest.raises(ValueError, match="no 'name'"):
        build_pipeline([{"base": 2}])
    with pytest.raises(ValueError, match="list of step specs"):
        build_pipeline("log")


def test_split_pipeline_leading_sample_wise_run():
    steps = [{"name": "normalize_total", "target_sum": 1e4}, "log", "zscore", "unit_length"]
    sample_wise, fold = split_pipeline(steps)
    assert sample_wise == [{"name": "normalize_total", "target_sum": 1e4}, {"name": "log"}]
    assert fold == [{"name": "zscore"}, {"name": "unit_length"}]
    assert split_pipeline(["normalize_total", "log"]) == (
        [],
        [{"name": "normalize_total"}, {"name": "log"}],
    )
    assert split_pipeline(["log", "round_counts"]) == (
        [{"name": "log"}, {"name": "round_counts"}],
        [],
    )
    # both halves rebuild the same transform as the whole
    whole = build_pipeline(steps).fit(COUNTS[:8]).transform(COUNTS[8:])
    first = build_pipeline(sample_wise).fit_transform(COUNTS)
    second = build_pipeline(fold).fit(first[:8]).transform(first[8:])
    np.testing.assert_allclose(second, whole)


@settings(max_examples=40, deadline=None)
@given(
    data=arrays(
        np.float64,
        array_shapes(min_dims=2, max_dims=2, min_side=2, max_side=6),
        elements=st.integers(-20, 20).map(float),
    ),
    n_train=st.integers(1, 5),
    power=st.sampled_from([1, 3, 5]),
    shift=st.floats(-5, 5),
)
def test_rank_transform_property_strictly_increasing(data, n_train, power, shift):
    """Property test: any strictly increasing map of the data leaves the ranks unchanged."""
    n_train = min(n_train, data.shape[0] - 1)
    train, test = data[:n_train], data[n_train:]

    def f(x):
        return np.sign(x) * np.abs(x) ** power + shift

    base = RankTransform().fit(train).transform(test)
    np.testing.assert_array_equal(RankTransform().fit(f(train)).transform(f(test)), base)
    assert ((base > 0) & (base < 1)).all()


@pytest.mark.parametrize("name", sorted(STEPS))
def test_every_step_checks_each_parameter_by_its_constraints(name):
    cls = STEPS[name]
    assert set(cls._parameter_constraints) == set(cls._get_param_names())
    for param in cls._get_param_names():
        with pytest.raises(ValueError, match=f"The '{param}' parameter of {cls.__name__}"):
            cls(**{param: "not a value"}).fit(np.ones((4, 3)))


def test_log_base_one_refused():
    with pytest.raises(ValueError, match="'base' parameter of Log .* other than 1"):
        STEPS["log"](base=1).fit_transform(np.ones((2, 2)))
