"""Cohort readers on small fixtures in the real formats (tests/fixtures/io): values checked
against the numbers written in the fixture files by hand."""

from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import pytest

from omicsbayes.io import (
    read_association_list,
    read_counts,
    read_edge_list,
    read_geo_series_matrix,
    read_h5ad,
    read_matrix,
    read_tcga,
)
from omicsbayes.io._common import CohortError

FIX = Path(__file__).parent / "fixtures" / "io"
EXPR = np.array([[1.5, 2.0, 3.25], [4.0, 5.0, 6.0], [7.0, 8.5, np.nan]])


def test_matrix_samples_as_rows_with_sheet():
    a = read_matrix(FIX / "expr_rows.tsv", sample_sheet=FIX / "samples.tsv")
    assert a.obs_names.tolist() == ["S1", "S2", "S3"]
    assert a.var_names.tolist() == ["G1", "G2", "G3"]
    assert a.X.dtype == np.float64
    np.testing.assert_array_equal(a.X, EXPR)
    np.testing.assert_array_equal(a.layers["intensity"], EXPR)
    # the sheet lists S3 first: rows follow the matrix, values follow the IDs
    assert a.obs["group"].tolist() == ["A", "B", "A"]
    assert a.obs["age"].tolist() == [30, 41, 52]
    assert isinstance(a.obs["group"].dtype, pd.CategoricalDtype)


def test_matrix_samples_as_columns_csv_gz_equals_rows_tsv():
    b = read_matrix(FIX / "expr_cols.csv.gz", orientation="samples_as_columns")
    assert b.obs_names.tolist() == ["S1", "S2", "S3"]
    assert b.var_names.tolist() == ["G1", "G2", "G3"]
    np.testing.assert_array_equal(b.X, EXPR)
    assert b.obs.shape == (3, 0)


def test_matrix_counts_layer_is_integer():
    a = read_matrix(FIX / "counts_matrix.tsv", orientation="samples_as_columns", layer="counts")
    assert a.layers["counts"].dtype == np.int64
    np.testing.assert_array_equal(a.layers["counts"], [[0, 7], [12, 0], [5, 130]])
    assert a.X.dtype == np.float64


def test_matrix_explicit_sep_and_r_style_header(tmp_path):
    # write.table(row.names=TRUE) omits the row-name field from the header
    p = tmp_path / "r_style.dat"
    p.write_text("G1;G2\nS1;1;2\nS2;3;4\n")
    a = read_matrix(p, sep=";")
    assert a.obs_names.tolist() == ["S1", "S2"] and a.var_names.tolist() == ["G1", "G2"]
    np.testing.assert_array_equal(a.X, [[1, 2], [3, 4]])


@pytest.mark.parametrize(
    ("name", "sep", "orientation"),
    [("m.tsv", "\t", "samples_as_rows"), ("m.csv.gz", ",", "samples_as_columns")],
)
def test_matrix_round_trip(tmp_path, name, sep, orientation):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        rng.normal(size=(4, 5)),
        index=[f"P{i}" for i in range(4)],
        columns=[f"ENSG{j:03d}" for j in range(5)],
    )
    written = frame if orientation == "samples_as_rows" else frame.T
    written.rename_axis("id").to_csv(tmp_path / name, sep=sep)
    sheet = pd.DataFrame({"sample": frame.index, "label": ["a", "b", "a", "b"]})
    sheet.to_csv(tmp_path / "s.tsv", sep="\t", index=False)
    a = read_matrix(tmp_path / name, sample_sheet=tmp_path / "s.tsv", orientation=orientation)
    np.testing.assert_array_equal(a.X, frame.to_numpy())  # full precision survives
    assert a.obs_names.tolist() == frame.index.tolist()
    assert a.var_names.tolist() == frame.columns.tolist()
    assert a.obs["label"].tolist() == ["a", "b", "a", "b"]


def test_h5ad_round_trip(tmp_path):
    counts = np.array([[1, 0, 3], [4, 5, 6]], dtype=np.int64)
    src = ad.AnnData(
        X=counts,
        obs=pd.DataFrame({"label": ["x", "y"]}, index=["s1", "s2"]),
        var=pd.DataFrame(index=["g1", "g2", "g3"]),
    )
    src.write_h5ad(tmp_path / "c.h5ad")
    a = read_h5ad(tmp_path / "c.h5ad")
    assert a.X.dtype == np.float64
    np.testing.assert_array_equal(a.X, counts)
    np.testing.assert_array_equal(a.layers["counts"], counts)
    assert a.obs["label"].tolist() == ["x", "y"]
    assert a.var_names.tolist() == ["g1", "g2", "g3"]


def test_h5ad_float_x_is_kept_once(tmp_path):
    values = np.random.default_rng(0).normal(size=(20, 50))
    ad.AnnData(X=values.astype(np.float32)).write_h5ad(tmp_path / "f.h5ad")
    a = read_h5ad(tmp_path / "f.h5ad")
    assert a.X.dtype == np.float64 and list(a.layers) == []  # no copy of X as a layer
    np.testing.assert_array_equal(a.X, values.astype(np.float32))
    a.write_h5ad(tmp_path / "again.h5ad")
    assert list(ad.read_h5ad(tmp_path / "again.h5ad").layers) == []


def test_geo_series_matrix():
    g = read_geo_series_matrix(FIX / "GSE99999_series_matrix.txt.gz")
    assert g.obs_names.tolist() == ["GSM1000001", "GSM1000002", "GSM1000003"]
    assert g.var_names.tolist() == ["1007_s_at", "1053_at", "117_at", "121_at"]
    expected = np.array([[10.5, 5.5, 7, 3.5], [9.25, np.nan, 8, 4.5], [11, 6.75, 9, 5.5]])
    np.testing.assert_array_equal(g.X, expected)  # "null" is missing
    np.testing.assert_array_equal(g.layers["intensity"], expected)
    assert g.obs["title"].tolist() == ["tumour 1", "tumour 2", "tumour 3"]
    assert g.obs["er"].tolist() == [1, 0, 1]
    assert g.obs["grade"].tolist() == [3, 2, 1]
    # one characteristics line with a different key per sample, one sample without
    assert g.obs["tissue"].iloc[0] == "breast" and g.obs["tissue"].iloc[1:].isna().all()
    assert g.obs["node status"].iloc[1] == "negative"
    assert g.obs["node status"].iloc[[0, 2]].isna().all()
    assert g.obs["source_name_ch1"].tolist() == ["breast tumour"] * 3
    assert g.uns["geo"]["series"] == "GSE99999"


def test_tcga_primary_tumours_and_clinical():
    t = read_tcga(
        FIX / "COAD.rnaseqv2__RSEM_genes_normalized__data.data.txt",
        clinical=FIX / "COAD.clinical.tsv",
    )
    assert t.obs_names.tolist() == [
        "TCGA-A6-2671-01A-01R-1410-07",
        "TCGA-AA-3662-01A-01R-0821-07",
        "TCGA-AZ-4315-01A-01R-1410-07",
    ]
    assert t.obs["participant"].tolist() == ["TCGA-A6-2671", "TCGA-AA-3662", "TCGA-AZ-4315"]
    assert t.obs["sample_type_code"].tolist() == ["01"] * 3
    # clinical joined by participant (the lower-case Firehose ID matches too)
    assert t.obs["msi_status"].tolist() == ["MSI-H", "MSS", "MSS"]
    assert t.obs["age_at_diagnosis"].tolist() == [85, 61, 77]
    assert t.var_names.tolist() == ["?|100130426", "MLH1|4292", "TP53|7157"]
    assert t.var["symbol"].iloc[1:].tolist() == ["MLH1", "TP53"]
    assert pd.isna(t.var["symbol"].iloc[0])
    assert t.var["entrez"].tolist() == ["100130426", "4292", "7157"]
    np.testing.assert_array_equal(
        t.X, [[0.0, 1200.5, 300.0], [0.9066, 80.25, 410.5], [0.0, 1100.0, 100.0]]
    )


def test_tcga_all_sample_types_without_clinical():
    t = read_tcga(FIX / "COAD.rnaseqv2__RSEM_genes_normalized__data.data.txt", sample_types=None)
    assert t.n_obs == 5
    assert t.obs["sample_type_code"].tolist() == ["01", "11", "01", "06", "01"]
    assert t.obs["sample_type"].iloc[1] == "Solid Tissue Normal"
    t2 = read_tcga(
        FIX / "COAD.rnaseqv2__RSEM_genes_normalized__data.data.txt", sample_types=("11", "06")
    )
    assert t2.obs["participant"].tolist() == ["TCGA-A6-2671", "TCGA-AA-3664"]


def test_tcga_xena_layout(tmp_path):
    p = tmp_path / "HiSeqV2"
    p.write_text("sample\tTCGA-A6-2671-01\tTCGA-A6-2671-11\nMLH1\t10.25\t11\nTP53\t9\t8.5\n")
    t = read_tcga(p, sample_types=("01", "11"))
    assert t.obs["participant"].tolist() == ["TCGA-A6-2671"] * 2
    assert t.obs["vial"].tolist() == ["", ""]
    assert t.var["symbol"].tolist() == ["MLH1", "TP53"] and t.var["entrez"].isna().all()
    np.testing.assert_array_equal(t.X, [[10.25, 9], [11, 8.5]])


def test_tcga_xena_clinical_matrix_joins_by_sample(tmp_path):
    """UCSC Xena's clinical matrix has one row per sample (``sampleID``), so a participant with a
    tumour and a normal sample has two rows: each sample gets its own row's values."""
    matrix = tmp_path / "HiSeqV2"
    matrix.write_text(
        "sample\tTCGA-A6-2671-01\tTCGA-A6-2671-11\tTCGA-AA-3500-01\n"
        "MLH1\t10.25\t11\t3\nTP53\t9\t8.5\t2\n"
    )
    clinical = tmp_path / "COADREAD_clinicalMatrix"
    clinical.write_text(
        "sampleID\t_PATIENT\tCDE_ID_3226963\tsample_type\n"
        "TCGA-A6-2671-11\tTCGA-A6-2671\tMSI-H\tSolid Tissue Normal\n"
        "TCGA-A6-2671-01\tTCGA-A6-2671\tMSI-H\tPrimary Tumor\n"
        "TCGA-AA-3500-01\tTCGA-AA-3500\tMSS\tPrimary Tumor\n"
    )
    t = read_tcga(matrix, clinical, sample_types=None, clinical_participant_column="_PATIENT")
    assert t.obs["CDE_ID_3226963"].tolist() == ["MSI-H", "MSI-H", "MSS"]
    assert t.obs["clinical_sample_type"].tolist() == [
        "Primary Tumor",
        "Solid Tissue Normal",
        "Primary Tumor",
    ]
    clinical.write_text(
        clinical.read_text().replace("TCGA-AA-3500-01\tTCGA-AA", "TCGA-AA-3500-06\tTCGA-AA")
    )
    with pytest.raises(CohortError, match=r"1 samples have no row .*'TCGA-AA-3500-01'"):
        read_tcga(matrix, clinical, sample_types=None, clinical_participant_column="_PATIENT")
    clinical.write_text("_PATIENT\tmsi\nTCGA-A6-2671\tMSI-H\nTCGA-A6-2671\tMSS\n")
    with pytest.raises(CohortError, match="duplicated participant IDs: 'TCGA-A6-2671'"):
        read_tcga(matrix, clinical, sample_types=None, clinical_participant_column="_PATIENT")


def test_featurecounts():
    c = read_counts(FIX / "featurecounts.txt", format="featurecounts")
    assert c.obs_names.tolist() == ["S1", "S2"]
    assert c.var_names.tolist() == ["ENSG00000223972", "ENSG00000227232", "ENSG00000243485"]
    np.testing.assert_array_equal(c.layers["counts"], [[0, 15, 3], [2, 7, 0]])
    assert c.layers["counts"].dtype == np.int64
    assert c.var["length"].tolist() == [468, 98, 590]
    assert c.var["chr"].iloc[0] == "chr1;chr1"


def test_htseq_glob_reorders_genes_and_keeps_qc():
    c = read_counts(str(FIX / "htseq" / "*.counts.txt"), format="htseq")
    assert c.obs_names.tolist() == ["S1", "S2"]
    assert c.var_names.tolist() == ["ENSG00000223972", "ENSG00000227232", "ENSG00000243485"]
    # S2 lists its genes in another order; counts follow the gene IDs
    np.testing.assert_array_equal(c.layers["counts"], [[0, 15, 3], [2, 7, 0]])
    assert c.obs["qc_no_feature"].tolist() == [100, 80]
    assert c.obs["qc_alignment_not_unique"].tolist() == [12, 4]
    assert not any(v.startswith("__") for v in c.var_names)


@pytest.mark.parametrize(
    ("strand", "expected", "no_feature"),
    [
        ("unstranded", [[0, 15, 3], [2, 7, 0]], [30, 31]),
        ("forward", [[0, 1, 3], [1, 0, 0]], [300, 310]),
        ("reverse", [[0, 14, 0], [1, 7, 0]], [40, 41]),
    ],
)
def test_star_strand_columns(strand, expected, no_feature):
    files = [FIX / "star" / "S1_ReadsPerGene.out.tab", FIX / "star" / "S2" / "ReadsPerGene.out.tab"]
    c = read_counts(files, format="star", star_strand=strand)
    assert c.obs_names.tolist() == ["S1", "S2"]  # S2 named by its folder
    np.testing.assert_array_equal(c.layers["counts"], expected)
    assert c.obs["qc_noFeature"].tolist() == no_feature
    assert c.obs["qc_unmapped"].tolist() == [10, 11]
    assert c.n_vars == 3


def test_counts_with_sample_sheet(tmp_path):
    (tmp_path / "s.tsv").write_text("sample\tcondition\nS2\ttreated\nS1\tcontrol\n")
    c = read_counts(FIX / "featurecounts.txt", sample_sheet=tmp_path / "s.tsv")
    assert c.obs["condition"].tolist() == ["control", "treated"]


def test_association_list_by_name_and_position():
    by_name = read_association_list(
        FIX / "disease_gene.tsv", row_column="disease", col_column="gene", value_column="score"
    )
    by_pos = read_association_list(FIX / "disease_gene.tsv", value_column=2)
    expected = pd.DataFrame(
        {
            "row": ["OMIM:114480", "OMIM:114480", "OMIM:604370"],
            "col": ["BRCA1", "BRCA2", "BRCA1"],
            "value": [1.0, 0.5, 1.0],
        }
    )
    pd.testing.assert_frame_equal(by_name, expected, check_dtype=False)
    pd.testing.assert_frame_equal(by_pos, expected, check_dtype=False)
    ones = read_association_list(FIX / "disease_gene.tsv", header=True)
    assert ones["value"].tolist() == [1.0, 1.0, 1.0]


def test_association_list_round_trip(tmp_path):
    frame = pd.DataFrame(
        {"row": ["d1", "d2", "d2"], "col": ["g1", "g1", "g3"], "value": [2.5, 1, 3]}
    )
    frame.to_csv(tmp_path / "a.csv", index=False, header=False)
    back = read_association_list(tmp_path / "a.csv", value_column=2)
    pd.testing.assert_frame_equal(back, frame, check_dtype=False)


def test_edge_list_symmetric_with_given_nodes():
    adj, nodes = read_edge_list(FIX / "gene_network.tsv", nodes=["TP53", "BRCA1", "BRCA2", "MDM2"])
    assert nodes == ["TP53", "BRCA1", "BRCA2", "MDM2"]
    dense = adj.toarray()
    expected = np.array(
        [[0, 0.4, 0, 1.0], [0.4, 0, 0.9, 0], [0, 0.9, 0, 0], [1.0, 0, 0, 0]], dtype=float
    )
    np.testing.assert_array_equal(dense, expected)
    assert adj.format == "csr"


def test_edge_list_unweighted_both_directions_and_self_loop(tmp_path):
    p = tmp_path / "e.csv"
    p.write_text("a,b\nb,a\nc,c\n")
    adj, nodes = read_edge_list(p)
    assert nodes == ["a", "b", "c"]
    np.testing.assert_array_equal(adj.toarray(), [[0, 1, 0], [1, 0, 0], [0, 0, 1]])


def test_trailing_delimiter_is_not_a_column(tmp_path):
    p = tmp_path / "trail.tsv"
    p.write_text("sample\tG1\tG2\nS1\t1\t2\t\nS2\t3\t4\t\n")
    a = read_matrix(p)
    assert a.var_names.tolist() == ["G1", "G2"]
    np.testing.assert_array_equal(a.X, [[1, 2], [3, 4]])


@pytest.mark.parametrize(
    "load",
    [
        lambda: read_matrix(FIX / "expr_rows.tsv", sample_sheet=FIX / "samples.tsv"),
        lambda: read_geo_series_matrix(FIX / "GSE99999_series_matrix.txt.gz"),
        lambda: read_tcga(
            FIX / "COAD.rnaseqv2__RSEM_genes_normalized__data.data.txt",
            clinical=FIX / "COAD.clinical.tsv",
        ),
        lambda: read_counts(str(FIX / "htseq" / "*.txt"), format="htseq"),
        lambda: read_counts(FIX / "featurecounts.txt"),
    ],
    ids=["matrix", "geo", "tcga", "htseq", "featurecounts"],
)
def test_reader_output_survives_h5ad(tmp_path, load):
    """The workflow stores every cohort as raw.h5ad: each reader's output must write and read
    back unchanged."""
    a = load()
    a.write_h5ad(tmp_path / "raw.h5ad")
    b = read_h5ad(tmp_path / "raw.h5ad")
    np.testing.assert_array_equal(a.X, b.X)
    assert list(a.layers) == list(b.layers)
    for name in a.layers:
        np.testing.assert_array_equal(a.layers[name], b.layers[name])
    pd.testing.assert_frame_equal(a.obs, b.obs, check_dtype=False, check_categorical=False)
    assert a.var_names.tolist() == b.var_names.tolist()
