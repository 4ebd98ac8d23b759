"""Paper 003's Figures 2-3 as workflow outputs: the sweeps of the session's shared tiny run
(tests/conftest.py: tissue few-shot experiments ``n2`` and ``n3``, PCA+SVM with k = 2 and 4; sweep
``per_class`` over the experiments, sweep ``components`` over two model entries of one)."""

import copy

import pandas as pd
import pytest

pytestmark = pytest.mark.workflow


@pytest.fixture(scope="module")
def swept(tiny_run):
    return tiny_run


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


SWEEP_CONFIG = {
    "seed": 3,
    "cohorts": {"tissue": {"format": "demo", "name": "tissue_gene_expression", "label": "tissue"}},
    "transforms": {"unit_length": {"steps": ["unit_length"]}},
    "protocols": {"few2": {"type": "few_shot", "n_per_class": 2, "n_repeats": 2}},
    "models": {
        "PCA2": {"class": "PCASVM", "params": {"n_components": 2}},
        "PCA4": {"class": "PCASVM", "params": {"n_components": 4}},
    },
    "experiments": {
        "n2": {
            "cohort": "tissue",
            "task": {"kind": "multiclass"},
            "transforms": ["unit_length"],
            "models": ["PCA2", "PCA4"],
            "protocol": "few2",
        }
    },
    "sweeps": {
        "per_class": {"experiments": ["n2"], "x": "training samples per class", "values": [2]},
        "components": {
            "experiments": ["n2", "n2"],
            "x": "number of components k",
            "values": [2, 4],
            "lines": {"PCA+SVM": ["PCA2", "PCA4"]},
        },
    },
}


@pytest.mark.parametrize(
    "edit,expected",
    [
        (lambda s: s["per_class"].update(values=[2, 3]), "sweeps.per_class.values"),
        (
            lambda s: s["components"]["lines"].update(PCA=["PCA2", "PCA9"]),
            "sweeps.components.lines",
        ),
    ],
)
def test_bad_sweep_stops_before_any_job(tmp_path, edit, expected, snakemake_run):
    config = copy.deepcopy(SWEEP_CONFIG)
    edit(config["sweeps"])
    result = snakemake_run(tmp_path, "--dry-run", "--cores", "1", config=config)
    assert result.returncode != 0
    assert expected in result.stderr + result.stdout
    assert not (tmp_path / "results").exists()


def test_a_sweep_over_a_kind_without_sweeps_stops_before_any_job(tmp_path, snakemake_run):
    """Whether a kind's experiments can be swept is its class attribute ``sweeps``; the message
    names the kinds that can (from the registry)."""
    config = copy.deepcopy(SWEEP_CONFIG)
    config["protocols"]["held"] = {"type": "heldout_entries", "n_repeats": 2}
    config["models"]["ibp"] = {"class": "IBPFactorModel"}
    config["experiments"]["masked"] = {
        "kind": "heldout_entries",
        "cohort": "tissue",
        "transforms": ["unit_length"],
        "models": ["ibp"],
        "protocol": "held",
    }
    config["sweeps"]["per_class"].update(experiments=["n2", "masked"], values=[2, 3])
    result = snakemake_run(tmp_path, "--dry-run", "--cores", "1", config=config)
    assert result.returncode != 0
    assert (
        "sweeps.per_class.experiments: ['masked'] are not classification experiments; a sweep "
        "draws a metric (auroc, aupr, accuracy, error_rate) of classification experiments"
    ) in result.stderr + result.stdout
    assert not (tmp_path / "results").exists()
