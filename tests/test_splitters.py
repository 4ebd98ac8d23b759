"""Fold tables: stratification, disjointness, coverage, determinism, errors, TSV round trip."""

import inspect
import os

import numpy as np
import pandas as pd
import pytest

from omicsbayes.evaluate.splitters import (
    PROTOCOLS,
    SPLIT_COUNTS,
    _reject_sample,
    classification_splits,
    entry_kfold_splits,
    heldout_entry_splits,
    negatives_table,
    read_splits,
    row_kfold_splits,
    sample_negatives,
    write_splits,
)

Y = np.array(["a"] * 30 + ["b"] * 20 + ["c"] * 10, dtype=object)


def _sets(table, split, role, key="sample"):
    part = table[(table["split"] == split) & (table["role"] == role)]
    return set(part[key].tolist())


def test_stratified_kfold_each_labelled_sample_tested_once():
    y = np.concatenate([Y, [None, np.nan]])
    with pytest.warns(UserWarning, match="2 samples have no label"):
        table = classification_splits(y, "stratified_kfold", 3, n_splits=5)
    assert list(table.columns) == ["split", "sample", "role"]
    assert table["split"].dtype == np.int64 and table["sample"].dtype == np.int64
    tested = table.loc[table["role"] == "test", "sample"]
    assert sorted(tested) == list(range(60))  # every labelled sample exactly once
    for split in range(5):
        train, test = _sets(table, split, "train"), _sets(table, split, "test")
        assert not train & test and train | test == set(range(60))
        assert _sets(table, split, "unlabelled") == {60, 61}
        counts = pd.Series(Y[sorted(test)]).value_counts()
        assert counts.to_dict() == {"a": 6, "b": 4, "c": 2}  # exact stratification here


def test_repeated_subsampling_sizes_and_stratification():
    table = classification_splits(Y, "repeated_subsampling", 1, n_splits=7, test_size=0.25)
    assert table["split"].nunique() == 7
    for split in range(7):
        train, test = _sets(table, split, "train"), _sets(table, split, "test")
        assert len(test) == 15 and len(train) == 45 and not train & test
        counts = pd.Series(Y[sorted(test)]).value_counts().to_dict()
        assert abs(counts["a"] - 7.5) <= 1 and abs(counts["b"] - 5) <= 1
        assert abs(counts["c"] - 2.5) <= 1
    assert classification_splits(Y, "repeated_subsampling", 1)["split"].nunique() == 100


def test_few_shot_counts_per_class():
    table = classification_splits(Y, "few_shot", 5, n_per_class=3, n_repeats=4)
    assert table["split"].nunique() == 4
    trains = []
    for split in range(4):
        train, test = _sets(table, split, "train"), _sets(table, split, "test")
        assert pd.Series(Y[sorted(train)]).value_counts().to_dict() == {"a": 3, "b": 3, "c": 3}
        assert train | test == set(range(60)) and not train & test
        trains.append(frozenset(train))
    assert len(set(trains)) == 4  # repeats draw different training sets


@pytest.mark.parametrize(
    "protocol, kwargs",
    [
        ("stratified_kfold", {"n_splits": 4}),
        ("repeated_subsampling", {"n_splits": 4}),
        ("few_shot", {"n_per_class": 2, "n_repeats": 4}),
    ],
)
def test_deterministic_per_seed(protocol, kwargs):
    first = classification_splits(Y, protocol, 11, **kwargs)
    pd.testing.assert_frame_equal(first, classification_splits(Y, protocol, 11, **kwargs))
    assert not first.equals(classification_splits(Y, protocol, 12, **kwargs))


def test_split_count_defaults_come_from_split_counts():
    """Each splitter, called without its count, makes the number of splits SPLIT_COUNTS names;
    the experiment kinds read their defaults from the same table."""
    from omicsbayes import protocols

    y = np.array(["a", "b"] * 60, dtype=object)
    extra = {"few_shot": {"n_per_class": 2}}
    for protocol in PROTOCOLS:
        table = classification_splits(y, protocol, 0, **extra.get(protocol, {}))
        assert table["split"].nunique() == SPLIT_COUNTS[protocol][1], protocol
    mask = np.ones((6, 5), dtype=bool)
    counts = {
        "heldout_entries": heldout_entry_splits(mask, random_state=0),
        "new_rows": row_kfold_splits(30, random_state=0),
        "known_rows": entry_kfold_splits(np.arange(30), np.arange(30), random_state=0),
    }
    for protocol, table in counts.items():
        assert table["split"].nunique() == SPLIT_COUNTS[protocol][1], protocol
    for kind in protocols.KINDS:
        for key, default in protocols.get(kind).split_counts.values():
            assert (key, default) in SPLIT_COUNTS.values()
    from omicsbayes.protocols.disease_gene import disease_gene_cv
    from omicsbayes.protocols.rating import rating_cv

    for function in (disease_gene_cv, rating_cv):
        default = inspect.signature(function).parameters["n_splits"].default
        assert default == SPLIT_COUNTS["known_rows"][1], function.__name__


def test_labels_of_any_dtype():
    y = np.array([1.0, 2.0, np.nan] * 10)
    with pytest.warns(UserWarning, match="10 samples have no label"):
        table = classification_splits(y, "stratified_kfold", 0, n_splits=5)
    assert (table.loc[table["role"] == "unlabelled", "sample"] % 3 == 2).all()
    table = classification_splits([True, False] * 10, "stratified_kfold", 0, n_splits=5)
    assert len(table) == 100


def test_classification_split_errors():
    with pytest.raises(ValueError, match=r"class 'c' has 10 labelled samples.*n_splits=11"):
        classification_splits(Y, "stratified_kfold", 0, n_splits=11)
    with pytest.raises(ValueError, match=r"class 'c' has 10 .*n_per_class=10 needs at least 11"):
        classification_splits(Y, "few_shot", 0, n_per_class=10)
    with pytest.raises(
        ValueError, match=r"class 'x' has 1 .*repeated_subsampling needs at least 2"
    ):
        classification_splits(np.append(Y, "x"), "repeated_subsampling", 0)
    with pytest.raises(ValueError, match=r"class 3\.0 has 1 labelled"):
        classification_splits(np.array([1.0, 1, 2, 2, 3]), "repeated_subsampling", 0)
    with pytest.raises(ValueError, match="1 class"):
        classification_splits(["a"] * 10, "stratified_kfold", 0, n_splits=2)
    with pytest.raises(ValueError, match="unknown protocol 'loo'"):
        classification_splits(Y, "loo", 0)
    with pytest.raises(ValueError, match="n_per_class"):
        classification_splits(Y, "few_shot", 0)
    with pytest.raises(ValueError, match="random_state"):
        classification_splits(Y, "stratified_kfold", None)


def test_heldout_entries_fraction_observed_and_rows_kept():
    rng = np.random.default_rng(1)
    mask = rng.random((40, 15)) < 0.4
    mask[0] = False
    mask[0, 3] = True  # a row with one observed entry is never held out
    table = heldout_entry_splits(mask, fraction=0.2, n_repeats=3, random_state=4)
    assert list(table.columns) == ["split", "row", "col", "role"]
    assert set(table["role"]) == {"test"}
    n_test = round(0.2 * mask.sum())
    for split in range(3):
        part = table[table["split"] == split]
        assert len(part) == n_test
        assert not part.duplicated(["row", "col"]).any()
        assert mask[part["row"], part["col"]].all()
        held = np.zeros_like(mask)
        held[part["row"], part["col"]] = True
        assert ((mask & ~held).sum(axis=1) >= 1)[mask.any(axis=1)].all()
        assert not held[0].any()
    pd.testing.assert_frame_equal(
        table, heldout_entry_splits(mask, fraction=0.2, n_repeats=3, random_state=4)
    )
    assert not table.equals(heldout_entry_splits(mask, fraction=0.2, n_repeats=3, random_state=5))


def test_heldout_entries_uniform_over_entries_of_full_rows():
    """With every row having many entries, each entry is held out with probability fraction."""
    mask = np.ones((10, 10), dtype=bool)
    table = heldout_entry_splits(mask, fraction=0.3, n_repeats=400, random_state=0)
    freq = np.zeros((10, 10))
    np.add.at(freq, (table["row"], table["col"]), 1 / 400)
    # one protected entry per row (probability 1/10 each), then 30 of the other 90 entries:
    # p = 0.9 * 30 / 90 = 0.3 for every entry; binomial(400, 0.3) sd is 0.023
    assert np.abs(freq - 0.3).max() < 0.1
    assert abs(freq.mean() - 0.3) < 1e-12


def test_heldout_entries_errors():
    with pytest.raises(ValueError, match="boolean"):
        heldout_entry_splits(np.array([[np.nan, 1.0]]), random_state=0)
    with pytest.raises(ValueError, match="holds out none"):
        heldout_entry_splits(np.eye(2, dtype=bool), fraction=0.1, random_state=0)


def test_row_kfold_each_row_tested_once():
    table = row_kfold_splits(23, n_splits=5, random_state=2)
    assert sorted(table.loc[table["role"] == "test", "row"]) == list(range(23))
    for split in range(5):
        assert not _sets(table, split, "train", "row") & _sets(table, split, "test", "row")
    pd.testing.assert_frame_equal(table, row_kfold_splits(23, n_splits=5, random_state=2))
    assert not table.equals(row_kfold_splits(23, n_splits=5, random_state=3))
    with pytest.raises(ValueError, match="n_splits=5"):
        row_kfold_splits(3, n_splits=5, random_state=0)


def test_entry_kfold_each_entry_tested_once():
    rows, cols = np.arange(12) % 4, np.arange(12) % 5
    table = entry_kfold_splits(rows, cols, n_splits=3, random_state=0)
    assert list(table.columns) == ["split", "entry", "role"]
    assert sorted(table.loc[table["role"] == "test", "entry"]) == list(range(12))
    assert (table.groupby("split").size() == 12).all()
    with pytest.raises(ValueError, match="equal length"):
        entry_kfold_splits([0, 1], [0], random_state=0)


@pytest.mark.parametrize("shape", [(30, 40), (3000, 2000)])  # enumeration and rejection paths
def test_sample_negatives_are_distinct_unknown_entries(shape):
    rng = np.random.default_rng(0)
    prow = rng.integers(0, shape[0], 200)
    pcol = rng.integers(0, shape[1], 200)
    exclude = np.arange(5)
    sets = sample_negatives(
        prow, pcol, shape, n_sets=3, ratio=1.5, random_state=1, exclude_rows=exclude
    )
    positives = set(zip(prow.tolist(), pcol.tolist()))
    assert len(sets) == 3
    for rows, cols in sets:
        assert rows.size == 300 and rows.dtype == np.int64
        pairs = list(zip(rows.tolist(), cols.tolist()))
        assert len(set(pairs)) == 300 and not set(pairs) & positives
        assert not np.isin(rows, exclude).any()
        assert rows.max() < shape[0] and cols.max() < shape[1]
    again = sample_negatives(
        prow, pcol, shape, n_sets=3, ratio=1.5, random_state=1, exclude_rows=exclude
    )
    for (r1, c1), (r2, c2) in zip(sets, again):
        np.testing.assert_array_equal(r1, r2)
        np.testing.assert_array_equal(c1, c2)
    assert not np.array_equal(sets[0][0], sets[1][0])


def test_sample_negatives_uniform_over_unknown_entries():
    prow, pcol = np.array([0, 1, 2]), np.array([0, 1, 2])
    sets = sample_negatives(prow, pcol, (4, 5), n_sets=3000, random_state=0)
    freq = np.zeros((4, 5))
    for rows, cols in sets:
        np.add.at(freq, (rows, cols), 1)
    freq /= 3000
    unknown = np.ones((4, 5), dtype=bool)
    unknown[prow, pcol] = False
    assert (freq[~unknown] == 0).all()
    # each of the 17 unknown entries is drawn with probability 3/17 (binomial sd 0.007)
    assert np.abs(freq[unknown] - 3 / 17).max() < 0.03


def test_rejection_sampler_uniform_on_small_matrix():
    rng = np.random.default_rng(2)
    allowed = np.array([0, 2, 3])
    positive = np.array([0, 17])  # linear indices with 6 columns: (0, 0) and (2, 5)
    freq = np.zeros(24)
    for _ in range(2000):
        chosen = _reject_sample(rng, allowed, 6, positive, 5, 18 - 2)
        assert np.unique(chosen).size == 5
        freq[chosen] += 1
    freq /= 2000
    valid = np.setdiff1d((allowed[:, None] * 6 + np.arange(6)).ravel(), positive)
    assert (np.delete(freq, valid) == 0).all()
    assert np.abs(freq[valid] - 5 / 16).max() < 0.05  # binomial(2000, 5/16) sd is 0.01


def test_sample_negatives_errors():
    with pytest.raises(ValueError, match="only 2 unknown"):
        sample_negatives([0, 1], [0, 1], (2, 2), ratio=1.5, random_state=0)
    with pytest.raises(ValueError, match="outside shape"):
        sample_negatives([5], [0], (2, 2), random_state=0)


def test_write_read_round_trip(tmp_path):
    with pytest.warns(UserWarning):
        table = classification_splits(np.append(Y, None), "few_shot", 0, n_per_class=2, n_repeats=2)
    table["sample_id"] = np.array(["NA", "s1"] * 61, dtype=object)[table["sample"]]
    path = tmp_path / "splits" / "few_shot.tsv"
    write_splits(table, path)
    back = read_splits(path)
    pd.testing.assert_frame_equal(back, table)
    assert os.listdir(path.parent) == ["few_shot.tsv"]  # no temporary file left behind
    entries = heldout_entry_splits(np.ones((5, 5), bool), random_state=0)
    write_splits(entries, path)
    pd.testing.assert_frame_equal(read_splits(path), entries)
    sets = sample_negatives([0, 1], [1, 2], (4, 4), n_sets=2, random_state=0)
    negatives = negatives_table(sets)
    assert list(negatives.columns) == ["set", "row", "col", "role"]
    np.testing.assert_array_equal(negatives.loc[negatives["set"] == 1, "col"], sets[1][1])
    write_splits(negatives, path)
    pd.testing.assert_frame_equal(read_splits(path), negatives)


def test_read_splits_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="split stage"):
        read_splits(tmp_path / "missing.tsv")
    (tmp_path / "bad.tsv").write_text("a\tb\n1\t2\n")
    with pytest.raises(ValueError, match="no 'split' or 'set' column"):
        read_splits(tmp_path / "bad.tsv")
