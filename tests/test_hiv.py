"""Tests of the HIVDB genotype-phenotype reader (paper 001, section 4.2)."""

import gzip
import logging
from pathlib import Path

import anndata as ad
import numpy as np
import pytest

from omicsbayes.io import CohortError
from omicsbayes.io.hiv import read_hivdb_obs, read_hivdb_phenosense

FIXTURES = Path(__file__).parent / "fixtures" / "hiv"
CURRENT = FIXTURES / "NRTI_DataSet.txt"
WITH_DDC_FTC = FIXTURES / "NRTI_DataSet_DDC_FTC.txt"


def raw_rows(path):
    lines = path.read_text().splitlines()
    header = lines[0].split("\t")
    return header, [dict(zip(header, line.split("\t"))) for line in lines[1:]]


def test_features_are_mutations_relative_to_consensus():
    adata = read_hivdb_phenosense(CURRENT, "3TC", cutoff=3.0)
    header, rows = raw_rows(CURRENT)
    assert adata.n_obs == 12
    # brute force: every non-consensus letter or symbol in a covered cell is one feature
    expected = set()
    for row in rows:
        for col in header:
            if col.startswith("P") and row[col] not in ("-", "."):
                for char in row[col]:
                    expected.add(col + {"#": "ins", "~": "del"}.get(char, char))
    assert set(adata.var_names) == expected
    assert {"P184V", "P184I", "P69ins", "P67del", "P65R"} <= expected
    x = adata.to_df()
    assert x.loc["2996", ["P184V", "P41L", "P215Y"]].tolist() == [1.0, 1.0, 1.0]
    assert x.loc["2996"].sum() == 3
    assert x.loc["4387"].sum() == 0  # consensus everywhere
    assert x.loc["5279", ["P184V", "P184I"]].tolist() == [1.0, 1.0]  # a mixture
    assert adata.var.loc["P184V", "position"] == 184
    assert adata.var.loc["P184V", "amino_acid"] == "V"
    assert adata.obs.loc["5221", "n_uncovered"] == 3 + 11
    assert np.array_equal(adata.layers["mutations"], adata.X)
    assert set(np.unique(adata.X)) <= {0.0, 1.0}


def test_labels_from_cutoff_and_missing_phenotypes_reported(caplog):
    with caplog.at_level(logging.WARNING, logger="omicsbayes"):
        adata = read_hivdb_phenosense(WITH_DDC_FTC, "FTC")
    _, rows = raw_rows(WITH_DDC_FTC)
    missing = [r["SeqID"] for r in rows if r["FTC"] in ("", "NA")]
    assert adata.uns["hivdb"]["n_missing_phenotype"] == len(missing) == 4
    assert sorted(adata.uns["hivdb"]["missing_phenotype_ids"]) == sorted(missing)
    assert "4 isolate(s) excluded" in caplog.text
    assert adata.n_obs == 12 - 4 and not set(missing) & set(adata.obs_names)
    assert adata.uns["hivdb"]["cutoff"] == 3.0
    fold = {r["SeqID"]: float(r["FTC"].lstrip(">")) for r in rows if r["SeqID"] not in missing}
    for seq_id, label in adata.obs["label"].items():
        assert label == ("resistant" if fold[seq_id] >= 3.0 else "susceptible")
        assert adata.obs.loc[seq_id, "fold_change"] == fold[seq_id]
    ddc = read_hivdb_phenosense(WITH_DDC_FTC, "ddc")
    assert ddc.uns["hivdb"]["cutoff"] == 1.5 and ddc.n_obs == 10
    low = ddc.obs["fold_change"] < 1.5
    assert (ddc.obs.loc[low, "label"] == "susceptible").all()
    assert (ddc.obs.loc[~low, "label"] == "resistant").all()
    # features come from the kept isolates only
    assert (ddc.X.sum(0) > 0).all()
    three = read_hivdb_phenosense(CURRENT, "3TC", cutoff=3.0)
    assert three.uns["hivdb"]["n_censored_fold_change"] == 1


def test_bad_input_raises_cohort_error(tmp_path):
    with pytest.raises(CohortError, match="cutoff is required"):
        read_hivdb_phenosense(CURRENT, "3TC")
    with pytest.raises(CohortError, match="no fold-change column 'DDC'"):
        read_hivdb_phenosense(CURRENT, "DDC")
    with pytest.raises(CohortError, match="not found"):
        read_hivdb_phenosense(tmp_path / "absent.txt", "DDC")
    header, rows = raw_rows(WITH_DDC_FTC)
    text = WITH_DDC_FTC.read_text()
    bad = tmp_path / "bad_cell.txt"
    bad.write_text(text.replace("\t~\t", "\t?\t"))
    with pytest.raises(CohortError, match="'5464', column 'P67'"):
        read_hivdb_phenosense(bad, "DDC")
    bad.write_text(text.replace("\t4.5\t", "\tfour\t"))
    with pytest.raises(CohortError, match="not a number"):
        read_hivdb_phenosense(bad, "DDC")
    lines = text.splitlines()
    bad.write_text("\n".join([*lines, lines[1]]) + "\n")
    with pytest.raises(CohortError, match="duplicated isolate"):
        read_hivdb_phenosense(bad, "DDC")
    bad.write_text(text.replace("SeqID", "Isolate", 1))
    with pytest.raises(CohortError, match="SeqID"):
        read_hivdb_phenosense(bad, "DDC")
    with pytest.raises(CohortError, match="positive"):
        read_hivdb_phenosense(CURRENT, "3TC", cutoff=0)


@pytest.mark.parametrize("read", [read_hivdb_phenosense, read_hivdb_obs])
def test_a_ragged_or_truncated_file_is_one_cohort_error(read, tmp_path):
    """The reader and the .obs reader read the file alike: a row with extra fields and a cut
    gzip stream are each one CohortError naming the file."""
    lines = WITH_DDC_FTC.read_text().splitlines()
    ragged = tmp_path / "ragged.txt"
    ragged.write_text("\n".join([*lines[:3], lines[3] + "\textra", *lines[4:]]) + "\n")
    ragged_message = r"ragged\.txt: rows have different numbers of tab-separated fields"
    with pytest.raises(CohortError, match=ragged_message):
        read(ragged, "DDC")
    packed = gzip.compress(WITH_DDC_FTC.read_bytes())
    cut = tmp_path / "cut.txt.gz"
    cut.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(CohortError, match=r"cut\.txt\.gz: gzip stream is damaged or truncated"):
        read(cut, "DDC")


def test_writes_to_h5ad(tmp_path):
    adata = read_hivdb_phenosense(WITH_DDC_FTC, "DDC")
    adata.write_h5ad(tmp_path / "hiv.h5ad")
    back = ad.read_h5ad(tmp_path / "hiv.h5ad")
    np.testing.assert_array_equal(back.X, adata.X)
    assert back.obs.equals(adata.obs) and list(back.var_names) == list(adata.var_names)
