"""One entry point from a config cohort entry to AnnData."""

from __future__ import annotations

import inspect
from pathlib import Path

from ._common import CohortError, list_ids
from .associations import load_omim, load_orphanet, read_associations
from .counts import read_counts
from .delimited import read_matrix
from .demo import load_demo
from .geo import read_geo_series_matrix
from .h5ad import read_h5ad
from .hiv import read_hivdb_phenosense
from .simulate import simulate_counts
from .tcga import read_tcga

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
    if "sample_types" in kwargs and isinstance(kwargs["sample_types"], list):
        kwargs["sample_types"] = tuple(kwargs["sample_types"])
    adata = reader(**kwargs)
    label = spec.get("label")
    if label is not None:
        if label not in adata.obs.columns:
            raise CohortError(
                f"label column {label!r} is not in the cohort's sample sheet (.obs columns: "
                f"{list_ids(adata.obs.columns, 30) or 'none'}); expected one of them"
            )
        adata.uns["label_column"] = label
    return adata
