"""Scale-out is real: the workflow through the cluster-generic executor and a fake scheduler."""

import copy
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.workflow
FAKE = Path(__file__).with_name("fake_scheduler.py")


def _cluster_args(queue):
    return [
        "--executor", "cluster-generic",
        "--cluster-generic-submit-cmd", f"{sys.executable} {FAKE} submit {queue}",
        "--cluster-generic-status-cmd", f"{sys.executable} {FAKE} status {queue}",
        "--jobs", "4",
        "--latency-wait", "10",
    ]  # fmt: skip


def test_cluster_run_equals_local_run(tmp_path, tiny_config, snakemake_run):
    local, cluster, queue = tmp_path / "local", tmp_path / "cluster", tmp_path / "queue"
    result = snakemake_run(local, "--cores", "2", config=tiny_config)
    assert result.returncode == 0, result.stderr[-3000:]
    result = snakemake_run(cluster, *_cluster_args(queue), config=tiny_config)
    assert result.returncode == 0, result.stderr[-3000:]

    ledger = (queue / "ledger.tsv").read_text().splitlines()
    n_jobs = 1 + 1 + 1 + 2 + 1 + 1  # data, preprocess, split, 2 fits, evaluate, summary
    assert len(ledger) == n_jobs
    assert all((queue / f"{line.split()[0]}.rc").read_text().strip() == "0" for line in ledger)
    for table in ("results/malignant/metrics.tsv", "results/breast_cancer/splits/cv3.tsv"):
        assert (local / table).read_bytes() == (cluster / table).read_bytes()


def test_cluster_reports_a_failed_job(tmp_path, tiny_config, snakemake_run):
    """A fault the config check cannot see (a matrix cell holding text, found by the reader in
    the data job) fails that job on the cluster, and nothing runs after it."""
    cohort = Path(__file__).with_name("bad_inputs") / "non_numeric_cell"
    config = copy.deepcopy(tiny_config)
    config["cohorts"]["breast_cancer"] = {
        "format": "delimited",
        "path": str(cohort / "matrix.tsv"),
        "sample_sheet": str(cohort / "samples.tsv"),
        "orientation": "samples_as_columns",
        "label": "group",
    }
    config["experiments"]["malignant"]["task"] = {"kind": "binary", "positive": ["b"]}
    queue = tmp_path / "queue"
    result = snakemake_run(tmp_path / "run", *_cluster_args(queue), config=config)
    assert result.returncode != 0
    rcs = [p.read_text().strip() for p in queue.glob("*.rc")]
    assert rcs and all(rc != "0" for rc in rcs)  # the data job failed and nothing ran after it
    assert "abc" in (tmp_path / "run/logs/data/breast_cancer.log").read_text()
