"""Delimited expression or count matrices (CSV/TSV, optionally gzip) with a sample sheet."""

from __future__ import annotations

import io

import pandas as pd

from ._common import (
    NA_TOKENS,
    CohortError,
    categorical_labels,
    check_unique,
    list_ids,
    make_anndata,
    parse_table,
    read_text,
    sep_name,
    sniff_sep,
    split_line,
)

ORIENTATIONS = ("samples_as_rows", "samples_as_columns")


def read_sample_sheet(path, sample_column="sample", sep=None, unique=True):
    """Read a sample sheet (TSV, or CSV by extension) indexed by ``sample_column``.

    Parameters
    ----------
    path : str or Path
        Sample sheet file; one row per sample.
    sample_column : str
        Column holding the sample IDs (matched exactly, as strings).
    sep : str, optional
        Delimiter; sniffed from the extension when omitted.
    unique : bool
        Refuse repeated IDs (a table of several rows per ID, as a clinical table of one row per
        sample indexed by participant, passes ``unique=False``).

    Returns
    -------
    pandas.DataFrame
        Indexed by sample ID (string), remaining columns as read; text columns categorical.
    """
    text = read_text(path)
    first = text.splitlines()[0]
    sep = sniff_sep(path, first, sep)
    header = [h.strip() for h in split_line(first, sep)]
    if sample_column not in header:
        raise CohortError(
            f"{path}: sample sheet has no column {sample_column!r} (columns: "
            f"{list_ids(header)}); expected a column of sample IDs named {sample_column!r}"
        )
    check_unique(header, path, "column")
    for lineno, line in enumerate(text.splitlines()[1:], start=2):
        n = len(split_line(line, sep)) if line.strip() else len(header)
        if n != len(header):
            raise CohortError(
                f"{path}: sample sheet line {lineno} has {n} fields but the header has "
                f"{len(header)}; expected a regular {sep_name(sep)}-delimited table"
            )
    sheet = pd.read_csv(
        io.StringIO(text),
        sep=sep,
        dtype={sample_column: str},
        na_values=NA_TOKENS,
        keep_default_na=False,
        float_precision="round_trip",
        index_col=False,
    )
    sheet.columns = [c.strip() for c in sheet.columns]
    if sheet.empty:
        raise CohortError(f"{path}: sample sheet has a header but no rows; expected one per sample")
    ids = sheet[sample_column]
    if ids.isna().any():
        row = int(ids.isna().to_numpy().nonzero()[0][0]) + 2
        raise CohortError(f"{path}: empty sample ID in column {sample_column!r} at line {row}")
    ids = ids.str.strip()
    if unique:
        check_unique(ids.tolist(), path, "sample")
    sheet = sheet.drop(columns=[sample_column]).set_axis(pd.Index(ids, dtype=object), axis=0)
    sheet.index.name = None
    return categorical_labels(sheet)


def join_sample_sheet(sample_ids, sheet, matrix_name, sheet_name):
    """Rows of ``sheet`` in the order of ``sample_ids``; CohortError listing unmatched IDs."""
    in_matrix = pd.Index(sample_ids)
    only_matrix = in_matrix.difference(sheet.index, sort=False)
    only_sheet = sheet.index.difference(in_matrix, sort=False)
    if len(only_matrix) == len(in_matrix):
        raise CohortError(
            f"{matrix_name}: no sample in common with sample sheet {sheet_name} (matrix samples: "
            f"{list_ids(in_matrix, 5)}; sheet samples: {list_ids(sheet.index, 5)}); expected the "
            "same sample IDs, matched exactly (is the orientation right?)"
        )
    if len(only_matrix) or len(only_sheet):
        parts = []
        if len(only_matrix):
            parts.append(f"in the matrix but not the sheet: {list_ids(only_matrix)}")
        if len(only_sheet):
            parts.append(f"in the sheet but not the matrix: {list_ids(only_sheet)}")
        raise CohortError(
            f"{matrix_name}: samples do not match sample sheet {sheet_name}; "
            + "; ".join(parts)
            + "; expected the same sample IDs in both, matched exactly"
        )
    return sheet.loc[in_matrix]


def read_matrix(
    path,
    sample_sheet=None,
    orientation="samples_as_rows",
    sep=None,
    layer="intensity",
    sample_column="sample",
):
    """Read a delimited matrix (CSV/TSV, gzip allowed) into AnnData (samples x features).

    Parameters
    ----------
    path : str or Path
        Matrix file. The first column holds row IDs and the header row holds column IDs.
    sample_sheet : str or Path, optional
        Sample sheet (TSV) with one row per sample; its other columns become ``.obs``.
        Every sample must appear in both files (IDs matched exactly).
    orientation : {"samples_as_rows", "samples_as_columns"}
        Whether rows of the file are samples (features as columns) or features.
    sep : str, optional
        Delimiter; from the extension (.csv comma, .tsv/.txt tab) when omitted.
    layer : {"intensity", "counts"}
        Layer that keeps the raw values; "counts" also checks non-negative integers.
    sample_column : str
        Sample ID column of the sample sheet.

    Returns
    -------
    anndata.AnnData
        X float64, raw values in ``layers[layer]``, ``.obs`` from the sample sheet.
    """
    if orientation not in ORIENTATIONS:
        raise CohortError(
            f"{path}: orientation {orientation!r} is not known; expected one of {ORIENTATIONS}"
        )
    text = read_text(path)
    sep = sniff_sep(path, text.splitlines()[0], sep)
    rows_are_samples = orientation == "samples_as_rows"
    row_kind, col_kind = ("sample", "feature") if rows_are_samples else ("feature", "sample")
    table = parse_table(text, str(path), sep, row_kind=row_kind, col_kind=col_kind)
    if not rows_are_samples:
        table = table.T
    obs = None
    if sample_sheet is not None:
        sheet = read_sample_sheet(sample_sheet, sample_column=sample_column)
        obs = join_sample_sheet(table.index, sheet, str(path), str(sample_sheet))
    return make_anndata(table.to_numpy(), table.index, table.columns, layer, str(path), obs=obs)


def read_matrix_obs(sample_sheet=None, sample_column="sample"):
    """The ``.obs`` :func:`read_matrix` gives, from the sample sheet alone (the matrix is not
    read; the reader checks that both name the same samples): the sheet, or a frame without
    columns when there is none.

    Returns
    -------
    pandas.DataFrame
    """
    if sample_sheet is None:
        return pd.DataFrame()
    return read_sample_sheet(sample_sheet, sample_column=sample_column)
