"""Shared fixtures: a runner for the real snakemake on a small config in a temporary directory,
the workflow's own config checks in process, and one tiny workflow run (plus its report) shared by
every test module that inspects a run's outputs."""

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))


def run_snakemake(workdir, *args, config=None, timeout=900, env=None, snakefile=None):
    """Run the repository's Snakefile (or ``snakefile``) in ``workdir`` with ``config`` written as
    its config file (``env``: extra environment variables)."""
    workdir = Path(workdir)
    if config is not None:
        (workdir / "config").mkdir(parents=True, exist_ok=True)
        (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    env = dict(
        os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", **env or {}
    )
    return subprocess.run(
        [
            SNAKEMAKE,
            "-s",
            str(snakefile or REPO / "workflow" / "Snakefile"),
            "-d",
            str(workdir),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


@pytest.fixture
def snakemake_run():
    """The function :func:`run_snakemake`, for tests."""
    return run_snakemake


@pytest.fixture
def tiny_config():
    """One real bundled cohort, one transform, two baselines, three folds."""
    return _tiny_config()


def check_workflow_config(config):
    """What the workflow checks before any job (workflow/rules/common.smk), in process: the JSON
    schema (``WorkflowError``), then :func:`omicsbayes.config.check_config` (``ConfigError``)."""
    from snakemake.utils import validate

    from omicsbayes.config import check_config

    validate(config, str(REPO / "workflow" / "schemas" / "config.schema.yaml"))
    check_config(config)


@pytest.fixture
def workflow_checks():
    """The function :func:`check_workflow_config`, for tests."""
    return check_workflow_config


@pytest.fixture(scope="module")
def tiny_config_module():
    """:func:`tiny_config` for module-scoped fixtures."""
    return _tiny_config()


@pytest.fixture(scope="module")
def snakemake_module_run():
    """:func:`run_snakemake` for module-scoped fixtures."""
    return run_snakemake


def _tiny_config():
    return {
        "seed": 11,
        "cohorts": {
            "breast_cancer": {
                "format": "demo",
                "name": "breast_cancer_wisconsin",
                "label": "diagnosis",
            }
        },
        "transforms": {"zscore": {"steps": ["zscore"]}},
        "protocols": {"cv3": {"type": "stratified_kfold", "n_splits": 3}},
        "models": {
            "logistic": {"class": "LogisticBaseline"},
            "linear_svm": {"class": "LinearSVMBaseline"},
        },
        "experiments": {
            "malignant": {
                "cohort": "breast_cancer",
                "task": {"kind": "binary", "positive": ["malignant"]},
                "transforms": ["zscore"],
                "models": ["logistic", "linear_svm"],
                "protocol": "cv3",
            }
        },
    }


def tiny_run_config():
    """One config for the shared run: :func:`_tiny_config`'s classification experiment, paper
    000's model figures (digits 3/5/8 one-vs-rest, a tiny R-L-BSVM) and paper 003's sweeps
    (tissue few-shot, PCA+SVM at two k)."""
    config = _tiny_config()
    config["cohorts"].update(
        digits={
            "format": "demo",
            "name": "digits",
            "label": "digit",
            "keep_labels": ["3", "5", "8"],
        },
        tissue={"format": "demo", "name": "tissue_gene_expression", "label": "tissue"},
    )
    config["transforms"]["unit_length"] = {"steps": ["unit_length"]}
    few_shot = {"type": "few_shot", "n_repeats": 2}
    config["protocols"].update(
        few2={**few_shot, "n_per_class": 2}, few3={**few_shot, "n_per_class": 3}
    )
    config["models"].update(
        {
            "R-L-BSVM": {
                "class": "RankFactorClassifier",
                "variant": "R-L-BSVM",
                "params": {"n_factors": 3, "max_iter": 10},
            },
            "PCA2": {"class": "PCASVM", "params": {"n_components": 2}},
            "PCA4": {"class": "PCASVM", "params": {"n_components": 4}},
        }
    )
    config["experiments"]["digits_ovr"] = {
        "paper": "000",
        "cohort": "digits",
        "task": {"kind": "one_vs_rest"},
        "transforms": ["zscore"],
        "models": ["logistic", "R-L-BSVM"],
        "protocol": "cv3",
        "figures": ["R-L-BSVM", "logistic"],  # logistic has no factor structure: skipped
    }
    for n in (2, 3):
        config["experiments"][f"n{n}"] = {
            "paper": "003",
            "cohort": "tissue",
            "task": {"kind": "multiclass"},
            "transforms": ["unit_length"],
            "models": ["PCA2", "PCA4"],
            "protocol": f"few{n}",
        }
    config["sweeps"] = {
        "per_class": {  # one line per model of the experiments
            "experiments": ["n2", "n3"],
            "x": "training samples per class",
            "values": [2, 3],
            "title": "accuracy against the number of training samples",
        },
        "components": {  # one experiment, one line through two model entries
            "experiments": ["n3", "n3"],
            "x": "number of components k",
            "values": [2, 4],
            "lines": {"PCA+SVM": ["PCA2", "PCA4"]},
        },
    }
    return config


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """Workdir of one full run of :func:`tiny_run_config` and its ``results/report.html``.

    Run once per test session: with pytest-xdist the workers share one directory and the first to
    arrive runs it while the others wait on a lock. Read-only for the tests that use it.
    """
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # shared by every worker of this session
    workdir = base / "tiny_run"
    outcome = base / "tiny_run.json"
    with open(base / "tiny_run.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not outcome.exists():
            workdir.mkdir(exist_ok=True)
            report = str(workdir / "results" / "report.html")
            steps = [("--cores", "2"), ("--cores", "1", "--report", report)]
            record = {"returncode": 0, "stderr": ""}
            for i, args in enumerate(steps):
                result = run_snakemake(workdir, *args, config=tiny_run_config() if i == 0 else None)
                record = {"returncode": result.returncode, "stderr": result.stderr[-3000:]}
                if result.returncode != 0:
                    break
            outcome.write_text(json.dumps(record))
    record = json.loads(outcome.read_text())
    assert record["returncode"] == 0, record["stderr"]
    return workdir
