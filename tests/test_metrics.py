"""Metrics against hand-computed cases and brute force; perplexity closed form; summaries."""

import itertools

import numpy as np
import pandas as pd
import pytest

from omicsbayes.evaluate.metrics import (
    accuracy,
    aupr,
    auroc,
    error_rate,
    heldout_log_likelihood,
    perplexity,
    rmse,
    summarize,
)


def test_auroc_and_aupr_hand_case():
    y, s = [0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]
    # 3 of the 4 positive-negative pairs are ordered correctly
    assert auroc(y, s) == pytest.approx(0.75)
    # ranked: + (P=1, R=.5), -, + (P=2/3, R=1), -  ->  AP = .5 * 1 + .5 * 2/3
    assert aupr(y, s) == pytest.approx(0.5 + 1 / 3)


def test_auroc_brute_force_pairs_with_ties():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 40)
    s = rng.integers(0, 5, 40).astype(float)  # many ties
    pos, neg = s[y == 1], s[y == 0]
    pairs = [(p > n) + 0.5 * (p == n) for p, n in itertools.product(pos, neg)]
    assert auroc(y, s) == pytest.approx(np.mean(pairs))


def test_aupr_brute_force_no_ties():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 30)
    s = rng.permutation(30).astype(float)
    order = np.argsort(-s)
    hits = y[order] == 1
    precision_at_hits = np.cumsum(hits)[hits] / (np.flatnonzero(hits) + 1)
    assert aupr(y, s) == pytest.approx(precision_at_hits.mean())


def test_string_labels_and_pos_label():
    y, s = ["mss", "mss", "msi", "msi"], [0.9, 0.6, 0.65, 0.2]
    # positive is the larger label, "mss" (scikit-learn's classes_[1])
    assert auroc(y, s) == pytest.approx(0.75)
    assert auroc(y, s, pos_label="msi") == pytest.approx(0.25)
    with pytest.raises(ValueError, match="pos_label='x'"):
        auroc(y, s, pos_label="x")


def test_single_class_split_gives_nan():
    assert np.isnan(auroc([1, 1, 1], [0.2, 0.5, 0.1]))
    assert np.isnan(aupr(["a", "a"], [0.2, 0.5]))


def test_metric_input_errors():
    with pytest.raises(ValueError, match="3 classes"):
        auroc([0, 1, 2], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="non-finite"):
        aupr([0, 1], [np.nan, 0.2])
    with pytest.raises(ValueError, match="2 samples but y_score has 3"):
        auroc([0, 1], [0.1, 0.2, 0.3])


def test_accuracy_error_rate_rmse():
    assert accuracy(["a", "b", "b", "a"], ["a", "b", "a", "a"]) == 0.75
    assert error_rate(["a", "b", "b", "a"], ["a", "b", "a", "a"]) == 0.25
    assert rmse([1.0, 2, 3], [1.0, 2, 5]) == pytest.approx(np.sqrt(4 / 3))


def test_heldout_log_likelihood_mean_per_entry():
    assert heldout_log_likelihood([[-1.0, -2.0], [-3.0, -6.0]]) == pytest.approx(-3.0)
    assert heldout_log_likelihood([-1.0, -np.inf]) == -np.inf
    with pytest.raises(ValueError, match="1 NaN"):
        heldout_log_likelihood([-1.0, np.nan])
    with pytest.raises(ValueError, match="at least one"):
        heldout_log_likelihood([])


def test_perplexity_closed_forms():
    # a uniform model over V words has perplexity V whatever the number of tokens
    for V, n in [(7, 10), (1000, 3)]:
        assert perplexity(n * np.log(1 / V), n) == pytest.approx(V)
    # a model that puts probability 1 on every held-out token has perplexity 1
    assert perplexity(0.0, 12) == 1.0
    # 2 tokens at probabilities 1/2 and 1/8: geometric mean probability 1/4
    assert perplexity(np.log(1 / 2) + np.log(1 / 8), 2) == pytest.approx(4.0)
    with pytest.raises(ValueError, match="n_tokens"):
        perplexity(-1.0, 0)


def test_summarize_mean_sd_and_nan_counts():
    df = pd.DataFrame(
        {
            "model": ["m1", "m1", "m2", "m2", "m2"],
            "auroc": [0.5, 0.7, np.nan, 0.8, 0.9],
            "accuracy": [1.0, 2.0, 3.0, 4.0, 5.0],
        }
    )
    out = summarize(df, "model", ["auroc", "accuracy"])
    assert list(out.columns) == [
        "model",
        "auroc_mean",
        "auroc_sd",
        "accuracy_mean",
        "accuracy_sd",
        "n_splits",
        "auroc_n_nan",
        "accuracy_n_nan",
    ]
    m1, m2 = out.iloc[0], out.iloc[1]
    assert m1["auroc_mean"] == pytest.approx(0.6)
    assert m1["auroc_sd"] == pytest.approx(np.sqrt(0.02))  # ((.1^2 + .1^2) / 1) ^ .5
    assert m2["auroc_mean"] == pytest.approx(0.85) and m2["auroc_n_nan"] == 1
    assert m2["accuracy_sd"] == pytest.approx(1.0)  # sd of 3, 4, 5 with ddof=1
    assert list(out["n_splits"]) == [2, 3]
    overall = summarize(df, [], ["accuracy"])
    assert list(overall.columns) == ["accuracy_mean", "accuracy_sd", "n_splits", "accuracy_n_nan"]
    assert overall["accuracy_mean"].item() == 3.0
    assert overall["accuracy_sd"].item() == pytest.approx(np.std([1, 2, 3, 4, 5], ddof=1))
    with pytest.raises(ValueError, match="'aupr'"):
        summarize(df, "model", ["aupr"])
