"""GEO series matrix files (GSExxxx_series_matrix.txt[.gz]), parsed offline."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ._common import (
    CohortError,
    check_unique,
    list_ids,
    make_anndata,
    parse_table,
    read_text,
    split_line,
)

TABLE_BEGIN = "!series_matrix_table_begin"
TABLE_END = "!series_matrix_table_end"
# single-valued sample fields copied into .obs, by their GEO name
SAMPLE_FIELDS = ("title", "geo_accession", "source_name_ch1", "platform_id")


def _unquote(fields):
    return [f.strip() for f in fields]


def _characteristics(lines, accessions, name):
    """Columns from every ``!Sample_characteristics_ch1`` line: each cell "key: value"."""
    columns = {}
    for lineno, fields in lines:
        if len(fields) != len(accessions):
            raise CohortError(
                f"{name}: line {lineno} (!Sample_characteristics_ch1) has {len(fields)} values "
                f"for {len(accessions)} samples; expected one per sample"
            )
        for acc, cell in zip(accessions, fields):
            if not cell:
                continue
            key, sep, value = cell.partition(":")
            key, value = (key.strip(), value.strip()) if sep else ("characteristics_ch1", cell)
            if key in SAMPLE_FIELDS:
                key = f"{key}_characteristic"
            col = columns.setdefault(key, {})
            col[acc] = f"{col[acc]}; {value}" if acc in col else value
    obs = pd.DataFrame(index=pd.Index(accessions, dtype=object))
    for key, col in columns.items():
        values = pd.Series(col, dtype=object).reindex(obs.index)
        numeric = pd.to_numeric(values, errors="coerce")
        if numeric.notna().sum() == values.notna().sum():
            obs[key] = numeric.astype(np.float64)
        else:
            obs[key] = values.astype("category")
    return obs


def read_geo_series_matrix(path):
    """Read a GEO series matrix file into AnnData (samples x probes).

    The expression table between ``!series_matrix_table_begin`` and ``!series_matrix_table_end``
    (probes x samples) is transposed; every ``!Sample_characteristics_ch1`` cell "key: value"
    becomes an ``.obs`` column ``key`` (numeric when every value is a number, else
    categorical; cells without a colon go to ``characteristics_ch1``), beside ``title``,
    ``geo_accession``, ``source_name_ch1`` and ``platform_id``. Values "null"/"" are NaN.

    Parameters
    ----------
    path : str or Path
        GSExxxx_series_matrix.txt or .txt.gz.

    Returns
    -------
    anndata.AnnData
        Indexed by GSM accession; probe IDs (``ID_REF``) as ``var_names``; raw values in
        ``layers["intensity"]``; ``uns["geo"]`` holds the series accession and title.
    """
    name = str(path)
    text = read_text(path)
    lines = text.splitlines()
    begin = next((i for i, ln in enumerate(lines) if ln.strip() == TABLE_BEGIN), None)
    if begin is None:
        raise CohortError(
            f"{name}: no '{TABLE_BEGIN}' line; expected a GEO series matrix file "
            "(GSExxxx_series_matrix.txt[.gz])"
        )
    end = next((i for i in range(begin + 1, len(lines)) if lines[i].strip() == TABLE_END), None)
    if end is None:
        raise CohortError(
            f"{name}: truncated: no '{TABLE_END}' line after the table; expected a complete "
            "series matrix file (was the download interrupted?)"
        )
    fields, characteristics, series = {}, [], {}
    for lineno, line in enumerate(lines[:begin], start=1):
        if line.startswith("!Series_"):
            key, *vals = _unquote(split_line(line, "\t"))
            series.setdefault(key[len("!Series_") :], " ".join(vals))
        if not line.startswith("!Sample_"):
            continue
        key, *vals = _unquote(split_line(line, "\t"))
        key = key[len("!Sample_") :]
        if key == "characteristics_ch1":
            characteristics.append((lineno, vals))
        elif key in SAMPLE_FIELDS and key not in fields:
            fields[key] = (lineno, vals)
    if "geo_accession" not in fields:
        raise CohortError(f"{name}: no '!Sample_geo_accession' line; expected one per file")
    accessions = fields["geo_accession"][1]
    check_unique(accessions, name, "sample")
    table_lines = lines[begin + 1 : end]
    if len(table_lines) < 2:
        raise CohortError(
            f"{name}: the series matrix table has no data rows; expected probes x samples "
            "(RNA-seq series often keep their counts in supplementary files instead)"
        )
    table = parse_table("\n".join(table_lines), name, "\t", row_kind="probe", col_kind="sample")
    table = table.T
    missing = [a for a in accessions if a not in set(table.index)]
    extra = [s for s in table.index if s not in set(accessions)]
    if missing or extra:
        raise CohortError(
            f"{name}: table columns do not match !Sample_geo_accession; only in the header "
            f"lines: {list_ids(missing)}; only in the table: {list_ids(extra)}; expected the same "
            "GSM accessions"
        )
    obs = pd.DataFrame(index=pd.Index(accessions, dtype=object))
    for key in SAMPLE_FIELDS:
        if key in fields:
            lineno, vals = fields[key]
            if len(vals) != len(accessions):
                raise CohortError(
                    f"{name}: line {lineno} (!Sample_{key}) has {len(vals)} values for "
                    f"{len(accessions)} samples; expected one per sample"
                )
            obs[key] = vals
    chars = _characteristics(characteristics, accessions, name)
    obs = pd.concat([obs, chars], axis=1)
    obs = obs.loc[table.index]
    for key in SAMPLE_FIELDS:
        if key in obs and key != "geo_accession":
            obs[key] = obs[key].astype("category")
    adata = make_anndata(table.to_numpy(), table.index, table.columns, "intensity", name, obs=obs)
    adata.uns["geo"] = {
        "series": series.get("geo_accession", ""),
        "title": series.get("title", ""),
    }
    return adata
