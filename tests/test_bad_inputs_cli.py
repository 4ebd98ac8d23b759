"""The command line's bad-input corpus (tests/bad_inputs_cli/): each case is one fault of an
``omicsbayes fit`` or ``omicsbayes predict`` call and gives one line, a non-zero exit, no fit
and no output.

A case directory holds its data files and ``case.yaml``: ``args`` (the command line, paths
relative to the case), ``expect`` (substrings of the message) and ``description``.
"""

import shutil
from pathlib import Path

import pytest
import yaml

from omicsbayes import cli, models

CORPUS = Path(__file__).with_name("bad_inputs_cli")
CASES = sorted(p.name for p in CORPUS.iterdir() if (p / "case.yaml").exists())


def _files(folder):
    return {p.relative_to(folder) for p in folder.rglob("*")}


@pytest.mark.parametrize("name", CASES)
def test_cli_case(name, tmp_path, monkeypatch, capsys):
    case = yaml.safe_load((CORPUS / name / "case.yaml").read_text())
    shutil.copytree(CORPUS / name, tmp_path, dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)
    fits = []
    for model in ("RankFactorClassifier", "BAMClassifier", "ConstrainedMVGP"):
        # a fault found before the fit never reaches it
        monkeypatch.setattr(getattr(models, model), "fit", lambda *a, **k: fits.append(a))
    before = _files(tmp_path)
    with pytest.raises(SystemExit) as exit:
        cli.main([str(a) for a in case["args"]])
    message = str(exit.value.code).strip() or capsys.readouterr().err.strip()
    assert exit.value.code != 0 and message
    assert "\n" not in message, f"one line: {message!r}"
    for expected in case["expect"]:
        assert expected in message, f"{expected!r} not in {message!r}"
    assert not fits
    assert _files(tmp_path) == before  # nothing written (and no payload ran)
