"""P@k and R@k against hand-computed cases (paper 004, section 5.1)."""

import numpy as np
import pytest

from omicsbayes.evaluate.ranking import precision_at_k, ranking_curves, recall_at_k

SCORES = np.array(
    [
        [0.9, 0.8, 0.7, 0.6, 0.5],
        [0.1, 0.2, 0.3, 0.4, 0.5],
        [1.0, 1.0, 1.0, 1.0, 1.0],
        [0.5, 0.4, 0.3, 0.2, 0.1],
    ]
)
# row 0: gene 0 is a training positive, removed; ranking 1, 2, 3, 4 with test positives 1 and 3
# row 1: its only test positive is also a training positive -> no test positive, excluded
# row 2: no test positive at all -> excluded
# row 3: test positive 4 ranks last (5th of 5)
TEST = {0: [1, 3], 1: [0], 2: [], 3: [4]}
TRAIN = {0: [0], 1: [0], 2: [2]}


def test_curves_hand_computed():
    out = ranking_curves(SCORES, TEST, TRAIN, ks=[1, 2, 3, 5])
    # row 0 hits at ranks 1 and 3 (G=2); row 3 hit at rank 5 (G=1)
    np.testing.assert_allclose(
        out["precision"], [(1 + 0) / 2, (0.5 + 0) / 2, (2 / 3) / 2, (0.4 + 0.2) / 2]
    )
    np.testing.assert_allclose(out["recall"], [0.25, 0.25, 0.5, 1.0])
    assert (out["n_rows"] == 2).all() and (out["n_excluded"] == 2).all()


def test_pairs_and_dict_inputs_agree():
    rows = np.array([0, 0, 1, 3])
    cols = np.array([1, 3, 0, 4])
    by_pairs = ranking_curves(SCORES, (rows, cols), (np.array([0, 1, 2]), np.array([0, 0, 2])))
    by_dict = ranking_curves({i: SCORES[i] for i in range(4)}, TEST, TRAIN)
    np.testing.assert_allclose(by_pairs[["precision", "recall"]], by_dict[["precision", "recall"]])
    assert list(by_pairs["k"]) == list(range(1, 21))


def test_subset_of_rows_scored():
    out = ranking_curves({3: SCORES[3]}, TEST, TRAIN, ks=[4, 5])
    np.testing.assert_allclose(out["recall"], [0.0, 1.0])
    assert (out["n_excluded"] == 0).all()


def test_ties_broken_by_column_index():
    # all scores tied: ranking is 0, 1, 3, 4 after removing training positive 2
    assert precision_at_k(SCORES[2], [1], 2, exclude=[2]) == 0.5
    assert recall_at_k(SCORES[2], [3], 2, exclude=[2]) == 0.0
    assert recall_at_k(SCORES[2], [3], 3, exclude=[2]) == 1.0


def test_single_row_functions_and_no_positive():
    assert precision_at_k(SCORES[0], [1, 3], 3, exclude=[0]) == pytest.approx(2 / 3)
    assert recall_at_k(SCORES[0], [1, 3], 1, exclude=[0]) == 0.5
    assert np.isnan(recall_at_k(SCORES[1], [0], 3, exclude=[0]))
    with pytest.raises(ValueError, match="k must be"):
        precision_at_k(SCORES[0], [1], 0)


def test_all_rows_excluded_gives_nan_and_count():
    out = ranking_curves(SCORES[:3], {2: []}, TRAIN, ks=[1])
    assert out["n_rows"][0] == 0 and out["n_excluded"][0] == 3
    assert np.isnan(out["precision"][0])


def test_bad_inputs():
    with pytest.raises(ValueError, match="ks"):
        ranking_curves(SCORES, TEST, TRAIN, ks=[])
    with pytest.raises(ValueError, match="column indices"):
        ranking_curves(SCORES, {0: [9]}, TRAIN)
    with pytest.raises(ValueError, match="2-D"):
        ranking_curves(SCORES[0], TEST, TRAIN)


def test_ranking_curves_figure_one_line_per_model():
    import matplotlib

    matplotlib.use("Agg")
    from omicsbayes.pl.mvgp import ranking_curves_figure

    tables = []
    for model in ("Con. MV-GP (D)", "PMF-5"):
        for split in range(2):
            t = ranking_curves(SCORES, TEST, TRAIN, ks=[1, 2, 3])
            tables.append(t.assign(model=model, split=split))
    import pandas as pd

    fig = ranking_curves_figure(pd.concat(tables), "known diseases")
    assert len(fig.axes) == 2 and all(len(ax.lines) == 2 for ax in fig.axes)
    np.testing.assert_allclose(fig.axes[0].lines[0].get_ydata(), tables[0]["precision"])
    with pytest.raises(ValueError, match="lacks columns"):
        ranking_curves_figure(tables[0].drop(columns="model"))
