"""HIVDB genotype-phenotype data sets (Stanford HIV Drug Resistance Database, PhenoSense).

The HIVDB genotype-phenotype files (``NRTI_DataSet.txt``, ``PI_DataSet.txt``, ...) are
tab-separated, one row per isolate: ``SeqID``, one fold-change column per drug (``3TC``,
``ABC``, ``AZT``, ``D4T``, ``DDI``, ``TDF`` in the current NRTI file; older releases also have
``DDC`` and ``FTC``), possibly further annotation columns (``Method``, ``Subtype``, ...), and
one column per amino-acid position ``P1`` ... ``P240`` (reverse transcriptase) holding
``-`` for the subtype B consensus, ``.`` for no sequence, one or more letters for the amino
acids found (several letters = a mixture), ``#`` for an insertion and ``~`` for a deletion.
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd

from ._common import CohortError, check_unique, list_ids, make_anndata, read_text, string_table

logger = logging.getLogger("omicsbayes")

DEFAULT_CUTOFFS = {"DDC": 1.5, "FTC": 3.0}
"""Fold-change cutoffs of paper 001, section 4.2 (resistant when fold change >= cutoff)."""

_POSITION = re.compile(r"^P(\d+)$")
_SYMBOLS = {"#": "ins", "~": "del", "*": "*"}
_NO_CALL = {".", "X", ""}
_MISSING_FOLD = {"", "NA", "na", "NaN", "nan", ".", "-"}


def _parse_fold_change(values, name, drug, seq_ids):
    """Fold changes as floats (NaN when missing) and a mask of censored values (a leading >
    or <, dropped)."""
    out = np.full(len(values), np.nan)
    censored = np.zeros(len(values), dtype=bool)
    for i, raw in enumerate(values):
        text = raw.strip()
        if text in _MISSING_FOLD:
            continue
        if text[0] in "<>":
            censored[i] = True
            text = text[1:].strip()
        try:
            out[i] = float(text)
        except ValueError:
            raise CohortError(
                f"{name}: fold change {raw!r} for isolate {seq_ids[i]!r} in column {drug!r} is "
                "not a number; expected a positive fold change or an empty/NA cell"
            ) from None
        if not out[i] > 0:
            raise CohortError(
                f"{name}: fold change {raw!r} for isolate {seq_ids[i]!r} in column {drug!r} is "
                "not positive; expected IC50 ratios > 0"
            )
    return out, censored


def _mutations(cell, name, seq_id, column):
    """Feature suffixes found in one position cell ('' for consensus or no call)."""
    text = cell.strip().upper()
    if text == "-" or text in _NO_CALL:
        return []
    found = []
    for char in text:
        if char.isalpha() and char.isascii():
            if char != "X":
                found.append(char)
        elif char in _SYMBOLS:
            found.append(_SYMBOLS[char])
        else:
            raise CohortError(
                f"{name}: isolate {seq_id!r}, column {column!r} holds {cell!r}; expected '-' "
                "(consensus), '.' (no sequence), amino-acid letters, '#' (insertion) or "
                "'~' (deletion)"
            )
    return found


def read_hivdb_phenosense(path, drug, cutoff=None, *, method="PhenoSense", subtype=None):
    """Read an HIVDB genotype-phenotype file as binary mutation features and a drug label.

    Parameters
    ----------
    path : str or Path
        Tab-separated HIVDB data set (optionally gzip-compressed).
    drug : str
        Fold-change column to label by (case-insensitive), e.g. ``"DDC"``, ``"FTC"``, ``"3TC"``.
    cutoff : float, optional
        Isolates with fold change >= cutoff are ``resistant``, the others ``susceptible``.
        Defaults to 1.5 for DDC and 3.0 for FTC (paper 001, section 4.2); required otherwise.
    method : str or None, default "PhenoSense"
        When the file has a ``Method`` column, keep only isolates assayed with this method
        (the others are counted in ``.uns``); None keeps every method.
    subtype : str, optional
        Keep only isolates of this subtype (needs a ``Subtype`` column), e.g. ``"B"``.

    Returns
    -------
    anndata.AnnData
        Isolates x mutations. X is 1.0 where the isolate carries the amino acid (mixtures
        count for each of their amino acids; the file does not name the consensus residue, so
        a mixture such as ``KR`` at a K position also gives a ``P70K`` feature), also in
        ``.layers["mutations"]``; ``.var`` has
        ``position`` and ``amino_acid`` (features named like ``P184V``, ``P69ins``,
        ``P67del``), one per mutation seen in at least one kept isolate. ``.obs`` has
        ``fold_change``, ``label`` (``resistant``/``susceptible``), ``n_uncovered`` (positions
        without sequence, which contribute no feature) and the file's annotation columns.
        ``.uns["hivdb"]`` records the drug, cutoff and every exclusion with its count and IDs.

    Raises
    ------
    CohortError
        Missing file or columns, unknown drug, no cutoff for a drug without a default,
        duplicated SeqIDs, unreadable fold changes or position cells, no isolate left.
    """
    name = str(path)
    frame = _read_table(path, name)
    seq_col, positions, drug_col = _layout(frame.columns, name, drug)
    position_cols = {c for _, c in positions}
    seq_ids, fold, censored, keep, excluded, cutoff = _phenotypes(
        frame, name, seq_col, drug_col, cutoff, method, subtype
    )
    for why, ids in excluded.items():
        if ids:
            logger.warning(
                "%s: %d isolate(s) excluded for %s (%s): %s",
                name,
                len(ids),
                drug_col,
                why.replace("_", " "),
                list_ids(ids, limit=5),
            )

    # every cell is checked, also in excluded rows; features come from the kept isolates
    kept = frame[keep]
    row_of = np.cumsum(keep) - 1
    features = {}
    uncovered = np.zeros(len(kept), dtype=np.int64)
    for pos, col in sorted(positions):
        cells = frame[col].tolist()
        uncovered += np.array([c.strip() in _NO_CALL for c in cells])[keep]
        for row, cell in enumerate(cells):
            for aa in _mutations(cell, name, seq_ids[row], col):
                if keep[row]:
                    features.setdefault((pos, aa), []).append(row_of[row])
    keys = sorted(features)
    values = np.zeros((len(kept), len(keys)))
    for j, key in enumerate(keys):
        values[features[key], j] = 1.0
    var = pd.DataFrame(
        {"position": [k[0] for k in keys], "amino_acid": [k[1] for k in keys]},
        index=[f"P{p}{a}" for p, a in keys],
    )
    fold_kept = fold[keep]
    obs = _isolate_obs(kept, [seq_col, drug_col, *position_cols], fold_kept, cutoff)
    obs["n_uncovered"] = uncovered
    adata = make_anndata(values, kept.index, var.index, "mutations", name, obs=obs, var=var)
    adata.uns["hivdb"] = {
        "drug": drug_col,
        "cutoff": float(cutoff),
        "n_rows": int(len(frame)),
        "n_isolates": int(keep.sum()),
        "n_resistant": int((fold_kept >= cutoff).sum()),
        "n_susceptible": int((fold_kept < cutoff).sum()),
        "n_censored_fold_change": int(censored[keep].sum()),
        **{f"n_{k}": len(v) for k, v in excluded.items()},
        **{f"{k}_ids": list(v) for k, v in excluded.items()},
    }
    return adata


def _read_table(path, name):
    """The file's table, every cell a string as written (:func:`string_table`)."""
    expected = "the HIVDB genotype-phenotype layout, one field per column on every row"
    return string_table(read_text(path), name, expected)


def _layout(columns, name, drug):
    """The SeqID column, the position columns ``[(position, column)]`` and the drug's
    fold-change column of an HIVDB header (CohortError when one is missing)."""
    columns = list(columns)
    upper = {c.upper(): c for c in columns}
    if "SEQID" not in upper:
        raise CohortError(
            f"{name}: no 'SeqID' column (header starts {list_ids(columns[:5])}); expected "
            "the tab-separated HIVDB genotype-phenotype layout"
        )
    seq_col = upper["SEQID"]
    positions = [(int(m.group(1)), c) for c in columns if (m := _POSITION.match(c))]
    if not positions:
        raise CohortError(
            f"{name}: no amino-acid position columns P1, P2, ...; expected the HIVDB layout"
        )
    drug_key = str(drug).strip().upper()
    position_cols = {c for _, c in positions}
    if drug_key not in upper or upper[drug_key] in position_cols | {seq_col}:
        candidates = [c for c in columns if c not in position_cols and c != seq_col]
        raise CohortError(
            f"{name}: no fold-change column {drug!r}; the file's other columns are "
            f"{list_ids(candidates, limit=20)}"
        )
    return seq_col, positions, upper[drug_key]


def _phenotypes(frame, name, seq_col, drug_col, cutoff, method, subtype):
    """The isolates' IDs, fold changes, censored flags, the kept isolates (a mask), the
    excluded ones by reason and the cutoff (a drug's default when None). ``frame`` is indexed
    in place by SeqID."""
    drug_key = drug_col.upper()
    columns = {c.upper(): c for c in frame.columns}
    if cutoff is None:
        if drug_key not in DEFAULT_CUTOFFS:
            raise CohortError(
                f"cutoff is required for drug {drug_col!r}; defaults exist only for "
                f"{', '.join(f'{k} ({v})' for k, v in DEFAULT_CUTOFFS.items())}"
            )
        cutoff = DEFAULT_CUTOFFS[drug_key]
    if not np.isfinite(cutoff) or cutoff <= 0:
        raise CohortError(f"cutoff={cutoff!r}; expected a positive fold change")

    seq_ids = [s.strip() for s in frame[seq_col]]
    if any(s == "" for s in seq_ids):
        raise CohortError(f"{name}: row {seq_ids.index('') + 2} has an empty SeqID")
    check_unique(seq_ids, name, "isolate")
    frame.index = pd.Index(seq_ids, dtype=object)
    fold, censored = _parse_fold_change(frame[drug_col].tolist(), name, drug_col, seq_ids)

    keep = np.ones(len(frame), dtype=bool)
    excluded = {}
    if method is not None and "METHOD" in columns:
        other = frame[columns["METHOD"]].str.strip().str.upper() != str(method).upper()
        excluded["other_method"] = list(frame.index[other.to_numpy()])
        keep &= ~other.to_numpy()
    if subtype is not None:
        if "SUBTYPE" not in columns:
            raise CohortError(f"{name}: subtype={subtype!r} given but the file has no Subtype")
        other = frame[columns["SUBTYPE"]].str.strip().str.upper() != str(subtype).upper()
        excluded["other_subtype"] = list(frame.index[(other.to_numpy() & keep)])
        keep &= ~other.to_numpy()
    missing = np.isnan(fold) & keep
    excluded["missing_phenotype"] = list(frame.index[missing])
    keep &= ~missing
    if not keep.any():
        raise CohortError(
            f"{name}: no isolate has a {drug_col} fold change after the exclusions "
            f"({', '.join(f'{k}: {len(v)}' for k, v in excluded.items())})"
        )
    return seq_ids, fold, censored, keep, excluded, cutoff


def _isolate_obs(kept, dropped, fold_kept, cutoff):
    """``.obs`` of the kept isolates: the file's annotation columns, fold_change and label."""
    obs = kept.drop(columns=dropped).copy()
    obs["fold_change"] = fold_kept
    obs["label"] = pd.Categorical(
        np.where(fold_kept >= cutoff, "resistant", "susceptible"),
        categories=["susceptible", "resistant"],
    )
    return obs


def read_hivdb_obs(path, drug, cutoff=None, *, method="PhenoSense", subtype=None):
    """The ``.obs`` :func:`read_hivdb_phenosense` gives (without ``n_uncovered``), from the
    file's SeqID, fold-change and annotation columns; the position cells are not parsed.
    Parameters as :func:`read_hivdb_phenosense`.

    Returns
    -------
    pandas.DataFrame
        Indexed by the kept isolates' SeqIDs; ``label`` is ``resistant`` or ``susceptible``.
    """
    name = str(path)
    frame = _read_table(path, name)
    seq_col, positions, drug_col = _layout(frame.columns, name, drug)
    _, fold, _, keep, _, cutoff = _phenotypes(
        frame, name, seq_col, drug_col, cutoff, method, subtype
    )
    dropped = [seq_col, drug_col, *(c for _, c in positions)]
    return _isolate_obs(frame[keep], dropped, fold[keep], cutoff)
