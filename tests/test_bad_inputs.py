"""The bad-input corpus (tests/bad_inputs/): each case has one fault and gives one clear error.

A case directory holds files in real formats and ``case.yaml``:

- ``target: reader``: ``cohort`` is a config cohort entry read with ``read_cohort``; the error is a
  ``CohortError`` whose message names the file and contains every ``expect`` substring.
- ``target: call``: ``function`` of :mod:`omicsbayes.io` called with ``kwargs`` (paths relative to
  the case); the same ``CohortError`` checks as a reader case.
- ``target: workflow``: ``config.yaml`` (and its data files) run through the real snakemake; the
  run exits non-zero before any fit output exists, and the log or console names every ``expect``.
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


@pytest.mark.workflow
@pytest.mark.parametrize("name", [c for c in CASES if _case(c)["target"] == "workflow"])
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
