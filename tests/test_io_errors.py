"""Every bad input gives one CohortError naming the file and what was expected."""

import gzip
import shutil
from pathlib import Path

import pytest

from omicsbayes.io import (
    CohortError,
    parse_barcode,
    read_association_list,
    read_cohort,
    read_cohort_obs,
    read_counts,
    read_edge_list,
    read_geo_series_matrix,
    read_h5ad,
    read_matrix,
    read_tcga,
)

FIX = Path(__file__).parent / "fixtures" / "io"
TCGA = FIX / "COAD.rnaseqv2__RSEM_genes_normalized__data.data.txt"


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def raises(fn, *parts):
    """Call ``fn``; assert CohortError (a ValueError) whose message holds every part."""
    with pytest.raises(CohortError) as info:
        fn()
    assert isinstance(info.value, ValueError)
    msg = str(info.value)
    assert "\n" not in msg, "one message, one line"
    for part in parts:
        assert str(part) in msg, f"{part!r} not in {msg!r}"
    return msg


READERS = {
    "matrix": read_matrix,
    "h5ad": read_h5ad,
    "geo": read_geo_series_matrix,
    "tcga": read_tcga,
    "featurecounts": read_counts,
    "htseq": lambda p: read_counts([p], format="htseq"),
    "star": lambda p: read_counts([p], format="star"),
    "association": read_association_list,
    "edges": read_edge_list,
}


@pytest.mark.parametrize("reader", READERS)
def test_missing_file(tmp_path, reader):
    p = tmp_path / "nope.tsv"
    raises(lambda: READERS[reader](p), "nope.tsv", "not found")


@pytest.mark.parametrize("reader", READERS)
def test_empty_file(tmp_path, reader):
    p = write(tmp_path, "empty.tsv", "")
    raises(lambda: READERS[reader](p), "empty.tsv", "empty")


def test_header_only(tmp_path):
    p = write(tmp_path, "head.tsv", "sample\tG1\tG2\n")
    raises(lambda: read_matrix(p), "head.tsv", "no data rows")
    raises(lambda: read_tcga(write(tmp_path, "t.tsv", "gene\tTCGA-A6-2671-01\n")), "no data rows")
    raises(lambda: read_association_list(p, header=True), "head.tsv", "no data rows")


def test_wrong_delimiter(tmp_path):
    p = write(tmp_path, "commas.tsv", "sample,G1,G2\nS1,1,2\n")
    raises(lambda: read_matrix(p), "commas.tsv", "only one column", "sep=','")
    q = write(tmp_path, "tabs.csv", "sample\tG1\nS1\t1\n")
    raises(lambda: read_matrix(q), "tabs.csv", "only one column", "sep='\\t'")
    raises(
        lambda: read_edge_list(write(tmp_path, "e.tsv", "a b\nb c\n")), "e.tsv", "expected 2 or 3"
    )
    raises(
        lambda: read_association_list(write(tmp_path, "a.tsv", "d1 g1\n")), "a.tsv", "out of range"
    )
    h = write(tmp_path, "S1.counts.txt", "g1,3\ng2,4\n")
    raises(lambda: read_counts([h], format="htseq"), "S1.counts.txt", "expected 2")


def test_non_numeric_cell(tmp_path):
    p = write(tmp_path, "counts.tsv", "gene\tS1\tS2\tS3\nGENE6\t1\t2\t3\nGENE7\t4\t5\tabc\n")
    raises(
        lambda: read_matrix(p, orientation="samples_as_columns"),
        "counts.tsv: column 'S3' has non-numeric value 'abc' at row 'GENE7'; expected numbers",
    )
    h = write(tmp_path, "S1.counts.txt", "g1\t3\ng2\tx\n")
    raises(lambda: read_counts([h], format="htseq"), "S1.counts.txt", "'x'", "'g2'")
    a = write(tmp_path, "assoc.tsv", "d\tg\tv\nd1\tg1\t0.5\nd2\tg1\thigh\n")
    raises(lambda: read_association_list(a, value_column="v"), "assoc.tsv", "'high'", "line 3")


def test_infinite_value(tmp_path):
    p = write(tmp_path, "inf.tsv", "sample\tG1\tG2\nS1\t1\tinf\nS2\t-Inf\t2\n")
    raises(lambda: read_matrix(p), "inf.tsv", "column 'G1' has infinite value '-inf' at row 'S2'")


def test_ragged_rows(tmp_path):
    p = write(tmp_path, "ragged.tsv", "sample\tG1\tG2\nS1\t1\t2\nS2\t3\n")
    raises(lambda: read_matrix(p), "ragged.tsv", "line 3 has 2 fields")
    h = write(tmp_path, "S1.counts.txt", "g1\t3\ng2\t4\t5\n")
    raises(lambda: read_counts([h], format="htseq"), "S1.counts.txt", "different numbers")
    e = write(tmp_path, "edges.tsv", "a\tb\nb\tc\td\n")
    raises(lambda: read_edge_list(e), "edges.tsv", "different numbers")
    s = write(tmp_path, "sheet.tsv", "sample\tx\nS1\ta\tb\n")
    raises(
        lambda: read_matrix(FIX / "expr_rows.tsv", sample_sheet=s),
        "sheet.tsv",
        "line 2 has 3 fields",
    )


def test_duplicated_ids(tmp_path):
    p = write(tmp_path, "dup.tsv", "gene\tS1\tS2\tS1\nG1\t1\t2\t3\n")
    raises(
        lambda: read_matrix(p, orientation="samples_as_columns"),
        "dup.tsv",
        "duplicated sample",
        "'S1'",
    )
    q = write(tmp_path, "dupf.tsv", "gene\tS1\nG1\t1\nG2\t2\nG1\t3\n")
    raises(
        lambda: read_matrix(q, orientation="samples_as_columns"),
        "dupf.tsv",
        "duplicated feature",
        "'G1'",
    )
    s = write(tmp_path, "sheet.tsv", "sample\tx\nS1\ta\nS1\tb\n")
    raises(
        lambda: read_matrix(FIX / "expr_rows.tsv", sample_sheet=s), "sheet.tsv", "duplicated sample"
    )
    h1, h2 = FIX / "htseq" / "S1.counts.txt", tmp_path / "S1.counts.txt"
    shutil.copy(h1, h2)
    raises(lambda: read_counts([h1, h2], format="htseq"), "duplicated sample", "'S1'")


def test_sample_sheet_mismatch_lists_ids(tmp_path):
    s = write(tmp_path, "sheet.tsv", "sample\tx\nS1\ta\nS2\tb\nS4\tc\n")
    raises(
        lambda: read_matrix(FIX / "expr_rows.tsv", sample_sheet=s),
        "expr_rows.tsv",
        "sheet.tsv",
        "in the matrix but not the sheet: 'S3'",
        "in the sheet but not the matrix: 'S4'",
    )
    disjoint = write(tmp_path, "other.tsv", "sample\tx\nG1\ta\nG2\tb\n")
    raises(
        lambda: read_matrix(FIX / "expr_rows.tsv", sample_sheet=disjoint),
        "no sample in common",
        "orientation",
    )
    nocol = write(tmp_path, "nocol.tsv", "id\tx\nS1\ta\n")
    raises(
        lambda: read_matrix(FIX / "expr_rows.tsv", sample_sheet=nocol),
        "nocol.tsv",
        "'sample'",
        "'id'",
    )


def test_label_column_missing():
    spec = {"format": "delimited", "path": "expr_rows.tsv", "sample_sheet": "samples.tsv"}
    raises(
        lambda: read_cohort({**spec, "label": "tissue"}, base_dir=FIX),
        "'tissue'",
        "'group'",
        "'age'",
    )


def test_bad_counts(tmp_path):
    neg = write(tmp_path, "neg.tsv", "gene\tS1\tS2\nG1\t1\t-3\n")
    raises(
        lambda: read_matrix(neg, orientation="samples_as_columns", layer="counts"),
        "neg.tsv",
        "negative count -3",
        "'S2'",
        "'G1'",
    )
    frac = write(tmp_path, "frac.tsv", "gene\tS1\tS2\nG1\t1.5\t3\n")
    raises(
        lambda: read_matrix(frac, orientation="samples_as_columns", layer="counts"),
        "frac.tsv",
        "non-integer count 1.5",
    )
    h = write(tmp_path, "S9.counts.txt", "g1\t3\ng2\t-1\n")
    raises(lambda: read_counts([h], format="htseq"), "S9.counts.txt", "negative count")
    fc = (FIX / "featurecounts.txt").read_text().replace("\t98\t15\t7", "\t98\t15.5\t7")
    raises(lambda: read_counts(write(tmp_path, "fc.txt", fc)), "fc.txt", "non-integer count 15.5")


def test_count_layouts(tmp_path):
    bad = write(tmp_path, "fc.txt", "Geneid\tchr\tS1\nG1\tchr1\t3\n")
    raises(lambda: read_counts(bad), "fc.txt", "Geneid Chr Start End Strand Length")
    star = write(tmp_path, "S1ReadsPerGene.out.tab", "G1\t1\t2\t3\n")
    raises(lambda: read_counts([star], format="star"), "S1ReadsPerGene.out.tab", "N_unmapped")
    other = write(tmp_path, "S3.counts.txt", "ENSG00000223972\t1\nENSG00000999999\t1\n")
    raises(
        lambda: read_counts([FIX / "htseq" / "S1.counts.txt", other], format="htseq"),
        "S3.counts.txt",
        "'ENSG00000227232'",
        "'ENSG00000999999'",
    )
    raises(
        lambda: read_counts(str(tmp_path / "*.none"), format="htseq"), "*.none", "no file matches"
    )
    raises(lambda: read_counts(FIX / "featurecounts.txt", format="kallisto"), "'kallisto'", "htseq")
    raises(lambda: read_counts([star], format="star", star_strand="yes"), "'yes'", "reverse")


def test_tcga_bad_barcode_and_clinical(tmp_path):
    bad = write(tmp_path, "tcga.tsv", "gene\tTCGA-A6-2671-01A\tTCGA.A6.2672.01A\nG|1\t1\t2\n")
    raises(lambda: read_tcga(bad), "tcga.tsv", "'TCGA.A6.2672.01A'", "TCGA-XX-XXXX")
    raises(lambda: parse_barcode("TCGA-A6-26"), "'TCGA-A6-26'")
    clin = write(tmp_path, "clin.tsv", "participant\tmsi\nTCGA-A6-2671\tMSS\n")
    raises(
        lambda: read_tcga(TCGA, clinical=clin),
        "clin.tsv",
        "'TCGA-AA-3662'",
        "'TCGA-AZ-4315'",
    )
    raises(
        lambda: read_tcga(TCGA, clinical=clin, clinical_participant_column="patient"), "'patient'"
    )
    raises(lambda: read_tcga(TCGA, sample_types=("02",)), "no sample of type", "'01', '06', '11'")


def test_geo_truncated(tmp_path):
    text = gzip.decompress((FIX / "GSE99999_series_matrix.txt.gz").read_bytes()).decode()
    cut = text.replace("!series_matrix_table_end\n", "")
    p = tmp_path / "GSE1_series_matrix.txt.gz"
    p.write_bytes(gzip.compress(cut.encode()))
    raises(lambda: read_geo_series_matrix(p), "GSE1_series_matrix.txt.gz", "truncated")
    # a download cut mid-stream: the gzip member itself is incomplete
    q = tmp_path / "GSE2_series_matrix.txt.gz"
    q.write_bytes((FIX / "GSE99999_series_matrix.txt.gz").read_bytes()[:-20])
    raises(lambda: read_geo_series_matrix(q), "GSE2_series_matrix.txt.gz", "truncated")
    r = write(tmp_path, "GSE3.txt", text.replace("!series_matrix_table_begin", "!table"))
    raises(lambda: read_geo_series_matrix(r), "GSE3.txt", "!series_matrix_table_begin")
    s = write(
        tmp_path,
        "GSE4.txt",
        text.replace('"GSM1000002"\t"GSM1000003"\n"1007', '"GSM1000002"\t"GSM1000009"\n"1007'),
    )
    raises(lambda: read_geo_series_matrix(s), "GSE4.txt", "'GSM1000003'", "'GSM1000009'")


def test_h5ad_not_hdf5(tmp_path):
    raises(lambda: read_h5ad(write(tmp_path, "x.h5ad", "not hdf5")), "x.h5ad", "h5ad")


def test_edge_list_errors(tmp_path):
    neg = write(tmp_path, "neg.tsv", "a\tb\t0.5\nb\tc\t-1\n")
    raises(lambda: read_edge_list(neg), "neg.tsv", "negative weight -1", "'b', 'c'", "line 2")
    raises(
        lambda: read_edge_list(FIX / "gene_network.tsv", nodes=["BRCA1", "BRCA2", "TP53"]),
        "gene_network.tsv",
        "'MDM2'",
    )
    clash = write(tmp_path, "clash.tsv", "a\tb\t1\nb\ta\t2\n")
    raises(lambda: read_edge_list(clash), "clash.tsv", "different weights")
    nan = write(tmp_path, "nan.tsv", "a\tb\tNA\n")
    raises(lambda: read_edge_list(nan, header=False), "nan.tsv", "'NA'")


def test_association_errors(tmp_path):
    dup = write(tmp_path, "dup.tsv", "d1\tg1\nd1\tg1\n")
    raises(lambda: read_association_list(dup), "dup.tsv", "('d1', 'g1')", "more than once")
    raises(
        lambda: read_association_list(FIX / "disease_gene.tsv", row_column="omim"),
        "disease_gene.tsv",
        "'omim'",
        "'disease'",
    )
    empty = write(tmp_path, "blank.tsv", "d1\t\n")
    raises(lambda: read_association_list(empty), "blank.tsv", "empty column entity", "line 1")


def test_read_cohort_errors():
    raises(lambda: read_cohort({"format": "xlsx"}), "'xlsx'", "delimited", "simulated_counts")
    raises(lambda: read_cohort({"format": "demo", "name": "mnist"}), "'mnist'", "digits")
    raises(
        lambda: read_cohort({"format": "delimited", "path": "x.tsv", "sampel_sheet": "s.tsv"}),
        "'sampel_sheet'",
        "sample_sheet",
    )
    raises(
        lambda: read_cohort({"format": "delimited", "path": "expr_rows.tsv"}, base_dir="/no/where"),
        "/no/where/expr_rows.tsv",
        "not found",
    )
    raises(
        lambda: read_matrix(FIX / "expr_rows.tsv", orientation="rows"), "'rows'", "samples_as_rows"
    )


@pytest.mark.parametrize("read", [read_cohort, read_cohort_obs])
def test_a_cohort_entry_without_a_key_its_reader_needs_is_refused(read):
    raises(lambda: read({"format": "geo"}), "format 'geo' has no key 'path'")
    raises(lambda: read({"format": "demo"}), "format 'demo' has no key 'name'")
    raises(lambda: read({"format": "hivdb", "path": "x.txt"}), "format 'hivdb' has no key 'drug'")
    raises(lambda: read({"format": "counts"}), "format 'counts' has no key 'path'")  # spec's name
