"""Transposable data: association lists (row entity, column entity, value) and side-information
edge lists (node, node, weight)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ._common import CohortError, check_unique, list_ids, one_line, read_text, sniff_sep, split_line


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


def _load(path, sep, header, names_given, value_field):
    """Frame of strings from a delimited file without leading '#' comment lines, plus the
    1-based file line number of each data row."""
    name = str(path)
    lines = read_text(path).splitlines()
    skip = 0
    while skip < len(lines) and (lines[skip].startswith("#") or not lines[skip].strip()):
        skip += 1
    if skip == len(lines):
        raise CohortError(f"{name}: only comment lines; expected one row per pair")
    sep = sniff_sep(path, lines[skip], sep)
    first = split_line(lines[skip], sep)
    if header == "infer":
        header = names_given or (
            value_field is not None
            and value_field < len(first)
            and not _is_number(first[value_field].strip())
        )
    body = "\n".join(lines[skip:])
    try:
        frame = pd.read_csv(
            io.StringIO(body),
            sep=sep,
            header=0 if header else None,
            dtype=str,
            keep_default_na=False,
            skip_blank_lines=False,
        )
    except pd.errors.ParserError as exc:
        raise CohortError(
            f"{name}: rows have different numbers of {sep!r}-separated fields ({one_line(exc)})"
        ) from exc
    if frame.empty:
        raise CohortError(f"{name}: has a header but no data rows; expected one row per pair")
    frame = frame.fillna("")
    lineno = np.arange(len(frame)) + skip + 1 + int(bool(header))
    return frame, lineno, sep


def _column(frame, key, name, what):
    if isinstance(key, (int, np.integer)):
        if not 0 <= key < frame.shape[1]:
            raise CohortError(
                f"{name}: {what} column index {key} is out of range; the file has "
                f"{frame.shape[1]} column(s) (is the delimiter right?)"
            )
        return frame.iloc[:, int(key)].str.strip()
    if key not in frame.columns:
        raise CohortError(
            f"{name}: no {what} column {key!r} (columns: {list_ids(frame.columns)}); expected "
            "a header naming it"
        )
    return frame[key].str.strip()


def _ids(series, lineno, name, what):
    empty = (series == "").to_numpy()
    if empty.any():
        raise CohortError(f"{name}: empty {what} at line {lineno[empty][0]}; expected an ID")
    return series.to_numpy(dtype=object)


def _values(series, lineno, name, what):
    conv = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(conv)
    if bad.any():
        k = np.flatnonzero(bad)[0]
        raise CohortError(
            f"{name}: {what} {series.iloc[k]!r} at line {lineno[k]} is not a finite number; "
            "expected numbers"
        )
    return conv


def read_association_list(
    path, sep=None, row_column=0, col_column=1, value_column=None, header="infer"
):
    """Read an association list (e.g. disease, gene[, score]) as a long table.

    Parameters
    ----------
    path : str or Path
        Delimited file (gzip allowed); leading ``#`` lines are skipped.
    sep : str, optional
        Delimiter; from the extension or the first line when omitted.
    row_column, col_column : int or str
        Columns of the row and column entities, by position or by header name.
    value_column : int or str, optional
        Column of the association value; 1.0 for every pair when omitted.
    header : bool or "infer"
        Whether the first line is a header. "infer": yes when any column is given by name, or
        when the value column's first entry is not a number; otherwise no.

    Returns
    -------
    pandas.DataFrame
        Columns ``row``, ``col`` (strings) and ``value`` (float64), one row per pair.
    """
    name = str(path)
    keys = [k for k in (row_column, col_column, value_column) if k is not None]
    names_given = any(isinstance(k, str) for k in keys)
    value_field = value_column if isinstance(value_column, (int, np.integer)) else None
    frame, lineno, _ = _load(path, sep, header, names_given, value_field)
    rows = _ids(_column(frame, row_column, name, "row"), lineno, name, "row entity")
    cols = _ids(_column(frame, col_column, name, "column"), lineno, name, "column entity")
    if value_column is None:
        values = np.ones(len(frame))
    else:
        values = _values(_column(frame, value_column, name, "value"), lineno, name, "value")
    out = pd.DataFrame({"row": rows, "col": cols, "value": values})
    dup = out.duplicated(["row", "col"], keep=False).to_numpy()
    if dup.any():
        pairs = [
            f"({r!r}, {c!r})" for r, c in out.loc[dup, ["row", "col"]].drop_duplicates().values
        ]
        raise CohortError(
            f"{name}: pairs listed more than once: {', '.join(pairs[:10])}"
            f"{' ...' if len(pairs) > 10 else ''}; expected each (row, column) pair once"
        )
    return out


def read_edge_list(path, nodes=None, sep=None, header="infer"):
    """Read a side-information graph (node, node[, weight]) as a symmetric sparse adjacency.

    Parameters
    ----------
    path : str or Path
        Delimited file with 2 or 3 columns; leading ``#`` lines are skipped.
    nodes : sequence of str, optional
        Node order of the matrix (e.g. the cohort's genes); an edge naming any other node
        raises CohortError. Default: the sorted names found in the file.
    sep : str, optional
        Delimiter; from the extension or the first line when omitted.
    header : bool or "infer"
        Whether the first line is a header. "infer": yes when a third field on the first line
        is not a number; otherwise no.

    Returns
    -------
    scipy.sparse.csr_matrix
        Symmetric (n_nodes, n_nodes) weights (1.0 without a weight column); an edge listed in
        both directions must carry the same weight.
    list of str
        Node names in matrix order.
    """
    name = str(path)
    frame, lineno, _ = _load(path, sep, header, False, 2)
    if frame.shape[1] not in (2, 3):
        raise CohortError(
            f"{name}: {frame.shape[1]} column(s); expected 2 or 3 (node, node, optional weight)"
        )
    a = _ids(frame.iloc[:, 0].str.strip(), lineno, name, "node")
    b = _ids(frame.iloc[:, 1].str.strip(), lineno, name, "node")
    if frame.shape[1] == 3:
        w = _values(frame.iloc[:, 2].str.strip(), lineno, name, "weight")
        neg = w < 0
        if neg.any():
            k = np.flatnonzero(neg)[0]
            raise CohortError(
                f"{name}: negative weight {w[k]:g} for edge ({a[k]!r}, {b[k]!r}) at line "
                f"{lineno[k]}; expected non-negative weights"
            )
    else:
        w = np.ones(len(frame))
    if nodes is None:
        node_list = sorted(set(a) | set(b))
    else:
        node_list = [str(n) for n in nodes]
        check_unique(node_list, f"{name} (nodes argument)", "node")
    index = {n: i for i, n in enumerate(node_list)}
    for ends in (a, b):
        unknown = np.array([e not in index for e in ends])
        if unknown.any():
            k = np.flatnonzero(unknown)[0]
            raise CohortError(
                f"{name}: edge at line {lineno[k]} names node {ends[k]!r}, which is not among the "
                f"{len(node_list)} given nodes; expected only known nodes"
            )
    i = np.array([index[x] for x in a])
    j = np.array([index[x] for x in b])
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    edges = pd.DataFrame({"lo": lo, "hi": hi, "w": w})
    per_edge = edges.groupby(["lo", "hi"])["w"].agg(["min", "max"])
    conflict = per_edge[per_edge["min"] != per_edge["max"]]
    if len(conflict):
        p, q = conflict.index[0]
        raise CohortError(
            f"{name}: edge ({node_list[p]!r}, {node_list[q]!r}) is listed with different "
            f"weights {conflict['min'].iloc[0]:g} and {conflict['max'].iloc[0]:g}; expected one "
            "weight per edge"
        )
    p, q = per_edge.index.get_level_values(0), per_edge.index.get_level_values(1)
    weights = per_edge["min"].to_numpy()
    off = p != q
    rows = np.concatenate([p, q[off]])
    cols = np.concatenate([q, p[off]])
    data = np.concatenate([weights, weights[off]])
    n = len(node_list)
    return sp.csr_matrix((data, (rows, cols)), shape=(n, n)), node_list
