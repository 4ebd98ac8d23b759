"""Paper 003's Figures 2-3 as workflow outputs: the real snakemake on a tiny few-shot config.

The Snakefile used is the repository's, with workflow/rules/sweeps.smk included and
sweep_targets() added to rule all when the repository's does not do so yet.
"""

import copy
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"

pytestmark = [
    pytest.mark.workflow,
    pytest.mark.skipif(
        "sweeps" not in yaml.safe_load(SCHEMA.read_text())["properties"],
        reason="workflow/schemas/config.schema.yaml has no `sweeps` property yet",
    ),
]


def _snakefile(workdir):
    """The repository's Snakefile with absolute includes, plus the sweeps rule file and targets."""
    text = (REPO / "Snakefile").read_text()
    text = text.replace('include: "workflow/', f'include: "{REPO}/workflow/')
    if "sweeps.smk" not in text:
        head, rule_all = text.split("rule all:")
        head += f'include: "{REPO}/workflow/rules/sweeps.smk"\n\n\n'
        rule_all = rule_all.replace("    input:\n", "    input:\n        sweep_targets(),\n", 1)
        text = head + "rule all:" + rule_all
    path = Path(workdir) / "Snakefile"
    path.write_text(text)
    return path


def _run(workdir, *args, config=None):
    workdir = Path(workdir)
    if config is not None:
        (workdir / "config").mkdir(parents=True, exist_ok=True)
        (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return subprocess.run(
        [SNAKEMAKE, "-s", str(_snakefile(workdir)), "-d", str(workdir), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def _few_shot(n):
    return {"type": "few_shot", "n_per_class": n, "n_repeats": 2}


CONFIG = {
    "seed": 3,
    "cohorts": {"tissue": {"format": "demo", "name": "tissue_gene_expression", "label": "tissue"}},
    "transforms": {"unit_length": {"steps": ["unit_length"]}},
    "protocols": {"few2": _few_shot(2), "few3": _few_shot(3)},
    "models": {
        "PCA2": {"class": "PCASVM", "params": {"n_components": 2}},
        "PCA4": {"class": "PCASVM", "params": {"n_components": 4}},
    },
    "experiments": {
        f"n{n}": {
            "cohort": "tissue",
            "task": {"kind": "multiclass"},
            "transforms": ["unit_length"],
            "models": ["PCA2", "PCA4"],
            "protocol": f"few{n}",
        }
        for n in (2, 3)
    },
    "sweeps": {
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
    },
}


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """Workdir of one full run of the tiny config, then its report."""
    workdir = tmp_path_factory.mktemp("sweeps")
    result = _run(workdir, "--cores", "2", config=CONFIG)
    assert result.returncode == 0, result.stderr[-3000:]
    report = workdir / "results" / "report.html"
    result = _run(workdir, "--cores", "1", "--report", str(report))
    assert result.returncode == 0, result.stderr[-3000:]
    return workdir


def test_sweep_tables_hold_each_point_of_each_line(swept):
    table = pd.read_csv(swept / "results/sweeps/per_class.tsv", sep="\t")
    assert set(table["line"]) == {"PCA2", "PCA4"}
    for model in ("PCA2", "PCA4"):
        rows = table[table["line"] == model]
        assert rows["x"].tolist() == [2, 3]
        assert rows["experiment"].tolist() == ["n2", "n3"]
        assert (rows["model"] == model).all()
        assert (rows["n_splits"] == 2).all()
        # each point is the mean and sd over the repeats in that experiment's per-split metrics
        for _, row in rows.iterrows():
            metrics = pd.read_csv(swept / f"results/{row['experiment']}/metrics.tsv", sep="\t")
            acc = metrics.loc[metrics["model"] == model, "accuracy"]
            assert len(acc) == 2
            assert row["accuracy_mean"] == pytest.approx(acc.mean())
            assert row["accuracy_sd"] == pytest.approx(acc.std(ddof=1))
    k = pd.read_csv(swept / "results/sweeps/components.tsv", sep="\t")
    assert k["x"].tolist() == [2, 4]
    assert k["model"].tolist() == ["PCA2", "PCA4"]
    assert set(k["line"]) == {"PCA+SVM"}
    n3 = table[table["experiment"] == "n3"].set_index("model")["accuracy_mean"]
    assert k["accuracy_mean"].tolist() == pytest.approx([n3["PCA2"], n3["PCA4"]])


def test_sweep_figures_and_report(swept):
    for name in ("per_class", "components"):
        assert (swept / f"results/sweeps/{name}.png").stat().st_size > 1000
    html = (swept / "results/report.html").read_text()
    assert "Sweeps" in html
    for name in ("per_class.png", "per_class.tsv", "components.png", "components.tsv"):
        assert name in html


@pytest.mark.parametrize(
    "edit,expected",
    [
        (lambda s: s["per_class"].update(values=[2]), "sweeps.per_class.values"),
        (
            lambda s: s["components"]["lines"].update(PCA=["PCA2", "PCA9"]),
            "sweeps.components.lines",
        ),
    ],
)
def test_bad_sweep_stops_before_any_job(tmp_path, edit, expected):
    config = copy.deepcopy(CONFIG)
    edit(config["sweeps"])
    result = _run(tmp_path, "--cores", "1", config=config)
    assert result.returncode != 0
    assert expected in result.stderr + result.stdout
    assert not (tmp_path / "results").exists()
