"""tl.predict scores a new cohort with a fit (in memory or from a file), matching genes by name;
uns[key]["params"] of every tl function rebuilds its estimator."""

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.exceptions import NotFittedError

from omicsbayes import io, models, tl

RNG = np.random.default_rng(1)
GENES = [f"g{j}" for j in range(10)]


def cohort(n, genes=GENES, seed=0, three=False):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % (3 if three else 2)
    X = rng.normal(size=(n, len(genes))) + 1.5 * (y[:, None] == 1) * (np.arange(len(genes)) < 3)
    adata = ad.AnnData(
        X,
        obs=pd.DataFrame({"label": [f"c{v}" for v in y]}, index=[f"s{seed}_{i}" for i in range(n)]),
        var=pd.DataFrame(index=genes),
    )
    adata.layers["counts"] = rng.poisson(np.exp(1 + 0.3 * X)).astype(np.int64)
    adata.var["hv"] = np.arange(len(genes)) % 4 != 3
    return adata


@pytest.fixture(scope="module")
def fitted():
    train = cohort(40)
    est = tl.rank_factor(train, "label", variant="G-L-BSVM", n_factors=2, max_iter=20)
    return train, est


def shuffled_with_extras(adata, seed):
    """The cohort's genes in another order, with three genes the fit never saw."""
    order = np.random.default_rng(seed).permutation(adata.n_vars)
    new = adata[:, order].copy()
    extra = ad.AnnData(
        np.ones((new.n_obs, 3)), obs=new.obs[[]], var=pd.DataFrame(index=["x1", "x2", "x3"])
    )
    extra.layers["counts"] = np.ones((new.n_obs, 3), dtype=np.int64)
    out = ad.concat([new, extra], axis=1, merge="first")
    out.obs = new.obs.copy()
    return out


def test_predict_matches_genes_by_name_from_memory_and_file(fitted, tmp_path):
    _, est = fitted
    new = cohort(12, seed=5)
    expected = est.decision_function(new.X)
    scores = est.transform(new.X)
    moved = shuffled_with_extras(new, 3)
    tl.predict(moved, est, key_added="scored")
    np.testing.assert_array_equal(moved.obs["scored_decision"], expected)
    np.testing.assert_array_equal(moved.obsm["X_scored"], scores)
    assert list(moved.obs["scored_prediction"]) == list(est.predict(new.X))
    assert moved.uns["scored"]["n_genes_used"] == 10 and moved.uns["scored"]["n_genes_ignored"] == 3
    path = io.save_fit(est, tmp_path / "rf.obfit")
    from_file = tl.predict(shuffled_with_extras(new, 4), path, copy=True)
    np.testing.assert_array_equal(from_file.obs["rank_factor_decision"], expected)  # fit's key
    assert from_file.uns["rank_factor"]["fit"] == str(path)
    assert io.read_header(path)["feature_names"] == GENES


def test_missing_and_duplicated_genes_are_one_error(fitted):
    _, est = fitted
    new = cohort(6, seed=2)[:, [g not in ("g1", "g4", "g9") for g in GENES]].copy()
    with pytest.raises(
        ValueError,
        match=r"tl.predict: 3 of the fit's 10 genes are not in adata\.var_names \(g1, g4, g9\)",
    ):
        tl.predict(new, est)
    many = cohort(6, seed=2)[:, [0]].copy()
    with pytest.raises(
        ValueError, match=r"9 of the fit's 10 genes .*\(g1, g2, g3, g4, g5, \.\.\.\)"
    ):
        tl.predict(many, est)
    twice = cohort(6, seed=2)
    twice.var_names = ["g0", "g0", *GENES[2:]]
    with pytest.raises(ValueError, match=r"duplicated gene names \(g0\)"):
        tl.predict(twice, est)


def test_gene_selection_layer_and_one_vs_rest_are_kept(tmp_path):
    train, new = cohort(45, three=True), cohort(9, seed=7, three=True)
    est = tl.pfa(train, label_key="label", mask_var="hv", n_factors=2, n_iter=8, burn_in=4)
    path = io.save_fit(est, tmp_path / "pfa.obfit")
    header = io.read_header(path)
    assert header["layer"] == "counts" and header["feature_names"] == [
        g for g in GENES if g in set(train.var_names[train.var["hv"]])
    ]
    scored = tl.predict(shuffled_with_extras(new, 1), path, copy=True)
    X = new.layers["counts"][:, new.var["hv"].to_numpy()]
    expected = est.decision_function(X)
    for j, task in enumerate(["c0", "c1", "c2"]):
        np.testing.assert_array_equal(scored.obs[f"pfa_decision_{task}"], expected[:, j])
    bam = tl.bam(train, "label", max_iter=10)  # a kernel-map Pipeline in a OneVsRestClassifier
    loaded = io.load_fit(io.save_fit(bam, tmp_path / "bam.obfit"))
    moved = shuffled_with_extras(new, 2)
    moved.X = sp.csr_matrix(moved.X)  # sparse X is taken as stored
    tl.predict(moved, loaded, key_added="b")
    np.testing.assert_array_equal(moved.obs["b_decision_c2"], bam.decision_function(new.X)[:, 2])


def test_what_cannot_be_scored_is_refused(fitted):
    train, est = fitted
    bare = models.BAMClassifier(max_iter=5).fit(train.X, train.obs["label"])
    with pytest.raises(ValueError, match="keeps no gene names"):
        tl.predict(train, bare)
    mvgp = tl.mvgp(train, model="PMF", rank=2, max_iter=20)
    with pytest.raises(ValueError, match="PMF has no transform or decision_function"):
        tl.predict(train, mvgp)
    with pytest.raises(TypeError, match=r"RankFactorClassifier got an AnnData.*tl\.predict"):
        est.decision_function(train)
    with pytest.raises(TypeError, match=r"BAMClassifier got an AnnData.*tl\.predict"):
        bare.decision_function(train)
    frame = pd.DataFrame(train.X, columns=train.var_names)
    np.testing.assert_array_equal(bare.decision_function(frame), bare.decision_function(train.X))
    with pytest.raises(TypeError, match=r"tl\.predict: fit is a int; expected a fitted estimator"):
        tl.predict(train, 3)
    with pytest.raises(NotFittedError, match=r"tl\.predict: This BAMClassifier instance is not"):
        tl.predict(train, models.BAMClassifier())


TL_FITS = {
    "rank_factor": lambda a: tl.rank_factor(a, "label", variant="G-L-BSVM", max_iter=5),
    "bam": lambda a: tl.bam(a, "label", max_iter=5),
    "bprobit": lambda a: tl.bam(a, "label", variant="BPROBIT", kernel=None, max_iter=5),
    "bm2pca": lambda a: tl.bm2pca(a, "label", n_components=2, max_iter=5),
    "rflvm": lambda a: tl.rflvm(a, n_iter=4, burn_in=2, n_random_features=4, hmc_leapfrog=2),
    "ibp_factor": lambda a: tl.ibp_factor(a, n_iter=4, burn_in=2),
    "pfa": lambda a: tl.pfa(a, n_factors=2, n_iter=4, burn_in=2),
    "pfa_classifier": lambda a: tl.pfa(a, label_key="label", n_factors=2, n_iter=4, burn_in=2),
    "mvgp": lambda a: tl.mvgp(a, model="KPMF", rank=2, max_iter=5),
}


@pytest.mark.parametrize("name", sorted(TL_FITS))
def test_params_in_uns_rebuild_the_estimator(name, tmp_path):
    adata = cohort(20, seed=3)
    est = TL_FITS[name](adata)
    path = tmp_path / "fit.h5ad"
    adata.write_h5ad(path)
    uns = ad.read_h5ad(path).uns[{"bprobit": "bam", "pfa_classifier": "pfa"}.get(name, name)]
    core = est[-1] if hasattr(est, "steps") else est
    rebuilt = getattr(models, uns["model"])(**uns["params"])
    assert type(rebuilt) is type(core)
    rebuilt._validate_params()
    for key, value in core.get_params(deep=False).items():
        back = rebuilt.get_params(deep=False)[key]
        assert (back is None) if value is None else np.array_equal(back, value), key
