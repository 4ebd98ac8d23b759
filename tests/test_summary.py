"""The report's per-experiment winner (omicsbayes.evaluate.winners) on small metric tables whose
answer is worked out by hand."""

import numpy as np
import pandas as pd
import pytest

from omicsbayes.evaluate.winners import AHEAD_SE, COLUMNS, experiment_winner, winners

BINARY = {"kind": "classification", "task": {"kind": "binary", "positive": ["a"]}}


def classification_table(values, transform="zscore", tasks=("a",)):
    """Per-split AUROC and accuracy rows: values[model] = one AUROC per split (the same for
    every task; accuracy set to 1 - AUROC so a wrong metric choice picks the other model)."""
    return pd.DataFrame(
        [
            {"transform": transform, "model": model, "split": split, "task": task,
             "auroc": v, "accuracy": 1 - v}
            for model, vs in values.items()
            for split, v in enumerate(vs)
            for task in tasks
        ]
    )  # fmt: skip


def test_winner_margin_and_paired_standard_error():
    values = {"A": [0.80, 0.70, 0.90, 0.85], "B": [0.75, 0.69, 0.80, 0.70], "C": [0.5] * 4}
    row = experiment_winner(classification_table(values), BINARY)
    diff = np.subtract(values["A"], values["B"])  # paired by split: 0.05, 0.01, 0.10, 0.15
    assert row["metric"] == "auroc"
    assert (row["winner"], row["runner_up"]) == ("A", "B")
    assert row["winner_mean"] == pytest.approx(np.mean(values["A"]))
    assert row["runner_up_mean"] == pytest.approx(np.mean(values["B"]))
    assert row["margin"] == pytest.approx(diff.mean())
    assert row["margin_se"] == pytest.approx(diff.std(ddof=1) / 2)
    assert row["n_splits"] == 4 and row["ahead"]  # 0.0775 is 2.6 standard errors
    assert row["statement"].startswith("A ahead of B by 0.078 auroc")


def test_ahead_means_more_than_two_paired_standard_errors():
    values = {"A": [0.83, 0.79, 0.76, 0.79], "B": [0.80, 0.80, 0.75, 0.78]}
    row = experiment_winner(classification_table(values), BINARY)
    diff = np.subtract(values["A"], values["B"])  # 0.03, -0.01, 0.01, 0.01: margin 1.2 se
    se = diff.std(ddof=1) / 2
    assert AHEAD_SE == 2 and se < row["margin"] < 2 * se and not row["ahead"]
    assert row["statement"] == (
        "A not clearly ahead of B: 0.010 auroc within 2 standard errors "
        f"({np.mean(values['A']):.3f} against {np.mean(values['B']):.3f}; se {se:.3f}, 4 splits)"
    )
    values["A"][1] = 0.81  # 0.03, 0.01, 0.01, 0.01: margin 3 se
    row = experiment_winner(classification_table(values), BINARY)
    assert row["ahead"] and row["statement"].endswith("; 3.0 se over 4 splits)")


def test_a_margin_within_the_standard_error_is_not_ahead():
    values = {"A": [0.9, 0.7, 0.8], "B": [0.7, 0.9, 0.79]}  # A ahead on average by 0.0033
    row = experiment_winner(classification_table(values), BINARY)
    assert row["winner"] == "A" and row["margin"] == pytest.approx(0.01 / 3)
    assert row["margin_se"] > row["margin"] and not row["ahead"]
    se = np.std([0.2, -0.2, 0.01], ddof=1) / np.sqrt(3)
    assert row["statement"] == (
        "A not clearly ahead of B: 0.003 auroc within 2 standard errors (0.800 against 0.797; "
        f"se {se:.3f}, 3 splits)"
    )


def test_exact_ties_are_written_as_ties_not_as_a_zero_margin():
    identical = {"A": [0.818, 0.7, 0.9], "B": [0.818, 0.7, 0.9]}
    row = experiment_winner(classification_table(identical), BINARY)
    assert row["margin"] == 0 and row["margin_se"] == 0 and not row["ahead"]
    assert row["statement"] == "A tied with B at 0.806 auroc (identical on every split, n = 3)"
    swapped = {"A": [0.9, 0.7], "B": [0.7, 0.9]}  # equal means, paired differences +-0.2
    row = experiment_winner(classification_table(swapped), BINARY)
    assert row["statement"] == "A tied with B at 0.800 auroc (se 0.200, n = 2)"
    steady = {"A": [0.9002, 0.8002], "B": [0.9, 0.8]}  # a real margin below 0.0005, se 0
    row = experiment_winner(classification_table(steady), BINARY)
    assert row["ahead"] and row["statement"].startswith("A ahead of B by 0.0002 auroc")
    assert row["statement"].endswith("the same margin on all 2 splits)")


def test_multiclass_is_judged_on_accuracy_and_tasks_are_averaged():
    table = classification_table({"A": [0.9, 0.8], "B": [0.6, 0.7]}, tasks=("multiclass",))
    row = experiment_winner(table, {"task": {"kind": "multiclass"}})
    assert row["metric"] == "accuracy" and row["winner"] == "B"  # accuracy = 1 - the values
    two_tasks = classification_table({"A": [0.9, 0.8], "B": [0.6, 0.7]}, tasks=("t1", "t2"))
    second = two_tasks["task"] == "t2"
    two_tasks.loc[second, "auroc"] = np.where(two_tasks.loc[second, "model"] == "A", 0.5, 1.0)
    row = experiment_winner(two_tasks, BINARY)  # A: (0.9 + 0.5) / 2, (0.8 + 0.5) / 2
    assert (row["winner"], row["runner_up"]) == ("B", "A")  # B: (0.6 + 1) / 2, (0.7 + 1) / 2
    assert row["winner_mean"] == pytest.approx(0.825)
    assert row["runner_up_mean"] == pytest.approx(0.675)


def test_transforms_are_candidates_and_nan_splits_leave_the_pair():
    table = pd.concat(
        [
            classification_table({"A": [0.9, np.nan, 0.7], "B": [0.6, 0.6, 0.5]}, "rank"),
            classification_table({"A": [0.85, 0.8, 0.7], "B": [0.8, 0.6, 0.6]}, "zscore"),
        ]
    )
    row = experiment_winner(table, BINARY)
    assert row["winner"] == "A (rank)"  # 0.8 over its two splits, A (zscore) 0.783
    assert row["runner_up"] == "B (zscore)"  # the same model on another transform is no rival
    assert row["n_splits"] == 2 and row["margin"] == pytest.approx(0.1)  # splits 0 and 2


def test_lower_is_better_metrics_and_the_largest_k():
    rating = pd.DataFrame(
        {
            "transform": "none", "model": ["A", "A", "B", "B"] * 2, "split": [0, 1] * 4,
            "k": [10] * 4 + [20] * 4, "rmse": [0.9, 1.1, 1.0, 1.2, 0.9, 1.1, 1.0, 1.4],
            "recall": [0.5, 0.4, 0.1, 0.2, 0.3, 0.3, 0.6, 0.5],
        }
    )  # fmt: skip
    row = experiment_winner(rating, {"kind": "rating"})
    assert row["metric"] == "rmse" and (row["winner"], row["runner_up"]) == ("A", "B")
    assert row["margin"] == pytest.approx(0.2)  # k = 20: B - A = 0.1, 0.3
    row = experiment_winner(rating, {"kind": "disease_gene"})
    assert row["metric"] == "recall" and row["winner"] == "B"  # at k = 20, not k = 10
    assert row["winner_mean"] == pytest.approx(0.55)


def test_winners_table_names_the_paper_and_handles_a_lone_model():
    tables = {
        "e2": classification_table({"A": [0.8, 0.9], "B": [0.7, 0.8]}),
        "e1": classification_table({"A": [0.8, 0.9]}),
    }
    experiments = {"e1": {**BINARY, "paper": "000"}, "e2": BINARY}
    table = winners(tables, experiments)
    assert list(table.columns) == COLUMNS
    assert list(table["experiment"]) == ["e2", "e1"]  # sorted by paper: "" before "000"
    lone = table.set_index("experiment").loc["e1"]
    assert lone["paper"] == "000" and pd.isna(lone["runner_up"]) and not lone["ahead"]
    assert "no rival" in lone["statement"]


def test_one_split_has_no_standard_error_and_no_values_no_winner():
    row = experiment_winner(classification_table({"A": [0.9], "B": [0.8]}), BINARY)
    assert row["margin"] == pytest.approx(0.1) and np.isnan(row["margin_se"])
    assert not row["ahead"] and row["statement"] == (
        "A not clearly ahead of B: 0.100 auroc on one split, no standard error "
        "(0.900 against 0.800)"
    )
    row = experiment_winner(classification_table({"A": [np.nan], "B": [np.nan]}), BINARY)
    assert pd.isna(row["winner"]) and row["statement"] == "no auroc values"
    assert set(row) == set(COLUMNS[2:])
