"""TCGA gene x sample matrices (Firehose / UCSC Xena layout) joined to a clinical table."""

from __future__ import annotations

import re

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
    sniff_sep,
    split_line,
)
from .delimited import read_sample_sheet

# TCGA-<TSS>-<participant>-<sample type><vial>[-<portion><analyte>-<plate>-<centre>]
BARCODE = re.compile(r"^TCGA-([A-Z0-9]{2})-([A-Z0-9]{4})-(\d{2})([A-Z])?(-.*)?$")
FIREHOSE_SECOND_HEADER = ("gene_id", "gene", "composite element ref")
"""First fields of the second header line of Firehose matrices, which the readers skip."""
SAMPLE_TYPES = {
    "01": "Primary Solid Tumor",
    "02": "Recurrent Solid Tumor",
    "03": "Primary Blood Derived Cancer - Peripheral Blood",
    "04": "Recurrent Blood Derived Cancer - Bone Marrow",
    "05": "Additional - New Primary",
    "06": "Metastatic",
    "07": "Additional Metastatic",
    "08": "Human Tumor Original Cells",
    "09": "Primary Blood Derived Cancer - Bone Marrow",
    "10": "Blood Derived Normal",
    "11": "Solid Tissue Normal",
    "12": "Buccal Cell Normal",
    "13": "EBV Immortalized Normal",
    "14": "Bone Marrow Normal",
    "20": "Control Analyte",
    "40": "Recurrent Blood Derived Cancer - Peripheral Blood",
    "50": "Cell Lines",
    "60": "Primary Xenograft Tissue",
    "61": "Cell Line Derived Xenograft Tissue",
}


def parse_barcode(barcode, name="barcode"):
    """Split a TCGA sample barcode into its parts.

    Parameters
    ----------
    barcode : str
        At least ``TCGA-XX-XXXX-NN`` (15 characters), e.g. ``TCGA-A6-2671-01A-01R-1410-07``.
    name : str
        File name for the error message.

    Returns
    -------
    dict
        participant (first 12 characters), sample_type_code (characters 14-15),
        sample_type (its name), tissue_source_site, vial (may be empty).
    """
    m = BARCODE.match(barcode)
    if m is None:
        raise CohortError(
            f"{name}: column {barcode!r} is not a TCGA sample barcode; expected "
            "'TCGA-XX-XXXX-NN...' (e.g. TCGA-A6-2671-01A-01R-1410-07)"
        )
    code = m.group(3)
    return {
        "participant": barcode[:12],
        "sample_type_code": code,
        "sample_type": SAMPLE_TYPES.get(code, "unknown"),
        "tissue_source_site": m.group(1),
        "vial": m.group(4) or "",
    }


def read_tcga(
    path,
    clinical=None,
    sample_types=("01",),
    clinical_participant_column="participant",
    layer="intensity",
):
    """Read a TCGA gene x sample matrix into AnnData (samples x genes).

    Rows are genes, either ``SYMBOL|ENTREZ`` (Firehose; ``?`` for no symbol) or plain IDs
    (Xena); a second Firehose header line (``gene_id  normalized_count ...``) is skipped.
    Columns are TCGA barcodes, parsed into ``.obs`` columns participant, sample_type_code,
    sample_type, tissue_source_site and vial.

    Parameters
    ----------
    path : str or Path
        Matrix (TSV, gzip allowed).
    clinical : str or Path, optional
        Clinical table (TSV), one row per participant; all its columns are joined into ``.obs``
        by participant (IDs compared in upper case, Firehose writes them in lower case). Kept
        samples whose participant is absent raise CohortError listing them.
    sample_types : sequence of str or None
        Two-digit sample type codes to keep (default primary tumour "01"); None keeps all.
    clinical_participant_column : str
        Column of the clinical table holding the 12-character participant barcodes.
    layer : {"intensity", "counts"}
        Layer that keeps the raw values.

    Returns
    -------
    anndata.AnnData
        ``.var`` columns symbol and entrez (missing when the row ID has no ``|``).
    """
    name = str(path)
    text = read_text(path)
    lines = text.splitlines()
    sep = sniff_sep(path, lines[0])
    if len(lines) > 1:
        second = split_line(lines[1], sep)
        if second and second[0].strip().lower() in FIREHOSE_SECOND_HEADER:
            lines = [lines[0], *lines[2:]]
            text = "\n".join(lines)
    table = parse_table(text, name, sep, row_kind="gene", col_kind="sample").T
    keep, obs = _sample_obs(
        table.index.tolist(), sample_types, clinical, clinical_participant_column, name
    )
    table = table.loc[keep]
    genes = table.columns.tolist()
    symbol, entrez = [], []
    for g in genes:
        if "|" in g:
            s, _, e = g.partition("|")
            symbol.append(np.nan if s in ("?", "") else s)
            entrez.append(e)
        else:
            symbol.append(g)
            entrez.append(np.nan)
    var = pd.DataFrame({"symbol": symbol, "entrez": entrez}, index=genes)
    return make_anndata(table.to_numpy(), table.index, genes, layer, name, obs=obs, var=var)


def _sample_obs(barcodes, sample_types, clinical, column, name):
    """The kept samples (a mask over ``barcodes``) and their ``.obs``: the barcodes' parts and
    the clinical table's columns."""
    obs = pd.DataFrame([parse_barcode(b, name) for b in barcodes], index=barcodes)
    keep = np.ones(len(obs), dtype=bool)
    if sample_types is not None:
        if isinstance(sample_types, str):
            sample_types = (sample_types,)
        wanted = [str(s).zfill(2) for s in sample_types]
        keep = obs["sample_type_code"].isin(wanted).to_numpy()
        if not keep.any():
            present = sorted(obs["sample_type_code"].unique())
            raise CohortError(
                f"{name}: no sample of type {wanted}; the file has sample type codes {present}; "
                "expected at least one (set sample_types)"
            )
        obs = obs.loc[keep]
    if clinical is not None:
        obs = _join_clinical(obs, clinical, column, name)
    for col in ("sample_type_code", "sample_type", "tissue_source_site"):
        obs[col] = obs[col].astype("category")
    return keep, obs


def read_tcga_obs(
    path, clinical=None, sample_types=("01",), clinical_participant_column="participant"
):
    """The ``.obs`` :func:`read_tcga` gives, from the matrix's header line (its barcodes) and the
    clinical table; the matrix's values are not read. Parameters as :func:`read_tcga`.

    Returns
    -------
    pandas.DataFrame
        Indexed by the kept samples' barcodes.
    """
    name = str(path)
    lines = head_lines(path, limit=3)
    sep = sniff_sep(path, lines[0])
    header = split_line(lines[0], sep)
    data = lines[1:]
    if data and split_line(data[0], sep)[0].strip().lower() in FIREHOSE_SECOND_HEADER:
        data = data[1:]
    if not data or not data[0].strip():
        raise CohortError(f"{name}: has a header but no data rows; expected one row per gene")
    first = data[0]
    n = len(split_line(first, sep))
    if n == len(header) + 1 and not first.endswith(sep):  # R write.table: no row-name field
        header = ["", *header]
    barcodes = [h.strip() for h in header[1:]]
    check_unique(barcodes, name, "sample")
    return _sample_obs(barcodes, sample_types, clinical, clinical_participant_column, name)[1]


def _sample_column(sheet):
    """The column of a clinical table holding TCGA sample barcodes (UCSC Xena's ``sampleID``,
    one row per sample), or None."""
    for col in sheet.columns:
        values = sheet[col].dropna().astype(str)
        if len(values) and values.map(lambda v: BARCODE.match(v) is not None).all():
            return col
    return None


def _join_clinical(obs, clinical, column, name):
    """``obs`` joined to the clinical table: by participant, or, where a participant has several
    rows (a table of one row per sample, as UCSC Xena's clinical matrices), by the sample
    barcode's first 15 characters (``TCGA-XX-XXXX-NN``) in the table's barcode column."""
    sheet = read_sample_sheet(clinical, sample_column=column, unique=False)
    ids = [s.upper() for s in sheet.index]
    keys = obs["participant"].tolist()
    by_sample = _sample_column(sheet) if len(set(ids)) < len(ids) else None
    if by_sample is not None:
        ids = [str(v)[:15].upper() for v in sheet[by_sample]]
        keys = [b[:15].upper() for b in obs.index]
        check_unique(ids, str(clinical), f"sample (column {by_sample!r})")
    else:
        check_unique(ids, str(clinical), "participant")
    sheet.index = pd.Index(ids, dtype=object)
    missing = sorted(set(keys) - set(sheet.index))
    if missing and by_sample is not None:
        raise CohortError(
            f"{name}: {len(missing)} samples have no row in clinical table {clinical} (column "
            f"{by_sample!r}): {list_ids(missing)}; expected every kept sample's barcode"
        )
    if missing:
        raise CohortError(
            f"{name}: {len(missing)} participants have no row in clinical table {clinical} "
            f"(column {column!r}): {list_ids(missing)}; expected every kept sample's participant"
        )
    clash = [c for c in sheet.columns if c in obs.columns]
    sheet = sheet.rename(columns={c: f"clinical_{c}" for c in clash})
    joined = sheet.loc[keys].set_axis(obs.index, axis=0)
    return pd.concat([obs, joined], axis=1)
