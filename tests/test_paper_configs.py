"""The paper configs (config/papers/) through the real snakemake from their URLs: a loopback HTTP
server holds a real-format fixture at each address the config names (tests/fixtures/papers/,
``https://host/p`` served as ``http://127.0.0.1:port/host/p``), sizes come from an override
(tests/fixtures/papers/overrides/). A first run downloads every file and runs to the summary; a
second run with the server stopped reads the cache; a wrong pinned checksum and a 404 are refused
before any model job, naming the cohort key and the URL, with nothing half-downloaded in the
cache. Papers 003 and 004 fetch nothing: each is an example of config/examples/ with every
experiment's ``paper`` key set; tests/test_examples.py runs paper003's example, and paper004 runs
here on the bundled OMIM cohort (the disease_gene example's run swaps it for a fixture)."""

import shutil
from pathlib import Path

import anndata
import numpy as np
import pandas as pd
import pytest
import yaml
from test_examples import merge
from test_remote_cohorts import LoopbackServer, _sha256

from omicsbayes.config import check_cohort_labels
from omicsbayes.downloads import local_spec, remote_files
from omicsbayes.io.cohort import PATH_KEYS, read_cohort

REPO = Path(__file__).resolve().parents[1]
PAPERS = sorted((REPO / "config" / "papers").glob("paper*.yaml"))
FIXTURES = REPO / "tests" / "fixtures" / "papers"
EXAMPLES = REPO / "config" / "examples"
GEO_PLATFORM = REPO / "tests" / "fixtures" / "examples" / "geo" / "GPL6947.annot.gz"
# a real-format fixture for each kind of file the paper configs fetch (by the URL's file name)
SERVED = {
    "_series_matrix.txt.gz": FIXTURES / "geo" / "GSE39941_series_matrix.txt.gz",
    ".annot.gz": GEO_PLATFORM,
    "HiSeqV2.gz": FIXTURES / "xena" / "HiSeqV2.gz",
    "_clinicalMatrix": FIXTURES / "xena" / "COADREAD_clinicalMatrix",
    "NRTI_DataSet.Full.txt": FIXTURES / "hivdb" / "NRTI_DataSet.Full.txt",
    "congress109members.csv": FIXTURES / "congress" / "congress109members.csv",
    "congress109.csv": FIXTURES / "congress" / "congress109.csv",
}
FETCHING = [p for p in PAPERS if remote_files(yaml.safe_load(p.read_text())["cohorts"])]
# the papers that fetch nothing, and the example each one is (apart from its `paper` keys)
BUNDLED = {"paper003": "paper003_few_shot", "paper004": "disease_gene"}
# what a test override may set (tests/fixtures/papers/overrides/): sizes, splits, iterations,
# grids, and a subset of an experiment's transforms, models and figures
OVERRIDABLE = {
    "transforms": {"steps"},
    "protocols": {"n_splits", "n_repeats", "n_negative_sets"},
    "models": {"grid", "params"},
    "experiments": {"transforms", "models", "figures"},
}
SIZES = {"n_factors", "max_iter", "n_iter", "burn_in", "n_random_features", "n_latent"}


def paper_config(paper):
    """The paper config updated by its override (nested mappings merge)."""
    override = yaml.safe_load((FIXTURES / "overrides" / f"{paper.stem}.yaml").read_text())
    return merge(yaml.safe_load(paper.read_text()), override)


def fixture_of(url):
    return next(f for suffix, f in SERVED.items() if url.endswith(suffix))


def serve_at(config, folder, base):
    """Copy each URL's fixture to ``folder``/host/path and point the config's URLs at ``base``
    (the loopback server's address); returns the moved URLs (cohort key -> URL)."""
    moved = {}
    for remote in remote_files(config["cohorts"]):
        local = Path(folder) / remote.url.split("://", 1)[1]
        local.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(fixture_of(remote.url), local)
    for name, spec in config["cohorts"].items():
        for key in PATH_KEYS:
            url = spec.get(key)
            if isinstance(url, str) and "://" in url:
                spec[key] = f"{base}/{url.split('://', 1)[1]}"
                moved[f"cohorts.{name}.{key}"] = spec[key]
    return moved


def test_every_fetching_paper_has_an_override_and_a_fixture_per_url():
    assert [p.stem for p in FETCHING] == ["paper000", "paper001", "paper002"]
    assert [p.stem for p in PAPERS if p not in FETCHING] == sorted(BUNDLED)
    for paper in FETCHING:
        assert (FIXTURES / "overrides" / f"{paper.stem}.yaml").is_file()
        for remote in remote_files(paper_config(paper)["cohorts"]):
            assert fixture_of(remote.url).is_file(), remote.url


@pytest.mark.parametrize("paper", sorted(BUNDLED))
def test_bundled_paper_config_is_its_example_with_paper_keys(paper):
    """A paper config that fetches nothing is its example of config/examples/ with each
    experiment's ``paper`` key set: the example's run is the paper config's run."""
    config = yaml.safe_load((REPO / "config" / "papers" / f"{paper}.yaml").read_text())
    assert not remote_files(config["cohorts"])
    assert {e.pop("paper") for e in config["experiments"].values()} == {paper[-3:]}
    example = yaml.safe_load((EXAMPLES / f"{BUNDLED[paper]}.yaml").read_text())
    assert config == example


def _steps(steps):
    """A transform's steps as (name, parameters) pairs."""
    return [
        (s, {}) if isinstance(s, str) else (s["name"], {k: v for k, v in s.items() if k != "name"})
        for s in steps
    ]


@pytest.mark.parametrize(
    "override", sorted((FIXTURES / "overrides").glob("*.yaml")), ids=lambda p: p.stem
)
def test_paper_overrides_change_only_sizes(override):
    """A test override names only entries its paper config defines and sets only sizes (folds,
    repeats, negative sets, iterations, factors, a transform's gene count), grids, and a subset
    of an experiment's transforms, models and figures."""
    paper = yaml.safe_load((REPO / "config" / "papers" / override.name).read_text())
    changes = yaml.safe_load(override.read_text())
    assert set(changes) <= set(OVERRIDABLE)
    for section, entries in changes.items():
        assert set(entries) <= set(paper[section]), section
        for entry, keys in entries.items():
            assert set(keys) <= OVERRIDABLE[section], (section, entry)
            if section == "models":
                assert set(keys.get("params", {})) <= SIZES, entry
            if section == "transforms":
                old, new = _steps(paper[section][entry]["steps"]), _steps(keys["steps"])
                assert [n for n, _ in old] == [n for n, _ in new], entry
                for (_, a), (_, b) in zip(old, new):
                    assert {k for k in a | b if a.get(k) != b.get(k)} <= {"n"}, entry
            if section == "experiments":
                for key, values in keys.items():
                    assert set(values) <= set(paper[section][entry].get(key, [])), (entry, key)


@pytest.mark.parametrize("paper", FETCHING, ids=lambda p: p.stem)
def test_paper_cohorts_read_from_their_fixtures(paper, workflow_checks):
    """In process: the paper's merged config passes the workflow's checks, what its fixtures'
    sample sheets tell, and every URL cohort reads from its fixture (the readers take the
    public layouts: Xena's one clinical row per sample, HIVDB's .Full.txt, the Congress csv)."""
    config = paper_config(paper)
    workflow_checks(config)
    local = {r.url: str(fixture_of(r.url)) for r in remote_files(config["cohorts"])}
    check_cohort_labels(config, local)
    for name in {r.cohort for r in remote_files(config["cohorts"])}:
        spec = local_spec(config["cohorts"][name], local)
        spec = {k: v for k, v in spec.items() if k not in ("label_map", "keep_labels")}
        adata = read_cohort(spec)
        assert adata.n_obs >= 10 and adata.n_vars >= 10, name


def _no_model_job(workdir):
    return not (Path(workdir) / "logs" / "fit").exists()


@pytest.mark.workflow
@pytest.mark.parametrize("paper", FETCHING, ids=lambda p: p.stem)
def test_paper_config_runs_from_its_urls_then_offline(paper, tmp_path, snakemake_run):
    """The experiments on fetched cohorts (the bundled ones run in tests/test_examples.py)."""
    config = paper_config(paper)
    fetched = {r.cohort for r in remote_files(config["cohorts"])}
    config["experiments"] = {
        n: e for n, e in config["experiments"].items() if e["cohort"] in fetched
    }
    served = tmp_path / "served"
    server = LoopbackServer(served)
    try:
        moved = serve_at(config, served, server.url)
        urls = sorted(set(moved.values()))
        missing = {**config, "cohorts": yaml.safe_load(yaml.safe_dump(config["cohorts"]))}
        first_key, first_url = next(iter(moved.items()))
        cohort, key = first_key.split(".")[1:]
        missing["cohorts"][cohort][key] = first_url + ".missing"
        result = snakemake_run(tmp_path / "http_404", "--cores", "1", config=missing)
        assert result.returncode != 0
        assert f"config key {first_key}: {first_url}.missing not found" in result.stderr, (
            result.stderr[-3000:]
        )
        assert not (tmp_path / "http_404" / "results").exists()
        assert not list((tmp_path / "http_404" / ".snakemake" / "storage").rglob("*.missing"))

        work = tmp_path / "run"
        result = snakemake_run(work, "--cores", "2", config=config)
        assert result.returncode == 0, result.stderr[-3000:]
    finally:
        server.stop()
    record = pd.read_csv(work / "results" / "downloads.tsv", sep="\t")
    assert sorted(set(record["url"])) == urls
    for url, digest in zip(record["url"], record["sha256"]):
        assert digest == _sha256(fixture_of(url)), url
    summary = pd.read_csv(work / "results" / "summary.tsv", sep="\t")
    assert set(summary["experiment"]) == set(config["experiments"])

    shutil.rmtree(work / "results")  # offline: the cached copies feed the data jobs
    shutil.rmtree(work / "logs")
    result = snakemake_run(work, "--cores", "2", "--until", "data")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Retrieving from storage" not in result.stderr
    assert sorted(set(pd.read_csv(work / "results" / "downloads.tsv", sep="\t")["url"])) == urls

    cohort, key = first_key.split(".")[1:]
    wrong = "0" * 64
    config["cohorts"][cohort]["sha256"] = {key: wrong}
    result = snakemake_run(work, "--cores", "2", config=config)
    assert result.returncode != 0
    assert f"{first_key}: {first_url}: SHA-256 " in result.stderr, result.stderr[-3000:]
    assert wrong in result.stderr and _sha256(fixture_of(first_url)) in result.stderr
    assert _no_model_job(work)
    cached = work / ".snakemake" / "storage" / "http" / first_url.split("://", 1)[1]
    assert not cached.exists()  # the refused copy left the cache


@pytest.mark.workflow
def test_paper004_runs_end_to_end_on_the_bundled_omim_cohort(tmp_path, snakemake_run):
    """config/papers/paper004.yaml as written plus its size override, to every default target:
    Tables 1-2 (P@k and R@k for k = 1..20 per model), Figure 3 (the curves), the ranked
    candidates, and the paper's rows of results/summary.tsv and results/winners.tsv; the paper's
    model ranks held-out genes far above chance."""
    paper = REPO / "config" / "papers" / "paper004.yaml"
    config = paper_config(paper)
    override = FIXTURES / "overrides" / "paper004.yaml"
    result = snakemake_run(
        tmp_path, "--cores", "2", "--configfile", str(paper), str(override), timeout=600
    )
    assert result.returncode == 0, result.stderr[-4000:]
    n_genes = anndata.read_h5ad(tmp_path / "results" / "omim" / "raw.h5ad", backed="r").n_vars
    for name, experiment in config["experiments"].items():
        folder = tmp_path / "results" / name
        summary = pd.read_csv(folder / "summary.tsv", sep="\t")
        assert set(summary["model"]) == set(experiment["models"]), name
        curves = summary.pivot(index="k", columns="model", values="recall_mean")
        assert list(curves.index) == list(range(1, 21)), name
        values = summary[["precision_mean", "recall_mean"]].to_numpy(float)
        assert np.isfinite(values).all() and (values >= 0).all() and (values <= 1).all(), name
        assert (np.diff(curves.to_numpy(), axis=0) >= 0).all(), name  # R@k grows with k
        assert curves.loc[20, "ConMVGP-D"] > 10 * 20 / n_genes, (name, curves.loc[20])
        assert (folder / "figures" / "metrics.png").stat().st_size > 1000
        candidates = pd.read_csv(folder / "candidates.tsv", sep="\t")
        assert set(candidates["model"]) == set(experiment["models"]), name
        assert np.isfinite(candidates["score"].to_numpy(float)).all(), name
    overall = pd.read_csv(tmp_path / "results" / "summary.tsv", sep="\t")
    assert set(overall["experiment"]) == set(config["experiments"])
    winners = pd.read_csv(tmp_path / "results" / "winners.tsv", sep="\t", dtype={"paper": str})
    assert set(winners["paper"]) == {"004"}
    assert set(winners["experiment"]) == set(config["experiments"])
