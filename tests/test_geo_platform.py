"""GEO platform annotation: probes -> gene symbols, collapsed by mean or max-mean, against a
hand-checked series of 2 samples x 6 probes (tests/fixtures/io/GSE99999_series_matrix.txt.gz is
the 4-probe series; these tests write their own)."""

import gzip
import logging

import numpy as np
import pandas as pd
import pytest

from omicsbayes.config import ConfigError
from omicsbayes.io import CohortError, read_cohort, read_geo_platform, read_geo_series_matrix

SERIES = """!Series_title\t"hand-checked series"
!Series_geo_accession\t"GSE1"
!Sample_title\t"a"\t"b"
!Sample_geo_accession\t"GSM1"\t"GSM2"
!Sample_characteristics_ch1\t"group: x"\t"group: y"
!Sample_platform_id\t"GPL570"\t"GPL570"
!series_matrix_table_begin
"ID_REF"\t"GSM1"\t"GSM2"
"p1"\t1\t3
"p2"\t5\t7
"p3"\t2\tnull
"p4"\t9\t9
"p5"\t4\t4
"p6"\t8\t0
!series_matrix_table_end
"""
# .annot layout: ^/!/# header lines, !platform_table_begin, "Gene symbol" column
ANNOT = """^Annotation
!Annotation_date = Jun 23 2012
!Annotation_platform = GPL570
#ID = Identifier for the platform feature
#Gene symbol = Entrez Gene symbol
!platform_table_begin
ID\tGene title\tGene symbol\tGene ID
p1\tgene A\tGA\t1
p2\tgene A\tGA\t1
p3\tgene B\tGB\t2
p4\t\t\t
p5\tgene A and C\tGA /// GC\t1 /// 3
p6\tgene C\tGC\t3
!platform_table_end
"""


@pytest.fixture
def files(tmp_path):
    series = tmp_path / "GSE1_series_matrix.txt.gz"
    with gzip.open(series, "wt") as fh:
        fh.write(SERIES)
    annot = tmp_path / "GPL570.annot"
    annot.write_text(ANNOT)
    return series, annot


def test_platform_table_both_layouts(tmp_path, files):
    symbols, platform = read_geo_platform(files[1])
    assert platform == "GPL570"
    assert symbols.drop("p4").to_dict() == {
        "p1": "GA", "p2": "GA", "p3": "GB", "p5": "GA /// GC", "p6": "GC"
    }  # fmt: skip
    assert pd.isna(symbols["p4"])  # an empty cell is no symbol
    # the full table ("Download full table"): '#' comments, "Gene Symbol", '---' for none
    full = tmp_path / "GPL570-55999.txt"
    full.write_text(
        "# ID = Affymetrix Probe Set ID\n# Gene Symbol = gene symbol\n"
        "ID\tGB_ACC\tGene Symbol\tENTREZ_GENE_ID\np1\tU1\tGA\t1\np2\tU2\t---\t---\n"
    )
    symbols, platform = read_geo_platform(full)
    assert platform is None and symbols["p1"] == "GA" and pd.isna(symbols["p2"])
    illumina = tmp_path / "GPL6947.txt"
    illumina.write_text("ID\tSymbol\nILMN_1\tGA\n")
    assert read_geo_platform(illumina, symbol_column="Symbol")[0]["ILMN_1"] == "GA"
    with pytest.raises(CohortError, match="symbol_column"):
        read_geo_platform(illumina)


def test_symbols_without_collapse_keep_every_probe(files):
    g = read_geo_series_matrix(files[0], annotation=files[1])
    assert list(g.var_names) == ["p1", "p2", "p3", "p4", "p5", "p6"]
    assert g.var["gene_symbol"].iloc[[0, 1, 2, 4, 5]].tolist() == [
        "GA", "GA", "GB", "GA /// GC", "GC"
    ]  # fmt: skip
    assert pd.isna(g.var["gene_symbol"].iloc[3])


def test_collapse_mean_by_hand(files, caplog):
    with caplog.at_level(logging.INFO, logger="omicsbayes"):
        g = read_geo_series_matrix(files[0], annotation=files[1], collapse="mean")
    # p4 (no symbol) and p5 (GA /// GC) dropped; GA = mean(p1, p2), GB = p3, GC = p6
    assert list(g.obs_names) == ["GSM1", "GSM2"]
    assert list(g.var_names) == ["GA", "GB", "GC"]
    expected = np.array([[3.0, 2.0, 8.0], [5.0, np.nan, 0.0]])
    np.testing.assert_array_equal(g.X, expected)
    np.testing.assert_array_equal(g.layers["intensity"], expected)
    assert g.var["n_probes"].tolist() == [2, 1, 1]
    assert g.var["probe"].tolist() == ["p1,p2", "p3", "p6"]
    assert g.uns["geo"]["collapse"] == {
        "method": "mean",
        "n_probes": 6,
        "n_genes": 3,
        "n_probes_without_symbol": 1,
        "n_probes_multi_gene": 1,
    }
    assert g.uns["geo"]["series"] == "GSE1"
    assert "dropped 1 probes without a gene symbol and 1 annotated with several" in caplog.text
    assert list(g.obs["group"]) == ["x", "y"]


def test_collapse_max_mean_by_hand(files):
    g = read_geo_series_matrix(files[0], annotation=files[1], collapse="max_mean")
    # GA: p1 mean 2, p2 mean 6 -> p2; GB: p3 (mean over its observed value); GC: p6
    assert g.var["probe"].tolist() == ["p2", "p3", "p6"]
    np.testing.assert_array_equal(g.X, np.array([[5.0, 2.0, 8.0], [7.0, np.nan, 0.0]]))


def test_collapse_through_read_cohort_and_h5ad(tmp_path, files):
    spec = {
        "format": "geo",
        "path": files[0].name,
        "annotation": files[1].name,
        "collapse": "max_mean",
        "label": "group",
    }
    g = read_cohort(spec, base_dir=tmp_path)
    g.write_h5ad(tmp_path / "raw.h5ad")  # NaN symbols and the uns record survive h5ad
    assert list(g.var_names) == ["GA", "GB", "GC"] and g.uns["label_column"] == "group"
    probes = read_cohort({k: spec[k] for k in ("format", "path", "annotation")}, tmp_path)
    probes.write_h5ad(tmp_path / "probes.h5ad")


def test_annotation_errors(tmp_path, files):
    with pytest.raises(CohortError, match="needs the platform annotation table"):
        read_geo_series_matrix(files[0], collapse="mean")
    with pytest.raises(CohortError, match="'median' is not known"):
        read_geo_series_matrix(files[0], annotation=files[1], collapse="median")
    other = tmp_path / "GPL96.annot"
    other.write_text(ANNOT.replace("GPL570", "GPL96"))
    with pytest.raises(CohortError, match="platform table of GPL96.*GPL570"):
        read_geo_series_matrix(files[0], annotation=other)
    wrong = tmp_path / "wrong.annot"
    wrong.write_text("ID\tGene symbol\nILMN_1\tGA\n")
    with pytest.raises(CohortError, match="none of the 6 probe IDs"):
        read_geo_series_matrix(files[0], annotation=wrong)
    no_id = tmp_path / "noid.annot"
    no_id.write_text("Probe\tGene symbol\np1\tGA\n")
    with pytest.raises(CohortError, match="no 'ID' column"):
        read_geo_platform(no_id)
    dup = tmp_path / "dup.annot"
    dup.write_text("ID\tGene symbol\np1\tGA\np1\tGB\n")
    with pytest.raises(CohortError, match="duplicated probe IDs"):
        read_geo_platform(dup)


def test_config_schema_refuses_collapse_without_annotation(tiny_config, workflow_checks):
    tiny_config["cohorts"]["breast_cancer"] = {
        "format": "geo",
        "path": "GSE1_series_matrix.txt.gz",
        "collapse": "max_mean",
        "label": "group",
    }
    with pytest.raises(ConfigError, match="'annotation' is a dependency of 'collapse'"):
        workflow_checks(tiny_config)
    tiny_config["cohorts"]["breast_cancer"].update(annotation="GPL570.annot", collapse="median")
    with pytest.raises(ConfigError, match="'median' is not one of"):
        workflow_checks(tiny_config)


def test_probe_absent_from_the_table_has_no_symbol(tmp_path, files, caplog):
    short = tmp_path / "GPL570_short.annot"
    short.write_text(ANNOT.replace("p6\tgene C\tGC\t3\n", ""))
    with caplog.at_level(logging.INFO, logger="omicsbayes"):
        g = read_geo_series_matrix(files[0], annotation=short)
        collapsed = read_geo_series_matrix(files[0], annotation=short, collapse="mean")
    assert pd.isna(g.var.loc["p6", "gene_symbol"]) and g.n_vars == 6
    assert (
        "4 of 6 probes have a gene symbol (1 not in the table, 1 without a symbol)" in caplog.text
    )
    assert list(collapsed.var_names) == ["GA", "GB"]
    assert collapsed.uns["geo"]["collapse"]["n_probes_without_symbol"] == 2
