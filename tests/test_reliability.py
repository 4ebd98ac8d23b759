"""Reruns give the same bytes; an interrupted run resumes, reruns nothing finished."""

import base64
import copy
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.workflow
REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
TABLES = ("results/malignant/metrics.tsv", "results/malignant/summary.tsv", "results/summary.tsv")


# Put on PYTHONPATH of the interrupted run: in the fit job of model "bam" (its first split), BAM's
# fit signals through a file and then waits for the kill, so the run is killed mid-job at a known
# point whatever the machine's speed.
HOOK = """
import os, signal, sys

if os.environ.get("OMICSBAYES_TEST_BLOCKED_FIT"):
    from omicsbayes.models.bam import BAMClassifier

    fit = BAMClassifier.fit

    def fit_or_wait(self, X, y):
        job = getattr(sys.modules["__main__"], "snakemake", None)
        if job is not None and job.wildcards.model == "bam":
            open(os.environ["OMICSBAYES_TEST_BLOCKED_FIT"], "w").close()
            signal.pause()
        return fit(self, X, y)

    BAMClassifier.fit = fit_or_wait
"""


def _slow_config(tiny_config):
    """The tiny config with a Bayesian model (two fit jobs of four splits each)."""
    config = copy.deepcopy(tiny_config)
    config["protocols"]["cv3"]["n_splits"] = 4
    config["models"]["bam"] = {"class": "BAMClassifier", "params": {"ranking": "pairwise"}}
    config["experiments"]["malignant"]["models"] = ["logistic", "bam"]
    return config


def _incomplete_outputs(workdir):
    """Outputs Snakemake had not yet marked complete (its markers are base64 of the path)."""
    markers = (workdir / ".snakemake" / "incomplete").rglob("*")
    return {
        base64.urlsafe_b64decode(m.name).decode()
        for m in markers
        if m.is_file() and "@" not in m.name and m.name != "migration_underway"
    }


def test_rerun_is_byte_identical_and_seed_changes_folds(tmp_path, tiny_config, snakemake_run):
    first, second, reseeded = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for folder in (first, second):
        assert snakemake_run(folder, "--cores", "2", config=tiny_config).returncode == 0
    for table in (*TABLES, "results/breast_cancer/splits/cv3.tsv"):
        assert (first / table).read_bytes() == (second / table).read_bytes(), table
    config = copy.deepcopy(tiny_config)
    config["seed"] += 1
    assert (
        snakemake_run(
            reseeded, "--cores", "2", "results/breast_cancer/splits/cv3.tsv", config=config
        ).returncode
        == 0
    )
    splits = "results/breast_cancer/splits/cv3.tsv"
    assert (first / splits).read_bytes() != (reseeded / splits).read_bytes()


def test_killed_run_resumes_without_rerunning_finished_jobs(tmp_path, tiny_config, snakemake_run):
    config = _slow_config(tiny_config)
    reference, interrupted = tmp_path / "reference", tmp_path / "interrupted"
    assert snakemake_run(reference, "--cores", "2", config=config).returncode == 0

    (interrupted / "config").mkdir(parents=True)
    (interrupted / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    hook, blocked = tmp_path / "hook", tmp_path / "blocked"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    path = os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", PYTHONPATH=path)
    env["OMICSBAYES_TEST_BLOCKED_FIT"] = str(blocked)
    process = subprocess.Popen(
        [
            SNAKEMAKE,
            "-s",
            str(REPO / "workflow" / "Snakefile"),
            "-d",
            str(interrupted),
            "--cores",
            "2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )
    fits = interrupted / "results/malignant/fits"

    def complete_fits():
        """Fit outputs Snakemake has marked complete, with their modification times."""
        incomplete = _incomplete_outputs(interrupted)
        return {
            p: p.stat().st_mtime_ns
            for p in fits.rglob("predictions.tsv")
            if str(p.relative_to(interrupted)) not in incomplete
        }

    # wait until the blocked job waits and the other one is complete (deadline: a broken run
    # fails the test instead of hanging it)
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and process.poll() is None:
        if blocked.exists() and len(complete_fits()) == 1:
            break
        time.sleep(0.2)
    running = process.poll() is None
    os.killpg(process.pid, signal.SIGKILL)  # Snakemake and every job it started
    process.wait()
    assert running and blocked.exists(), "the run ended or never reached the blocked fit"
    finished = complete_fits()
    assert len(finished) == 1, "the fit job that was not blocked had finished"
    assert not (fits / "zscore" / "bam" / "predictions.tsv").exists()

    assert snakemake_run(interrupted, "--unlock", "--cores", "1").returncode == 0
    result = snakemake_run(interrupted, "--cores", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    for path, mtime in finished.items():  # jobs finished before the kill were not rerun
        assert path.stat().st_mtime_ns == mtime, path
    for table in TABLES:
        assert (interrupted / table).read_bytes() == (reference / table).read_bytes(), table
