"""Paper 000's model figures in the real snakemake: a whole-cohort fit saved as tables, then the
figures and tables drawn from them, all in the report.

The run is the session's shared tiny run (tests/conftest.py, experiment ``digits_ovr``: digits 3, 5
and 8 one-vs-rest, a tiny R-L-BSVM and the logistic baseline, which has no factor structure and is
skipped).
"""

import anndata as ad
import numpy as np
import pandas as pd
import pytest

FIGURES = ("rank_vs_log.png", "coefficients.png", "loadings_heatmap.png", "gene_network.png")
TABLES = ("loadings.tsv", "coef.tsv", "scores.tsv", "top_genes.tsv", "gene_network_edges.tsv")


@pytest.mark.workflow
def test_model_figures_from_saved_tables_and_in_report(tiny_run):
    tmp_path = tiny_run
    folder = tmp_path / "results/digits_ovr/model_figures"
    assert sorted(p.name for p in folder.iterdir()) == ["R-L-BSVM"]
    out = folder / "R-L-BSVM"
    for name in (*FIGURES, "loadings_images.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG", name
        assert (out / name).stat().st_size > 5000, name

    raw = ad.read_h5ad(tmp_path / "results/digits/raw.h5ad")
    loadings = pd.read_csv(out / "loadings.tsv", sep="\t", dtype={"feature": str})
    coef = pd.read_csv(out / "coef.tsv", sep="\t", dtype={"task": str})
    scores = pd.read_csv(out / "scores.tsv", sep="\t", dtype={"sample_id": str})
    factors = ["factor_1", "factor_2", "factor_3"]
    assert list(loadings.columns) == ["feature", *factors]
    assert loadings["feature"].tolist() == raw.var_names.tolist()
    assert coef["task"].tolist() == ["3", "5", "8"] and list(coef.columns[1:]) == factors
    assert scores["sample_id"].tolist() == raw.obs_names.tolist()
    for table in (loadings, coef, scores):
        values = table[factors].to_numpy()
        assert np.isfinite(values).all() and np.abs(values).max() > 0

    # the tables drawn from are the saved ones: recompute from them what the figures show
    A = loadings.set_index("feature")[factors]
    top = pd.read_csv(out / "top_genes.tsv", sep="\t")
    assert len(top) == 3 * 20
    for k, factor in enumerate(factors, start=1):
        first = top[(top["factor"] == k) & (top["rank"] == 1)].iloc[0]
        assert first["gene"] == A[factor].abs().idxmax()
        assert first["loading"] == pytest.approx(A.loc[first["gene"], factor], rel=1e-6)
    weights = A.to_numpy() @ coef[factors].to_numpy().T
    gene = A.index[np.unravel_index(np.abs(weights).argmax(), weights.shape)[0]]
    log = (tmp_path / "logs/model_figures/digits_ovr/R-L-BSVM/model_figures.log").read_text()
    assert f"most discriminative gene {gene} " in log
    edges = pd.read_csv(out / "gene_network_edges.tsv", sep="\t")
    assert 0 < len(edges) <= 100 and (edges["weight"].abs() >= 0.8).all()
    assert set(edges["gene_a"]) | set(edges["gene_b"]) <= set(A.index)
    fit_log = (tmp_path / "logs/model_figures/digits_ovr/R-L-BSVM/fit_summary.log").read_text()
    assert "on all 539 samples x 64 features" in fit_log and "fitted in" in fit_log

    html = (tmp_path / "results/report.html").read_text()
    for name in (*FIGURES, *TABLES, "loadings_images.png"):
        assert name in html, f"{name} is not in the report"
    assert "Figure 1 of paper 000" in html and "digits_ovr" in html


@pytest.mark.workflow
def test_figures_naming_a_model_outside_the_experiment_stops_the_run(
    tmp_path, tiny_config, snakemake_run
):
    config = tiny_config
    config["experiments"]["malignant"]["figures"] = ["logistic", "G-L-BSVM"]
    result = snakemake_run(tmp_path, "--dry-run", "--cores", "1", config=config)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "experiments.malignant.figures" in output and "G-L-BSVM" in output


@pytest.mark.workflow
def test_figures_of_a_kind_without_model_figures_stop_the_run(tmp_path, tiny_config, snakemake_run):
    """Whether a kind's experiments may list ``figures:`` is its class attribute
    ``model_figures``; the message names the kinds that may (from the registry)."""
    config = tiny_config
    config["protocols"]["held"] = {"type": "heldout_entries", "n_repeats": 2}
    config["models"]["ibp"] = {"class": "IBPFactorModel"}
    config["experiments"]["masked"] = {
        "kind": "heldout_entries",
        "cohort": "breast_cancer",
        "transforms": ["zscore"],
        "models": ["ibp"],
        "protocol": "held",
        "figures": ["ibp"],
    }
    result = snakemake_run(tmp_path, "--dry-run", "--cores", "1", config=config)
    assert result.returncode != 0
    assert (
        "experiments.masked.figures: only classification experiments have model figures, this "
        "one is 'heldout_entries'"
    ) in result.stdout + result.stderr


def test_pixel_grid_puts_shuffled_pixels_back_in_their_place():
    from omicsbayes.pl.rank_factor import pixel_grid

    rng = np.random.default_rng(0)
    image = rng.normal(size=(3, 4))
    cells = [(r, c) for r in range(3) for c in range(4)]
    shuffled = rng.permutation(len(cells))
    names = [f"pixel_{cells[i][0]}_{cells[i][1]}" for i in shuffled]
    values = np.array([image[cells[i]] for i in shuffled])
    shape, order = pixel_grid(names)
    assert shape == (3, 4)
    np.testing.assert_array_equal(values[order].reshape(shape), image)
    assert pixel_grid(["pixel_0_0", "pixel_0_1", "gene"]) is None
    assert pixel_grid(["pixel_0_0", "pixel_1_1"]) is None  # not a complete grid


def test_feature_labels_name_genes_by_symbol_and_stay_unique():
    from omicsbayes.pl.rank_factor import feature_labels

    probes = ["ILMN_1", "ILMN_2", "ILMN_3", "ILMN_4", "ILMN_5"]
    symbols = ["STAT1", None, "STAT1", " ", "GBP5"]
    labels = feature_labels(probes, symbols)
    assert list(labels) == ["STAT1 (ILMN_1)", "ILMN_2", "STAT1 (ILMN_3)", "ILMN_4", "GBP5"]
    assert labels.is_unique
    assert list(feature_labels(probes)) == probes  # no symbols: the names as they are


@pytest.fixture
def kinds_registry(monkeypatch):
    """The kinds' registry, restored after the test (a kind defined in a test stays there)."""
    from omicsbayes.protocols import _base

    monkeypatch.setattr(_base, "_REGISTRY", dict(_base._REGISTRY))
    return _base._REGISTRY


def _dose_kind():
    """A kind defined outside the package whose whole-cohort fit learns one task of its own
    (high against low dose), with no ``label`` or ``task`` in its config entries."""
    from omicsbayes import protocols

    class Dose(protocols.ExperimentKind):
        name = "dose"
        requires = frozenset({"classifier"})
        split_counts = {"dose_folds": ("n_splits", 2)}
        metrics = ("auroc",)
        model_figures = True
        asked = []

        def make_splits(self, adata, protocol, random_state, label=None):
            raise NotImplementedError

        def fit_fold(self, adata, splits, params, wildcards, checkpoint=None):
            raise NotImplementedError

        def primary_metric(self, experiment):
            return "auroc", True

        def figure_labels(self, adata, experiment, cohort):
            high = adata.obs[cohort["dose"]] > experiment["threshold"]
            adata.obs["high_dose"] = high.to_numpy(dtype=float)
            return ["high_dose"], ["high dose"]

        def figure_groups(self, obs, experiment, cohort, task):
            self.asked.append(task)
            high = (obs[cohort["dose"]] > experiment["threshold"]).to_numpy()
            return np.where(high, "high", "low").astype(object)

    return Dose


def test_model_figure_scripts_ask_the_experiments_kind(kinds_registry, tmp_path, workflow_script):
    """fit_summary.py and model_figures.py take the fit's tasks and Figure 1's groups from the
    experiment's kind (its ``figure_labels`` and ``figure_groups``), not from a classification
    task."""
    _dose_kind()
    rng = np.random.default_rng(0)
    dose = rng.uniform(0, 10, 40)
    X = rng.lognormal(size=(40, 6))
    X[:, 0] *= np.exp(dose / 5)
    obs = pd.DataFrame({"dose": dose}, index=[f"s{i}" for i in range(40)])
    cohort = ad.AnnData(X, obs=obs, var=pd.DataFrame(index=[f"g{j}" for j in range(6)]))
    cohort.write_h5ad(tmp_path / "raw.h5ad")
    experiment = {"kind": "dose", "cohort": "c", "models": ["rf"], "threshold": 5.0}
    cohort_entry = {"format": "h5ad", "dose": "dose"}
    out = {n: str(tmp_path / f"{n}.tsv") for n in ("loadings", "coef", "scores")}
    log = workflow_script(
        "fit_summary.py",
        "fit_summary",
        tmp_path,
        input={"data": str(tmp_path / "raw.h5ad")},
        output={
            **out,
            "fit": str(tmp_path / "fit.h5ad"),
            "estimator": str(tmp_path / "fit.obfit"),
            "trace": str(tmp_path / "trace.png"),
        },
        wildcards={"experiment": "e", "model": "rf"},
        params={
            "experiment": experiment,
            "cohort": cohort_entry,
            "model": {
                "class": "RankFactorClassifier",
                "variant": "R-L-BSVM",
                "params": {"n_factors": 2, "max_iter": 3},
            },
            "steps": [],
            "seed": 1,
        },
    )
    assert "ERROR" not in log, log
    coef = pd.read_csv(out["coef"], sep="\t")
    assert coef["task"].tolist() == ["high dose"]
    assert "high_dose" in ad.read_h5ad(tmp_path / "fit.h5ad").obs
    figures = {
        n: str(tmp_path / f"{n}.{'tsv' if n in ('top_genes', 'edges') else 'png'}")
        for n in ("rank_vs_log", "coefficients", "heatmap", "top_genes", "network", "edges")
    }
    log = workflow_script(
        "model_figures.py",
        "model_figures",
        tmp_path,
        input={
            "loadings": out["loadings"],
            "coef": out["coef"],
            "cohort": str(tmp_path / "raw.h5ad"),
        },
        output=figures,
        params={
            "experiment": experiment,
            "cohort": cohort_entry,
            "n_top": 3,
            "network": {"n_genes": 6, "threshold": 0.0, "max_edges": 5},
        },
    )
    assert "ERROR" not in log, log
    from omicsbayes import protocols

    assert protocols.get("dose").asked == ["high dose"]
    assert open(figures["rank_vs_log"], "rb").read(4) == b"\x89PNG"


def test_a_kind_with_model_figures_defines_the_figure_hooks(kinds_registry):
    """A kind that sets ``model_figures`` and leaves the hooks to the base is refused when
    defined, naming what it lacks; the classification kind defines both."""
    from omicsbayes import protocols
    from omicsbayes.protocols._base import FIGURE_HOOKS

    with pytest.raises(TypeError, match=r"'bare' .*sets model_figures but does not define"):

        class Bare(protocols.ExperimentKind):
            name = "bare"
            model_figures = True

            def make_splits(self, adata, protocol, random_state, label=None):
                raise NotImplementedError

            def fit_fold(self, adata, splits, params, wildcards, checkpoint=None):
                raise NotImplementedError

            def primary_metric(self, experiment):
                return "auroc", True

            def figure_labels(self, adata, experiment, cohort):
                return "label", None

    assert "bare" not in protocols.KINDS
    for name in protocols.kinds_with("model_figures"):
        kind = type(protocols.get(name))
        assert all(
            getattr(kind, h) is not getattr(protocols.ExperimentKind, h) for h in FIGURE_HOOKS
        )


@pytest.mark.parametrize(
    ("task", "label_key", "tasks"),
    [
        ({"kind": "binary", "positive": ["a"]}, ["task:a"], ["a"]),
        ({"kind": "one_vs_rest"}, ["task:a", "task:b", "task:c"], ["a", "b", "c"]),
        ({"kind": "multiclass"}, "label", None),
    ],
)
def test_classification_figure_labels_and_groups(task, label_key, tasks):
    """Classification's figure hooks: the tasks of :func:`task_targets` as ``.obs`` columns (the
    label column itself for a multiclass task); a task's positive samples against the others,
    named by their label when they share one, else ``rest``."""
    from omicsbayes import protocols

    labels = ["a", "b", "c", None] * 3
    adata = ad.AnnData(
        np.ones((12, 2)), obs=pd.DataFrame({"label": labels}, index=[f"s{i}" for i in range(12)])
    )
    kind = protocols.get("classification")
    experiment, cohort = {"task": task}, {"label": "label"}
    assert kind.figure_labels(adata, experiment, cohort) == (label_key, tasks)
    for key in label_key if tasks else []:
        column = adata.obs[key].to_numpy()
        assert set(column[:3]) == {0.0, 1.0} and np.isnan(column[3])
    groups = kind.figure_groups(adata.obs, experiment, cohort, "a")
    assert groups.tolist() == ["a", "rest", "rest", None] * 3
    two = adata[adata.obs["label"] != "c"].obs  # one negative label: the group takes its name
    groups = kind.figure_groups(two, {"task": {"kind": "binary", "positive": ["a"]}}, cohort, "a")
    assert groups.tolist() == ["a", "b", None] * 3
    with pytest.raises(protocols.ExperimentError, match="label column 'tissue' is missing"):
        kind.figure_labels(adata, experiment, {"label": "tissue"})


def test_fit_summary_names_the_cohort_file_of_a_missing_label(tmp_path, workflow_script, capsys):
    """A cohort without the experiment's label column stops fit_summary.py with one console
    line naming the file and the column."""
    obs = pd.DataFrame({"tissue": ["a", "b"] * 6}, index=[f"s{i}" for i in range(12)])
    ad.AnnData(np.ones((12, 3)), obs=obs).write_h5ad(tmp_path / "raw.h5ad")
    experiment = {"kind": "classification", "task": {"kind": "multiclass"}}
    cohort = {"label": "grade"}
    workflow_script(
        "fit_summary.py",
        "fit_summary",
        tmp_path,
        input={"data": str(tmp_path / "raw.h5ad")},
        output={},
        wildcards={"experiment": "e", "model": "m"},
        params={"experiment": experiment, "cohort": cohort, "steps": [], "seed": 1},
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"ExperimentError: {tmp_path / 'raw.h5ad'}: label column 'grade' is missing; "
        "columns are ['tissue']"
    ]
