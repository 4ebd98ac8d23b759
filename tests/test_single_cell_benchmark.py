"""benchmarks/single_cell: the summary arithmetic (paired differences from each factor's
reference level) and the Markdown table the models page includes."""

import importlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def single_cell(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    return importlib.import_module("benchmarks.single_cell")


def _per_split(levels, factor="prediction_bounds", model="R-L-BSVM"):
    return pd.DataFrame(
        [
            ("c1", factor, model, level, split, v, 1.0)
            for level, vs in levels.items()
            for split, v in enumerate(vs)
        ],
        columns=["cohort", "factor", "model", "level", "split", "auroc", "seconds"],
    )


def test_summary_pairs_each_level_with_the_factor_reference(single_cell):
    reference = [0.70, 0.80, 0.75, 0.72]
    shifted = [v + 0.05 + 0.01 * (i % 2) for i, v in enumerate(reference)]
    table = single_cell.summarize(_per_split({"adjacent": shifted, "extreme": reference}))
    assert table["level"].tolist() == ["extreme", "adjacent"]  # the reference first
    ref, other = table.iloc[0], table.iloc[1]
    assert ref["difference"] == "reference"
    assert ref["mean"] == pytest.approx(np.mean(reference))
    assert ref["se"] == pytest.approx(np.std(reference, ddof=1) / 2)
    paired = np.subtract(shifted, reference)
    want = f"{paired.mean():+.3f} ± {paired.std(ddof=1) / 2:.3f}"
    assert other["difference"] == want and other["verdict"] == "higher" and other["n"] == 4


def test_summary_keeps_rows_without_a_model_read_back_from_tsv(single_cell, tmp_path):
    rows = _per_split({"R-L-BSVM": [0.7, 0.8], "G-L-BSVM on log1p": [0.8, 0.9]}, "likelihood", "")
    rows.to_csv(tmp_path / "splits.tsv", sep="\t", index=False)
    table = single_cell.summarize(pd.read_csv(tmp_path / "splits.tsv", sep="\t"))
    assert table["level"].tolist() == ["R-L-BSVM", "G-L-BSVM on log1p"]
    assert table["model"].tolist() == ["", ""]


def test_summary_calls_a_noisy_difference_level(single_cell):
    table = single_cell.summarize(
        _per_split({"extreme": [0.7, 0.8, 0.7, 0.8], "adjacent": [0.8, 0.7, 0.8, 0.7]})
    )
    assert table.iloc[1]["verdict"] == "level"


def test_markdown_table_names_its_command(single_cell):
    table = single_cell.summarize(_per_split({"extreme": [0.7, 0.8], "adjacent": [0.6, 0.7]}))
    text = single_cell.markdown_table(table, ["--cohorts", "pbmc"])
    assert "`python -m benchmarks.single_cell --cohorts pbmc`" in text
    assert (
        "| c1 | prediction_bounds | R-L-BSVM | adjacent | 0.650 ± 0.050 | -0.100 ± 0.000 |" in text
    )


def test_cohort_factors_run_inference_when_asked_on_simulated_cohorts_only(single_cell):
    everything_else = set(single_cell.FACTORS) - {"inference"}
    simulated = "simulated sparse counts, 400 cells"
    assert single_cell.cohort_factors("digits 3 vs 5") == everything_else
    assert single_cell.cohort_factors(simulated) == everything_else
    assert single_cell.cohort_factors(simulated, ["inference"]) == {"inference"}
    assert single_cell.cohort_factors("digits 3 vs 5", ["inference"]) == set()
    light = "simulated sparse counts, 2000 cells"
    assert single_cell.cohort_factors(light) == {"likelihood", "prediction_bounds"}
    assert single_cell.cohort_factors(light, ["inference", "cohort_size"]) == {"inference"}


def test_split_rows_inference_levels_share_the_default_fit(single_cell):
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 30)
    X = rng.poisson(0.4 + 0.8 * y[:, None] * (np.arange(6) < 2), (60, 6)).astype(float)
    train, test = np.arange(60) % 3 != 0, np.arange(60) % 3 == 0
    args = ("c1", X[train], y[train], X[test], y[test], 7)
    rows = single_cell.split_rows(*args, {"inference"})
    table = pd.DataFrame(rows, columns=["cohort", "factor", "model", "level", "auroc", "seconds"])
    assert table["factor"].unique().tolist() == ["inference"]
    assert table["level"].tolist() == single_cell.FACTORS["inference"]
    default, _ = single_cell._fit_scores("R-L-BSVM", *args[1:])
    assert table["auroc"].iloc[0] == default["extreme"]  # the reference is the default VB fit
    assert table["auroc"].between(0, 1).all()


def test_main_rejects_an_unknown_factor(single_cell):
    with pytest.raises(SystemExit):
        single_cell.main(["--factors", "nonsense", "--from-splits", "x.tsv"])
