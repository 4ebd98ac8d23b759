"""The real snakemake on the default config (dry run) and on a tiny config (full run + report)."""

import copy
from pathlib import Path

import pandas as pd
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.workflow


def test_default_config_dry_run(tmp_path, snakemake_run):
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    result = snakemake_run(tmp_path, "--dry-run", "--cores", "1", config=config)
    assert result.returncode == 0, result.stderr
    for rule in ("data", "preprocess", "split", "fit", "evaluate", "metrics_figure", "summary"):
        assert rule in result.stdout


def test_tiny_run_produces_tables_figures_and_report(tmp_path, tiny_config, snakemake_run):
    result = snakemake_run(tmp_path, "--cores", "2", config=tiny_config)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = pd.read_csv(tmp_path / "results/malignant/metrics.tsv", sep="\t")
    assert set(metrics["model"]) == {"logistic", "linear_svm"}
    assert sorted(metrics["split"].unique()) == [0, 1, 2]
    assert (metrics["auroc"] > 0.9).all()  # the Wisconsin set is close to linearly separable
    summary = pd.read_csv(tmp_path / "results/summary.tsv", sep="\t")
    assert len(summary) == 2
    splits = pd.read_csv(tmp_path / "results/breast_cancer/splits/cv3.tsv", sep="\t")
    tested = splits[splits["role"] == "test"]
    assert tested["sample"].is_unique and len(tested) == 569  # every sample tested exactly once
    assert (tmp_path / "results/malignant/figures/metrics.png").stat().st_size > 1000
    for log in (tmp_path / "logs/fit").rglob("*.log"):
        assert "fitted and predicted" in log.read_text()

    report = tmp_path / "results/report.html"
    result = snakemake_run(tmp_path, "--cores", "1", "--report", str(report))
    assert result.returncode == 0, result.stderr[-3000:]
    html = report.read_text()
    for name in ("metrics.tsv", "summary.tsv", "metrics.png"):
        assert name in html


@pytest.mark.parametrize(
    "edit,expected",
    [
        (lambda c: c.update(sed=1), "sed"),  # a misspelled top-level key
        (lambda c: c["models"]["logistic"].update({"class": "Logistik"}), "Logistik"),
        (
            lambda c: c["experiments"]["malignant"].update(protocol="cv10"),
            "experiments.malignant.protocol",
        ),
        (lambda c: c["transforms"]["zscore"].update(steps=["zcore"]), "transforms.zscore.steps"),
        (lambda c: c["protocols"]["cv3"].update(n_splits=1), "n_splits"),
    ],
)
def test_bad_config_stops_before_any_job(tmp_path, tiny_config, edit, expected, snakemake_run):
    config = copy.deepcopy(tiny_config)
    edit(config)
    result = snakemake_run(tmp_path, "--cores", "1", config=config)
    assert result.returncode != 0
    assert expected in result.stderr + result.stdout
    assert not (tmp_path / "results").exists()
