"""Fold tables, written once per cohort and protocol so that every model sees the same folds.

Every splitter is deterministic given its integer ``random_state`` and returns a long pandas
DataFrame (one row per split and sample, row, column or entry) that :func:`write_splits` writes
as TSV and :func:`read_splits` reads back with the same dtypes.

=========================  ==================================================  ====================
splitter                   protocol                                            columns
=========================  ==================================================  ====================
classification_splits      stratified k-fold, repeated stratified subsampling  split, sample, role
                           (paper 001), few-shot per class (paper 003)
heldout_entry_splits       held-out matrix entries (paper 002)                 split, row, col, role
row_kfold_splits           new rows (paper 004)                                split, row, role
entry_kfold_splits         known rows, folds over positive entries (004)       split, entry, role
sample_negatives           sampled unknown entries as negatives (004)          list of (rows, cols)
negatives_table            those sets as a table                               set, row, col, role
=========================  ==================================================  ====================
"""

import warnings
from numbers import Integral
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import KFold, StratifiedKFold, StratifiedShuffleSplit

from ..jobs import atomic_write

PROTOCOLS = ("stratified_kfold", "repeated_subsampling", "few_shot")
"""Protocols of :func:`classification_splits`."""

SPLIT_COUNTS = {
    "stratified_kfold": ("n_splits", 10),
    "repeated_subsampling": ("n_splits", 100),
    "few_shot": ("n_repeats", 20),
    "heldout_entries": ("n_repeats", 5),
    "known_rows": ("n_splits", 5),
    "new_rows": ("n_splits", 5),
}
"""Protocol -> (the parameter that counts its splits, its default): the one place the defaults
live. The splitters' defaults and the experiment kinds' ``split_counts``
(:mod:`omicsbayes.protocols`) are read from it; ``known_rows`` is :func:`entry_kfold_splits`,
``new_rows`` :func:`row_kfold_splits`."""

_INT_COLUMNS = ("split", "sample", "row", "col", "entry", "set")


def _check_seed(random_state):
    if isinstance(random_state, bool) or not isinstance(random_state, Integral):
        raise ValueError(
            f"random_state={random_state!r} must be an int, so that the folds can be reproduced"
        )
    if random_state < 0:
        raise ValueError(f"random_state={random_state} must be >= 0")
    return int(random_state)


def _check_count(value, name, minimum):
    if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
        raise ValueError(f"{name}={value!r} must be an integer >= {minimum}")
    return int(value)


def _split_count(protocol, value):
    """``value``, or the protocol's default split count when it is None."""
    return SPLIT_COUNTS[protocol][1] if value is None else value


def _table(parts, columns):
    """Concatenate per-split column dicts into a typed long table sorted by its key columns."""
    df = pd.DataFrame({c: np.concatenate([p[c] for p in parts]) for c in columns})
    for c in columns:
        if c in _INT_COLUMNS:
            df[c] = df[c].astype(np.int64)
    return df.sort_values([c for c in columns if c != "role"], kind="stable").reset_index(drop=True)


def _labels(y):
    """Codes of the labelled samples, the class values, and positions of unlabelled samples."""
    y = np.asarray(y, dtype=object)
    if y.ndim != 1:
        raise ValueError(f"y has shape {y.shape}; expected one label per sample (1-D)")
    missing = pd.isna(y)
    codes, classes = pd.factorize(y[~missing], sort=False)
    return np.flatnonzero(~missing), codes, np.asarray(classes, dtype=object), missing


def min_class_size(protocol, n_splits=None, n_per_class=None):
    """Labelled samples every class needs under a :func:`classification_splits` protocol.

    Parameters
    ----------
    protocol : {"stratified_kfold", "repeated_subsampling", "few_shot"}
    n_splits : int, optional
        stratified_kfold's folds (None: its default in :data:`SPLIT_COUNTS`).
    n_per_class : int, optional
        few_shot's training samples per class.

    Returns
    -------
    (int, str)
        The count and the protocol with its setting, for messages.
    """
    if protocol == "stratified_kfold":
        k = _split_count(protocol, n_splits)
        return k, f"stratified_kfold with n_splits={k}"
    if protocol == "few_shot":
        return n_per_class + 1, f"few_shot with n_per_class={n_per_class}"
    return 2, protocol


def _require_per_class(classes, counts, need, what):
    short = np.flatnonzero(counts < need)
    if short.size:
        k = short[0]
        label = classes[k].item() if isinstance(classes[k], np.generic) else classes[k]
        raise ValueError(
            f"class {label!r} has {counts[k]} labelled samples; {what} needs at least {need} "
            "per class"
        )


def classification_splits(
    y,
    protocol,
    random_state,
    n_splits=None,
    test_size=0.25,
    n_per_class=None,
    n_repeats=SPLIT_COUNTS["few_shot"][1],
):
    """Train/test splits of the samples of a classification cohort.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels of any dtype; missing labels (NaN/None) mark unlabelled samples, which are in no
        training or test set and are listed with role ``"unlabelled"`` in every split (a
        semi-supervised model may use them; a warning says how many).
    protocol : {"stratified_kfold", "repeated_subsampling", "few_shot"}
        - ``stratified_kfold``: scikit-learn's shuffled StratifiedKFold; every labelled sample is
          tested exactly once. Needs ``n_splits`` samples per class.
        - ``repeated_subsampling``: ``n_splits`` stratified train/test splits with a fraction
          ``test_size`` tested (scikit-learn's StratifiedShuffleSplit; paper 001 uses 100 splits
          of 75/25). Needs 2 samples per class.
        - ``few_shot``: ``n_repeats`` splits, each training on ``n_per_class`` samples drawn per
          class without replacement and testing on the rest (paper 003: 2, 3 or 5 per class,
          20 repeats). Needs ``n_per_class + 1`` samples per class.
    random_state : int
    n_splits : int or None
        Folds (stratified_kfold) or splits (repeated_subsampling); None: the protocol's default
        in :data:`SPLIT_COUNTS` (10 and 100).
    test_size : float in (0, 1)
        repeated_subsampling only.
    n_per_class : int
        few_shot only (required there).
    n_repeats : int
        few_shot only.

    Returns
    -------
    pandas.DataFrame
        Columns ``split`` (int, from 0), ``sample`` (int position in ``y``), ``role``
        (``"train"``, ``"test"`` or ``"unlabelled"``), sorted by split and sample.

    Raises
    ------
    ValueError
        Unknown protocol, a single class, or a class with too few samples for the protocol
        (the message names the class, its count and what the protocol needs).
    """
    seed = _check_seed(random_state)
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; expected one of {', '.join(PROTOCOLS)}")
    labelled, codes, classes, missing = _labels(y)
    if classes.size < 2:
        raise ValueError(
            f"y has {classes.size} class(es) among its {labelled.size} labelled samples "
            f"({list(classes)}); a classification split needs at least 2"
        )
    counts = np.bincount(codes, minlength=classes.size)
    if missing.any():
        warnings.warn(
            f"{int(missing.sum())} samples have no label (the first is sample "
            f"{np.flatnonzero(missing)[0]}); they are in no training or test set (role "
            "'unlabelled')",
            UserWarning,
            stacklevel=2,
        )

    if protocol == "stratified_kfold":
        k = _check_count(_split_count(protocol, n_splits), "n_splits", 2)
        _require_per_class(classes, counts, *min_class_size(protocol, n_splits=k))
        folds = StratifiedKFold(k, shuffle=True, random_state=seed).split(labelled, codes)
    elif protocol == "repeated_subsampling":
        k = _check_count(_split_count(protocol, n_splits), "n_splits", 1)
        if not 0 < test_size < 1:
            raise ValueError(f"test_size={test_size!r} must be in (0, 1)")
        _require_per_class(classes, counts, *min_class_size(protocol))
        n_test = int(np.ceil(test_size * labelled.size))
        if min(n_test, labelled.size - n_test) < classes.size:
            raise ValueError(
                f"test_size={test_size} gives {n_test} test and {labelled.size - n_test} training "
                f"samples; repeated_subsampling needs at least one per class ({classes.size}) "
                "on each side"
            )
        folds = StratifiedShuffleSplit(k, test_size=test_size, random_state=seed).split(
            labelled, codes
        )
    else:
        if n_per_class is None:
            raise ValueError("few_shot needs n_per_class (training samples per class)")
        m = _check_count(n_per_class, "n_per_class", 1)
        r = _check_count(n_repeats, "n_repeats", 1)
        _require_per_class(classes, counts, *min_class_size(protocol, n_per_class=m))
        folds = _few_shot(codes, m, r, seed)

    unlabelled = np.flatnonzero(missing)
    parts = []
    for split, (train, test) in enumerate(folds):
        parts.append(
            {
                "split": np.full(missing.size, split),
                "sample": np.concatenate([labelled[train], labelled[test], unlabelled]),
                "role": np.repeat(
                    np.array(["train", "test", "unlabelled"], dtype=object),
                    [train.size, test.size, unlabelled.size],
                ),
            }
        )
    return _table(parts, ["split", "sample", "role"])


def _few_shot(codes, n_per_class, n_repeats, seed):
    """Yield (train, test) positions: n_per_class random samples of each class train."""
    rng = np.random.default_rng(seed)
    n = codes.size
    for _ in range(n_repeats):
        order = np.lexsort((rng.random(n), codes))  # by class, random within class
        sorted_codes = codes[order]
        first = np.searchsorted(sorted_codes, sorted_codes, side="left")
        within = np.arange(n) - first
        is_train = np.empty(n, dtype=bool)
        is_train[order] = within < n_per_class
        yield np.flatnonzero(is_train), np.flatnonzero(~is_train)


def heldout_entry_splits(
    observed_mask, fraction=0.2, n_repeats=SPLIT_COUNTS["heldout_entries"][1], *, random_state
):
    """Held-out matrix entries (paper 002: 20 % of the observed entries, five trials).

    In each repeat, ``round(fraction * n_observed)`` observed entries are held out uniformly at
    random, except that each row keeps one observed entry (chosen at random) whenever enough
    other entries exist, so that no row is entirely held out; a row with a single observed entry
    is then never held out. Training uses every other observed entry.

    Parameters
    ----------
    observed_mask : array-like of bool, shape (n_rows, n_cols)
        True where an entry is observed.
    fraction : float in (0, 1)
    n_repeats : int >= 1
    random_state : int

    Returns
    -------
    pandas.DataFrame
        Columns ``split``, ``row``, ``col``, ``role`` (always ``"test"``): the held-out entries
        only, sorted by split, row and column.
    """
    seed = _check_seed(random_state)
    mask = np.asarray(observed_mask)
    if mask.ndim != 2:
        raise ValueError(f"observed_mask has shape {mask.shape}; expected a 2-D matrix")
    if mask.dtype != bool:
        if not np.isin(mask, (0, 1)).all():
            raise ValueError(
                "observed_mask must be boolean (True where observed); for a data matrix with "
                "NaN for missing entries pass ~np.isnan(Y)"
            )
        mask = mask.astype(bool)
    if not 0 < fraction < 1:
        raise ValueError(f"fraction={fraction!r} must be in (0, 1)")
    r = _check_count(n_repeats, "n_repeats", 1)
    rows, cols = np.nonzero(mask)
    n_test = int(round(fraction * rows.size))
    if n_test == 0:
        raise ValueError(
            f"fraction={fraction} of {rows.size} observed entries holds out none; need more "
            "observed entries or a larger fraction"
        )
    rng = np.random.default_rng(seed)
    parts = []
    for split in range(r):
        keys = rng.random(rows.size)
        order = np.lexsort((keys, rows))
        first_of_row = np.ones(rows.size, dtype=bool)
        first_of_row[1:] = rows[order][1:] != rows[order][:-1]
        kept = order[first_of_row]  # one random observed entry per row
        candidates = order[~first_of_row]
        if n_test <= candidates.size:
            test = rng.choice(candidates, size=n_test, replace=False)
        else:
            extra = rng.choice(kept, size=n_test - candidates.size, replace=False)
            test = np.concatenate([candidates, extra])
        parts.append(
            {
                "split": np.full(n_test, split),
                "row": rows[test],
                "col": cols[test],
                "role": np.full(n_test, "test", dtype=object),
            }
        )
    return _table(parts, ["split", "row", "col", "role"])


def _kfold_table(n, n_splits, seed, key):
    parts = []
    for split, (train, test) in enumerate(
        KFold(n_splits, shuffle=True, random_state=seed).split(np.empty((n, 1)))
    ):
        parts.append(
            {
                "split": np.full(n, split),
                key: np.concatenate([train, test]),
                "role": np.repeat(
                    np.array(["train", "test"], dtype=object), [train.size, test.size]
                ),
            }
        )
    return _table(parts, ["split", key, "role"])


def row_kfold_splits(n_rows, n_splits=SPLIT_COUNTS["new_rows"][1], *, random_state):
    """Row-wise k-fold for new-row prediction (paper 004's new diseases or users).

    Returns
    -------
    pandas.DataFrame
        Columns ``split``, ``row``, ``role`` (``"train"``/``"test"``), every row in every split;
        each row is a test row in exactly one split.
    """
    seed = _check_seed(random_state)
    n_rows = _check_count(n_rows, "n_rows", 1)
    k = _check_count(n_splits, "n_splits", 2)
    if n_rows < k:
        raise ValueError(f"n_rows={n_rows} is smaller than n_splits={k}")
    return _kfold_table(n_rows, k, seed, "row")


def entry_kfold_splits(rows, cols, n_splits=SPLIT_COUNTS["known_rows"][1], *, random_state):
    """K-fold over the positive entries for known-row prediction (paper 004, section 5).

    The folds are drawn uniformly over the entries, as in the paper; a test entry's row may
    then have no training entry (common in OMIM, about 1.1 genes per disease): the row is then
    only predictable through its kernel, and ranking metrics count it as the paper does.

    Parameters
    ----------
    rows, cols : array-like of int, shape (n_positive,)
        The positive entries.

    Returns
    -------
    pandas.DataFrame
        Columns ``split``, ``entry`` (index into ``rows``/``cols``), ``role``.
    """
    seed = _check_seed(random_state)
    rows, cols = np.asarray(rows), np.asarray(cols)
    if rows.ndim != 1 or rows.shape != cols.shape:
        raise ValueError(
            f"rows and cols must be 1-D of equal length, got shapes {rows.shape} and {cols.shape}"
        )
    k = _check_count(n_splits, "n_splits", 2)
    if rows.size < k:
        raise ValueError(f"{rows.size} positive entries are fewer than n_splits={k}")
    return _kfold_table(rows.size, k, seed, "entry")


def sample_negatives(
    positive_rows,
    positive_cols,
    shape,
    n_sets=5,
    ratio=1.0,
    *,
    random_state,
    exclude_rows=None,
):
    """Sets of unknown entries used as negatives (paper 004, after Mordelet & Vert 2011).

    Each set holds ``round(ratio * n_positive)`` distinct entries drawn uniformly, without
    replacement, from the entries that are not positive and not in ``exclude_rows``; the sets are
    drawn independently. Pass the training positives only: a test positive is unknown at training
    time and may be drawn, as in real use. Large sparse matrices are sampled by rejection on
    linear indices (nothing of size rows x columns is formed); small ones by enumeration.

    Parameters
    ----------
    positive_rows, positive_cols : array-like of int
    shape : (n_rows, n_cols)
    n_sets : int >= 1
    ratio : float > 0
        Negatives per positive.
    random_state : int
    exclude_rows : array-like of int, optional
        Rows from which no negative is drawn (for example the test rows of a new-row split).

    Returns
    -------
    list of (rows, cols)
        ``n_sets`` pairs of int64 arrays, each sorted by row then column.
    """
    seed = _check_seed(random_state)
    n_rows, n_cols = (int(s) for s in shape)
    prow = np.asarray(positive_rows, dtype=np.int64)
    pcol = np.asarray(positive_cols, dtype=np.int64)
    if prow.shape != pcol.shape or prow.ndim != 1:
        raise ValueError("positive_rows and positive_cols must be 1-D of equal length")
    if prow.size and (
        prow.min() < 0 or prow.max() >= n_rows or pcol.min() < 0 or pcol.max() >= n_cols
    ):
        raise ValueError(f"a positive entry lies outside shape {(n_rows, n_cols)}")
    k = _check_count(n_sets, "n_sets", 1)
    if not ratio > 0:
        raise ValueError(f"ratio={ratio!r} must be > 0")
    allowed_rows = np.ones(n_rows, dtype=bool)
    if exclude_rows is not None:
        allowed_rows[np.asarray(exclude_rows, dtype=np.int64)] = False
    allowed = np.flatnonzero(allowed_rows)  # candidate rows; entries are (allowed[a], c)
    positive = np.unique(prow * n_cols + pcol)
    positive = positive[allowed_rows[positive // n_cols]]
    n_candidates = allowed.size * n_cols
    n_unknown = n_candidates - positive.size
    n_neg = int(round(ratio * prow.size))
    if n_neg < 1:
        raise ValueError(f"ratio={ratio} of {prow.size} positives gives no negative")
    if n_neg > n_unknown:
        raise ValueError(
            f"{n_neg} negatives requested but only {n_unknown} unknown entries are available"
        )
    rng = np.random.default_rng(seed)
    sets = []
    for _ in range(k):
        if n_candidates <= 4_000_000:
            pool = (allowed[:, None] * n_cols + np.arange(n_cols)).ravel()
            pool = pool[~np.isin(pool, positive, assume_unique=True)]
            linear = rng.choice(pool, size=n_neg, replace=False)
        else:
            linear = _reject_sample(rng, allowed, n_cols, positive, n_neg, n_unknown)
        linear = np.sort(linear)
        sets.append((linear // n_cols, linear % n_cols))
    return sets


def _reject_sample(rng, allowed, n_cols, positive, n_neg, n_unknown):
    """Distinct uniform unknown entries: draw linear indices, drop repeats and positives."""
    chosen = np.empty(0, dtype=np.int64)
    n_candidates = allowed.size * n_cols
    while chosen.size < n_neg:
        need = n_neg - chosen.size
        draw = int(need * n_candidates / max(n_unknown - chosen.size, 1) * 1.2) + 64
        a = rng.integers(0, n_candidates, size=draw)
        linear = allowed[a // n_cols] * n_cols + a % n_cols
        linear = linear[~np.isin(linear, positive)]
        both = np.concatenate([chosen, linear])
        _, first = np.unique(both, return_index=True)
        chosen = both[np.sort(first)]  # drop repeats, keep draw order
    return chosen[:n_neg]


def negatives_table(sets):
    """The output of :func:`sample_negatives` as a long table for :func:`write_splits`.

    Returns
    -------
    pandas.DataFrame
        Columns ``set``, ``row``, ``col``, ``role`` (always ``"negative"``).
    """
    parts = [
        {
            "set": np.full(len(rows), k),
            "row": rows,
            "col": cols,
            "role": np.full(len(rows), "negative", dtype=object),
        }
        for k, (rows, cols) in enumerate(sets)
    ]
    return _table(parts, ["set", "row", "col", "role"])


def write_splits(df, path):
    """Write a fold table as TSV, atomically (a temporary file in the same folder, then replace).

    Parameters
    ----------
    df : pandas.DataFrame
        A table from one of the splitters or :func:`negatives_table` (a ``split`` or ``set``
        column; it may carry extra columns, e.g. sample IDs).
    path : str or Path
    """
    if "split" not in df.columns and "set" not in df.columns:
        raise ValueError(
            f"a fold table needs a 'split' (or 'set') column; got columns {list(df.columns)}"
        )
    atomic_write(path, lambda tmp: df.to_csv(tmp, sep="\t", index=False))


def read_splits(path):
    """Read a fold table written by :func:`write_splits` with its dtypes.

    Index columns (split, sample, row, col, entry, set) come back as int64 and text columns as
    strings (a value such as "NA" stays the string "NA"); other columns are inferred.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"fold table {path} does not exist (run the split stage first)")
    header = pd.read_csv(path, sep="\t", nrows=0).columns
    if "split" not in header and "set" not in header:
        raise ValueError(
            f"{path}: not a fold table (no 'split' or 'set' column; columns {list(header)})"
        )
    text = [c for c in ("role", "sample_id") if c in header]
    dtypes = {c: np.int64 for c in header if c in _INT_COLUMNS}
    dtypes.update(dict.fromkeys(text, str))
    return pd.read_csv(
        path,
        sep="\t",
        dtype=dtypes,
        keep_default_na=False,
        na_values={c: ["", "NaN", "nan", "NA"] for c in header if c not in text},
        float_precision="round_trip",
    )
