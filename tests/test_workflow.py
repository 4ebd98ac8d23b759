"""The real snakemake on the default config (dry run) and on the session's shared tiny run (full
run + report, tests/conftest.py); config faults through the workflow's checks in process."""

import copy
from pathlib import Path

import pandas as pd
import pytest
import yaml

from omicsbayes.config import ConfigError

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.workflow
def test_default_config_dry_run(tmp_path, snakemake_run):
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    result = snakemake_run(tmp_path, "--dry-run", "--cores", "1", config=config)
    assert result.returncode == 0, result.stderr
    for rule in ("data", "preprocess", "split", "fit", "evaluate", "summary"):
        assert rule in result.stdout


@pytest.mark.workflow
def test_tiny_run_produces_tables_figures_and_report(tiny_run):
    tmp_path = tiny_run
    metrics = pd.read_csv(tmp_path / "results/malignant/metrics.tsv", sep="\t")
    assert set(metrics["model"]) == {"logistic", "linear_svm"}
    assert sorted(metrics["split"].unique()) == [0, 1, 2]
    assert (metrics["auroc"] > 0.9).all()  # the Wisconsin set is close to linearly separable
    summary = pd.read_csv(tmp_path / "results/summary.tsv", sep="\t")
    assert set(summary["experiment"]) == {"malignant", "digits_ovr", "n2", "n3"}
    assert set(summary.loc[summary["experiment"] == "malignant", "model"]) == {
        "logistic",
        "linear_svm",
    }
    splits = pd.read_csv(tmp_path / "results/breast_cancer/splits/cv3.tsv", sep="\t")
    tested = splits[splits["role"] == "test"]
    assert tested["sample"].is_unique and len(tested) == 569  # every sample tested exactly once
    assert (tmp_path / "results/malignant/figures/metrics.png").stat().st_size > 1000
    for log in (tmp_path / "logs/fit/malignant").rglob("*.log"):
        assert "fitted and predicted" in log.read_text()

    html = (tmp_path / "results/report.html").read_text()
    for name in ("metrics.tsv", "summary.tsv", "metrics.png"):
        assert name in html


BAD_CONFIGS = {
    "misspelled_top_level_key": (lambda c: c.update(sed=1), "sed"),
    "unknown_class": (lambda c: c["models"]["logistic"].update({"class": "Logistik"}), "Logistik"),
    "undefined_protocol": (
        lambda c: c["experiments"]["malignant"].update(protocol="cv10"),
        "experiments.malignant.protocol",
    ),
    "unknown_step": (
        lambda c: c["transforms"]["zscore"].update(steps=["zcore"]),
        "transforms.zscore.steps",
    ),
    "one_split": (lambda c: c["protocols"]["cv3"].update(n_splits=1), "n_splits"),
    "parameter_value_the_schema_does_not_know": (  # the estimator's own constraints
        lambda c: c["models"].update(
            rf={"class": "RankFactorClassifier", "params": {"prediction_bounds": "nearest"}}
        ),
        r"config key models\.rf: The 'prediction_bounds' parameter of RankFactorClassifier must",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_config_is_refused_in_process(case, tiny_config, workflow_checks):
    """What the workflow checks before any job (schema, then check_config), in process."""
    edit, expected = BAD_CONFIGS[case]
    config = copy.deepcopy(tiny_config)
    edit(config)
    with pytest.raises(ConfigError, match=expected):
        workflow_checks(config)


@pytest.mark.workflow
def test_bad_config_stops_the_real_run_before_any_job(tmp_path, tiny_config, snakemake_run):
    """One case through the real snakemake: the checks above are what it runs first."""
    edit, expected = BAD_CONFIGS["undefined_protocol"]
    config = copy.deepcopy(tiny_config)
    edit(config)
    result = snakemake_run(tmp_path, "--cores", "1", config=config)
    assert result.returncode != 0
    assert expected in result.stderr + result.stdout
    assert not (tmp_path / "results").exists()


@pytest.mark.workflow
def test_disease_gene_run_with_inner_selection(tmp_path, snakemake_run):
    """An association list with a disease graph through the disease_gene experiment kind."""
    import numpy as np

    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(4), 6)  # 24 diseases in 4 related groups, each group's 5 genes
    lines = ["disease\tgene"]
    for d, g in enumerate(groups):
        for gene in rng.choice(5, size=3, replace=False):
            lines.append(f"D{d}\tG{5 * g + gene}")
    (tmp_path / "assoc.tsv").write_text("\n".join(lines) + "\n")
    edges = ["disease\tdisease"] + [
        f"D{i}\tD{j}" for i in range(24) for j in range(i + 1, 24) if groups[i] == groups[j]
    ]
    (tmp_path / "graph.tsv").write_text("\n".join(edges) + "\n")
    config = {
        "seed": 5,
        "cohorts": {
            "toy": {
                "format": "associations",
                "path": "assoc.tsv",
                "row_graph": "graph.tsv",
                "header": True,
            }
        },
        "protocols": {
            "known": {"type": "known_rows", "n_splits": 2, "n_negative_sets": 1},
            "new": {"type": "new_rows", "n_splits": 2, "n_negative_sets": 1},
        },
        "models": {
            "conmvgp": {
                "class": "ConstrainedMVGP",
                "side_information": "diffusion",
                "params": {"max_rank": 3},
                "grid": [{"lam": 0.1, "sigma2": 0.1}, {"lam": 1.0, "sigma2": 0.1}],
            }
        },
        "experiments": {
            "toy_known": {
                "kind": "disease_gene",
                "cohort": "toy",
                "models": ["conmvgp"],
                "protocol": "known",
            },
            "toy_new": {
                "kind": "disease_gene",
                "cohort": "toy",
                "models": ["conmvgp"],
                "protocol": "new",
            },
        },
    }
    result = snakemake_run(tmp_path, "--cores", "2", config=config)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = pd.read_csv(tmp_path / "results/toy_known/metrics.tsv", sep="\t")
    assert sorted(metrics["k"].unique()) == list(range(1, 21))
    assert set(metrics["chosen_lam"]) <= {0.1, 1.0} and set(metrics["chosen_sigma2"]) == {0.1}
    assert metrics.loc[metrics["k"] == 5, "recall"].mean() > 0.3  # the graph carries the groups
    new = pd.read_csv(tmp_path / "results/toy_new/metrics.tsv", sep="\t")
    assert new.loc[new["k"] == 5, "recall"].mean() > 0.2  # new diseases, through the graph only
    candidates = pd.read_csv(tmp_path / "results/toy_known/candidates.tsv", sep="\t")
    assert candidates["col_id"].str.startswith("G").all() and (candidates["rank"] <= 20).all()
    assert np.isfinite(candidates["score"]).all()  # training genes are never candidates


@pytest.mark.workflow
def test_model_figures_with_a_gene_selecting_transform(tmp_path, tiny_config, snakemake_run):
    """`figures:` with `top_genes` in the experiment's first transform: the
    whole-cohort fit keeps the genes selected on all samples and the tables and figures name
    them (recomputed here with numpy from the cohort as read)."""
    import anndata as ad
    import numpy as np

    config = copy.deepcopy(tiny_config)
    config["transforms"]["top8"] = {"steps": [{"name": "top_genes", "n": 8, "by": "variance"}]}
    config["models"]["R-L-BSVM"] = {
        "class": "RankFactorClassifier",
        "variant": "R-L-BSVM",
        "params": {"n_factors": 2, "max_iter": 5},
    }
    config["experiments"]["malignant"].update(
        transforms=["top8"], models=["logistic", "R-L-BSVM"], figures=["R-L-BSVM"]
    )
    folder = "results/malignant/model_figures/R-L-BSVM"
    targets = [f"{folder}/{name}" for name in ("top_genes.tsv", "rank_vs_log.png", "trace.png")]
    result = snakemake_run(tmp_path, "--cores", "2", *targets, config=config)
    assert result.returncode == 0, result.stderr[-3000:]

    raw = ad.read_h5ad(tmp_path / "results/breast_cancer/raw.h5ad")
    variance = np.asarray(raw.X, dtype=float).var(axis=0)
    selected = raw.var_names[np.sort(np.argsort(-variance, kind="stable")[:8])].tolist()
    loadings = pd.read_csv(tmp_path / folder / "loadings.tsv", sep="\t")
    assert loadings["feature"].tolist() == selected  # in the cohort's order
    top = pd.read_csv(tmp_path / folder / "top_genes.tsv", sep="\t")
    assert set(top["gene"]) == set(selected)  # 8 genes < n_top = 20: every one, per factor
    assert (tmp_path / folder / "rank_vs_log.png").stat().st_size > 1000
    fit = ad.read_h5ad(tmp_path / folder / "fit.h5ad")
    assert fit.var_names.tolist() == selected and fit.n_obs == raw.n_obs
    log = (tmp_path / "logs/model_figures/malignant/R-L-BSVM/fit_summary.log").read_text()
    assert "8 of 30 features selected" in log
    assert log.splitlines()[-1].split(" INFO ")[-1].startswith("resources: CPU ")


@pytest.mark.workflow
def test_model_figures_refuse_a_kernel_map(tmp_path, tiny_config, snakemake_run):
    """A `figures:` model whose first transform is a kernel map (columns are training samples,
    not features) stops with one message naming the steps."""
    config = copy.deepcopy(tiny_config)
    config["transforms"]["kernel"] = {"steps": [{"name": "empirical_kernel_map"}]}
    config["models"]["R-L-BSVM"] = {
        "class": "RankFactorClassifier",
        "variant": "R-L-BSVM",
        "params": {"n_factors": 2, "max_iter": 5},
    }
    config["experiments"]["malignant"].update(
        transforms=["kernel"], models=["R-L-BSVM"], figures=["R-L-BSVM"]
    )
    target = "results/malignant/model_figures/R-L-BSVM/loadings.tsv"
    result = snakemake_run(tmp_path, "--cores", "1", target, config=config)
    assert result.returncode != 0
    log = (tmp_path / "logs/model_figures/malignant/R-L-BSVM/fit_summary.log").read_text()
    assert "columns that are not features" in log and "empirical_kernel_map" in log


def test_usage_line_reports_the_process_cpu_and_peak_memory():
    """The resource line every job's log ends with: at least the CPU this process has spent
    (time.process_time) and the resident memory of an array it has just filled."""
    import re
    import time

    import numpy as np

    from omicsbayes.jobs import usage_line

    block = np.ones(200 * 2**20 // 8)  # 200 MB, every page written
    cpu = time.process_time()
    line = usage_line(1.5)
    found = re.fullmatch(r"resources: CPU ([\d.]+) s, peak RSS (\d+) MB, 1.50 s wall", line)
    assert found, line
    assert float(found[1]) >= cpu - 0.01
    assert int(found[2]) >= 200 + block[0] - 1


def test_workflow_profile_does_not_delay_the_end_of_a_run():
    """profiles/default (the workflow profile of every run from the repository root) keeps a job
    rate timespan of at most a second: Snakemake waits out the current timespan before it exits,
    so a rate counted per minute would add up to a minute to every run (docs/workflow.md)."""
    from snakemake.settings.types import MaxJobsPerTimespan

    profile = yaml.safe_load((REPO / "profiles" / "default" / "config.yaml").read_text())
    limit = MaxJobsPerTimespan.parse_choice(profile.get("max-jobs-per-timespan", "100/1s"))
    assert limit.timespan <= 1
