"""Shared pieces of the cohort readers: the error type, file opening, delimiter sniffing,
numeric table parsing and AnnData assembly."""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import numbers
import zlib
from collections import Counter
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd

NA_TOKENS = ["", "NA", "NaN", "nan", "null", "NULL", "N/A", "n/a"]
_SEP_NAMES = {"\t": "tab", ",": "comma", ";": "semicolon", " ": "space", "|": "pipe"}


class CohortError(ValueError):
    """A cohort file that cannot be read as asked; the message names the file and what was
    expected."""


def one_line(exc):
    """An exception's message on one line (pandas and h5py messages may span several)."""
    return " ".join(str(exc).split())


def whole_number(value, name, low):
    """``value`` as an int when it is a whole number of at least ``low``; otherwise ValueError
    naming ``name`` (a string, None, a bool, a fraction or infinity included)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not float(value).is_integer()
        or value < low
    ):
        raise ValueError(f"{name}={value!r}; expected an integer >= {low}")
    return int(value)


def sep_name(sep):
    """Human name of a delimiter, for messages."""
    return _SEP_NAMES.get(sep, repr(sep))


def list_ids(ids, limit=10):
    """Quote up to ``limit`` IDs and say how many more there are."""
    ids = list(ids)
    shown = ", ".join(repr(str(i)) for i in ids[:limit])
    if len(ids) > limit:
        shown += f", ... ({len(ids) - limit} more)"
    return shown


def check_file(path):
    """Return ``path`` as a Path, raising CohortError when it is missing or not a file."""
    if path is None:
        raise CohortError("no file given; expected a path")
    p = Path(path)
    if not p.exists():
        raise CohortError(f"{path}: file not found (looked for {p.resolve()}); expected a file")
    if not p.is_file():
        raise CohortError(f"{path}: is a directory; expected a file")
    return p


@contextlib.contextmanager
def _text_file(path):
    """The open text of a (possibly gzip-compressed) file, read in the block; CohortError for a
    missing file, a damaged or truncated gzip stream or text that is not UTF-8."""
    p = check_file(path)
    opener = gzip.open if p.name.endswith(".gz") else open
    try:
        with opener(p, "rt", encoding="utf-8-sig") as fh:
            yield fh
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise CohortError(
            f"{path}: gzip stream is damaged or truncated ({one_line(exc)}); expected a complete "
            ".gz file"
        ) from exc
    except UnicodeDecodeError as exc:
        raise CohortError(
            f"{path}: not a UTF-8 text file ({one_line(exc)}); expected a delimited text file"
        ) from exc


def _check_not_empty(path, text):
    if not text.strip():
        raise CohortError(f"{path}: file is empty; expected a header line and data rows")


def read_text(path):
    """Whole text of a (possibly gzip-compressed) file; CohortError if missing, empty,
    undecodable or a truncated gzip stream."""
    with _text_file(path) as fh:
        text = fh.read()
    _check_not_empty(path, text)
    return text


def head_lines(path, stop=None, limit=None):
    """The first lines of a (possibly gzip-compressed) text file, read no further than needed:
    up to and including the first line for which ``stop(line)`` is true, or ``limit`` lines.
    CohortError as :func:`read_text` for a missing, empty, undecodable or damaged file."""
    lines = []
    with _text_file(path) as fh:
        for line in fh:
            lines.append(line.rstrip("\r\n"))
            if (stop is not None and stop(lines[-1])) or len(lines) == limit:
                break
    _check_not_empty(path, "".join(lines))
    return lines


def sep_from_name(path):
    """Delimiter implied by the file extension (.csv comma; .tsv/.txt/.tab tab), else None."""
    name = Path(path).name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    if name.endswith(".csv"):
        return ","
    if name.endswith((".tsv", ".txt", ".tab")):
        return "\t"
    return None


def sniff_sep(path, first_line, sep=None):
    """The delimiter to use: ``sep`` if given, else from the extension, else the most frequent
    of tab, comma and semicolon in the header line."""
    if sep is not None:
        return sep
    by_name = sep_from_name(path)
    if by_name is not None:
        return by_name
    counts = {s: first_line.count(s) for s in ("\t", ",", ";")}
    best = max(counts, key=counts.get)
    return best if counts[best] > 0 else "\t"


def split_line(line, sep):
    """Fields of one delimited line, honouring double quotes."""
    return next(csv.reader([line], delimiter=sep, quotechar='"'))


def string_table(text, name, expected):
    """A tab-separated table (header line first) with every cell a string as written: no
    missing-value parsing, no quoting; column names stripped. CohortError naming ``expected``
    when the rows have different numbers of fields."""
    try:
        frame = pd.read_csv(
            io.StringIO(text), sep="\t", dtype=str, keep_default_na=False, quoting=csv.QUOTE_NONE
        )
    except pd.errors.ParserError as exc:
        raise CohortError(
            f"{name}: rows have different numbers of tab-separated fields ({one_line(exc)}); "
            f"expected {expected}"
        ) from exc
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame


def check_unique(ids, name, kind):
    """CohortError listing IDs that occur more than once."""
    counts = Counter(ids)
    dup = [i for i, c in counts.items() if c > 1]
    if dup:
        detail = ", ".join(f"{d!r} ({counts[d]} times)" for d in dup[:10])
        more = f", ... ({len(dup) - 10} more)" if len(dup) > 10 else ""
        raise CohortError(f"{name}: duplicated {kind} IDs: {detail}{more}; expected unique IDs")


def check_ids_present(ids, name, kind, where):
    """CohortError when an ID is empty or missing."""
    for pos, i in enumerate(ids):
        if i is None or (isinstance(i, float) and np.isnan(i)) or str(i).strip() == "":
            raise CohortError(f"{name}: {kind} ID at {where} {pos + 1} is empty; expected an ID")


def to_numeric_frame(frame, name):
    """Convert every column of ``frame`` to float64; the first non-numeric cell raises
    CohortError naming its column and row."""
    out = {}
    for col in frame.columns:
        series = frame[col]
        if pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series):
            out[col] = series.to_numpy(dtype=np.float64)
            continue
        conv = pd.to_numeric(series, errors="coerce")
        bad = conv.isna() & series.notna()
        if bad.any():
            row = series.index[np.flatnonzero(bad.to_numpy())[0]]
            value = series[bad].iloc[0]
            raise CohortError(
                f"{name}: column {str(col)!r} has non-numeric value {str(value)!r} at row "
                f"{str(row)!r}; expected numbers"
            )
        out[col] = conv.to_numpy(dtype=np.float64)
    for col, values in out.items():
        inf = np.isinf(values)
        if inf.any():
            row = frame.index[np.flatnonzero(inf)[0]]
            raise CohortError(
                f"{name}: column {str(col)!r} has infinite value {str(values[inf][0])!r} at row "
                f"{str(row)!r}; expected finite numbers (missing values as NA)"
            )
    return pd.DataFrame(out, index=frame.index, columns=frame.columns)


def parse_table(
    text, name, sep, *, row_kind="row", col_kind="column", skip_lines=0, n_annotation=0
):
    """Parse a delimited numeric table (first column row IDs, header row of column IDs).

    Parameters
    ----------
    text : str
        Whole file text.
    name : str
        File name for messages.
    sep : str
        Delimiter.
    row_kind, col_kind : str
        What rows and columns are ("feature", "sample"), for messages.
    skip_lines : int
        Leading lines to skip (comments).
    n_annotation : int
        Text columns after the ID column (e.g. featureCounts' Chr ... Length), kept as strings.

    Returns
    -------
    pandas.DataFrame
        float64 values, string row and column IDs, both checked unique and non-empty.
    pandas.DataFrame
        Only when ``n_annotation > 0``: the annotation columns as strings.
    """
    lines = text.splitlines()[skip_lines:]
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise CohortError(f"{name}: file is empty; expected a header line and data rows")
    header = split_line(lines[0], sep)
    if len(header) < 2 + n_annotation:
        others = [s for s in ("\t", ",", ";") if s != sep and s in lines[0]]
        hint = (
            f"; the header contains {sep_name(others[0])}s: pass sep={others[0]!r}"
            if others
            else ""
        )
        raise CohortError(
            f"{name}: only one column parsed with {sep_name(sep)} as delimiter{hint}; expected "
            f"an ID column followed by one column per {col_kind}"
        )
    data = lines[1:]
    if not any(line.strip() for line in data):
        raise CohortError(f"{name}: has a header but no data rows; expected one row per {row_kind}")
    n_head = len(header)
    n_data = None
    for lineno, line in enumerate(data, start=2 + skip_lines):
        if not line.strip():
            raise CohortError(f"{name}: line {lineno} is blank; expected a data row")
        n = len(split_line(line, sep)) if '"' in line else line.count(sep) + 1
        if n_data is None:
            n_data = n
            if n not in (n_head, n_head + 1):
                raise CohortError(
                    f"{name}: line {lineno} has {n} fields but the header has {n_head}; "
                    f"expected the same number of {sep_name(sep)}-separated fields on every line"
                )
        elif n != n_data:
            raise CohortError(
                f"{name}: line {lineno} has {n} fields but line {2 + skip_lines} has {n_data}; "
                f"expected the same number of {sep_name(sep)}-separated fields on every line"
            )
    trailing = n_data == n_head + 1 and all(line.endswith(sep) for line in data)
    if n_data == n_head + 1 and not trailing:  # R write.table: no row-name field in the header
        header = ["", *header]
    col_ids = [h.strip() for h in header[1:]]
    check_ids_present(col_ids, name, col_kind, "header field")
    check_unique(col_ids, name, col_kind)
    frame = pd.read_csv(
        io.StringIO("\n".join(data)),
        sep=sep,
        header=None,
        dtype={i: str for i in range(n_annotation + 1)},
        na_values=NA_TOKENS,
        keep_default_na=False,
        quotechar='"',
        low_memory=False,
        float_precision="round_trip",
    )
    if trailing:  # every data line ends with a delimiter: drop the empty last field
        frame = frame.iloc[:, :-1]
    row_ids = frame.iloc[:, 0].tolist()
    check_ids_present(row_ids, name, row_kind, "data row")
    row_ids = [str(r).strip() for r in row_ids]
    check_unique(row_ids, name, row_kind)
    index = pd.Index(row_ids, dtype=object)
    values = frame.iloc[:, 1 + n_annotation :]
    values = values.set_axis(index, axis=0).set_axis(pd.Index(col_ids[n_annotation:]), axis=1)
    values = to_numeric_frame(values, name)
    if n_annotation == 0:
        return values
    annotation = frame.iloc[:, 1 : 1 + n_annotation]
    annotation = annotation.set_axis(index, axis=0).set_axis(col_ids[:n_annotation], axis=1)
    return values, annotation


def check_counts(values, name, row_ids, col_ids, row_kind="sample", col_kind="feature"):
    """CohortError for missing, negative or non-integer counts; returns int64 counts."""
    values = np.asarray(values, dtype=np.float64)
    finite = ~np.isnan(values)
    checks = (
        (~finite, "a missing value", "counts cannot be missing"),
        (finite & (values < 0), "negative count", "non-negative integer counts"),
        (finite & (values != np.round(values)), "non-integer count", "non-negative integer counts"),
        (finite & (values >= 2.0**63), "too large count", "counts below 2**63 (int64)"),
    )
    for mask, what, expected in checks:
        if mask.any():
            i, j = np.argwhere(mask)[0]
            shown = "" if what == "a missing value" else f" {values[i, j]:g}"
            raise CohortError(
                f"{name}: {what}{shown} for {row_kind} {str(row_ids[i])!r}, {col_kind} "
                f"{str(col_ids[j])!r}; expected {expected}"
            )
    return values.astype(np.int64)


def make_anndata(values, obs_names, var_names, layer, name, obs=None, var=None):
    """AnnData (samples x features) with X float64 and the raw values in ``layers[layer]``
    (int64 after checking when ``layer == "counts"``)."""
    obs_names = pd.Index([str(s) for s in obs_names], dtype=object)
    var_names = pd.Index([str(v) for v in var_names], dtype=object)
    values = np.asarray(values, dtype=np.float64)
    if layer == "counts":
        raw = check_counts(values, name, obs_names, var_names)
    else:
        raw = values.copy()
    obs = pd.DataFrame(index=obs_names) if obs is None else obs.set_axis(obs_names, axis=0)
    var = pd.DataFrame(index=var_names) if var is None else var.set_axis(var_names, axis=0)
    adata = ad.AnnData(X=values, obs=obs, var=var)
    adata.layers[layer] = raw
    return adata


def categorical_labels(frame):
    """Turn object (string) columns into pandas categoricals, leaving missing values missing."""
    for col in frame.columns:
        if frame[col].dtype == object:
            frame[col] = frame[col].astype("category")
    return frame
