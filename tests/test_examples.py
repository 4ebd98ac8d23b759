"""Every example of config/examples/ runs end to end through the real snakemake on a small
real-format fixture (tests/fixtures/examples/, written by its make_fixtures.py).

Each run is the example file as written, followed by an override file that changes only paths
and sizes (tests/fixtures/examples/overrides/<example>.yaml):
``snakemake --configfile config/examples/<example>.yaml overrides/<example>.yaml``, with every
experiment's summary table and metrics figure as explicit targets. The work directory has no
config/config.yaml, so nothing else is merged in. The examples of ``FROM_URLS`` take their
cohort files from a loopback HTTP server: a third config file gives each file's URL, and the
workflow fetches them (snakemake's http storage plugin) as a user's run from public addresses.
"""

import contextlib
import math
import shutil
from pathlib import Path

import anndata
import numpy as np
import pandas as pd
import pytest
import yaml

from omicsbayes.io.cohort import PATH_KEYS

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "config" / "examples"
FIXTURES = REPO / "tests" / "fixtures" / "examples"

# the summary columns that must be finite, by experiment kind (multiclass tasks have no AUROC)
FINITE = {
    "classification": ["accuracy_mean", "error_rate_mean"],
    "binary": ["auroc_mean", "aupr_mean", "accuracy_mean"],
    "disease_gene": ["precision_mean", "recall_mean"],
    "rating": ["rmse_mean", "recall_mean", "rmse_training_mean_mean"],
}
# planted signal: the best model of each experiment must beat chance by this much
SIGNAL = {
    "geo_tuberculosis": ("auroc_mean", 0.8),
    "tcga_msi": ("auroc_mean", 0.8),
    "hivdb_nrti": ("auroc_mean", 0.8),
    "rnaseq_counts": ("auroc_mean", 0.8),
    "paper003_few_shot": ("accuracy_mean", 0.5),  # 7 tissues: chance is about 0.14
    "disease_gene": ("recall_mean", 0.3),  # R@k over k = 1..20 and 60 genes
    "ratings_social": None,  # RMSE against the training mean, below
}


# the examples whose cohort files the test serves from a loopback HTTP server: the example as
# written, its override, then a file giving each cohort file's URL (fetched by the workflow)
FROM_URLS = {"geo_tuberculosis"}


def example_names():
    return sorted(p.stem for p in EXAMPLES.glob("*.yaml"))


def test_every_example_has_a_fixture_run():
    assert example_names() == sorted(SIGNAL)
    for name in SIGNAL:
        assert (FIXTURES / "overrides" / f"{name}.yaml").is_file()


def merge(base, new):
    """``base`` updated by ``new`` as snakemake merges config files (nested mappings merge)."""
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value
    return base


def _merged(name):
    """The config snakemake sees: the example updated by its override (nested mappings merge)."""

    config = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    return merge(config, yaml.safe_load((FIXTURES / "overrides" / f"{name}.yaml").read_text()))


def test_overrides_change_only_paths_and_sizes():
    """An override names only entries the example defines, and sets only paths and sizes
    (splits, repeats, gene counts, the grid, iterations, factors)."""
    allowed = {
        "cohorts": {"path", "annotation", "clinical", "sample_sheet", "row_graph", "col_graph"},
        "transforms": {"steps"},
        "protocols": {"n_splits", "n_repeats", "n_negative_sets"},
        "models": {"grid", "params"},
    }
    sizes = {"n_factors", "max_iter", "n_iter", "burn_in", "svm_max_iter"}
    for name in SIGNAL:
        example = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
        override = yaml.safe_load((FIXTURES / "overrides" / f"{name}.yaml").read_text())
        assert set(override) <= set(allowed), name
        for section, entries in override.items():
            assert set(entries) <= set(example[section]), (name, section)
            for entry, keys in entries.items():
                extra = set(keys) - allowed[section]
                if name == "disease_gene" and section == "cohorts":
                    extra -= {"format"}  # the OMIM cohort becomes an association list
                assert not extra, (name, entry, extra)
                assert set(keys.get("params", {})) <= sizes, (name, entry)


@contextlib.contextmanager
def _served(config, workdir):
    """A loopback server of the config's cohort files, and ``workdir/urls.yaml`` naming each
    file by its URL (the config's cohorts with their file keys only)."""
    from test_remote_cohorts import LoopbackServer

    folder = Path(workdir) / "served"
    folder.mkdir()
    urls, served = {}, []
    for cohort, keys in config["cohorts"].items():
        for key in PATH_KEYS:
            if isinstance(keys.get(key), str):
                source = REPO / keys[key]
                shutil.copy(source, folder / source.name)
                urls.setdefault(cohort, {})[key] = source.name
                served.append(source.name)
    server = LoopbackServer(folder)
    server.served = served
    for keys in urls.values():
        keys.update({k: f"{server.url}/{v}" for k, v in keys.items()})
    (Path(workdir) / "urls.yaml").write_text(yaml.safe_dump({"cohorts": urls}))
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.workflow
@pytest.mark.parametrize("name", sorted(SIGNAL))
def test_example_runs_end_to_end(name, tmp_path, snakemake_run):
    (tmp_path / "tests" / "fixtures").mkdir(parents=True)
    (tmp_path / "tests" / "fixtures" / "examples").symlink_to(FIXTURES)
    config = _merged(name)
    targets = [
        f"results/{e}/{leaf}"
        for e in config["experiments"]
        for leaf in ("summary.tsv", "figures/metrics.png")
    ]
    configfiles = [EXAMPLES / f"{name}.yaml", FIXTURES / "overrides" / f"{name}.yaml"]
    with contextlib.ExitStack() as stack:
        if name in FROM_URLS:
            server = stack.enter_context(_served(config, tmp_path))
            configfiles.append(tmp_path / "urls.yaml")
        result = snakemake_run(
            tmp_path,
            "--cores",
            "1",
            "--configfile",
            *map(str, configfiles),
            "--",
            *targets,
            timeout=600,
        )
    assert result.returncode == 0, result.stderr[-4000:]
    if name in FROM_URLS:  # every cohort file came from its URL, recorded with its checksum
        urls = pd.read_csv(tmp_path / "results" / "downloads.tsv", sep="\t")["url"]
        paths = [u.removeprefix(server.url + "/") for u in urls]
        assert sorted(paths) == sorted(server.served) and len(server.requests) >= len(paths)
    for e, experiment in config["experiments"].items():
        summary = pd.read_csv(tmp_path / "results" / e / "summary.tsv", sep="\t")
        assert set(summary["model"]) == set(experiment["models"]), e
        kind = experiment.get("kind", "classification")
        if kind == "classification" and experiment["task"]["kind"] != "multiclass":
            kind = "binary"
        assert np.isfinite(summary[FINITE[kind]].to_numpy(float)).all(), (e, summary)
        assert (tmp_path / "results" / e / "figures" / "metrics.png").stat().st_size > 1000
        if name == "geo_tuberculosis":  # probes collapsed to genes through GPL6947.annot.gz
            raw = anndata.read_h5ad(tmp_path / "results" / experiment["cohort"] / "raw.h5ad")
            assert {"STAT1", "GBP5"} <= set(raw.var_names) and raw.var["n_probes"].max() == 2
            assert raw.uns["geo"]["collapse"]["n_probes_multi_gene"] == 4
        if SIGNAL[name] is None:  # ratings: the graph-aware models beat the training mean
            best = summary.groupby("model")["rmse_mean"].mean().min()
            assert best < summary["rmse_training_mean_mean"].mean(), summary
        else:
            column, floor = SIGNAL[name]
            best = summary.groupby("model")[column].mean().max()
            assert best > floor and not math.isnan(best), (e, summary)


@pytest.mark.workflow
def test_geo_probes_without_collapse_are_named_by_gene_symbol(tmp_path, snakemake_run):
    """The GEO example with its platform annotation but no `collapse` keeps probes as features;
    the model figures' tables name the genes by symbol and keep the probe IDs in `feature`."""
    (tmp_path / "tests" / "fixtures").mkdir(parents=True)
    (tmp_path / "tests" / "fixtures" / "examples").symlink_to(FIXTURES)
    config = _merged("geo_tuberculosis")
    del config["cohorts"]["tb"]["collapse"]
    config["transforms"] = {"zscore": {"steps": ["zscore"]}}
    experiment = config["experiments"]["tb_groups"]
    experiment.update(transforms=["zscore"], models=["R-L-BSVM"], figures=["R-L-BSVM"])
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump(config))
    folder = "results/tb_groups/model_figures/R-L-BSVM"
    targets = [f"{folder}/{name}" for name in ("top_genes.tsv", "gene_network_edges.tsv")]
    result = snakemake_run(tmp_path, "--cores", "1", "--configfile", str(mine), "--", *targets)
    assert result.returncode == 0, result.stderr[-4000:]
    raw = anndata.read_h5ad(tmp_path / "results/tb/raw.h5ad")
    symbol = raw.var["gene_symbol"]
    top = pd.read_csv(tmp_path / folder / "top_genes.tsv", sep="\t")
    assert top["feature"].str.startswith("ILMN_").all()  # the probe IDs, in their own column
    for gene, probe in zip(top["gene"], top["feature"]):  # the symbol, the probe where it has none
        expected = symbol[probe] if isinstance(symbol[probe], str) and symbol[probe] else probe
        assert gene == expected or gene == f"{expected} ({probe})"
    assert (top["gene"] != top["feature"]).any()
    edges = pd.read_csv(tmp_path / folder / "gene_network_edges.tsv", sep="\t")
    assert list(edges.columns[:4]) == ["gene_a", "feature_a", "gene_b", "feature_b"]
