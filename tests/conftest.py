"""Shared fixtures: a runner for the real snakemake on a small config in a temporary directory,
the workflow's own config checks in process, one tiny workflow run (plus its report) shared by
every test module that inspects a run's outputs, and the enumerated law of a 2 x 2 sparse RFLVM's
(Z, X) that its samplers' tests compare their draws with."""

import fcntl
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy.special import logsumexp

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


class _Named(list):
    """The values of a Snakemake ``input``/``output``/``params`` object, by position and name."""

    def __init__(self, **items):
        super().__init__(items.values())
        self.__dict__.update(items)


def run_workflow_script(name, rule, tmp_path, **sections):
    """Run ``workflow/scripts/<name>`` in this process with a stand-in ``snakemake`` object
    (``sections``: ``input``, ``output``, ``params``, ``wildcards`` as dicts); returns its log
    (a failing job's ends with its one-line error)."""
    import runpy
    from types import SimpleNamespace

    log = Path(tmp_path) / f"{rule}.log"
    smk = SimpleNamespace(
        rule=rule, threads=1, log=[str(log)], **{k: _Named(**v) for k, v in sections.items()}
    )
    try:
        runpy.run_path(
            str(REPO / "workflow" / "scripts" / name),
            init_globals={"snakemake": smk},
            run_name="__main__",
        )
    except SystemExit:
        pass  # run_job exits 1 after logging the error
    return log.read_text()


@pytest.fixture
def workflow_script():
    """The function :func:`run_workflow_script`, for tests of a script without Snakemake."""
    return run_workflow_script


@pytest.fixture
def tiny_config():
    """One real bundled cohort, one transform, two baselines, three folds."""
    return _tiny_config()


def check_workflow_config(config):
    """What the workflow checks before any job (workflow/rules/common.smk), in process: the JSON
    schema with the registries' enums, then :func:`omicsbayes.config.check_config` (each raises
    ``ConfigError``)."""
    from omicsbayes.config import check_config, validate_config

    validate_config(config, REPO / "workflow" / "schemas" / "config.schema.yaml")
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


def _check_z_draws(loglik, pi, counts, x00, p_slack, x_tol):
    """Compare draws of (Z, X) of a sparse RFLVM with N x D = 2 x 2 to their exact law
    prod_ik N(x_ik; 0, 1) pi_k^z_ik (1 - pi_k)^(1 - z_ik) / pi*(Z) exp(loglik(X * Z)), pi*(Z)
    the smallest weight of a non-empty column (1 if none): the 16 matrices Z enumerated, the
    active x_ik integrated out on a grid of 31 points over [-5, 5]. ``loglik`` maps a stack of
    X * Z (G, 2, 2) to G log likelihoods; ``counts`` maps Z's bits (row-major tuple) to how
    often they were drawn and ``x00`` holds the draws of x_00 with z_00 = 1. Asserts each
    P(Z) within 5 standard errors plus ``p_slack`` and E[x_00 | z_00 = 1] within ``x_tol``."""
    N, D, grid = 2, 2, np.linspace(-5, 5, 31)
    log_p, e_x00 = {}, {}
    for bits in itertools.product([0, 1], repeat=N * D):
        Z = np.array(bits, bool).reshape(N, D)
        act = np.flatnonzero(Z.ravel())
        pts = np.array(list(itertools.product(grid, repeat=act.size))).reshape(
            grid.size**act.size, -1
        )
        X = np.zeros((pts.shape[0], N * D))
        X[:, act] = pts
        lw = loglik(X.reshape(-1, N, D)) - 0.5 * np.sum(pts**2, 1)
        lw += np.log(grid[1] - grid[0]) * act.size - 0.5 * act.size * np.log(2 * np.pi)
        used = Z.any(0)
        lp = np.sum(np.where(Z, np.log(pi), np.log1p(-pi))) - np.log(min([1.0, *pi[used]]))
        log_p[bits] = lp + logsumexp(lw)
        if Z[0, 0]:
            w = np.exp(lw - lw.max())
            e_x00[bits] = (w @ X[:, 0] / w.sum(), log_p[bits])
    norm = logsumexp(list(log_p.values()))
    T = sum(counts.values())
    for bits, lp in log_p.items():
        p = np.exp(lp - norm)
        assert abs(counts.get(bits, 0) / T - p) < 5 * np.sqrt(p * (1 - p) / T) + p_slack, bits
    w = np.array([np.exp(lp - norm) for _, lp in e_x00.values()])
    ref = np.array([m for m, _ in e_x00.values()]) @ w / w.sum()
    assert abs(np.mean(x00) - ref) < x_tol


@pytest.fixture
def check_z_draws():
    """:func:`_check_z_draws`: draws of a 2 x 2 sparse RFLVM's (Z, X) against their exact law."""
    return _check_z_draws
