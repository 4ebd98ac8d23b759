"""The bad-input corpus (tests/bad_inputs/): each case has one fault and gives one clear error.

A case directory holds files in real formats and ``case.yaml``:

- ``target: reader``: ``cohort`` is a config cohort entry read with ``read_cohort``; the error is a
  ``CohortError`` whose message names the file and contains every ``expect`` substring.
- ``target: call``: ``function`` of :mod:`omicsbayes.io` called with ``kwargs`` (paths relative to
  the case); the same ``CohortError`` checks as a reader case.
- ``target: workflow``: ``config.yaml`` (and its data files) for the workflow. ``stage: config``
  cases are faults of the config alone: the workflow's own checks (the JSON schema, then
  ``omicsbayes.config.check_config``) run in process and raise one error naming every
  ``expect``. ``stage: run`` cases are faults in the data that only a job can find: the config
  passes those checks, and the real snakemake exits non-zero before any fit output exists, its
  log or console naming every ``expect``. A few config cases (:data:`WHOLE_RUN`) also go
  through the real snakemake, to show the run stops on them before any job.
- ``target: legal``: an input that looks odd but is legal; the workflow completes on it.
"""

import shutil
from pathlib import Path

import pytest
import yaml

import omicsbayes.io
from omicsbayes.io import CohortError, read_cohort

CORPUS = Path(__file__).with_name("bad_inputs")
CASES = sorted(p.name for p in CORPUS.iterdir() if (p / "case.yaml").exists())
WHOLE_RUN = ("misspelled_config_key", "unknown_model_parameter")  # one schema, one check_config


def _case(name):
    return yaml.safe_load((CORPUS / name / "case.yaml").read_text())


def test_corpus_is_large_enough():
    assert len(CASES) >= 25


def _read(case, folder):
    if case["target"] == "reader":
        return read_cohort(case["cohort"], base_dir=folder)
    kwargs = dict(case["kwargs"], path=folder / case["kwargs"]["path"])
    return getattr(omicsbayes.io, case["function"])(**kwargs)


@pytest.mark.parametrize("name", [c for c in CASES if _case(c)["target"] in ("reader", "call")])
def test_reader_case(name, tmp_path):
    case = _case(name)
    shutil.copytree(CORPUS / name, tmp_path, dirs_exist_ok=True)
    before = set(tmp_path.iterdir())
    with pytest.raises(CohortError) as err:
        _read(case, tmp_path)
    message = str(err.value)
    assert "\n" not in message.strip(), "one message, one line"
    for expected in case["expect"]:
        assert expected in message, f"{expected!r} not in {message!r}"
    assert set(tmp_path.iterdir()) == before  # nothing written


def _workflow_cases(stage):
    return [c for c in CASES if _case(c)["target"] == "workflow" and _case(c)["stage"] == stage]


def test_every_workflow_case_has_a_stage():
    for name in CASES:
        case = _case(name)
        if case["target"] == "workflow":
            assert case.get("stage") in ("config", "run"), name


@pytest.mark.parametrize("name", _workflow_cases("config"))
def test_config_case_in_process(name, workflow_checks):
    config = yaml.safe_load((CORPUS / name / "config.yaml").read_text())
    with pytest.raises(Exception) as err:  # noqa: B017 (schema: WorkflowError, else ConfigError)
        workflow_checks(config)
    assert type(err.value).__name__ in ("WorkflowError", "ConfigError")
    for expected in _case(name)["expect"]:
        assert expected in str(err.value), f"{expected!r} not in {err.value}"


@pytest.mark.parametrize("name", _workflow_cases("run"))
def test_run_case_config_passes_the_checks(name, workflow_checks):
    """The fault of a ``stage: run`` case is in its data: its config alone is fine."""
    workflow_checks(yaml.safe_load((CORPUS / name / "config.yaml").read_text()))


@pytest.mark.workflow
@pytest.mark.parametrize("name", [*_workflow_cases("run"), *WHOLE_RUN])
def test_workflow_case(name, tmp_path, snakemake_run):
    case = _case(name)
    shutil.copytree(CORPUS / name, tmp_path, dirs_exist_ok=True)
    (tmp_path / "config").mkdir(exist_ok=True)
    shutil.move(tmp_path / "config.yaml", tmp_path / "config" / "config.yaml")
    result = snakemake_run(tmp_path, "--cores", "2")
    assert result.returncode != 0
    logs = (
        "".join(p.read_text() for p in (tmp_path / "logs").rglob("*.log"))
        if (tmp_path / "logs").exists()
        else ""
    )
    text = result.stdout + result.stderr + logs
    for expected in case["expect"]:
        assert expected in text, f"{expected!r} not in the run's output"
    assert not list(tmp_path.glob("results/*/fits/**/*.tsv")), "no fit output may remain"
    assert not list(tmp_path.glob("results/*/metrics.tsv"))


@pytest.mark.workflow
@pytest.mark.parametrize("name", [c for c in CASES if _case(c)["target"] == "legal"])
def test_legal_odd_input_works(name, tmp_path, snakemake_run):
    shutil.copytree(CORPUS / name, tmp_path, dirs_exist_ok=True)
    (tmp_path / "config").mkdir(exist_ok=True)
    shutil.move(tmp_path / "config.yaml", tmp_path / "config" / "config.yaml")
    result = snakemake_run(tmp_path, "--cores", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    assert list(tmp_path.glob("results/*/metrics.tsv"))
