"""GEO series matrix files (GSExxxx_series_matrix.txt[.gz]) and GEO platform annotation tables
(GPLxxx.annot[.gz], GPLxxx-nnnn.txt), parsed offline."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from ._common import (
    CohortError,
    check_unique,
    head_lines,
    list_ids,
    make_anndata,
    parse_table,
    read_text,
    split_line,
    string_table,
)

logger = logging.getLogger("omicsbayes")

TABLE_BEGIN = "!series_matrix_table_begin"
TABLE_END = "!series_matrix_table_end"
# single-valued sample fields copied into .obs, by their GEO name
SAMPLE_FIELDS = ("title", "geo_accession", "source_name_ch1", "platform_id")
COLLAPSE = ("mean", "max_mean")
MULTI_GENE = "///"  # GEO's separator of several genes in one annotation cell
NO_SYMBOL = {"", "---", "NA", "null"}
# header lines of a platform table that name its platform ("!Annotation_platform = GPL570")
PLATFORM_KEYS = ("!annotation_platform", "!platform_geo_accession", "^platform")


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


def _sample_obs(header, name):
    """The sample sheet of a series matrix's header lines (those before the table) and its
    ``!Series_`` fields: ``.obs`` indexed by GSM accession, as :func:`read_geo_series_matrix`
    writes it."""
    fields, characteristics, series = {}, [], {}
    for lineno, line in enumerate(header, start=1):
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
    for key in SAMPLE_FIELDS:
        if key in obs and key != "geo_accession":
            obs[key] = obs[key].astype("category")
    return obs, series


def read_geo_obs(path):
    """The ``.obs`` :func:`read_geo_series_matrix` gives a series matrix file, from its header
    lines only (the expression table is not read): ``title``, ``geo_accession``,
    ``source_name_ch1``, ``platform_id`` and one column per ``!Sample_characteristics_ch1`` key.

    Returns
    -------
    pandas.DataFrame
        Indexed by GSM accession.
    """
    name = str(path)
    lines = head_lines(path, stop=lambda line: line.strip() == TABLE_BEGIN)
    if lines[-1].strip() != TABLE_BEGIN:
        raise CohortError(
            f"{name}: no '{TABLE_BEGIN}' line; expected a GEO series matrix file "
            "(GSExxxx_series_matrix.txt[.gz])"
        )
    return _sample_obs(lines[:-1], name)[0]


def read_geo_platform(path, symbol_column=None):
    """Read a GEO platform annotation table: probe ID -> gene symbol.

    Both layouts GEO offers are read: the ``GPLxxx.annot[.gz]`` annotation file (column
    "Gene symbol") and the platform's full table ``GPLxxx-nnnn.txt`` (column "Gene Symbol").
    Lines starting with ``#``, ``!`` or ``^`` (column descriptions, ``!platform_table_begin``,
    ``^Annotation``) and blank lines are skipped; the first other line is the header.

    Parameters
    ----------
    path : str or Path
        Tab-separated table (gzip allowed) with an ``ID`` column.
    symbol_column : str, optional
        Column holding the gene symbols; default the column named "Gene Symbol" in any case
        (also "gene_symbol"). Name it for other layouts (e.g. "Symbol" in Illumina tables).

    Returns
    -------
    symbols : pandas.Series
        Indexed by probe ID: the symbol as written (several genes joined by ``" /// "``), NaN
        for a probe without one (empty cell or ``---``).
    platform : str or None
        The platform accession the header lines name (``!Annotation_platform``,
        ``!Platform_geo_accession`` or ``^PLATFORM``), if any.
    """
    name = str(path)
    lines = read_text(path).splitlines()
    platform = None
    body = []
    for line in lines:
        if line.startswith(("#", "!", "^")):
            key, sep, value = line.partition("=")
            if sep and key.strip().lower() in PLATFORM_KEYS:
                platform = value.strip()
            continue
        if line.strip():
            body.append(line)
    if not body:
        raise CohortError(
            f"{name}: no table found; expected a GEO platform table (GPLxxx.annot or "
            "GPLxxx-nnnn.txt) with a header line 'ID ... Gene symbol ...'"
        )
    frame = string_table("\n".join(body), name, "a tab-separated GEO platform table")
    if "ID" not in frame.columns:
        raise CohortError(
            f"{name}: no 'ID' column (header starts {list_ids(frame.columns[:5])}); expected a "
            "GEO platform table whose ID column holds the series matrix's ID_REF probe IDs"
        )
    if symbol_column is None:
        found = [c for c in frame.columns if c.lower().replace("_", " ") == "gene symbol"]
        if not found:
            raise CohortError(
                f"{name}: no 'Gene Symbol' / 'Gene symbol' column (columns: "
                f"{list_ids(frame.columns, 25)}); expected one, or name the symbol column with "
                "symbol_column"
            )
        symbol_column = found[0]
    elif symbol_column not in frame.columns:
        raise CohortError(
            f"{name}: no column {symbol_column!r} (symbol_column); columns: "
            f"{list_ids(frame.columns, 25)}"
        )
    ids = frame["ID"].str.strip()
    check_unique(ids.tolist(), name, "probe")
    symbols = frame[symbol_column].str.strip()
    symbols = symbols.where(~symbols.isin(NO_SYMBOL)).set_axis(pd.Index(ids, dtype=object))
    return symbols.rename("gene_symbol"), platform


def collapse_probes(adata, how, layer="intensity"):
    """Collapse probes to genes by their ``.var["gene_symbol"]``.

    Probes without a symbol and probes annotated with several genes (``A /// B``: they measure
    no single gene) are dropped, and both counts are logged and kept in
    ``uns["geo"]["collapse"]``; every sample is kept.

    Parameters
    ----------
    adata : anndata.AnnData
        Samples x probes, with ``.var["gene_symbol"]``.
    how : {"mean", "max_mean"}
        ``mean``: a gene's value in a sample is the mean over its probes (missing values
        skipped). ``max_mean``: the gene takes the values of its probe with the highest mean over
        the samples (the first such probe in file order on a tie).
    layer : str
        Layer of raw values, collapsed the same way as X.

    Returns
    -------
    anndata.AnnData
        Samples x genes, genes in order of their first probe; ``.var`` has gene_symbol,
        n_probes and probe (the probe kept by max_mean; all probes, comma-separated, for mean).
    """
    if how not in COLLAPSE:
        raise CohortError(f"collapse {how!r} is not known; expected one of {COLLAPSE}")
    symbol = adata.var["gene_symbol"]
    missing = symbol.isna().to_numpy()
    multi = ~missing & symbol.astype(str).str.contains(MULTI_GENE, regex=False).to_numpy()
    keep = ~missing & ~multi
    if not keep.any():
        raise CohortError(
            f"no probe has a single gene symbol ({int(missing.sum())} without a symbol, "
            f"{int(multi.sum())} with several); expected a platform table matching the series"
        )
    genes = symbol[keep].to_numpy(dtype=object)
    probes = adata.var_names[keep]
    X = pd.DataFrame(np.asarray(adata.X, dtype=np.float64)[:, keep], columns=probes)
    groups = pd.Series(probes, index=probes).groupby(genes, sort=False)
    order = pd.Index(pd.unique(genes), dtype=object)
    if how == "mean":
        chosen = groups.agg(",".join).reindex(order)
        values = X.T.groupby(genes, sort=False).mean().reindex(order).T.to_numpy()
        raw = pd.DataFrame(adata.layers[layer][:, keep], columns=probes)
        raw = raw.T.groupby(genes, sort=False).mean().reindex(order).T.to_numpy()
    else:
        means = X.mean(axis=0).fillna(-np.inf)  # an all-missing probe is chosen last
        chosen = means.groupby(genes, sort=False).idxmax().reindex(order)
        position = adata.var_names.get_indexer(chosen.to_numpy())
        values = np.asarray(adata.X, dtype=np.float64)[:, position]
        raw = np.asarray(adata.layers[layer])[:, position]
    var = pd.DataFrame(
        {
            "gene_symbol": order.to_numpy(),
            "n_probes": groups.size().reindex(order).to_numpy(dtype=np.int64),
            "probe": chosen.to_numpy(dtype=object),
        },
        index=order,
    )
    out = make_anndata(values, adata.obs_names, order, layer, "collapse", obs=adata.obs, var=var)
    out.layers[layer] = raw
    out.uns.update(adata.uns)
    stats = {
        "method": how,
        "n_probes": int(adata.n_vars),
        "n_genes": int(len(order)),
        "n_probes_without_symbol": int(missing.sum()),
        "n_probes_multi_gene": int(multi.sum()),
    }
    out.uns["geo"] = {**dict(adata.uns.get("geo", {})), "collapse": stats}
    logger.info(
        "collapsed %d probes to %d genes by %s; dropped %d probes without a gene symbol and %d "
        "annotated with several genes",
        stats["n_probes"],
        stats["n_genes"],
        how,
        stats["n_probes_without_symbol"],
        stats["n_probes_multi_gene"],
    )
    return out


def read_geo_series_matrix(path, annotation=None, collapse=None, symbol_column=None):
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
    annotation : str or Path, optional
        The platform's annotation table (:func:`read_geo_platform`): probes get
        ``.var["gene_symbol"]`` (NaN for probes without one or absent from the table, both
        counted in the log). A table that names another platform than the series raises.
    collapse : {"mean", "max_mean"}, optional
        Collapse probes to genes (:func:`collapse_probes`); needs ``annotation``.
    symbol_column : str, optional
        Gene symbol column of the annotation table, when not "Gene Symbol".

    Returns
    -------
    anndata.AnnData
        Indexed by GSM accession; probe IDs (``ID_REF``) as ``var_names`` (gene symbols after
        ``collapse``); raw values in ``layers["intensity"]``; ``uns["geo"]`` holds the series
        accession and title.
    """
    if collapse is not None and annotation is None:
        raise CohortError(
            f"collapse={collapse!r} needs the platform annotation table (key annotation: "
            "GPLxxx.annot[.gz] or GPLxxx-nnnn.txt); none given"
        )
    if collapse is not None and collapse not in COLLAPSE:
        raise CohortError(f"collapse {collapse!r} is not known; expected one of {COLLAPSE}")
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
    obs, series = _sample_obs(lines[:begin], name)
    accessions = obs.index.tolist()
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
    obs = obs.loc[table.index]
    adata = make_anndata(table.to_numpy(), table.index, table.columns, "intensity", name, obs=obs)
    adata.uns["geo"] = {
        "series": series.get("geo_accession", ""),
        "title": series.get("title", ""),
    }
    if annotation is None:
        return adata
    symbols, platform = read_geo_platform(annotation, symbol_column)
    series_platforms = sorted(set(obs.get("platform_id", pd.Series(dtype=object)).astype(str)))
    if platform is not None and series_platforms and platform not in series_platforms:
        raise CohortError(
            f"{annotation}: platform table of {platform}, but the series {name} was measured "
            f"on {', '.join(series_platforms)}; expected that platform's table"
        )
    matched = adata.var_names.isin(symbols.index)
    if not matched.any():
        raise CohortError(
            f"{annotation}: none of the {adata.n_vars} probe IDs of {name} (e.g. "
            f"{list_ids(adata.var_names[:3])}) is in the table's ID column (e.g. "
            f"{list_ids(symbols.index[:3])}); expected the platform of the series"
        )
    adata.var["gene_symbol"] = symbols.reindex(adata.var_names).to_numpy(dtype=object)
    n_absent, n_empty = int((~matched).sum()), int(adata.var["gene_symbol"].isna().sum())
    logger.info(
        "%s: %d of %d probes have a gene symbol (%d not in the table, %d without a symbol)",
        name,
        adata.n_vars - n_empty,
        adata.n_vars,
        n_absent,
        n_empty - n_absent,
    )
    return adata if collapse is None else collapse_probes(adata, collapse)
