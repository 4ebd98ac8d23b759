"""A cohort's sample sheet read before its data job: omicsbayes.io.read_cohort_obs gives the
``.obs`` the reader gives, for every format, without reading the matrix; the config check
(omicsbayes.config.check_cohort_labels) reads it for every cohort kind, URL cohorts on their
fetched copies; and label strings meaning missing are missing labels in the check, the splits
and the tasks, with tl's warning."""

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from omicsbayes.config import ConfigError, check_cohort_labels, cohort_sample_sheet
from omicsbayes.io._common import CohortError
from omicsbayes.io.cohort import read_cohort, read_cohort_obs
from omicsbayes.protocols.classification import Classification, task_targets

FIXTURES = Path(__file__).resolve().parent / "fixtures"
EXAMPLES = FIXTURES / "examples"
TCGA_MATRIX = next((EXAMPLES / "tcga").glob("*.data.txt.gz"))
COHORTS = {
    "geo": {"format": "geo", "path": str(EXAMPLES / "geo" / "GSE900001_series_matrix.txt.gz")},
    "tcga": {
        "format": "tcga",
        "path": str(TCGA_MATRIX),
        "clinical": str(EXAMPLES / "tcga" / "COADREAD.clinical.tsv"),
    },
    "tcga_r_layout": {
        "format": "tcga",
        "path": str(FIXTURES / "io" / "COAD.rnaseqv2__RSEM_genes_normalized__data.data.txt"),
        "clinical": str(FIXTURES / "io" / "COAD.clinical.tsv"),
        "sample_types": None,
    },
    "hivdb": {
        "format": "hivdb",
        "path": str(EXAMPLES / "hivdb" / "NRTI_DataSet.txt.gz"),
        "drug": "DDC",
    },
    "featurecounts": {
        "format": "counts",
        "path": str(EXAMPLES / "rnaseq" / "counts.txt.gz"),
        "sample_sheet": str(EXAMPLES / "rnaseq" / "samples.tsv"),
    },
    "htseq": {
        "format": "counts",
        "count_format": "htseq",
        "path": str(FIXTURES / "io" / "htseq" / "*"),
    },
    "star": {
        "format": "counts",
        "count_format": "star",
        "star_strand": "reverse",
        "path": [
            str(FIXTURES / "io" / "star" / "S1_ReadsPerGene.out.tab"),
            str(FIXTURES / "io" / "star" / "S2" / "ReadsPerGene.out.tab"),
        ],
    },
    "delimited": {
        "format": "delimited",
        "path": str(FIXTURES / "io" / "expr_rows.tsv"),
        "sample_sheet": str(FIXTURES / "io" / "samples.tsv"),
    },
    "demo": {"format": "demo", "name": "gse7390"},
}


@pytest.fixture(scope="module")
def h5ad_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("h5ad") / "gse7390.h5ad"
    read_cohort({"format": "demo", "name": "gse7390"}).write_h5ad(path)
    return path


@pytest.mark.parametrize("kind", [*sorted(COHORTS), "h5ad"])
def test_obs_alone_is_the_readers_obs(kind, h5ad_path):
    spec = COHORTS.get(kind, {"format": "h5ad", "path": str(h5ad_path)})
    full = read_cohort(spec).obs
    obs = read_cohort_obs(spec)
    assert set(obs.index) == set(full.index)
    only_full = {"n_uncovered"} if kind == "hivdb" else set()  # counted from the position columns
    if kind == "htseq":  # HTSeq's summary rows are its last lines: left to the reader
        only_full = {c for c in full.columns if c.startswith("qc_")}
        assert only_full
    assert list(obs.columns) == [c for c in full.columns if c not in only_full]
    pd.testing.assert_frame_equal(obs.loc[full.index], full[obs.columns])


def test_simulated_labels_have_the_simulated_class_sizes():
    spec = {
        "format": "simulated_counts",
        "n_samples": 31,
        "n_classes": 3,
        "n_genes": 20,
        "n_informative": 6,
    }
    drawn = read_cohort(spec).obs["label"].value_counts().sort_index()
    pd.testing.assert_series_equal(
        read_cohort_obs(spec)["label"].value_counts().sort_index(), drawn
    )


def test_obs_readers_stop_before_the_matrix(tmp_path):
    """A series matrix whose table is garbage and an HIVDB file whose position cells are: the
    obs readers never get there."""
    import gzip

    text = gzip.open(COHORTS["geo"]["path"], "rt").read()
    head = text[: text.index("!series_matrix_table_begin")]
    series = tmp_path / "GSE1_series_matrix.txt"
    series.write_text(head + "!series_matrix_table_begin\nnot a table at all\n")
    assert read_cohort_obs({"format": "geo", "path": str(series)})["illness"].notna().all()
    frame = pd.read_csv(COHORTS["hivdb"]["path"], sep="\t", dtype=str, keep_default_na=False)
    frame["P41"] = "?!"
    broken = tmp_path / "NRTI.txt"
    frame.to_csv(broken, sep="\t", index=False)
    spec = {**COHORTS["hivdb"], "path": str(broken)}
    assert len(read_cohort_obs(spec)) == len(read_cohort_obs(COHORTS["hivdb"]))


def test_htseq_files_are_read_no_further_than_their_first_line(tmp_path):
    """The sheet check reads an HTSeq file's first line only: a file whose later lines are not
    counts at all still gives its sample, while a missing file, an empty one or a first line
    that is not ``gene<TAB>count`` is refused naming the file, as the reader refuses them."""
    folder = tmp_path / "htseq"
    folder.mkdir()
    for source in sorted((FIXTURES / "io" / "htseq").iterdir()):
        shutil.copy(source, folder / source.name)
    with open(folder / "S2.counts.txt", "a") as fh:
        fh.write("not\ta\tcount table\n" * 1000)
    sheet = tmp_path / "samples.tsv"
    sheet.write_text("sample\tgroup\nS1\ta\nS2\tb\n")
    spec = {**COHORTS["htseq"], "path": str(folder / "*"), "sample_sheet": str(sheet)}
    assert read_cohort_obs(spec)["group"].tolist() == ["a", "b"]
    with pytest.raises(CohortError, match="S2.counts.txt: rows have different numbers"):
        read_cohort(spec)
    (folder / "S2.counts.txt").write_text("gene_id,count\nENSG1,3\n")
    with pytest.raises(CohortError, match=r"S2.counts.txt: first line 'gene_id,count'; expected"):
        read_cohort_obs(spec)
    (folder / "S2.counts.txt").write_text("")
    with pytest.raises(CohortError, match="S2.counts.txt: file is empty"):
        read_cohort_obs(spec)
    spec["path"] = [str(folder / "S1.counts.txt"), str(folder / "S3.counts.txt")]
    with pytest.raises(CohortError, match="S3.counts.txt"):
        read_cohort_obs(spec)


def classification(cohort, **task):
    return {
        "cohorts": {"c": cohort},
        "protocols": {"cv": {"type": "stratified_kfold", "n_splits": 3}},
        "experiments": {
            "e": {
                "cohort": "c",
                "protocol": "cv",
                "task": task or {"kind": "one_vs_rest"},
                "models": ["m"],
            }
        },
    }


@pytest.mark.parametrize(
    "kind, label, expected",
    [
        ("geo", "ilness", "the !Sample_ lines of path"),
        ("tcga", "msi", "the barcodes of path"),
        ("hivdb", "resistance", "fold_change and label (drug DDC)"),
        ("featurecounts", "groups", "sample_sheet"),
        ("htseq", "group", "sample_sheet (none) of the samples of path"),
        ("star", "group", "sample_sheet (none) and the summary rows of path"),
    ],
)
def test_a_label_column_not_in_the_cohort_is_refused(kind, label, expected):
    config = classification({**COHORTS[kind], "label": label})
    with pytest.raises(ConfigError) as err:
        check_cohort_labels(config)
    message = str(err.value)
    assert message.startswith(f"config key cohorts.c.label: {label!r} is not a column"), message
    assert expected in message and "expected one of [" in message


def test_what_a_geo_sheet_tells_names_the_key():
    config = classification({**COHORTS["geo"], "label": "illness"}, kind="binary", positive=["TB"])
    with pytest.raises(ConfigError, match=r"experiments.e.task.positive: \['TB'\] never occur"):
        check_cohort_labels(config)
    config = classification({**COHORTS["geo"], "label": "illness"})
    config["protocols"]["cv"]["n_splits"] = 13  # 12 samples per group
    with pytest.raises(ConfigError, match="protocols.cv.n_splits: .* class .* has 12"):
        check_cohort_labels(config)


def test_an_unreadable_sheet_names_its_key_and_file(tmp_path):
    bad = tmp_path / "clinical.tsv"
    bad.write_text("patient\tmsi_status\nTCGA-XX\tMSS\n")
    config = classification({**COHORTS["tcga"], "clinical": str(bad), "label": "msi_status"})
    with pytest.raises(ConfigError) as err:
        check_cohort_labels(config)
    assert str(err.value).startswith(f"config key cohorts.c.clinical: {bad}: sample sheet has no")


def test_a_url_cohort_is_checked_on_its_fetched_copy(tmp_path):
    url = "https://example.org/geo/GSE900001_series_matrix.txt.gz"
    spec = {**COHORTS["geo"], "path": url, "annotation": "https://example.org/GPL1.annot.gz"}
    assert cohort_sample_sheet("c", spec) is None  # not fetched: the fetch step checks it
    assert cohort_sample_sheet("c", spec, {url: str(tmp_path / "absent")}) is None
    copy = tmp_path / "cache" / "GSE900001_series_matrix.txt.gz"
    copy.parent.mkdir()
    shutil.copy(COHORTS["geo"]["path"], copy)
    local = {url: str(copy)}  # the annotation is not needed for the sheet
    assert len(cohort_sample_sheet("c", spec, local)) == 36
    config = classification({**spec, "label": "ilness"})
    check_cohort_labels(config)  # nothing fetched: nothing to check yet
    with pytest.raises(ConfigError, match=f"'ilness' is not a column .*path {url}"):
        check_cohort_labels(config, local)
    copy.write_bytes(b"")
    with pytest.raises(ConfigError) as err:
        check_cohort_labels(config, local)
    assert (
        str(err.value)
        == f"config key cohorts.c.path: {url}: file is empty; expected a header line and data rows"
    )


def test_an_unknown_demo_is_refused_for_every_kind():
    config = classification({"format": "demo", "name": "digitz", "label": "digit"})
    config["experiments"]["e"]["kind"] = "heldout_entries"
    with pytest.raises(ConfigError, match="cohorts.c.name: 'digitz' is not a bundled demo"):
        check_cohort_labels(config)


# label strings meaning missing: one rule (omicsbayes.tl._checks.missing_labels)

WARNING = r"has 3 labels that are strings meaning missing"


def labels_with_strings():
    """Six labelled samples per class and three unlabelled, written as "nan", "None" and ""."""
    values = ["a"] * 6 + ["b"] * 6 + ["nan", "None", ""]
    return pd.Series(values, index=[f"s{i}" for i in range(15)], name="group")


def test_task_targets_treat_missing_strings_as_nan():
    strings = labels_with_strings()
    nan = strings.where(strings.isin(["a", "b"]))
    for task in (
        {"kind": "binary", "positive": ["b"]},
        {"kind": "one_vs_rest"},
        {"kind": "multiclass"},
    ):
        with pytest.warns(UserWarning, match=WARNING):
            by_string = task_targets(strings, task)
        pd.testing.assert_frame_equal(by_string, task_targets(nan, task))
        assert "nan" not in by_string.columns and "" not in by_string.columns


def test_splits_treat_missing_strings_as_nan():
    import anndata as ad

    strings = labels_with_strings()
    obs = pd.DataFrame({"group": strings, "nan_group": strings.where(strings.isin(["a", "b"]))})
    adata = ad.AnnData(np.zeros((15, 2)), obs=obs)
    protocol = {"type": "stratified_kfold", "n_splits": 3}
    with pytest.warns(UserWarning, match=WARNING):
        by_string = Classification().make_splits(adata, protocol, 5, label="group")
    pd.testing.assert_frame_equal(
        by_string, Classification().make_splits(adata, protocol, 5, label="nan_group")
    )
    assert set(by_string.loc[by_string["sample"] >= 12, "role"]) == {"unlabelled"}


def test_the_config_check_does_not_count_missing_strings_as_a_class(tmp_path):
    sheet = tmp_path / "samples.tsv"  # the sheet reader reads "nan" and "" as NaN itself
    labels = ["a"] * 6 + ["b"] * 6 + ["None", "<NA>", "none"]
    pd.DataFrame({"sample": [f"s{i}" for i in range(15)], "group": labels}).to_csv(
        sheet, sep="\t", index=False
    )
    spec = {"format": "delimited", "path": "x.tsv", "sample_sheet": str(sheet), "label": "group"}
    config = classification(spec)
    config["protocols"]["cv"]["n_splits"] = 6  # 6 per class: passes, "nan" is no class of 1
    with pytest.warns(UserWarning, match=r"cohort 'c': \.obs\['group'\] " + WARNING):
        check_cohort_labels(config)
    config["protocols"]["cv"]["n_splits"] = 7
    with pytest.warns(UserWarning), pytest.raises(ConfigError, match="class 'a' .* has 6"):
        check_cohort_labels(config)


def test_every_example_on_its_fixtures_passes_the_sheet_checks(monkeypatch):
    """The examples' cohorts (GEO, TCGA, HIVDB, featureCounts, demo, association lists) as the
    fixture runs give them (tests/test_examples.py) pass what their sheets tell."""
    from test_examples import _merged, example_names

    from omicsbayes.config import check_config, validate_config

    monkeypatch.chdir(FIXTURES.parents[1])  # the overrides' paths are relative to the checkout
    for name in example_names():
        config = _merged(name)
        validate_config(config, FIXTURES.parents[1] / "workflow" / "schemas" / "config.schema.yaml")
        check_config(config)
        check_cohort_labels(config)
