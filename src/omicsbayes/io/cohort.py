"""One entry point from a config cohort entry to AnnData."""

from __future__ import annotations

import inspect
from pathlib import Path

import pandas as pd

from ._common import CohortError, list_ids
from .associations import load_omim, load_orphanet, read_associations
from .counts import read_counts, read_counts_obs
from .delimited import read_matrix, read_matrix_obs
from .demo import load_demo, read_demo_obs
from .geo import read_geo_obs, read_geo_series_matrix
from .h5ad import read_h5ad, read_h5ad_obs
from .hiv import read_hivdb_obs, read_hivdb_phenosense
from .movielens import load_movielens_100k, load_movielens_small
from .simulate import simulate_counts, simulate_obs
from .tcga import read_tcga, read_tcga_obs

READERS = {
    "delimited": read_matrix,
    "h5ad": read_h5ad,
    "geo": read_geo_series_matrix,
    "tcga": read_tcga,
    "counts": read_counts,
    "demo": load_demo,
    "simulated_counts": simulate_counts,
    "hivdb": read_hivdb_phenosense,
    "associations": read_associations,
    "omim": load_omim,
    "orphanet": load_orphanet,
    "movielens_100k": load_movielens_100k,
    "movielens_small": load_movielens_small,
}
# format -> the reader of its .obs alone (read_cohort_obs); formats without one have no .obs columns
OBS_READERS = {
    "delimited": read_matrix_obs,
    "h5ad": read_h5ad_obs,
    "geo": read_geo_obs,
    "tcga": read_tcga_obs,
    "counts": read_counts_obs,
    "demo": read_demo_obs,
    "simulated_counts": simulate_obs,
    "hivdb": read_hivdb_obs,
}
# spec keys renamed on the way to the reader ("format" is taken by the dispatcher)
RENAMES = {"counts": {"count_format": "format", "path": "paths"}}
PATH_KEYS = ("path", "paths", "sample_sheet", "clinical", "row_graph", "col_graph", "annotation")


def _resolve(value, base):
    if isinstance(value, (list, tuple)):
        return [_resolve(v, base) for v in value]
    p = Path(value)
    return str(p if p.is_absolute() else base / p)


def read_cohort(spec, base_dir="."):
    """Read the cohort a config entry describes.

    Parameters
    ----------
    spec : dict
        ``format`` (one of ``READERS``) plus that reader's keyword arguments, e.g.
        ``{"format": "demo", "name": "digits"}``,
        ``{"format": "delimited", "path": "x.tsv", "sample_sheet": "s.tsv",
        "orientation": "samples_as_columns"}``,
        ``{"format": "counts", "count_format": "htseq", "paths": "counts/*.txt"}``,
        ``{"format": "simulated_counts", "n_samples": 60}``.
        Optional ``label``: an ``.obs`` column that must exist (rows with a missing label are
        kept); it is recorded in ``uns["label_column"]``.
    base_dir : str or Path
        Folder that relative paths (``PATH_KEYS``: path, paths, sample_sheet, clinical, the graphs,
        annotation) are resolved against.

    Returns
    -------
    anndata.AnnData
    """
    fmt, kwargs = _reader_kwargs(spec, base_dir)
    adata = READERS[fmt](**kwargs)
    label = spec.get("label")
    if label is not None:
        if label not in adata.obs.columns:
            raise CohortError(
                f"label column {label!r} is not in the cohort's sample sheet (.obs columns: "
                f"{list_ids(adata.obs.columns, 30) or 'none'}); expected one of them"
            )
        adata.uns["label_column"] = label
    return adata


def read_cohort_obs(spec, base_dir="."):
    """The ``.obs`` :func:`read_cohort` gives a cohort entry, reading only what it needs: a demo's
    or a delimited or count cohort's sample sheet, an h5ad file's ``.obs`` group, a GEO series
    matrix's header lines, a TCGA matrix's header line and its clinical table, an HIVDB file's
    fold-change and annotation columns, a simulated cohort's class sizes.

    Parameters and key checks as :func:`read_cohort` (``label`` is not looked up here).

    Returns
    -------
    pandas.DataFrame
        Columns as ``.obs`` would have them. Rows are the cohort's samples, except where the
        matrix is not read (a delimited or featureCounts cohort's sample sheet rows, which the
        reader requires to be the matrix's samples; no rows for a delimited cohort without a
        sheet, an association list or OMIM, whose ``.obs`` has no columns).
    """
    fmt, kwargs = _reader_kwargs(spec, base_dir)
    reader = OBS_READERS.get(fmt)
    if reader is None:
        return pd.DataFrame()
    wanted = inspect.signature(reader).parameters
    return reader(**{k: v for k, v in kwargs.items() if k in wanted})


def _reader_kwargs(spec, base_dir):
    """The format of a cohort entry and its reader's keyword arguments (paths resolved)."""
    if not isinstance(spec, dict):
        raise CohortError(f"cohort spec is a {type(spec).__name__}; expected a mapping")
    fmt = spec.get("format")
    if fmt not in READERS:
        raise CohortError(
            f"cohort format {fmt!r} is not known; expected one of {', '.join(READERS)}"
        )
    reader = READERS[fmt]
    renames = RENAMES.get(fmt, {})
    allowed = (set(inspect.signature(reader).parameters) | set(renames)) - {"format"}
    kwargs = {}
    for key, value in spec.items():
        if key in ("format", "label"):
            continue
        if key not in allowed:
            raise CohortError(
                f"cohort key {key!r} is not known for format {fmt!r}; expected some of "
                f"{list_ids(sorted(allowed), 20)} (plus 'format' and 'label')"
            )
        if key in PATH_KEYS and value is not None:
            value = _resolve(value, Path(base_dir))
        kwargs[renames.get(key, key)] = value
    parameters = inspect.signature(reader).parameters.values()
    spec_key = {new: old for old, new in renames.items()}
    missing = [
        spec_key.get(p.name, p.name)
        for p in parameters
        if p.default is p.empty and p.kind != p.VAR_KEYWORD and p.name not in kwargs
    ]
    if missing:
        raise CohortError(
            f"cohort of format {fmt!r} has no key {list_ids(missing)}; expected "
            f"{'it' if len(missing) == 1 else 'them'} in the cohort entry"
        )
    if "sample_types" in kwargs and isinstance(kwargs["sample_types"], list):
        kwargs["sample_types"] = tuple(kwargs["sample_types"])
    return fmt, kwargs
