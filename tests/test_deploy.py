"""The workflow as a deployable unit: a config runs alone, the catalogue layout, the
conda environment every rule names, and use as a module of another workflow."""

import gzip
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from omicsbayes.io.cohort import PATH_KEYS

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "config" / "examples").glob("*.yaml"))
SUMMARY = re.compile(r"^results/([^/]+)/summary\.tsv$")


def planned_summaries(result):
    """The experiments whose ``results/{experiment}/summary.tsv`` a ``--summary`` run plans."""
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    return sorted(m.group(1) for row in rows if (m := SUMMARY.match(row[0])))


def stand_in_files(config, workdir):
    """Empty files at every cohort path an experiment's cohort names (a plan never reads them)."""
    for cohort in {e["cohort"] for e in config["experiments"].values()}:
        for key in PATH_KEYS:
            values = config["cohorts"][cohort].get(key) or []
            for value in [values] if isinstance(values, str) else values:
                path = Path(workdir) / value.replace("*", "x").replace("?", "x")
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()


def fixture_files(example, workdir):
    """The example's cohort files at the paths it names: the small real-format fixtures of
    tests/test_examples.py (a plan reads the sample sheets, so an empty file will not do)."""
    from test_examples import _merged

    config = yaml.safe_load(example.read_text())
    fixtures = _merged(example.stem)
    for cohort in {e["cohort"] for e in config["experiments"].values()}:
        for key in PATH_KEYS:
            value = config["cohorts"][cohort].get(key)
            if isinstance(value, str):
                target = Path(workdir) / value
                target.parent.mkdir(parents=True, exist_ok=True)
                source = REPO / fixtures["cohorts"][cohort][key]
                opener = gzip.open if source.suffix == ".gz" and target.suffix != ".gz" else open
                with opener(source, "rb") as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst)
    return config


def default_config(tiny_config, workdir):
    """A default run in ``workdir/config/config.yaml`` (what an unmodified checkout runs)."""
    (Path(workdir) / "config").mkdir()
    (Path(workdir) / "config" / "config.yaml").write_text(yaml.safe_dump(tiny_config))


@pytest.mark.workflow
@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_plans_only_its_experiments(example, tmp_path, tiny_config, snakemake_run):
    """`--configfile example.yaml` plans exactly the example's experiments, even where a default
    config/config.yaml with other experiments sits in the working directory."""
    config = fixture_files(example, tmp_path)
    default_config(tiny_config, tmp_path)
    result = snakemake_run(tmp_path, "--configfile", str(example), "--summary")
    assert planned_summaries(result) == sorted(config["experiments"])


@pytest.mark.workflow
def test_default_config_without_configfile(tmp_path, tiny_config, snakemake_run):
    default_config(tiny_config, tmp_path)
    result = snakemake_run(tmp_path, "--summary")
    assert planned_summaries(result) == sorted(tiny_config["experiments"])


@pytest.mark.workflow
def test_config_overrides_merge_into_the_default(tmp_path, tiny_config, snakemake_run):
    """--config KEY=VALUE (without --configfile) still applies on top of the default run."""
    default_config(tiny_config, tmp_path)
    override = "experiments={malignant: {models: [logistic]}}"
    result = snakemake_run(tmp_path, "--summary", "--config", override)
    assert planned_summaries(result) == sorted(tiny_config["experiments"])
    fits = {row.split("\t")[0] for row in result.stdout.splitlines() if "/fits/" in row}
    assert {Path(f).parent.name for f in fits} == {"logistic"}


@pytest.mark.workflow
def test_no_experiments_stops_naming_the_key(tmp_path, tiny_config, snakemake_run):
    del tiny_config["experiments"]
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump(tiny_config))
    result = snakemake_run(tmp_path, "--configfile", str(mine), "--cores", "1")
    assert result.returncode != 0
    assert "config key experiments: " in result.stderr
    assert "mine.yaml names no experiment" in result.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.workflow
@pytest.mark.parametrize("key", ["path", "sample_sheet"])
def test_missing_cohort_file_stops_naming_key_and_file(key, tmp_path, tiny_config, snakemake_run):
    tiny_config["cohorts"]["breast_cancer"] = {
        "format": "delimited",
        "path": "data/matrix.tsv",
        "sample_sheet": "data/samples.tsv",
        "label": "diagnosis",
    }
    stand_in_files(tiny_config, tmp_path)
    missing = tiny_config["cohorts"]["breast_cancer"][key]
    (tmp_path / missing).unlink()
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump(tiny_config))
    result = snakemake_run(tmp_path, "--configfile", str(mine), "--cores", "1")
    assert result.returncode != 0
    assert f"config key cohorts.breast_cancer.{key}: file {missing!r} not found" in result.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.workflow
def test_lint_reports_nothing(tmp_path, tiny_config, snakemake_run):
    """`snakemake --lint`: every rule has conda and log; no absolute paths."""
    default_config(tiny_config, tmp_path)
    result = snakemake_run(tmp_path, "--lint")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Lints for" not in result.stdout + result.stderr
    assert "Congratulations" in result.stdout + result.stderr


def test_env_file_parses():
    env = yaml.safe_load((REPO / "workflow" / "envs" / "omicsbayes.yaml").read_text())
    assert "conda-forge" in env["channels"]
    assert any(str(d).startswith("python=") for d in env["dependencies"])


def fake_conda(tmp_path):
    """Environment variables that put tests/fake_conda.py first on PATH as ``conda``, and the
    file where it records each env it is asked to create."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    conda = bin_dir / "conda"
    conda.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" "{REPO / "tests" / "fake_conda.py"}" "$@"\n'
    )
    conda.chmod(0o755)
    record = tmp_path / "conda.jsonl"
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_CONDA_PREFIX": str(tmp_path / "conda_prefix"),
        "FAKE_CONDA_RECORD": str(record),
    }
    return env, record


def check_created_env(record, workdir):
    """One env created, from the copy in ``workdir``/.snakemake/conda/, whose pip section installs
    this checkout (editable) under requirements.lock's constraints."""
    (created,) = [json.loads(line) for line in record.read_text().splitlines()]
    assert Path(created["env_file"]).parent == Path(workdir) / ".snakemake" / "conda"
    assert created["source"] == str(REPO)
    (package,) = [r for r in created["pip"] if r["editable"]]
    assert Path(package["requirement"]).resolve() == REPO
    constraints = {r["requirement"].split("==")[0] for r in created["pip"] if r["constraint"]}
    assert {"numpy", "scipy", "polyagamma", "anndata"} <= constraints


@pytest.mark.workflow
def test_conda_env_installs_the_package_from_its_copy(
    tmp_path, tiny_config, snakemake_run, monkeypatch
):
    """`--sdm conda`: the env file Snakemake copies into .snakemake/conda/ (one env for every
    rule) has pip install this checkout, as pip reads it from the copy's folder
    (tests/fake_conda.py stands in for conda, offline)."""
    default_config(tiny_config, tmp_path)
    env, record = fake_conda(tmp_path)
    monkeypatch.delenv("OMICSBAYES_SOURCE", raising=False)
    result = snakemake_run(
        tmp_path, "--sdm", "conda", "--conda-create-envs-only", "--cores", "1", env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    check_created_env(record, tmp_path)


MODULE_SNAKEFILE = """\
configfile: "mine.yaml"


module omicsbayes:
    snakefile:
        "{snakefile}"
    config:
        config


use rule * from omicsbayes as omicsbayes_*


rule all:
    input:
        rules.omicsbayes_all.input,
    default_target: True
"""


@pytest.fixture
def module_workflow(tmp_path, tiny_config):
    """A second workflow in ``tmp_path`` importing this one as a module, on its own config (one
    baseline of the tiny config), with no config/config.yaml of its own."""
    tiny_config["models"] = {"logistic": tiny_config["models"]["logistic"]}
    tiny_config["experiments"]["malignant"]["models"] = ["logistic"]
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(tiny_config))
    snakefile = tmp_path / "Snakefile"
    snakefile.write_text(MODULE_SNAKEFILE.format(snakefile=REPO / "workflow" / "Snakefile"))
    return snakefile


@pytest.mark.workflow
def test_runs_as_a_module_of_another_workflow(tmp_path, module_workflow, snakemake_run):
    result = snakemake_run(tmp_path, "--cores", "2", snakefile=module_workflow)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "omicsbayes_fit" in result.stderr
    summary = pd.read_csv(tmp_path / "results" / "summary.tsv", sep="\t")
    assert set(summary["experiment"]) == {"malignant"}
    assert (tmp_path / "results" / "malignant" / "figures" / "metrics.png").stat().st_size > 0
    fit_logs = list((tmp_path / "logs" / "fit").rglob("*.log"))
    assert fit_logs and all("resources: CPU " in log.read_text() for log in fit_logs)
    report = tmp_path / "report.html"
    result = snakemake_run(tmp_path, "--report", str(report), snakefile=module_workflow)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Mean and standard deviation over splits" in report.read_text()  # a caption


@pytest.mark.workflow
def test_module_conda_env_installs_the_package(
    tmp_path, module_workflow, snakemake_run, monkeypatch
):
    env, record = fake_conda(tmp_path)
    monkeypatch.delenv("OMICSBAYES_SOURCE", raising=False)
    result = snakemake_run(
        tmp_path,
        "--sdm",
        "conda",
        "--conda-create-envs-only",
        "--cores",
        "1",
        env=env,
        snakefile=module_workflow,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    check_created_env(record, tmp_path)


@pytest.mark.workflow
def test_cluster_group_components_batch_the_fits(tmp_path, tiny_config, snakemake_run):
    """On a cluster (tests/fake_scheduler.py), `--group-components fit=2` submits the two fit
    jobs (one per model, each fitting the three splits) as one, and the metric table is
    byte-identical to a local run's."""
    local, cluster, queue = tmp_path / "local", tmp_path / "cluster", tmp_path / "queue"
    result = snakemake_run(local, "--cores", "2", config=tiny_config)
    assert result.returncode == 0, result.stderr[-3000:]
    fake = REPO / "tests" / "fake_scheduler.py"
    result = snakemake_run(
        cluster,
        *("--executor", "cluster-generic", "--jobs", "4", "--latency-wait", "10"),
        *("--cluster-generic-submit-cmd", f"{sys.executable} {fake} submit {queue}"),
        *("--cluster-generic-status-cmd", f"{sys.executable} {fake} status {queue}"),
        *("--group-components", "fit=2"),
        config=tiny_config,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    ledger = (queue / "ledger.tsv").read_text().splitlines()
    assert len(ledger) == 1 + 1 + 1 + 1 + 1 + 1  # data, preprocess, split, the 2 fits, ...
    table = "results/malignant/metrics.tsv"
    assert (local / table).read_bytes() == (cluster / table).read_bytes()


@pytest.mark.workflow
@pytest.mark.parametrize(
    "edit, message",
    [
        ("", "workflow/rules/rating.smk: no register_kind(...) call after the kind's rules"),
        ('register_kind("ratings",', "register_kind('ratings'): not an experiment kind of"),
    ],
    ids=["not_registered", "unknown_kind"],
)
def test_a_kind_rules_file_must_register_its_outputs(
    edit, message, tmp_path, tiny_config, snakemake_run
):
    """A kind's rules file that does not call register_kind, or names a kind that does not
    exist, stops the plan naming the file or the kind (not a KeyError in an input function)."""
    workflow = tmp_path / "workflow"
    shutil.copytree(REPO / "workflow", workflow)
    rules = workflow / "rules" / "rating.smk"
    rules.write_text(rules.read_text().replace('register_kind("rating",', edit or "dict("))
    default_config(tiny_config, tmp_path)
    result = snakemake_run(tmp_path, "-n", snakefile=workflow / "Snakefile")
    assert result.returncode != 0
    assert message in result.stdout + result.stderr
