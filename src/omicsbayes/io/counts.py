"""RNA-seq count tables: featureCounts, HTSeq-count and STAR ReadsPerGene.out.tab."""

from __future__ import annotations

import glob
import io
from pathlib import Path

import numpy as np
import pandas as pd

from ._common import (
    CohortError,
    check_counts,
    check_unique,
    head_lines,
    list_ids,
    make_anndata,
    one_line,
    parse_table,
    read_text,
    to_numeric_frame,
)
from .delimited import join_sample_sheet, read_sample_sheet

FORMATS = ("featurecounts", "htseq", "star")
FEATURECOUNTS_COLUMNS = ["Geneid", "Chr", "Start", "End", "Strand", "Length"]
# STAR ReadsPerGene.out.tab columns 2-4: unstranded, read 1 on the gene strand (htseq -s yes),
# read 2 on the gene strand (htseq -s reverse, e.g. Illumina TruSeq stranded)
STAR_COLUMNS = {"unstranded": 1, "forward": 2, "reverse": 3}
STAR_QC = ("N_unmapped", "N_multimapping", "N_noFeature", "N_ambiguous")
_SUFFIXES = (
    ".gz",
    ".bam",
    ".txt",
    ".tsv",
    ".tab",
    ".counts",
    ".count",
    ".cnt",
    ".htseq",
    "ReadsPerGene.out",
    "Aligned.sortedByCoord.out",
    "Aligned.out",
    ".sorted",
    ".sort",
)


def sample_id_from_path(path):
    """Sample ID from a file name: known suffixes (.gz, .txt, .counts, ReadsPerGene.out.tab,
    Aligned.sortedByCoord.out.bam, ...) removed; the parent folder's name when nothing is left
    (e.g. ``S1/ReadsPerGene.out.tab``)."""
    p = Path(path)
    stem = p.name
    changed = True
    while changed:
        changed = False
        for suffix in _SUFFIXES:
            if stem.endswith(suffix):
                stem = stem[: -len(suffix)].rstrip("._-")
                changed = True
    return stem or p.parent.name


def _expand(paths, fmt):
    if isinstance(paths, (str, Path)):
        text = str(paths)
        if any(ch in text for ch in "*?["):
            found = sorted(glob.glob(text))
            if not found:
                raise CohortError(f"{text}: no file matches this pattern; expected {fmt} files")
            return found
        return [text]
    paths = [str(p) for p in paths]
    if not paths:
        raise CohortError(f"no {fmt} files given; expected a list of paths or a glob pattern")
    return paths


def _check_featurecounts_header(header, name):
    """CohortError unless ``header`` (its fields) is a featureCounts header with a sample column."""
    if header[:6] != FEATURECOUNTS_COLUMNS:
        raise CohortError(
            f"{name}: header starts {header[:6]}; expected a featureCounts table with columns "
            f"{' '.join(FEATURECOUNTS_COLUMNS)} followed by one column per sample"
        )
    if len(header) < 7:
        raise CohortError(f"{name}: no sample column after Length; expected one per sample")


def _count_files(paths, format, star_strand):
    """The files of a count cohort and the column of each per-sample file to read (STAR's
    strand column, HTSeq's 1), after checking the format, the strand and, for featureCounts,
    that there is one table."""
    if format not in FORMATS:
        raise CohortError(f"count format {format!r} is not known; expected one of {FORMATS}")
    if star_strand not in STAR_COLUMNS:
        raise CohortError(
            f"star_strand {star_strand!r} is not known; expected one of {tuple(STAR_COLUMNS)}"
        )
    files = _expand(paths, format)
    if format == "featurecounts" and len(files) != 1:
        raise CohortError(
            f"featureCounts takes one table, got {len(files)} files ({list_ids(files, 3)}); "
            "expected a single path"
        )
    return files, STAR_COLUMNS[star_strand] if format == "star" else 1


def _file_samples(files, format):
    """The sample IDs of per-sample count files, from their names (checked unique)."""
    samples = [sample_id_from_path(f) for f in files]
    check_unique(samples, f"{format} files {list_ids(files, 3)}", "sample (from file names)")
    return samples


def _join_sheet(obs, samples, name, sample_sheet, sample_column):
    """``obs`` with the sample sheet's columns joined (IDs matched exactly), if one is given."""
    if sample_sheet is None:
        return obs
    sheet = read_sample_sheet(sample_sheet, sample_column=sample_column)
    sheet = join_sample_sheet(samples, sheet, name, str(sample_sheet))
    return pd.concat([obs, sheet.set_axis(obs.index, axis=0)], axis=1)


def _read_featurecounts(path):
    name = str(path)
    text = read_text(path)
    lines = text.splitlines()
    skip = 0
    while skip < len(lines) and lines[skip].startswith("#"):
        skip += 1
    _check_featurecounts_header(lines[skip].split("\t") if skip < len(lines) else [], name)
    values, annot = parse_table(
        text, name, "\t", row_kind="gene", col_kind="sample", skip_lines=skip, n_annotation=5
    )
    samples = [sample_id_from_path(c) for c in values.columns]
    check_unique(samples, name, "sample (from the BAM file names)")
    var = pd.DataFrame(
        {
            "chr": annot["Chr"].to_numpy(),
            "start": annot["Start"].to_numpy(),
            "end": annot["End"].to_numpy(),
            "strand": annot["Strand"].to_numpy(),
            "length": pd.to_numeric(annot["Length"], errors="coerce").to_numpy(),
        },
        index=values.index,
    )
    if var["length"].isna().any():
        gene = var.index[var["length"].isna().to_numpy()][0]
        raise CohortError(f"{name}: non-numeric Length for gene {gene!r}; expected a number")
    counts = check_counts(values.to_numpy().T, name, samples, values.index.tolist())
    return counts, samples, values.index.tolist(), var, pd.DataFrame(index=samples)


def _read_per_sample(path, fmt, column):
    """(gene IDs, counts, QC dict) of one HTSeq or STAR file."""
    name = str(path)
    text = read_text(path)
    n_fields = 2 if fmt == "htseq" else 4
    layout = "gene, count" if fmt == "htseq" else "gene, unstranded, forward, reverse"
    try:
        frame = pd.read_csv(
            io.StringIO(text), sep="\t", header=None, dtype={0: str}, keep_default_na=False
        )
    except pd.errors.ParserError as exc:
        raise CohortError(
            f"{name}: rows have different numbers of fields ({one_line(exc)}); expected {n_fields} "
            f"tab-separated columns ({layout})"
        ) from exc
    if frame.shape[1] != n_fields:
        raise CohortError(
            f"{name}: {frame.shape[1]} tab-separated column(s); expected {n_fields} ({layout})"
        )
    genes = frame[0].str.strip().tolist()
    check_unique(genes, name, "gene")
    values = to_numeric_frame(frame.iloc[:, 1:].set_axis(pd.Index(genes), axis=0), name)
    counts = check_counts(
        values.to_numpy(), name, genes, values.columns.tolist(), row_kind="gene", col_kind="column"
    )[:, column - 1]
    if fmt == "htseq":
        qc_mask = np.array([g.startswith("__") for g in genes])
        qc = {f"qc_{g[2:]}": int(c) for g, c, m in zip(genes, counts, qc_mask) if m}
    else:
        qc_mask = np.array([g in STAR_QC for g in genes])
        missing = [q for q in STAR_QC if q not in genes]
        if missing:
            raise CohortError(
                f"{name}: no {list_ids(missing)} rows; expected a STAR ReadsPerGene.out.tab file "
                "starting with the four N_ summary rows"
            )
        qc = {f"qc_{g[2:]}": int(c) for g, c, m in zip(genes, counts, qc_mask) if m}
    genes = [g for g, m in zip(genes, qc_mask) if not m]
    if not genes:
        raise CohortError(f"{name}: only summary rows; expected one row per gene")
    return genes, counts[~qc_mask], qc


def read_counts(
    paths,
    format="featurecounts",
    star_strand="unstranded",
    sample_sheet=None,
    sample_column="sample",
):
    """Read RNA-seq gene counts into AnnData (samples x genes) with integer ``layers["counts"]``.

    Parameters
    ----------
    paths : str, Path or list
        featureCounts: one table (comment line, ``Geneid Chr Start End Strand Length`` then one
        column per BAM file). HTSeq / STAR: one file per sample, as a list or a glob pattern;
        the sample ID is the file name without known suffixes (see ``sample_id_from_path``).
    format : {"featurecounts", "htseq", "star"}
        Layout of the files.
    star_strand : {"unstranded", "forward", "reverse"}
        STAR column: 2 (unstranded), 3 (read 1 on the gene strand) or 4 (read 2 on the gene
        strand, e.g. TruSeq stranded).
    sample_sheet : str or Path, optional
        Sample sheet TSV joined into ``.obs`` (IDs matched exactly, as in ``read_matrix``).
    sample_column : str
        Sample ID column of the sample sheet.

    Returns
    -------
    anndata.AnnData
        X float64 and ``layers["counts"]`` int64. HTSeq ``__no_feature``-style rows and STAR's
        ``N_`` rows become ``.obs`` columns ``qc_no_feature``, ``qc_unmapped``, ...;
        featureCounts annotation becomes ``.var`` chr, start, end, strand, length.
    """
    files, column = _count_files(paths, format, star_strand)
    if format == "featurecounts":
        counts, samples, genes, var, obs = _read_featurecounts(files[0])
        name = files[0]
    else:
        samples = _file_samples(files, format)
        genes, columns, qcs = None, [], []
        for f in files:
            g, c, qc = _read_per_sample(f, format, column)
            if genes is None:
                genes, first = g, f
            elif g != genes:
                missing = sorted(set(genes) - set(g))
                extra = sorted(set(g) - set(genes))
                if missing or extra:
                    raise CohortError(
                        f"{f}: genes differ from {first}; missing: {list_ids(missing)}; extra: "
                        f"{list_ids(extra)}; expected the same genes in every file"
                    )
                c = pd.Series(c, index=g).loc[genes].to_numpy()
            columns.append(c)
            qcs.append(qc)
        counts = np.column_stack(columns).T
        obs = pd.DataFrame(qcs, index=samples)
        var = None
        name = f"{format} files"
    obs = _join_sheet(obs, samples, name, sample_sheet, sample_column)
    return make_anndata(counts, samples, genes, "counts", name, obs=obs, var=var)


def _star_qc(path, column):
    """The four ``N_`` summary rows that open a STAR file (``qc_<name>`` -> count)."""
    wanted = {q: f"qc_{q[2:]}" for q in STAR_QC}
    qc = {}
    for line in head_lines(path, limit=len(STAR_QC)):
        key, *values = line.split("\t")
        if key.strip() in wanted and len(values) >= column:
            qc[wanted[key.strip()]] = pd.to_numeric(values[column - 1].strip(), errors="coerce")
    return qc


def _check_htseq_head(path):
    """CohortError unless an HTSeq file's first line is ``gene<TAB>count`` (the file is read no
    further: its ``__`` summary rows come last and are left to :func:`read_counts`)."""
    (first,) = head_lines(path, limit=1)
    fields = first.split("\t")
    if len(fields) != 2 or pd.isna(pd.to_numeric(fields[1].strip(), errors="coerce")):
        raise CohortError(
            f"{path}: first line {first[:80]!r}; expected an HTSeq-count file of 2 tab-separated "
            "columns (gene, count)"
        )


def read_counts_obs(
    paths,
    format="featurecounts",
    star_strand="unstranded",
    sample_sheet=None,
    sample_column="sample",
):
    """The ``.obs`` :func:`read_counts` gives, without reading the counts: the sample IDs (the
    featureCounts header, or the file names), the sample sheet's columns and the summary rows
    of STAR files (their first lines). Of an HTSeq file only the first line is read and checked:
    its summary rows (``qc_no_feature``, ...) are its last lines, so they are not among the
    columns. Parameters as :func:`read_counts`.

    Returns
    -------
    pandas.DataFrame
        Indexed by sample ID.
    """
    files, column = _count_files(paths, format, star_strand)
    if format == "featurecounts":
        name = files[0]
        lines = head_lines(name, stop=lambda line: not line.startswith("#"))
        header = lines[-1].split("\t")
        _check_featurecounts_header(header, name)
        samples = [sample_id_from_path(c.strip()) for c in header[6:]]
        check_unique(samples, name, "sample (from the BAM file names)")
        obs = pd.DataFrame(index=samples)
    else:
        samples = _file_samples(files, format)
        if format == "star":
            obs = pd.DataFrame([_star_qc(f, column) for f in files], index=samples)
        else:
            for f in files:
                _check_htseq_head(f)
            obs = pd.DataFrame(index=samples, columns=pd.Index([], dtype=object))
        name = f"{format} files"
    return _join_sheet(obs, samples, name, sample_sheet, sample_column)
