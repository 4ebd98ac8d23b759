"""omicsbayes.tl: scanpy-style fits that write into the AnnData."""

import subprocess
import sys

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.metrics import roc_auc_score

from omicsbayes import tl
from omicsbayes.tl._anndata import mcmc_diagnostics


def planted(n=60, d=30, n_classes=2, seed=0):
    """Samples x genes with the class shifting the first 6 genes; a count layer too."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % n_classes
    X = rng.normal(size=(n, d))
    X[:, :6] += 2.0 * (y[:, None] == (np.arange(6) % n_classes)[None, :])
    obs = pd.DataFrame(
        {"group": pd.Categorical([f"g{c}" for c in y])}, index=[f"s{i}" for i in range(n)]
    )
    var = pd.DataFrame(index=[f"gene{j}" for j in range(d)])
    var["highly_variable"] = np.arange(d) < 20
    adata = ad.AnnData(X, obs=obs, var=var)
    adata.layers["counts"] = rng.poisson(np.exp(1.0 + 0.5 * X)).astype(np.int64)
    return adata


RF = {"variant": "G-L-BSVM", "n_factors": 3, "max_iter": 30}


def _loaded_after(code):
    """Names of the ``omicsbayes.models`` and ``numba`` modules loaded after running ``code``
    in a fresh interpreter."""
    listing = (
        "import sys\n"
        "print(' '.join(m for m in sys.modules if m.startswith(('omicsbayes.models', 'numba'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\n{listing}"], capture_output=True, text=True, check=True
    )
    return out.stdout.split()


@pytest.mark.parametrize("module", ["omicsbayes", "omicsbayes.tl"])
def test_import_loads_no_model_and_no_numba(module):
    assert _loaded_after(f"import {module}") == []


def test_a_tl_function_imports_its_models_when_called():
    called = (
        "from omicsbayes import tl\n"
        "try:\n"
        "    tl.mvgp(None, model='NoSuchModel')\n"
        "except ValueError as e:\n"
        "    assert 'ConstrainedMVGP' in str(e), e"
    )
    assert "omicsbayes.models" in _loaded_after(called)


def test_rank_factor_writes_scores_loadings_decision_and_uns():
    adata = planted()
    est = tl.rank_factor(adata, "group", **RF)
    assert adata.obsm["X_rank_factor"].shape == (60, 3)
    np.testing.assert_array_equal(adata.obsm["X_rank_factor"], est.scores_)
    np.testing.assert_array_equal(adata.varm["rank_factor_loadings"], est.loadings_)
    decision = adata.obs["rank_factor_decision"].to_numpy()
    np.testing.assert_allclose(decision, est.decision_function(adata.X))
    y = (adata.obs["group"] == "g1").to_numpy()
    assert roc_auc_score(y, decision) > 0.95  # positive = classes[1] = g1
    uns = adata.uns["rank_factor"]
    assert uns["model"] == "RankFactorClassifier" and uns["variant"] == "G-L-BSVM"
    assert list(uns["classes"]) == ["g0", "g1"] and uns["trace_name"] == "lower_bound"
    np.testing.assert_array_equal(uns["trace"], est.lower_bound_)


def test_rank_factor_several_classes_are_joint_tasks_and_missing_labels_allowed():
    adata = planted(n=60, n_classes=3)
    adata.obs.loc[adata.obs_names[:5], "group"] = np.nan
    est = tl.rank_factor(adata, "group", **RF)
    assert est.n_tasks_ == 3  # one model, three one-vs-rest tasks sharing the factors
    columns = [f"rank_factor_decision_g{c}" for c in range(3)]
    decision = adata.obs[columns].to_numpy()
    labelled = adata.obs["group"].notna().to_numpy()
    predicted = np.argmax(decision[labelled], axis=1)
    truth = adata.obs["group"][labelled].cat.codes.to_numpy()
    assert np.mean(predicted == truth) > 0.8


def test_copy_returns_a_new_anndata_and_leaves_the_input():
    adata = planted()
    out = tl.rank_factor(adata, "group", copy=True, **RF)
    assert isinstance(out, ad.AnnData) and "X_rank_factor" in out.obsm
    assert "X_rank_factor" not in adata.obsm and "rank_factor" not in adata.uns


def test_mask_var_fits_the_selected_genes_only():
    adata = planted()
    tl.rank_factor(adata, "group", mask_var="highly_variable", **RF)
    sub = adata[:, adata.var["highly_variable"]].copy()
    tl.rank_factor(sub, "group", **RF)
    loadings = adata.varm["rank_factor_loadings"]
    assert np.isnan(loadings[20:]).all()
    np.testing.assert_allclose(loadings[:20], sub.varm["rank_factor_loadings"])
    np.testing.assert_allclose(adata.obsm["X_rank_factor"], sub.obsm["X_rank_factor"])
    with pytest.raises(ValueError, match="boolean array of length n_vars=30"):
        tl.rank_factor(adata, "group", mask_var=np.ones(3, bool), **RF)
    with pytest.raises(ValueError, match="'hvg' is not a .var column"):
        tl.rank_factor(adata, "group", mask_var="hvg", **RF)


def test_sparse_layer_gives_the_dense_fit():
    adata = planted()
    dense = tl.pfa(adata, n_factors=3, n_iter=12, burn_in=6, copy=True)
    adata.layers["counts"] = sp.csr_matrix(adata.layers["counts"])
    sparse = tl.pfa(adata, n_factors=3, n_iter=12, burn_in=6, copy=True)
    np.testing.assert_array_equal(dense.obsm["X_pfa"], sparse.obsm["X_pfa"])
    assert dense.uns["pfa"]["trace_name"] == "log_likelihood"
    assert "diagnostics" in dense.uns["pfa"]


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda a: tl.rank_factor(a, "disease", **RF), "label column 'disease' is not in"),
        (lambda a: tl.rank_factor(a, "one", **RF), r"1 class\(es\) \['a'\]"),
        (lambda a: tl.bam(a, "gappy"), "4 missing labels"),
        (lambda a: tl.rank_factor(a, "group", layer="norm", **RF), "layer 'norm' is not in"),
        (lambda a: tl.rank_factor(a, **RF), "label_key is None and adata.uns has no"),
        (lambda a: tl.bam(a, "group", variant="BAM"), "variant='BAM'"),
        (lambda a: tl.mvgp(a, row_kernel="graph"), "'graph' is not a key of obsp"),
    ],
)
def test_one_clear_message(call, message):
    adata = planted()
    adata.obs["one"] = "a"
    adata.obs["gappy"] = adata.obs["group"].astype(object)
    adata.obs.loc[adata.obs_names[:4], "gappy"] = np.nan
    with pytest.raises(ValueError, match=message):
        call(adata)


def test_bam_one_vs_rest_and_linear_coefficients():
    adata = planted(n=45, n_classes=3)
    est = tl.bam(adata, "group", kernel=None, max_iter=30)
    assert len(est.estimators_) == 3
    loadings = adata.varm["bam_loadings"]
    np.testing.assert_allclose(loadings[:, 1], est.estimators_[1].coef_)
    decision = adata.obs[[f"bam_decision_g{c}" for c in range(3)]].to_numpy()
    truth = adata.obs["group"].cat.codes.to_numpy()
    assert np.mean(np.argmax(decision, axis=1) == truth) > 0.8
    tl.bam(adata, "group", kernel="gaussian", variant="BPROBIT", key_added="bp", max_iter=20)
    assert adata.obsm["bp_dual_coef"].shape == (45, 3)  # one weight per training sample and class


def test_bm2pca_semi_supervised_and_unsupervised():
    adata = planted()
    adata.obs["partial"] = adata.obs["group"].astype(object)
    adata.obs.loc[adata.obs_names[::3], "partial"] = np.nan
    est = tl.bm2pca(adata, "partial", n_components=2, max_iter=30)
    assert adata.obsm["X_bm2pca"].shape == (60, 2)
    np.testing.assert_allclose(adata.varm["bm2pca_loadings"], est.loadings_)
    y = (adata.obs["group"] == "g1").to_numpy()
    assert roc_auc_score(y, adata.obs["bm2pca_decision"]) > 0.9  # unlabelled samples too
    tl.bm2pca(adata, None, n_components=2, max_iter=10, key_added="bpca")
    assert "bpca_decision" not in adata.obs and adata.obsm["X_bpca"].shape == (60, 2)


def test_unsupervised_mcmc_families_write_traces_and_diagnostics():
    adata = planted(n=30, d=8)
    est = tl.ibp_factor(adata, n_iter=12, burn_in=4)
    np.testing.assert_array_equal(adata.obsm["X_ibp_factor"], est.latent_)
    assert adata.varm["ibp_factor_loadings"].shape[0] == 8
    assert set(adata.uns["ibp_factor"]["diagnostics"].index) >= {"alpha", "n_active"}
    tl.rflvm(adata, n_iter=10, burn_in=4, n_random_features=5, hmc_leapfrog=5)
    assert adata.obsm["X_rflvm"].shape[0] == 30
    assert len(adata.uns["rflvm"]["trace"]) == 10


def test_loadings_are_genes_by_factors_even_when_square():
    """IBPFactorModel's loadings_ are genes x latent features like every model's; varm takes
    them as they are, also when there are as many latent features as genes."""
    from omicsbayes.models import IBPFactorModel
    from omicsbayes.tl._anndata import loadings_of

    Y = planted(n=30, d=8).X
    est = IBPFactorModel(n_iter=8, burn_in=4, random_state=0).fit(Y)
    assert est.loadings_.shape == (8, est.latent_.shape[1])
    fitted = est.latent_ @ est.loadings_.T  # samples x genes
    assert fitted.shape == Y.shape
    square = np.arange(16.0).reshape(4, 4)
    est.loadings_ = square
    np.testing.assert_array_equal(loadings_of(est, 4), square)
    with pytest.raises(
        ValueError, match=r"IBPFactorModel.loadings_ has shape \(4, 4\); expected 5"
    ):
        loadings_of(est, 5)


def test_results_survive_h5ad(tmp_path):
    adata = planted()
    tl.rank_factor(adata, "group", **RF)
    tl.pfa(adata, label_key="group", n_factors=3, n_iter=10, burn_in=5, svm_max_iter=20)
    adata.write_h5ad(tmp_path / "fit.h5ad")
    back = ad.read_h5ad(tmp_path / "fit.h5ad")
    np.testing.assert_array_equal(back.obsm["X_pfa"], adata.obsm["X_pfa"])
    assert back.uns["rank_factor"]["params"]["n_factors"] == 3
    assert "pfa_decision" in back.obs


def test_mvgp_on_an_association_anndata_with_a_kernel_from_obsp():
    rng = np.random.default_rng(1)
    U, V = rng.normal(size=(20, 2)), rng.normal(size=(15, 2))
    full = U @ V.T
    observed = rng.uniform(size=full.shape) < 0.5
    adata = ad.AnnData(sp.csr_matrix(np.where(observed, full, 0.0)))
    adata.X.data[:] = full[observed]  # stored entries are the observed ones
    adata.obsp["rows"] = np.eye(20)
    est = tl.mvgp(adata, "MVGP", row_kernel="rows", sigma2=1e-3)
    np.testing.assert_allclose(adata.layers["mvgp"], est.predict_rows())
    assert adata.uns["mvgp"]["n_observed"] == observed.sum()
    fac = tl.mvgp(adata, "KPMF", key_added="kpmf", rank=2, sigma2=0.01, max_iter=300)
    fitted = np.asarray(adata.layers["kpmf"])[observed]
    assert np.corrcoef(fitted, full[observed])[0, 1] > 0.95
    np.testing.assert_array_equal(adata.obsm["X_kpmf"], fac.row_factors_)
    assert adata.varm["kpmf_loadings"].shape == (15, 2)


def test_mcmc_diagnostics_flag_chains_that_disagree():
    import arviz as az

    rng = np.random.default_rng(2)
    same = rng.normal(size=(4, 500))
    apart = rng.normal(size=(4, 500)) + np.array([0, 0, 0, 3.0])[:, None]
    idata = az.from_dict(
        posterior={
            "mixed": same,
            "stuck": apart,
            "theta": rng.normal(size=(4, 500, 3)),  # raw factors: left out
            "train_decision": np.stack([same, apart], axis=-1),  # identifiable: worst element
        }
    )
    table = mcmc_diagnostics(idata)
    assert "theta" not in table.index
    assert table.loc["mixed", "r_hat"] < 1.02 and not table.loc["mixed", "flagged"]
    assert table.loc["mixed", "ess_bulk"] > 1000  # 2000 independent draws
    assert table.loc["stuck", "r_hat"] > 1.05 and table.loc["stuck", "flagged"]
    assert table.loc["train_decision", "r_hat"] == pytest.approx(table.loc["stuck", "r_hat"])
    one_chain = mcmc_diagnostics(az.from_dict(posterior={"mixed": same[:1]}))
    assert one_chain.loc["mixed", "r_hat"] < 1.05 and one_chain.loc["mixed", "ess_bulk"] > 250


def test_a_list_of_task_columns_is_one_joint_multi_task_fit():
    from omicsbayes.models import RankFactorClassifier

    adata = planted(n=45, n_classes=3)
    Y = np.column_stack([(adata.obs["group"] == g).to_numpy(float) for g in ("g0", "g2")])
    Y[:4, 1] = np.nan  # unlabelled for the second task only
    adata.obs["task_a"], adata.obs["task_b"] = Y[:, 0], Y[:, 1]
    est = tl.rank_factor(adata, ["task_a", "task_b"], variant=None, n_factors=2, max_iter=15)
    direct = RankFactorClassifier(n_factors=2, max_iter=15, random_state=0).fit(adata.X, Y)
    np.testing.assert_allclose(est.coef_, direct.coef_)
    np.testing.assert_allclose(
        adata.obs[["rank_factor_decision_task_a", "rank_factor_decision_task_b"]].to_numpy(),
        direct.decision_function(adata.X),
    )
    assert list(adata.uns["rank_factor"]["tasks"]) == ["task_a", "task_b"]
    with pytest.raises(ValueError, match="task column 'group' has 3 classes"):
        tl.rank_factor(adata, ["task_a", "group"], n_factors=2, max_iter=5)


def test_gibbs_fit_stores_its_draws_trace_and_diagnostics():
    adata = planted(n=30, d=10)
    est = tl.rank_factor(
        adata, "group", variant="G-L-BSVM", n_factors=2, inference="gibbs", n_samples=12, burn_in=6
    )
    uns = adata.uns["rank_factor"]
    assert uns["trace_name"] == "log_likelihood"
    np.testing.assert_array_equal(uns["trace"], est.log_likelihood_)
    np.testing.assert_array_equal(
        est.log_likelihood_[6:], est.idata_.sample_stats["log_pseudo_likelihood"].values[0]
    )
    table = uns["diagnostics"]
    assert {"train_decision", "log_pseudo_likelihood"} <= set(table.index)
    assert "scores" not in table.index and "loadings" not in table.index  # not identifiable
    assert (table["n_draws"] == 12).all()
