"""Shared fixtures: a runner for the real snakemake on a small config in a temporary directory."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))


def run_snakemake(workdir, *args, config=None, timeout=900):
    """Run the repository's Snakefile in ``workdir`` with ``config`` written as its config file."""
    workdir = Path(workdir)
    if config is not None:
        (workdir / "config").mkdir(parents=True, exist_ok=True)
        (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return subprocess.run(
        [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(workdir), *args],
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
