"""benchmarks/fidelity: the table it writes (columns, not numbers) and its summary arithmetic."""

import importlib
import shlex
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def fidelity(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    return importlib.import_module("benchmarks.fidelity")


def _per_split(values, claim="b_bam", protocol="paper", cohort="c1", metric="auroc"):
    return pd.DataFrame(
        [
            (claim, protocol, cohort, model, metric, split, v)
            for model, vs in values.items()
            for split, v in enumerate(vs)
        ],
        columns=["claim", "protocol", "cohort", "model", "metric", "split", "value"],
    )


def test_summary_is_mean_se_and_paired_difference(fidelity):
    values = {"BAM_L": [0.8, 0.7, 0.9], "BPROBIT": [0.6, 0.7, 0.5]}
    table = fidelity.summarize(_per_split(values))
    assert list(table.columns) == fidelity.COLUMNS
    plain = table[table["rival"].isna()].set_index("model")
    for model, vs in values.items():
        assert plain.loc[model, "mean"] == pytest.approx(np.mean(vs))
        assert plain.loc[model, "se"] == pytest.approx(np.std(vs, ddof=1) / np.sqrt(3))
        assert plain.loc[model, "n"] == 3 and plain.loc[model, "protocol"] == "paper"
    paired = table[table["rival"].notna()]
    assert len(paired) == 1  # BAM_P was not run: no BAM_P - BPROBIT row
    row = paired.iloc[0]
    assert (row["claim"], row["model"], row["rival"]) == ("b_bam", "BAM_L", "BPROBIT")
    assert row["mean"] == pytest.approx(0.8)  # the claimed winner's own mean
    diff = np.subtract(values["BAM_L"], values["BPROBIT"])  # paired by split: [0.2, 0, 0.4]
    assert row["difference"] == pytest.approx(diff.mean())
    assert row["difference_se"] == pytest.approx(diff.std(ddof=1) / np.sqrt(3))
    assert row["verdict"] == "tied"  # 0.2 against 2 x 0.115


def test_contrast_is_over_the_splits_both_models_were_fitted_on(fidelity):
    """A rival run on some folds only (``--folds``) pairs with the winner on those folds: the
    contrast's mean and n are the paired splits', not the winner's whole run."""
    values = {"BAM_L": [0.8, 0.7, 0.9], "BPROBIT": [0.6, 0.7]}
    row = fidelity.summarize(_per_split(values)).dropna(subset=["rival"]).iloc[0]
    assert row["n"] == 2 and row["mean"] == pytest.approx(0.75)
    assert row["difference"] == pytest.approx(0.1)


def test_a_contrast_two_runs_measure_alike_is_listed_once(fidelity):
    """Runs a_bsvm_attr and a_bsvm_overlap both refit the OR-L pair on the same splits: the
    a_bsvm contrast of their identical per-split values is one row, each run's models stay."""
    pair = {"OR-L-BSVM/intensity": [0.8, 0.7, 0.9], "OR-L-Probit/intensity": [0.6, 0.7, 0.5]}
    runs = [_per_split(pair, run, "default") for run in ("a_bsvm_attr", "a_bsvm_overlap")]
    table = fidelity.summarize(pd.concat(runs))
    assert len(table[table["rival"].notna()]) == 1
    assert set(table.loc[table["rival"].isna(), "claim"]) == {"a_bsvm_attr", "a_bsvm_overlap"}
    runs[1].loc[0, "value"] = 0.85  # different values: two rows
    assert len(fidelity.summarize(pd.concat(runs)).dropna(subset=["rival"])) == 2


def test_verdict_is_two_paired_standard_errors(fidelity):
    from omicsbayes.evaluate.winners import AHEAD_SE

    assert AHEAD_SE == 2
    assert fidelity.verdict(0.21, 0.1) == "ahead"
    assert fidelity.verdict(0.19, 0.1) == "tied"
    assert fidelity.verdict(-0.19, 0.1) == "tied"
    assert fidelity.verdict(-0.21, 0.1) == "behind"
    assert fidelity.verdict(0.5, np.nan) == "tied"  # one split: no standard error, no verdict


def test_summary_verdicts_protocols_and_claims_of_one_run(fidelity):
    """Paper 000's run holds two claims; each protocol is paired apart; a rival ahead of the
    claimed winner is 'behind'."""
    values = {
        "R-L-BSVM/intensity": [0.70, 0.72, 0.71, 0.69],
        "G-L-BSVM/log": [0.80, 0.81, 0.79, 0.80],
        "G-L-Probit/log": [0.70, 0.70, 0.71, 0.69],
    }
    per_split = pd.concat(
        [
            _per_split(values, "a_rank", "paper"),
            _per_split({k: v[::-1] for k, v in values.items()}, "a_rank", "default"),
        ]
    )
    table = fidelity.summarize(per_split)
    paired = table[table["rival"].notna()].set_index(["protocol", "claim", "model"])
    assert set(paired.index.get_level_values("protocol")) == {"paper", "default"}
    for protocol in ("paper", "default"):
        rank = paired.loc[(protocol, "a_rank", "R-L-BSVM/intensity")]
        assert rank["rival"] == "G-L-BSVM/log" and rank["verdict"] == "behind"
        assert rank["difference"] == pytest.approx(-0.095)
        bsvm = paired.loc[(protocol, "a_bsvm", "G-L-BSVM/log")]
        assert bsvm["rival"] == "G-L-Probit/log" and bsvm["verdict"] == "ahead"
    plain = table[table["rival"].isna()]
    assert len(plain) == 6 and set(plain["claim"]) == {"a_rank"}


def test_contrasts_name_models_the_runs_fit(fidelity):
    for run, contrasts in fidelity.CONTRASTS.items():
        specs = fidelity.MODELS[run]
        nested = all("class" not in spec for spec in specs.values())  # per protocol
        names = set().union(*specs.values()) if nested else set(specs)
        for other, into in fidelity.FITS_INTO.items():  # runs fitted apart on this run's splits
            names |= set(fidelity.MODELS[other]) if into == run else set()
        names |= {"popularity"} if run in fidelity.DISEASE_GENE_RUNS else set()
        references = (fidelity.mvgp_rating.POPULARITY, fidelity.mvgp_rating.TRAINING_MEAN)
        names |= set(references) if run in fidelity.mvgp_rating.RUNS else set()
        if run == "b_bam_attr":  # scorers the run fits without an estimator class
            names |= {"listwise MAP, no link", "pairwise MAP, no link"}
        for _claim, winner, rival in contrasts:
            assert {winner, rival} <= names, (run, winner, rival)


def test_identity_rows_are_contrasted_with_every_rival_on_both_metrics(fidelity):
    """Paper 004's claim that Con. MV-GP (I) is the best single method: its contrast with every
    other model of claim e_mvgp but Trace GP (I), which is contrasted with it, at R@20 and P@20;
    and the constrained diffusion models against the rank-20 factor models."""
    models = [*fidelity.MODELS["e_mvgp"]["default"], "popularity"]
    values = {m: [0.1 + 0.01 * i, 0.2 + 0.02 * i, 0.15] for i, m in enumerate(models)}
    per_split = pd.concat(
        _per_split(values, "e_mvgp", "default", "Orphanet", metric)
        for metric in ("recall@20", "precision@20")
    )
    contrasts = fidelity.summarize(per_split).dropna(subset=["rival"])
    for metric, part in contrasts.groupby("metric"):
        rivals = part.groupby("model")["rival"].apply(set)
        assert rivals["ConMVGP-I"] == {"ConMVGP-D", "TraceGP-D", "MVGP-D", "ProDiGe"} | {
            "KPMF",
            "PMF",
            "KPMF-20",
            "PMF-20",
        }, metric
        assert rivals["TraceGP-I"] == {"ConMVGP-I"}
        assert {"KPMF-20", "PMF-20"} <= rivals["ConMVGP-D"] & rivals["TraceGP-D"]


def test_write_and_markdown_table(fidelity, tmp_path):
    values = {"BM2PCA": [0.8, 0.9, 0.85], "PCA+SVM": [0.5, 0.55, 0.52], "FULL": [0.8, 0.9, 0.8]}
    per_split = _per_split(values, "d_bm2pca", "default", "digits", "accuracy")
    out, markdown = tmp_path / "fidelity.tsv", tmp_path / "docs" / "fidelity_table.md"
    table = fidelity.write(per_split, out, markdown, ["--quick", "--only", "d_bm2pca"])
    read = pd.read_csv(out, sep="\t")
    assert list(read.columns) == fidelity.COLUMNS and len(read) == len(table) == 5
    assert (tmp_path / "fidelity_splits.tsv").exists() and out.with_suffix(".png").exists()
    text = markdown.read_text()
    assert "Made by `python -m benchmarks.fidelity --quick --only d_bm2pca`" in text
    assert "not results" in text
    assert (
        "Claim runs not in this table: a_rank, a_rank_paper, a_pfa, a_pfa_paper, a_pfa_long,"
        " a_vb, a_bsvm_attr, a_bsvm_overlap, a_bsvm_grade_attr, a_bsvm_link_attr, a_margin_attr,"
        " a_nonlinear_attr, b_bam,"
        " b_bam_attr, c_rflvm,"
        " c_rflvm_paper, c_rflvm_paper_gplvm, c_rflvm_attribution, c_rflvm_sparsity, e_mvgp,"
        " e_mvgp_new, e_mvgp_graph, e_mvgp_trace_attr, e_mvgp_new_trace_attr, e_mvgp_rating,"
        " e_mvgp_rating_paper, e_mvgp_rating_new." in text
    )
    assert (
        "| d_bm2pca | default | digits | BM2PCA | PCA+SVM | accuracy | 0.327 ± 0.015 | ahead | 3 |"
        in text
    )
    assert (
        "| d_bm2pca | default | digits | BM2PCA | FULL | accuracy | 0.017 ± 0.017 | tied | 3 |"
        in text
    )
    assert "| d_bm2pca | default | digits | FULL | accuracy | 0.833 ± 0.033 | 3 |" in text
    assert "not results" not in fidelity.markdown_table(table, ["--only", "d_bm2pca"])


def test_from_splits_refuses_a_table_without_the_split_columns(fidelity, tmp_path):
    old = tmp_path / "old_splits.tsv"
    _per_split({"A": [1.0]}).drop(columns="protocol").to_csv(old, sep="\t", index=False)
    out = str(tmp_path / "f.tsv")
    with pytest.raises(SystemExit, match=r"old_splits.tsv: .* no column \['protocol'\]"):
        fidelity.main(["--from-splits", str(old), "--out", out, "--markdown", ""])


@pytest.mark.slow
def test_quick_run_writes_table_and_figure(fidelity, tmp_path):
    out, markdown = tmp_path / "fidelity.tsv", tmp_path / "fidelity_table.md"
    argv = ["--quick", "--only", "b_bam", "d_bm2pca", "--out", str(out)]
    assert fidelity.main([*argv, "--markdown", str(markdown)]) == 0
    table = pd.read_csv(out, sep="\t")
    assert list(table.columns) == fidelity.COLUMNS
    assert set(table["claim"]) == {"b_bam", "b_listwise", "d_bm2pca"}
    assert set(table["protocol"]) == {"paper", "default"}
    plain = table[table["rival"].isna()]
    expected = {
        "b_bam": set(fidelity.MODELS["b_bam"]["paper"]),
        "d_bm2pca": set(fidelity.MODELS["d_bm2pca"]) - {"BM2PCA k=10"},
    }
    for (claim, _protocol, _cohort), group in plain.groupby(["claim", "protocol", "cohort"]):
        assert set(group["model"]) == expected[claim]
        assert (group["n"] == 2).all() and group["mean"].notna().all()
    assert plain["cohort"].str.endswith("linear kernel map").sum() > 0  # paper 001's two kernels
    assert table["verdict"].dropna().isin(["ahead", "behind", "tied"]).all()
    assert table["rival"].notna().any()  # paired differences present
    assert out.with_suffix(".png").stat().st_size > 0
    assert (tmp_path / "fidelity_splits.tsv").exists()
    assert "--quick" in markdown.read_text()


def test_cohorts_option_keeps_the_named_cohorts_only(fidelity):
    cohorts = {"GSE7390 grade": 1, "GSE7390 ER": 2, "pbmc68k CD8+": 3}
    assert fidelity._chosen({"cohorts": None}, cohorts) == cohorts
    assert fidelity._chosen({"cohorts": ["pbmc", "ER"]}, cohorts) == {
        "GSE7390 ER": 2,
        "pbmc68k CD8+": 3,
    }


def test_seed_spread_shares_splits_and_averages_the_seeds(fidelity):
    tables = fidelity.seed_spread(5, n_splits=3, n_seeds=2, config=REPO / "config/config.yaml")
    by_seed = tables["mean AUROC per fit seed"]
    assert list(by_seed.index) == [0, 1]
    # the Gaussian-likelihood variants are deterministic: the same splits give the same AUROC
    for deterministic in ("G-L-BSVM", "G-L-Probit"):
        assert by_seed[deterministic].iloc[0] == pytest.approx(by_seed[deterministic].iloc[1])
    margins = tables["R-L-BSVM's paired margin per fit seed and averaged over seeds"]
    for rival, part in margins.groupby("rival"):
        per_seed = part[part["fit_seed"] != "mean of seeds"]["R-L-BSVM minus rival"]
        averaged = part[part["fit_seed"] == "mean of seeds"]["R-L-BSVM minus rival"].item()
        assert averaged == pytest.approx(per_seed.mean())  # every split has every seed
        expected = by_seed["R-L-BSVM"] - by_seed[rival]
        np.testing.assert_allclose(per_seed.to_numpy(), expected.to_numpy())


def test_bam_pairwise_default_converges_on_a_real_kernel_map():
    """BAM_P at its defaults reaches tol on a GSE7390 training split's Gaussian kernel map (with
    max_iter=200 it stops unconverged; python -m benchmarks.fidelity --only b_bam)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from omicsbayes.io import load_demo
    from omicsbayes.models import BAMClassifier
    from omicsbayes.preprocess.transforms import build_pipeline

    g = load_demo("gse7390")
    y = (g.obs["er"].astype(str) == "negative").to_numpy().astype(int)
    train = np.random.default_rng(0).permutation(len(y))[:148]
    kernel_map = build_pipeline([{"name": "empirical_kernel_map", "kernel": "gaussian"}])
    A = kernel_map.fit_transform(np.asarray(g.X)[train])
    for seed in range(3):  # the sweeps needed depend on the start: several seeded starts
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            model = BAMClassifier(ranking="pairwise", random_state=seed).fit(A, y[train])
        assert model.converged_ and 200 < model.n_iter_ < model.max_iter


def test_bprobit_default_converges_on_a_real_kernel_map(fidelity):
    """BPROBIT at its defaults reaches tol on claim (a)'s pbmc68k_reduced task (CD8+ cytotoxic
    against the other T/NK cells, Gaussian kernel map of the log1p counts), which needs more than
    200 sweeps from every start tried (python -m benchmarks.fidelity --review-defaults).
    """
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from omicsbayes.models import BayesianProbitClassifier
    from omicsbayes.preprocess.transforms import build_pipeline

    X, labels = fidelity._pbmc_t_nk()  # scanpy's bundled pbmc68k_reduced: no network
    y = (labels == "CD8+ Cytotoxic T").to_numpy().astype(int)
    train = np.random.default_rng(0).permutation(len(y))[:167]
    kernel_map = build_pipeline([{"name": "empirical_kernel_map", "kernel": "gaussian"}])
    A = kernel_map.fit_transform(X[train])
    for seed in range(3):
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            model = BayesianProbitClassifier(random_state=seed).fit(A, y[train])
        assert model.converged_ and 200 < model.n_iter_ < model.max_iter


def test_vb_runs_measure_both_inferences_on_shared_splits(fidelity):
    """Claim a_vb on a tiny synthetic cohort: every model, split and metric once; the paired
    rows set each deterministic VB against the Monte Carlo q(w) of the same variant."""
    rng = np.random.default_rng(0)
    labels = np.repeat(["pos", "neg"], 12)
    logs = rng.normal(size=(24, 6)) + 1.5 * (labels == "pos")[:, None] * np.r_[1, 1, 0, 0, 0, 0]
    tasks = {"toy": (logs, np.exp2, labels, ["pos"])}
    settings = {"n_splits": 2, "n_fit_seeds": 2, "cohorts": None}
    per_split = fidelity.vb_runs(tasks, settings, seed=3)
    assert list(per_split.columns) == fidelity.SPLIT_COLUMNS
    assert set(per_split["model"]) == set(fidelity.MODELS["a_vb"])
    assert set(per_split["metric"]) == {"auroc", "w_scale", "auroc_seed_sd"}
    assert len(per_split) == 4 * 2 * 3 and per_split["value"].notna().all()
    auroc = per_split[per_split["metric"] == "auroc"]["value"]
    assert auroc.between(0, 1).all()
    assert (per_split[per_split["metric"] != "auroc"]["value"] >= 0).all()
    table = fidelity.summarize(per_split)
    paired = table[table["rival"].notna()]
    assert len(paired) == 2 * 3  # two variants, three metrics
    assert paired["model"].str.endswith(" vb_deterministic").all()
    assert (paired["rival"] == paired["model"].str.replace(" vb_deterministic", " vb")).all()
    # same splits and seeds: the run is reproducible
    again = fidelity.vb_runs(tasks, settings, seed=3)
    pd.testing.assert_frame_equal(per_split, again)


def test_bam_claim_fits_the_linear_and_the_gaussian_kernel_map(fidelity, monkeypatch):
    """Paper 001 reports both kernels: claim b_bam fits each cohort on both maps, under both
    protocols, and the cohort's name says which map."""
    seen = []

    def record(claim, cohort, X, labels, task, split_protocol, models, steps, seed, **kw):
        seen.append((cohort, kw["protocol"], steps[0]["kernel"]))
        assert kw["binary_metrics"] == ("auroc", "aupr")  # the paper reports both
        return pd.DataFrame(columns=fidelity.SPLIT_COLUMNS)

    monkeypatch.setattr(fidelity, "_classification", record)
    fidelity.claim_b({"n_splits": 2, "cohorts": ["GSE7390"]}, seed=1)
    er = "GSE7390 ER (negative, 64/198)"
    assert sorted(seen) == sorted(
        (cohort, protocol, kernel)
        for cohort, kernel in ((er, "gaussian"), (f"{er}, linear kernel map", "linear"))
        for protocol in ("paper", "default")
    )


def test_classification_rows_carry_each_binary_metric(fidelity):
    rng = np.random.default_rng(0)
    labels = pd.Series(["a"] * 12 + ["b"] * 28)
    X = rng.normal(size=(40, 5)) + 0.5 * (labels == "a").to_numpy()[:, None]
    rows = fidelity._classification(
        "t", "c", X, labels, {"kind": "binary", "positive": ["a"]}, "repeated_subsampling",
        {"svm": {"class": "LinearSVMBaseline"}}, [], 0, binary_metrics=("auroc", "aupr"),
        n_splits=2,
    )  # fmt: skip
    assert list(rows.columns) == fidelity.SPLIT_COLUMNS
    by_metric = rows.pivot_table(index="split", columns="metric", values="value")
    assert list(by_metric.columns) == ["aupr", "auroc"] and len(by_metric) == 2
    assert ((by_metric >= 0) & (by_metric <= 1)).all().all()
    assert not np.allclose(by_metric["aupr"], by_metric["auroc"])  # each metric its own value


def _tiny_association_cohort(seed, n_rows, n_cols):
    import anndata
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    X = sp.csr_matrix((rng.random((n_rows, n_cols)) < 0.3).astype(float))
    graph = sp.csr_matrix((rng.random((n_rows, n_rows)) < 0.3).astype(float))
    adata = anndata.AnnData(X)
    adata.obsp["graph"] = graph + graph.T
    return adata


@pytest.fixture
def tiny_disease_gene(fidelity, monkeypatch):
    """claim_e on two tiny association matrices in place of OMIM and Orphanet; records each
    ranking fold's (cohort shape, class, grid, negative sets, seed) and each fold split's seed."""
    import omicsbayes.io.associations as associations
    from omicsbayes.protocols import disease_gene

    omim, orphanet = _tiny_association_cohort(0, 12, 15), _tiny_association_cohort(1, 10, 14)
    monkeypatch.setattr(associations, "load_omim", lambda: omim)
    monkeypatch.setattr(associations, "load_orphanet", lambda: orphanet)
    calls, split_seeds = [], []
    fold, kfold = disease_gene.ranking_fold_curves, fidelity.entry_kfold_splits

    def counted(*args, **kw):
        spec = args[3]
        calls.append(
            (
                args[0].shape,
                spec["class"],
                spec.get("grid"),
                kw["n_negative_sets"],
                kw["random_state"],
            )
        )
        return fold(*args, **kw)

    def seeded(*args, **kw):
        split_seeds.append(kw["random_state"])
        return kfold(*args, **kw)

    monkeypatch.setattr(fidelity, "ranking_fold_curves", counted)
    monkeypatch.setattr(fidelity, "entry_kfold_splits", seeded)
    return calls, split_seeds


def test_mvgp_claim_runs_kpmf_and_both_protocols(fidelity, tiny_disease_gene):
    """Claim e_mvgp on tiny association matrices: Con. MV-GP and Trace GP with the diffusion
    and the identity disease covariance, MV-GP, KPMF and PMF at rank 5 and 20, ProDiGe and
    popularity under the default and the paper protocol (the paper's with more negative sets:
    one pass over the sets gives both), on both cohorts."""
    calls, _ = tiny_disease_gene
    settings = {"n_folds": 1, "n_negative_sets": 1, "paper_negative_sets": 2}
    per_split = fidelity.claim_e(settings, seed=2)
    models = {"ConMVGP-D", "TraceGP-D", "MVGP-D", "KPMF", "PMF", "ProDiGe", "popularity"}
    models |= {"ConMVGP-I", "TraceGP-I", "KPMF-20", "PMF-20"}
    assert list(dict.fromkeys(per_split["cohort"])) == [
        "OMIM known diseases (12 x 15)",
        "Orphanet known diseases (10 x 14)",
    ]
    groups = per_split.groupby(["cohort", "protocol"])
    assert groups.ngroups == 4
    for _, part in groups:
        assert set(part["model"]) == models and part["value"].between(0, 1).all()
        assert part.groupby("model")["metric"].apply(set).eq({"recall@20", "precision@20"}).all()
    expected = ["ConstrainedMVGP", "TraceGP", "MVGP", "KPMF", "PMF", "ProDiGe"]
    expected += ["ConstrainedMVGP", "TraceGP", "KPMF", "PMF"]
    for shape in ((12, 15), (10, 14)):
        fitted = [(c, g, n) for s, c, g, n, _ in calls if s == shape]
        assert sorted(fitted) == sorted((c, None, (1, 2)) for c in expected)


def test_mvgp_claim_gives_each_model_its_disease_covariance_and_rank(
    fidelity, tiny_disease_gene, monkeypatch
):
    """The "-I" models and PMF see the identity disease covariance (no row kernel), the others
    the disease graph's diffusion kernel; KPMF-20 and PMF-20 are rank 20, KPMF and PMF rank 5."""
    from omicsbayes.protocols.entries import estimator_of

    seen, counted = [], fidelity.ranking_fold_curves

    def recorded(*args, **kw):
        estimator = estimator_of(args[3])
        rank = getattr(estimator, "rank", None)
        seen.append((type(estimator).__name__, rank, kw["row_kernel"] is None))
        return counted(*args, **kw)

    monkeypatch.setattr(fidelity, "ranking_fold_curves", recorded)
    settings = {"n_folds": 1, "n_negative_sets": 1, "paper_negative_sets": 1}
    fidelity.claim_e({**settings, "cohorts": ["Orphanet"]}, seed=2)
    diffusion = [("ConstrainedMVGP", None), ("TraceGP", None), ("MVGP", None), ("KPMF", 5)]
    identity = [("ConstrainedMVGP", None), ("TraceGP", None)]
    assert seen == [
        *[(*model, False) for model in diffusion],
        ("PMF", 5, True),
        ("ProDiGe", None, False),
        *[(*model, True) for model in identity],
        ("KPMF", 20, False),
        ("PMF", 20, True),
    ]


def test_mvgp_claim_seeds_omim_by_the_claim_and_orphanet_by_its_name(fidelity, tiny_disease_gene):
    """OMIM's folds and fits are seeded by the claim's name alone, Orphanet's by the claim's
    name and its own; Trace GP, MV-GP and ProDiGe by Con. MV-GP's name (its negative sets);
    --cohorts runs one cohort and leaves the other's rows as they are."""
    from omicsbayes._seed import derive_seed

    calls, split_seeds = tiny_disease_gene
    settings = {"n_folds": 1, "n_negative_sets": 1, "paper_negative_sets": 1}
    both = fidelity.claim_e(settings, seed=2)
    names = ["ConMVGP-D", "ConMVGP-D", "ConMVGP-D", "KPMF", "PMF", "ConMVGP-D"]
    names += ["ConMVGP-D", "ConMVGP-D", "KPMF", "PMF"]  # the -I models, KPMF-20, PMF-20
    assert split_seeds == [derive_seed(2, "e_mvgp"), derive_seed(2, "e_mvgp", "Orphanet")]
    assert [seed for shape, *_, seed in calls if shape == (12, 15)] == [
        derive_seed(2, "e_mvgp", name, 0) for name in names
    ]
    assert [seed for shape, *_, seed in calls if shape == (10, 14)] == [
        derive_seed(2, "e_mvgp", "Orphanet", name, 0) for name in names
    ]
    quick = ["popularity", "MVGP-D", "PMF"]
    for wanted in ("OMIM", "Orphanet"):
        alone = fidelity.claim_e({**settings, "cohorts": [wanted], "models": quick}, seed=2)
        assert set(alone["cohort"]) == {c for c in both["cohort"] if c.startswith(wanted)}
        kept = both["cohort"].str.startswith(wanted) & both["model"].isin(quick)
        expected = both[kept].reset_index(drop=True)
        pd.testing.assert_frame_equal(alone, expected)


def test_folds_option_fits_the_named_folds_as_a_full_run_does(fidelity, tiny_disease_gene):
    assert fidelity._folds({"n_folds": 2, "folds": None}, [0, 1, 2]) == [0, 1]
    assert fidelity._folds({"n_folds": 2, "folds": [2, 0]}, [0, 1, 2]) == [0, 2]
    with pytest.raises(SystemExit, match=r"--folds \[5\]: claim e_mvgp has folds \[0, 1, 2\]"):
        fidelity._folds({"n_folds": 5, "folds": [1, 5]}, [0, 1, 2])
    settings = {"n_folds": 2, "n_negative_sets": 1, "paper_negative_sets": 1}
    settings.update(cohorts=["Orphanet"], models=["popularity", "MVGP-D", "PMF"])
    full = fidelity.claim_e(settings, seed=3)
    second = fidelity.claim_e({**settings, "folds": [1]}, seed=3)
    assert set(second["split"]) == {1}
    expected = full[full["split"] == 1].reset_index(drop=True)
    pd.testing.assert_frame_equal(second, expected)


def test_models_option_fits_the_named_models_as_a_full_run_does(fidelity, tiny_disease_gene):
    settings = {"n_folds": 1, "n_negative_sets": 1, "paper_negative_sets": 1}
    settings["cohorts"] = ["Orphanet"]
    both = fidelity.claim_e({**settings, "models": ["KPMF", "MVGP-D"]}, seed=3)
    alone = fidelity.claim_e({**settings, "models": ["MVGP-D"]}, seed=3)
    assert set(both["model"]) == {"KPMF", "MVGP-D"} and set(alone["model"]) == {"MVGP-D"}
    expected = both[both["model"] == "MVGP-D"].reset_index(drop=True)
    pd.testing.assert_frame_equal(alone, expected)
    with pytest.raises(SystemExit, match=r"--models \['PMF-5'\]: claim e_mvgp_new fits"):
        fidelity.claim_e_new({**settings, "models": ["PMF-5", "KPMF"]}, seed=3)


@pytest.mark.parametrize("name", ["PMF", "PMF-20", "ConMVGP-I", "TraceGP-I"])
def test_new_disease_claim_refuses_identity_covariance_models_saying_why(fidelity, name):
    """A model whose disease covariance is the identity cannot score a disease with no training
    association: claim e_mvgp_new does not register it, and asking for it says why."""
    assert all(name not in models for models in fidelity.MODELS["e_mvgp_new"].values())
    assert name in fidelity.MODELS["e_mvgp"]["default"]
    why = rf"claim e_mvgp_new does not fit \['{name}'\] \({name}: its disease covariance is"
    with pytest.raises(SystemExit, match=why + " the identity, which cannot score a new disease"):
        fidelity._models({"models": ["KPMF", name]}, ["popularity", "KPMF"], "e_mvgp_new")


def test_new_disease_claim_folds_the_diseases_and_fits_every_model_on_one_sample(
    fidelity, tiny_disease_gene, monkeypatch
):
    """Claim e_mvgp_new: 5-fold over the diseases, every association tested exactly once and
    no test disease with a training association; one fit seed per fold for every model (the
    same negative sets); no PMF, which cannot score a new row."""
    import omicsbayes.io.associations as associations
    from omicsbayes._seed import derive_seed
    from omicsbayes.protocols import entries

    calls, _ = tiny_disease_gene
    folds, counted = [], fidelity.ranking_fold_curves

    def recorded(*args, **kw):
        folds.append((args[1], args[2]))
        return counted(*args, **kw)

    monkeypatch.setattr(fidelity, "ranking_fold_curves", recorded)
    settings = {"n_folds": 5, "n_negative_sets": 1, "paper_negative_sets": 1}
    settings.update(cohorts=["OMIM"], models=["popularity", "MVGP-D", "KPMF"])
    per_split = fidelity.claim_e_new(settings, seed=2)
    assert set(per_split["cohort"]) == {"OMIM new diseases (12 x 15)"}
    assert set(per_split["model"]) == {"popularity", "MVGP-D", "KPMF"}
    assert per_split.groupby("model")["split"].nunique().eq(5).all()
    assert all("PMF" not in models for models in fidelity.MODELS["e_mvgp_new"].values())
    assert {protocol for _, protocol in folds} == {"new_rows"}
    rows, _, _ = entries.matrix_entries(associations.load_omim().X)  # the tiny OMIM
    tested = np.zeros(rows.size, dtype=int)
    for table, protocol in folds[::2]:  # 2 models fit each fold (both protocols at once)
        fold = entries.fold_of(protocol, table, rows)
        tested += fold.is_test
        assert not np.isin(rows[~fold.is_test], fold.new_rows).any()
    np.testing.assert_array_equal(tested, 1)
    seeds = [seed for *_, seed in calls]
    assert seeds == [derive_seed(2, "e_mvgp_new", split) for split in range(5) for _ in range(2)]


def test_descriptive_metrics_are_higher_or_lower_and_small_values_stay_visible(fidelity):
    """A collapsed scale is 'lower', not 'behind', and is not printed as 0.000."""
    values = {
        "R-L-BSVM/intensity vb_deterministic": [1e-5, 2e-5, 3e-5],
        "R-L-BSVM/intensity vb": [0.21, 0.22, 0.23],
    }
    table = fidelity.summarize(_per_split(values, "a_vb", "paper", "c1", "w_scale"))
    assert table.loc[table["rival"].notna(), "verdict"].tolist() == ["lower"]
    text = fidelity.markdown_table(table)
    assert "| w_scale | 2.0e-05 ± 5.8e-06 | 3 |" in text
    assert "| w_scale | 0.220 ± 0.006 | 3 |" in text
    assert fidelity._pm(4e-17, 2e-17) == "0.000 ± 0.000"  # float noise of equal values


def test_from_splits_names_the_commands_that_fitted_the_rows(fidelity, tmp_path):
    runs = {
        "a": (_per_split({"BAM_L": [0.8, 0.7], "BPROBIT": [0.6, 0.7]}), ["--only", "b_bam"]),
        "b": (_per_split({"BM2PCA": [0.9]}, "d_bm2pca"), ["--quick", "--cohorts", "two words"]),
    }
    for name, (per_split, argv) in runs.items():
        fidelity.write(per_split, tmp_path / f"{name}.tsv", None, argv)
        read = pd.read_csv(tmp_path / f"{name}_splits.tsv", sep="\t")
        assert set(read["command"]) == {fidelity._command(argv)}
    markdown = tmp_path / "table.md"
    splits = [str(tmp_path / f"{name}_splits.tsv") for name in runs]
    argv = ["--from-splits", *splits, "--out", str(tmp_path / "all.tsv"), "--markdown"]
    assert fidelity.main([*argv, str(markdown)]) == 0
    text = markdown.read_text()
    assert (
        "Per-split rows fitted by: `python -m benchmarks.fidelity --only b_bam`;"
        " `python -m benchmarks.fidelity --quick --cohorts 'two words'`." in text
    )
    assert "not results" in text  # one of the runs was a smoke run
    missing = (
        "a_rank, a_rank_paper, a_pfa, a_pfa_paper, a_pfa_long, a_vb, a_bsvm_attr, a_bsvm_overlap,"
        " a_bsvm_grade_attr, a_bsvm_link_attr, a_margin_attr, a_nonlinear_attr, b_bam_attr,"
        " c_rflvm, c_rflvm_paper,"
        " c_rflvm_paper_gplvm,"
        " c_rflvm_attribution, c_rflvm_sparsity, e_mvgp,"
        " e_mvgp_new, e_mvgp_graph, e_mvgp_trace_attr, e_mvgp_new_trace_attr, e_mvgp_rating,"
        " e_mvgp_rating_paper, e_mvgp_rating_new"
    )
    assert f"Claim runs not in this table: {missing}." in text


def test_rflvm_paper_protocol_standardises_without_log_and_sizes_the_dense_model(
    fidelity, monkeypatch
):
    """Claim c_rflvm_paper on a tiny positive, skewed matrix: the models see the z-score of the
    values as they are (no log), the paper's starts, and the dense RFLVM the dimension count the
    IBP RFLVM of the same trial ended with."""
    import anndata

    import omicsbayes.protocols._common as common

    rng = np.random.default_rng(0)
    raw = np.exp(rng.normal(size=(30, 5)) @ rng.normal(size=(5, 6)))
    monkeypatch.setattr(fidelity, "load_demo", lambda name: anndata.AnnData(raw))
    fits = []
    make = common.make_estimator

    def recorded(spec, state):
        model = make(spec, state)
        fit = model.fit

        def fit_and_record(Y):
            fit(Y)
            fits.append((spec, Y, model))
            return model

        model.fit = fit_and_record
        return model

    monkeypatch.setattr(common, "make_estimator", recorded)
    settings = {"n_repeats": 2, "heldout_iter": 4, "cohorts": ["Wisconsin"]}
    per_split = fidelity.claim_c_paper(settings, seed=1)
    assert list(per_split.columns) == fidelity.SPLIT_COLUMNS
    assert set(per_split["cohort"]) == {"Wisconsin z-scored"}
    z = (raw - raw.mean(0)) / raw.std(0)
    assert len(fits) == 2 * 3
    for (ibp_spec, Y, ibp), (dense_spec, _, _), (linear_spec, _, _) in zip(*[iter(fits)] * 3):
        seen = ~np.isnan(Y)
        np.testing.assert_allclose(Y[seen], z[seen])  # standardised, not logged
        assert np.isnan(Y).mean() == pytest.approx(0.2, abs=0.01)
        assert ibp_spec["params"]["n_latent"] == 2 and ibp_spec["params"]["sparse"]
        assert linear_spec["params"]["n_init_features"] == 2
        assert not dense_spec["params"]["sparse"]
        assert dense_spec["params"]["n_latent"] == ibp.n_active_[-1]
    totals = per_split[per_split["metric"] == "heldout_loglik"].set_index(["model", "split"])
    per_entry = per_split[per_split["metric"] == "heldout_loglik_per_entry"]
    ratio = totals["value"].to_numpy() / per_entry.set_index(["model", "split"])["value"]
    np.testing.assert_allclose(ratio, round(0.2 * raw.size))  # the sum over held-out entries
    assert set(per_split["model"]) == set(fidelity.MODELS["c_rflvm_paper"])
    assert set(per_split["protocol"]) == {"paper"}
    fits.clear()
    settings = {**settings, "n_repeats": 1, "ibp_start": 3}
    other = fidelity.claim_c_paper(settings, seed=1)
    assert set(other["protocol"]) == {"paper, IBP models from 3"}
    (ibp_spec, _, ibp), (dense_spec, _, _), (linear_spec, _, _) = fits
    assert ibp_spec["params"]["n_latent"] == linear_spec["params"]["n_init_features"] == 3
    assert dense_spec["params"]["n_latent"] == ibp.n_active_[-1]
    fits.clear()
    longer = fidelity.claim_c_paper({**settings, "sweeps": 6}, seed=1)
    assert set(longer["protocol"]) == {"paper, IBP models from 3, 6 sweeps"}
    for spec, _, _ in fits:
        assert (spec["params"]["n_iter"], spec["params"]["burn_in"]) == (6, 3)
    assert fits[0][0]["params"]["n_latent"] == 3


def test_gplvm_run_fits_the_gplvm_at_the_ibp_rflvms_dimension_on_the_paper_trials(
    fidelity, monkeypatch
):
    """Run c_rflvm_paper_gplvm: GPLVM rows only, under run c_rflvm_paper, each trial's GPLVM
    given the held-out entries of that trial and the dimension its IBP RFLVM ended with."""
    import anndata

    import benchmarks.gplvm_peer as peer
    import omicsbayes.protocols._common as common

    rng = np.random.default_rng(0)
    raw = rng.normal(size=(30, 3)) @ rng.normal(size=(3, 6))
    monkeypatch.setattr(fidelity, "load_demo", lambda name: anndata.AnnData(raw))
    ibps, calls = [], []
    make = common.make_estimator

    def recorded(spec, state):
        model = make(spec, state)
        ibps.append(model)
        return model

    def gplvm(Y, mask, n_latent, **params):
        calls.append((mask.copy(), n_latent, params))
        return -float(mask.sum())

    monkeypatch.setattr(common, "make_estimator", recorded)
    monkeypatch.setattr(peer, "gplvm_heldout_loglik", gplvm)
    settings = {"n_repeats": 2, "heldout_iter": 4, "cohorts": ["Wisconsin"]}
    per_split = fidelity.claim_c_paper_gplvm(settings, seed=1)
    assert set(per_split["claim"]) == {"c_rflvm_paper"} and set(per_split["model"]) == {"GPLVM"}
    masks = [mask for _, _, _, mask in fidelity._paper002_trials(settings, 1)]
    assert len(calls) == len(ibps) == 2
    for (mask, n_latent, params), trial_mask, ibp in zip(calls, masks, ibps):
        np.testing.assert_array_equal(mask, trial_mask)
        assert n_latent == ibp.n_active_[-1] and ibp.sparse
        assert params["n_inducing"] == 50 and params["max_iters"] == 4
    dims = per_split[per_split["metric"] == "n_active"]["value"].tolist()
    assert dims == [ibp.n_active_[-1] for ibp in ibps]


def test_paper_table1_beside_the_paper_rows(fidelity):
    """The Markdown sets Table 1's Cancer column beside the paper-protocol Wisconsin rows, with
    the models the project does not fit named so; no such section without those rows."""
    values = {"IBP RFLVM": [-900.0, -1100.0], "RFLVM": [-1000.0, -1200.0]}
    per_split = _per_split(
        values, "c_rflvm_paper", "paper", fidelity.PAPER_TABLE1_COHORT, "heldout_loglik"
    )
    text = fidelity.markdown_table(fidelity.summarize(per_split))
    assert "| IBP RFLVM | IBP RFLVM | 6.68e+03 ± 114.16 | -1e+03 ± 100.00 | 2 |" in text
    assert "| GPLVM | GPLVM | -4.79e+03 ± 26.31 | not fitted |  |" in text
    assert "| IBP LFM | linear IBP | -2.46e+04 ± 33.90 | not fitted |  |" in text
    for other in (
        per_split.assign(cohort="GSE7390 z-scored"),
        per_split.assign(protocol="paper, IBP models from 8"),
    ):
        assert "Table 1" not in fidelity.markdown_table(fidelity.summarize(other))


def test_table1_reference_scores_a_gaussian_at_the_needed_error(fidelity, monkeypatch):
    """The error Table 1 needs, plugged into a Gaussian predictive whose variance equals it,
    scores Table 1's IBP RFLVM value; the standard normal row is its log density."""
    import anndata

    rng = np.random.default_rng(0)
    raw = rng.normal(size=(40, 6)) @ rng.normal(size=(6, 6))
    monkeypatch.setattr(fidelity, "load_demo", lambda name: anndata.AnnData(raw))
    table = next(iter(fidelity.table1_reference(seed=2, n_repeats=2).values()))
    assert len(table) == 2 and (table["n_heldout"] == 48).all()
    n, v = table["n_heldout"], table["geometric mean squared error Table 1 needs"]
    np.testing.assert_allclose(-0.5 * n * (np.log(2 * np.pi * v) + 1), 6.68e03)
    z = (raw - raw.mean(0)) / raw.std(0)
    assert (table["standard normal"] < -0.5 * n * np.log(2 * np.pi)).all()
    assert table["standard normal"].iloc[0] > -0.5 * np.sum(np.log(2 * np.pi) + z**2)
    assert (table["linear imputer geometric mean squared error"] > 0).all()


def test_committed_table_is_what_its_command_makes_from_the_committed_splits(fidelity, tmp_path):
    committed = REPO / "docs" / "_generated" / "fidelity_table.md"
    made_by = next(line for line in committed.read_text().splitlines() if line.startswith("Made"))
    argv = shlex.split(made_by.removeprefix("Made by `").removesuffix("`."))[3:]
    assert argv[0] == "--from-splits"
    markdown = tmp_path / "fidelity_table.md"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(REPO)  # the recorded paths are relative to the repository
        fidelity.main([*argv, "--out", str(tmp_path / "fidelity.tsv"), "--markdown", str(markdown)])
    assert markdown.read_text() == committed.read_text()


def test_recorded_commands_leave_out_where_a_run_writes(fidelity):
    argv = ["--only", "c_rflvm", "--out", "/tmp/x/fidelity.tsv", "--markdown", "", "--seed", "3"]
    assert fidelity._command(argv) == "python -m benchmarks.fidelity --only c_rflvm --seed 3"
    assert fidelity._command(["--out=/tmp/y.tsv", "--markdown=a.md", "--quick"]) == (
        "python -m benchmarks.fidelity --quick"
    )
    for path in (REPO / "docs" / "_generated" / "fidelity_splits").glob("*.tsv"):
        for command in pd.read_csv(path, sep="\t")["command"].unique():
            assert "--out" not in command and "--markdown" not in command, (path, command)


def test_one_rule_for_ahead_in_winners_report_docs_and_table(fidelity):
    from omicsbayes.evaluate.winners import AHEAD_SE

    words = {2: "two"}[AHEAD_SE]

    def text(*parts):
        return " ".join(REPO.joinpath(*parts).read_text().split())

    assert f"only when the margin exceeds {words} such standard errors" in text(
        "workflow", "report", "winners.rst"
    )
    assert f"ahead by more than {words} standard errors of the paired difference" in text(
        "docs", "choosing.md"
    )
    assert f"exceeds {AHEAD_SE} of its standard errors" in text(
        "docs", "_generated", "fidelity_table.md"
    )


def test_choosing_page_counts_match_the_settings(fidelity):
    text = " ".join((REPO / "docs" / "choosing.md").read_text().split())
    full = fidelity.SETTINGS["full"]
    assert f"Paper 001's 100 splits ({full['n_splits']} here;" in text
    for name in ("d_bm2pca", "d_bm2pca_2_per_class", "d_bm2pca_5_per_class"):
        rows = pd.read_csv(
            REPO / "docs" / "_generated" / "fidelity_splits" / f"{name}.tsv", sep="\t"
        )
        assert rows["split"].nunique() == 20, name
    assert "Paper 003's 20 repeats are in the table (`--only d_bm2pca --splits 20`)" in text
    assert full["paper_negative_sets"] == fidelity.PAPER_NEGATIVE_SETS == 5
    assert "Paper 004's results average 5 sampled negative sets; the `e_mvgp` rows of" in text
    assert f"the `default` rows use {full['n_negative_sets']} set" in text


SCALES = ("log", "intensity", "rank")


def test_rank_claims_run_at_the_defaults_and_under_the_papers_protocol(fidelity, monkeypatch):
    labels = pd.Series(["poor", "mid", "well"] * 10)
    tasks = {"tiny": (np.ones((30, 4)), np.exp2, labels, ["poor"])}
    monkeypatch.setattr(fidelity, "_paper000_tasks", lambda: tasks)
    calls = []

    def record(claim, cohort, X, labels, task, split_protocol, models, steps, seed, **kw):
        calls.append((claim, list(labels), task, split_protocol, set(models), steps, kw))
        return pd.DataFrame(columns=fidelity.SPLIT_COLUMNS)

    monkeypatch.setattr(fidelity, "_classification", record)
    settings = {**fidelity.SETTINGS["full"], "cohorts": None}
    fidelity.claim_a(settings, 0)
    fidelity.claim_a_paper(settings, 0)
    default, paper = calls[:3], calls[3:]
    zero_filter = {"name": "max_zero_fraction", "max_fraction": 0.25}  # section 4.3
    for (claim, seen, task, split_protocol, models, steps, kw), scale in zip(default, SCALES):
        assert (claim, split_protocol) == ("a_rank", "repeated_subsampling")
        assert steps == (["rank"] if scale == "rank" else [])
        assert models and all(name.endswith("/" + scale) for name in models)
        assert seen == list(labels) and task["positive"] == ["poor"]
        assert kw == {"protocol": "default", "n_splits": 10}
    for (claim, seen, task, split_protocol, models, steps, kw), scale in zip(paper, SCALES):
        assert (claim, split_protocol) == ("a_rank_paper", "stratified_kfold")
        assert steps == [zero_filter] + (["rank"] if scale == "rank" else [])
        assert models and all(name.endswith("/" + scale) for name in models)
        assert set(seen) == {"positive", "rest"} and seen.count("positive") == 10
        assert task["positive"] == ["positive"]  # folds stratified by the task's two classes
        assert kw == {"protocol": "paper", "n_splits": 10}
    assert paper[0][4] == {"G-L-BSVM/log", "G-L-Probit/log", "linear SVM/log"}
    specs = fidelity.MODELS["a_rank_paper"]
    for name, spec in specs.items():
        params = spec.get("params", {})
        if name.endswith("project VB/intensity"):
            assert params == {"prediction_bounds": "adjacent"}
        elif spec["class"] == "RankFactorClassifier":
            assert params["inference"] == "vb_deterministic"
            assert ("prediction_bounds" in params) == name.endswith("/intensity")
    contrasts = fidelity.CONTRASTS["a_rank_paper"]
    assert ("a_vb", "R-L-BSVM/intensity", "R-L-BSVM project VB/intensity") in contrasts
    assert {c for c, _, _ in contrasts} == {
        "a_rank",
        "a_bsvm",
        "a_margin",
        "a_nonlinear",
        "a_vb",
        "a_pfa",
    }


def test_pfa_rows_are_fitted_on_the_rank_runs_splits(fidelity, monkeypatch):
    """Paper 000's PFA-L-BSVM (Tables 4-5) on intensities, fitted apart on runs a_rank's and
    a_rank_paper's splits and seeds, under their claims: its rows pair with R-L-BSVM's."""
    rng = np.random.default_rng(0)
    labels = pd.Series(["poor", "mid", "well"] * 8)
    counts = rng.poisson(np.where(labels.to_numpy()[:, None] == "poor", 8.0, 2.0), (24, 5))
    tasks = {"tiny": (np.log2(counts + 1.0), lambda x: np.exp2(x) - 1.0, labels, ["poor"])}
    monkeypatch.setattr(fidelity, "_paper000_tasks", lambda: tasks)
    quick = {"class": "PFAClassifier", "params": {"n_factors": 2, "n_iter": 6}}
    monkeypatch.setitem(fidelity.MODELS, "a_pfa", {"PFA-L-BSVM/intensity": quick})
    monkeypatch.setitem(fidelity.MODELS, "a_pfa_paper", {"PFA-L-BSVM/intensity": quick})
    calls = []
    classification = fidelity._classification

    def record(claim, cohort, X, labels, task, split_protocol, models, steps, seed, **kw):
        calls.append((claim, split_protocol, set(models), steps, kw))
        return classification(
            claim, cohort, X, labels, task, split_protocol, models, steps, seed, **kw
        )

    monkeypatch.setattr(fidelity, "_classification", record)
    settings = {"n_splits": 2, "cohorts": None}
    rows = pd.concat([fidelity.claim_a_pfa(settings, 0), fidelity.claim_a_pfa_paper(settings, 0)])
    zero_filter = {"name": "max_zero_fraction", "max_fraction": 0.25}
    model = {"PFA-L-BSVM/intensity"}
    assert calls == [
        ("a_rank", "repeated_subsampling", model, [], {"protocol": "default", "n_splits": 2}),
        (
            "a_rank_paper",
            "stratified_kfold",
            model,
            [zero_filter],
            {"protocol": "paper", "n_splits": 2},
        ),
    ]
    assert set(zip(rows["claim"], rows["protocol"])) == {
        ("a_rank", "default"),
        ("a_rank_paper", "paper"),
    }
    assert set(rows["model"]) == model and rows["value"].between(0, 1).all()
    assert len(rows) == 2 * 2 and set(rows["metric"]) == {"auroc"}  # two splits, two runs
    rank = rows.assign(model="R-L-BSVM/intensity", value=rows["value"] + 0.1)
    table = fidelity.summarize(pd.concat([rows, rank]))
    paired = table[table["claim"] == "a_pfa"]
    assert len(paired) == 2 and set(paired["rival"]) == model  # one per run
    assert np.allclose(paired["difference"], 0.1)
    assert fidelity._run_in(rows, "a_pfa") and fidelity._run_in(rows, "a_pfa_paper")
    assert not fidelity._run_in(rank, "a_pfa")


def test_margin_attribution_refits_run_a_rank_on_its_gse7390_splits(fidelity, monkeypatch):
    """Run a_margin_attr: R-L-BSVM at wider margins, in the printed form and by Gibbs sampling,
    and OR-L-BSVM by Gibbs sampling, on run a_rank's splits of the GSE7390 tasks only, under
    claim a_rank; each R-L-BSVM variant is contrasted with OR-L-BSVM (claim a_margin)."""
    labels = pd.Series(["poor", "mid", "well"] * 10)
    task = (np.ones((30, 4)), np.exp2, labels, ["poor"])
    tasks = {"GSE7390 grade (poor vs rest)": task, "pbmc68k CD8+ vs T/NK (raw)": task}
    monkeypatch.setattr(fidelity, "_paper000_tasks", lambda: tasks)
    calls = []

    def record(claim, cohort, X, labels, task, split_protocol, models, steps, seed, **kw):
        calls.append((claim, cohort, split_protocol, models, steps, kw))
        return pd.DataFrame(columns=fidelity.SPLIT_COLUMNS)

    monkeypatch.setattr(fidelity, "_classification", record)
    fidelity.claim_a_margin_attr({"n_splits": 10, "cohorts": None}, 0)
    [(claim, cohort, split_protocol, models, steps, kw)] = calls
    assert (claim, cohort, split_protocol, steps) == (
        "a_rank",
        "GSE7390 grade (poor vs rest)",
        "repeated_subsampling",
        [],
    )
    assert kw == {"protocol": "default", "n_splits": 10}
    params = {name: spec["params"] for name, spec in models.items()}
    assert params == {
        "R-L-BSVM epsilon 0.5/intensity": {"epsilon": 0.5},
        "R-L-BSVM epsilon 2.0/intensity": {"epsilon": 2.0},
        "R-L-BSVM exact form/intensity": {"maxmargin_form": "exact"},
        "R-L-BSVM Gibbs/intensity": {"inference": "gibbs", "n_samples": 1000},
        "OR-L-BSVM Gibbs/intensity": {"inference": "gibbs", "n_samples": 1000},
    }
    assert 0.05 not in fidelity.MARGIN_EPSILONS  # the paper's margin is run a_rank's own
    assert {spec["variant"] for spec in models.values()} == {"R-L-BSVM", "OR-L-BSVM"}
    margin = {(w, r) for c, w, r in fidelity.CONTRASTS["a_rank"] if c == "a_margin"}
    assert margin == {
        ("R-L-BSVM/intensity", "OR-L-BSVM/intensity"),
        *[(name, "OR-L-BSVM/intensity") for name in models if name.startswith("R-L")],
        ("R-L-BSVM Gibbs/intensity", "OR-L-BSVM Gibbs/intensity"),
    }
    assert fidelity.FITS_INTO["a_margin_attr"] == "a_rank"


def test_pfa_long_chain_refits_run_a_pfa_on_its_splits_with_diagnostics(fidelity, monkeypatch):
    """Run a_pfa_long: the default chain repeats run a_pfa's AUROC split by split (same splits
    and fit seeds), every chain reports its R-hat and bulk ESS, the long chain pairs with the
    default one and with R-L-BSVM under claim a_rank, and the long chains on divided
    intensities are fits of the divided intensities that pair with the long chain."""
    from benchmarks import pfa_convergence

    rng = np.random.default_rng(1)
    labels = pd.Series(["poor", "mid", "well"] * 8)
    counts = rng.poisson(np.where(labels.to_numpy()[:, None] == "poor", 8.0, 2.0), (24, 5))
    cohort = pfa_convergence.COHORTS[0]
    tasks = {cohort: (np.log2(counts + 1.0), lambda x: np.exp2(x) - 1.0, labels, ["poor"])}
    tasks["other"] = tasks[cohort]
    monkeypatch.setattr(fidelity, "_paper000_tasks", lambda: tasks)
    short = {"class": "PFAClassifier", "params": {"n_factors": 2, "n_iter": 16, "verbose": False}}
    long = {**short, "params": {**short["params"], "n_iter": 32}}
    default, longer, *divided = list(fidelity.MODELS["a_pfa_long"])
    assert [pfa_convergence.count_divisor(name) for name in divided] == [16, 256]
    assert pfa_convergence.count_divisor(longer) == 1
    specs = {default: short, longer: long} | dict.fromkeys(divided, long)
    monkeypatch.setitem(fidelity.MODELS, "a_pfa_long", specs)
    monkeypatch.setitem(fidelity.MODELS, "a_pfa", {"PFA-L-BSVM/intensity": short})
    settings = {"n_splits": 2, "cohorts": None}
    rows = fidelity.claim_a_pfa_long(settings, 0)
    assert set(rows["cohort"]) == {cohort} and set(rows["claim"]) == {"a_rank"}
    assert set(rows["metric"]) == {"auroc", "r_hat", "ess_bulk"} and len(rows) == 4 * 2 * 3
    assert rows.loc[rows["metric"] == "r_hat", "value"].ge(0.9).all()
    pfa = fidelity.claim_a_pfa(settings, 0)
    pfa = pfa[pfa["cohort"] == cohort].set_index("split")["value"]
    mine = rows[(rows["model"] == default) & (rows["metric"] == "auroc")].set_index("split")
    pd.testing.assert_series_equal(mine["value"], pfa)
    rank = pfa.reset_index().assign(
        claim="a_rank", protocol="default", cohort=cohort, model="R-L-BSVM/intensity",
        metric="auroc", value=pfa.to_numpy() + 0.1,
    )  # fmt: skip
    table = fidelity.summarize(pd.concat([rows, rank[fidelity.SPLIT_COLUMNS]]))
    paired = table[table["rival"].notna()]
    assert {
        ("a_pfa", "R-L-BSVM/intensity", longer),
        ("a_pfa_long", longer, default),
        *[("a_pfa_long", name, longer) for name in divided],
    } <= set(zip(paired["claim"], paired["model"], paired["rival"]))
    assert fidelity._run_in(rows, "a_pfa_long") and not fidelity._run_in(rows, "a_pfa")
    # the chain on intensities / 16 is run a_pfa's fit of those intensities, split by split
    logs, inverse, *task = tasks[cohort]
    sixteenth = (logs, lambda x: inverse(x) / 16, *task)
    monkeypatch.setattr(fidelity, "_paper000_tasks", lambda: {cohort: sixteenth})
    monkeypatch.setitem(fidelity.MODELS, "a_pfa", {"PFA-L-BSVM/intensity": long})
    scaled = fidelity.claim_a_pfa(settings, 0).set_index("split")["value"]
    mine = rows[(rows["model"] == divided[0]) & (rows["metric"] == "auroc")].set_index("split")
    pd.testing.assert_series_equal(mine["value"], scaled)


@pytest.mark.parametrize(
    "per_class, n_splits, suffix",
    [(None, 2, ""), (2, 2, ", 2 per class"), (2, 21, ", 2 per class, 21 repeats")],
)
def test_bm2pca_claim_takes_the_papers_samples_per_class(
    fidelity, monkeypatch, per_class, n_splits, suffix
):
    """--per-class names the protocols; so does a repeat count above the paper's 20."""
    seen = []

    def record(claim, cohort, X, labels, task, split_protocol, models, steps, seed, **kw):
        seen.append((split_protocol, kw["n_per_class"], kw["protocol"]))
        return pd.DataFrame(
            [(claim, kw["protocol"], cohort, m, "accuracy", 0, 0.5) for m in models],
            columns=fidelity.SPLIT_COLUMNS,
        )

    monkeypatch.setattr(fidelity, "_classification", record)
    settings = {"n_splits": n_splits, "cohorts": ["digits"], "per_class": per_class}
    rows = fidelity.claim_d(settings, 0)
    assert seen == [("few_shot", per_class or 3, "default" + suffix)]
    assert set(rows["protocol"]) == {"paper" + suffix, "default" + suffix}
    paper = rows[rows["protocol"] == "paper" + suffix]
    assert "BM2PCA k=10" not in set(paper["model"]) and "BM2PCA" in set(paper["model"])


def _assert_mvgp_rows_are_the_claims(rows, claim):
    """The MV-GP rows of a Trace GP path run equal the default MV-GP rows of its claim."""
    claim = claim[(claim["protocol"] == "default") & (claim["model"] == "MVGP-D")]
    ours = rows[rows["model"] == "MVGP-D"].drop(columns="claim")
    key = ["metric", "split"]
    pd.testing.assert_frame_equal(
        ours.sort_values(key).reset_index(drop=True),
        claim.drop(columns="claim").sort_values(key).reset_index(drop=True),
    )


def test_trace_gp_path_refits_the_claims_fold_negative_set_and_mvgp(fidelity, tiny_disease_gene):
    """Run e_mvgp_trace_attr (benchmarks.mvgp_attribution) fits Trace GP on claim e_mvgp's fold,
    first negative set and fit seed: at lam = t, sigma2 = 1 each fit of the path scores what the
    claim's fold function scores; its MV-GP rows are the claim's own, and its best fit at each
    rank cap is the path's highest R@20, contrasted with MV-GP and the other cap under claim
    e_mvgp."""
    from omicsbayes._seed import derive_seed
    from omicsbayes.io import associations
    from omicsbayes.preprocess import diffusion_kernel
    from omicsbayes.protocols.disease_gene import ranking_fold_curves
    from omicsbayes.protocols.entries import matrix_entries

    attribution = importlib.import_module("benchmarks.mvgp_attribution")
    path = [0.5, 2.0]
    settings = {"cohorts": ["Orphanet"], "folds": [1], "n_negative_sets": 1}
    settings["paper_negative_sets"] = 1  # claim_e's MV-GP rows, default protocol only
    caps = dict(zip(attribution.CAPS, (2, 4)))
    rows = attribution.path_rows(settings, seed=3, path=path, caps=caps)
    assert set(rows["claim"]) == {"e_mvgp_trace_attr"} and set(rows["split"]) == {1}
    assert set(rows["model"]) == set(fidelity.MODELS["e_mvgp_trace_attr"])
    adata = associations.load_orphanet()  # the tiny one
    kernel = diffusion_kernel(adata.obsp["graph"])
    entry_rows, entry_cols, _ = matrix_entries(adata.X)
    tags = ("e_mvgp", "Orphanet")
    splits = fidelity.entry_kfold_splits(
        entry_rows, entry_cols, 5, random_state=derive_seed(3, *tags)
    )
    table, fit_seed = splits[splits["split"] == 1], derive_seed(3, *tags, "ConMVGP-D", 1)
    fits = attribution.trace_gp_path(adata, table, "known_rows", kernel, fit_seed, path, 4)
    assert set(path) <= set(fits["t"]) and fits["t"].is_monotonic_increasing
    lowest = fits["t"].iloc[0]  # below the path only while the best R@20 is at its lowest t
    assert fits["recall@20"].idxmax() != 0 or lowest / 4 < attribution.FLOOR
    assert lowest == path[0] or fits["recall@20"].iloc[1] == fits["recall@20"].max()
    for t, recall, precision in zip(fits["t"], fits["recall@20"], fits["precision@20"]):
        spec = {"class": "TraceGP", "params": {"lam": t, "sigma2": 1.0, "max_rank": 4}}
        curves = ranking_fold_curves(
            adata.X,
            table,
            "known_rows",
            spec,
            row_kernel=kernel,
            n_negative_sets=(1,),
            random_state=fit_seed,
        )[1]
        assert (recall, precision) == (curves["recall"].iloc[-1], curves["precision"].iloc[-1])
    value = rows.set_index(["model", "metric"])["value"]
    best = fits.loc[fits["recall@20"].idxmax()]
    name = list(caps)[1]  # the cap of 4
    assert value[(name, "recall@20")] == best["recall@20"]
    assert value[(name, "precision@20")] == best["precision@20"]
    assert value[(name, "log10_t")] == pytest.approx(np.log10(best["t"]))
    assert value[(name, "fitted_rank")] == best["rank"] <= 4
    assert value[(name, "at_rank_cap")] == float(not best["converged"])
    assert value[(attribution.BEST, "fitted_rank")] <= 2
    _assert_mvgp_rows_are_the_claims(rows, fidelity.claim_e({**settings, "models": ["MVGP-D"]}, 3))
    contrasts = fidelity.summarize(rows).dropna(subset=["rival"])
    assert set(zip(contrasts["claim"], contrasts["model"], contrasts["rival"])) == {
        ("e_mvgp", attribution.BEST, "MVGP-D"),
        ("e_mvgp", name, "MVGP-D"),
        ("e_mvgp", name, attribution.BEST),
    }


def test_trace_gp_path_on_new_diseases_refits_claim_e_mvgp_new(fidelity, tiny_disease_gene):
    """Run e_mvgp_new_trace_attr: claim e_mvgp_new's folds over the diseases and fit seeds; its
    MV-GP rows are the claim's own and its one model is the path at the raised rank cap."""
    attribution = importlib.import_module("benchmarks.mvgp_attribution")
    settings = {"cohorts": ["OMIM"], "folds": [2], "n_negative_sets": 1, "paper_negative_sets": 1}
    rows = attribution.new_path_rows(settings, seed=5)
    assert set(rows["claim"]) == {"e_mvgp_new_trace_attr"} and set(rows["split"]) == {2}
    assert set(rows["model"]) == set(fidelity.MODELS["e_mvgp_new_trace_attr"])
    assert set(rows["cohort"]) == {"OMIM new diseases (12 x 15)"}
    claim = fidelity.claim_e_new({**settings, "models": ["MVGP-D"]}, seed=5)
    _assert_mvgp_rows_are_the_claims(rows, claim)
    contrasts = fidelity.summarize(rows).dropna(subset=["rival"])
    assert set(zip(contrasts["claim"], contrasts["model"], contrasts["rival"])) == {
        ("e_mvgp_new", *attribution.NEW_CAPS, "MVGP-D")
    }


@pytest.mark.parametrize(
    ("split_protocol", "task", "split_kw"),
    [
        ("few_shot", {"kind": "multiclass"}, {"n_per_class": 2}),  # d_bm2pca
        ("repeated_subsampling", {"kind": "binary", "positive": "b"}, {}),  # b_bam
    ],
)
def test_more_splits_begin_with_the_default_runs_splits(fidelity, split_protocol, task, split_kw):
    """``--splits`` claims (``MORE_SPLITS``): a run with more splits repeats the 10-split run's
    rows on its first splits, so a longer run extends the committed one."""
    rng = np.random.default_rng(0)
    labels = np.repeat(["a", "b", "c"] if task["kind"] == "multiclass" else ["a", "b"], 8)
    X = rng.normal(size=(labels.size, 5)) + (labels == "b")[:, None]
    models = {"FULL": {"class": "FullSVM"}}
    kw = {"n_repeats" if split_protocol == "few_shot" else "n_splits": 2, **split_kw}
    short = fidelity._classification("c", "x", X, labels, task, split_protocol, models, [], 4, **kw)
    kw["n_repeats" if split_protocol == "few_shot" else "n_splits"] = 5
    long = fidelity._classification("c", "x", X, labels, task, split_protocol, models, [], 4, **kw)
    assert sorted(long["split"].unique()) == [0, 1, 2, 3, 4]
    first = long[long["split"] < 2].reset_index(drop=True)
    pd.testing.assert_frame_equal(first, short)


def test_splits_option_is_refused_for_claims_whose_splits_it_would_redraw(fidelity, tmp_path):
    out = ["--out", str(tmp_path / "f.tsv"), "--markdown", ""]
    with pytest.raises(SystemExit, match=r"--splits 20: only claims \['b_bam', 'd_bm2pca'\]"):
        fidelity.main(["--only", "a_rank", "d_bm2pca", "--splits", "20", *out])
    with pytest.raises(SystemExit, match=r"with at least 10 splits"):
        fidelity.main(["--only", "d_bm2pca", "--splits", "5", *out])
    assert not list(tmp_path.iterdir())  # refused before anything is written


@pytest.mark.parametrize("option", ["--ibp-start", "--sweeps"])
def test_chain_options_are_refused_outside_the_paper_002_run(fidelity, tmp_path, option):
    """--ibp-start and --sweeps change run c_rflvm_paper's chains only: any other claim, or a
    count below one, is refused before anything is fitted or written."""
    out = ["--out", str(tmp_path / "f.tsv"), "--markdown", ""]
    with pytest.raises(SystemExit, match=rf"{option} 8: only claim run c_rflvm_paper.*'c_rflvm'"):
        fidelity.main(["--only", "c_rflvm", "c_rflvm_paper", option, "8", *out])
    with pytest.raises(SystemExit, match=rf"{option} 0: only claim run c_rflvm_paper"):
        fidelity.main(["--only", "c_rflvm_paper", option, "0", *out])
    assert not list(tmp_path.iterdir())


def test_models_option_is_refused_for_claims_that_fit_all_their_models(fidelity, tmp_path):
    """A --models list a claim would not read is refused, not silently ignored."""
    out = ["--out", str(tmp_path / "f.tsv"), "--markdown", ""]
    with pytest.raises(
        SystemExit, match=r"--models: only claims .* take it, not \['a_margin_attr'\]"
    ):
        fidelity.main(["--only", "a_margin_attr", "e_mvgp", "--models", "PMF", *out])
    with pytest.raises(
        SystemExit,
        match=r"not \['a_bsvm_attr', .*'d_bm2pca', 'e_mvgp_new_trace_attr', 'e_mvgp_trace_attr'\]"
        r" \(pick claims with --only\)",
    ):
        fidelity.main(["--models", "PMF", *out])  # every claim
    assert not list(tmp_path.iterdir())  # refused before anything is written
