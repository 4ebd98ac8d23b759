"""The AnnData plumbing every ``tl`` function shares, written once.

Reading: :func:`matrix_of` (X or a layer, the ``mask_var`` genes, densified only after the gene
selection), :func:`labels_of` (one ``.obs`` column checked for presence, classes and NaN) and
:func:`task_matrix` (the one-vs-rest samples x tasks matrix the joint models take). Fitted
attributes: :func:`fitted` reads an estimator's attribute through a list of names (the shared
vocabulary first, then a model's own name for the same thing) and :func:`mcmc_diagnostics` computes
R-hat and ESS of the identifiable quantities of ``idata_``. Writing: :func:`write_results` puts
scores in ``.obsm["X_<key>"]``, loadings in ``.varm["<key>_loadings"]``, decision values in
``.obs["<key>_decision[_<task>]"]`` and the rest in ``.uns[key]``, and leaves on the estimator the
genes, layer and key it was fitted with (``anndata_fit_``), which a fit file keeps and
:func:`omicsbayes.tl.predict` reads.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from omicsbayes._attributes import ANNDATA_FIT, IDATA, SCORES, TRACES, fitted
from omicsbayes.inference.chain import trace_label, whole_chain_traces
from omicsbayes.inference.convergence import mcmc_diagnostics
from omicsbayes.preprocess.transforms import dense_matrix

from ._checks import check_classes, missing_labels

__all__ = [
    "fitted",
    "joint_targets",
    "labels_of",
    "loadings_of",
    "matrix_of",
    "mcmc_diagnostics",
    "run",
    "task_matrix",
    "trace_of",
    "values_of",
    "write_results",
]

# Without a trace attribute, the log likelihood of the retained draws (chains x draws) in idata_.
DRAW_TRACES = (
    ("sample_stats", "log_likelihood"),
    ("sample_stats", "log_pseudo_likelihood"),
    ("sample_stats", "log_likelihood_observed"),
)


def loadings_of(estimator, n_vars):
    """Loadings as (n_vars, n_factors) from ``loadings_``, ``components_`` or ``col_factors_``.

    ``loadings_`` and ``col_factors_`` are features x factors (the shared vocabulary),
    ``components_`` factors x features (scikit-learn's). ValueError when the one found does not
    have ``n_vars`` features.
    """
    for name, features_first in (
        ("loadings_", True),
        ("components_", False),
        ("col_factors_", True),
    ):
        value = fitted(estimator, name)
        if value is None:
            continue
        value = np.asarray(value, dtype=float)
        if value.ndim != 2:
            continue
        loadings = value if features_first else value.T
        if loadings.shape[0] != n_vars:
            raise ValueError(
                f"{type(estimator).__name__}.{name} has shape {value.shape}; expected "
                f"{n_vars} features {'first' if features_first else 'last'}"
            )
        return loadings
    return None


def trace_of(estimator):
    """``(name, array)`` of the bound or log-likelihood trace, ``(None, None)`` if none.

    BM2PCA's one-vs-rest fits keep one bound per class: they are stacked, shorter ones padded
    with NaN. An MCMC fit without a trace attribute gives the log likelihood of its retained
    draws from ``idata_`` (name ``draws_log_likelihood``; one row per chain).
    """
    for attr, name in TRACES:
        value = fitted(estimator, attr)
        if value is None:
            continue
        if isinstance(value, list | tuple) and value and np.ndim(value[0]) == 1:
            width = max(len(v) for v in value)
            out = np.full((len(value), width), np.nan)
            for i, v in enumerate(value):
                out[i, : len(v)] = v
            return name, out
        return name, np.asarray(value, dtype=float)
    values = _draws_trace(fitted(estimator, *IDATA))
    if values is not None:
        return "draws_log_likelihood", values[0] if len(values) == 1 else values
    return None, None


def _draws_trace(idata):
    """The log likelihood of the retained draws in ``idata`` (chains x draws), or None."""
    for group, var in DRAW_TRACES:
        data = getattr(idata, group, None) if idata is not None else None
        if data is not None and var in data and data[var].ndim == 2:
            return np.asarray(data[var].values, dtype=float)
    return None


def matrix_of(adata, layer=None, mask_var=None, who="tl"):
    """``(X, var mask)``: ``adata.X`` or ``adata.layers[layer]`` on the selected genes, dense.

    ``mask_var`` is None (all genes), a boolean array of length ``n_vars`` or the name of a boolean
    ``.var`` column (e.g. ``"highly_variable"``). Sparse matrices are densified after the gene
    selection only.
    """
    X = values_of(adata, layer, who)
    mask = _var_mask(adata, mask_var, who)
    X = X[:, mask] if not mask.all() else X
    return dense_matrix(X, who), mask


def values_of(adata, layer, who):
    """``adata.X`` or ``adata.layers[layer]`` as stored (sparse stays sparse)."""
    if layer is None:
        if adata.X is None:
            raise ValueError(f"{who}: adata.X is empty; pass layer= naming a layer with the values")
        return adata.X
    if layer not in adata.layers:
        raise ValueError(
            f"{who}: layer {layer!r} is not in adata.layers; layers are {list(adata.layers)}"
        )
    return adata.layers[layer]


def _var_mask(adata, mask_var, who):
    if mask_var is None:
        return np.ones(adata.n_vars, dtype=bool)
    if isinstance(mask_var, str):
        if mask_var not in adata.var:
            raise ValueError(
                f"{who}: mask_var {mask_var!r} is not a .var column; columns are "
                f"{list(adata.var.columns)}"
            )
        values = adata.var[mask_var]
        if values.dtype != bool:
            raise ValueError(
                f"{who}: .var[{mask_var!r}] has dtype {values.dtype}; mask_var needs a "
                "boolean column"
            )
        mask = values.to_numpy()
    else:
        mask = np.asarray(mask_var)
        if mask.dtype != bool or mask.shape != (adata.n_vars,):
            raise ValueError(
                f"{who}: mask_var must be a boolean array of length n_vars={adata.n_vars} or a "
                f".var column name; got dtype {mask.dtype}, shape {mask.shape}"
            )
    if not mask.any():
        raise ValueError(f"{who}: mask_var selects no gene")
    return mask


def labels_of(adata, label_key, who, allow_missing, allow_many_classes=False):
    """``(labels as an object array with None where missing, sorted classes)``.

    Missing labels are NaN / None and the strings of :data:`._checks.MISSING_STRINGS` (what
    ``astype(str)`` makes of NaN; a ``UserWarning`` says how many). Refuses a missing column,
    fewer than two classes, unless ``allow_missing`` missing labels, and what
    :func:`._checks.check_classes` refuses (continuous or mostly-unique columns unless
    ``allow_many_classes``, classes with fewer than two samples).
    """
    if label_key is None:
        label_key = adata.uns.get("label_column")
        if label_key is None:
            raise ValueError(
                f"{who}: label_key is None and adata.uns has no 'label_column'; pass the .obs "
                "column holding the labels"
            )
    if label_key not in adata.obs:
        raise ValueError(
            f"{who}: label column {label_key!r} is not in adata.obs; columns are "
            f"{list(adata.obs.columns)}"
        )
    column = adata.obs[label_key]
    missing = missing_labels(column, label_key, who, stacklevel=4)
    if missing.any() and not allow_missing:
        raise ValueError(
            f"{who}: .obs[{label_key!r}] has {int(missing.sum())} missing labels (NaN, or the "
            "strings 'nan' / 'None' / '') and this model needs a label for every sample; subset "
            "adata to the labelled samples"
        )
    labels = column.astype(object).where(~missing, None).to_numpy()
    labels = np.array([None if v is None else str(v) for v in labels], dtype=object)
    classes = np.array(sorted({v for v in labels if v is not None}), dtype=object)
    if len(classes) < 2:
        raise ValueError(
            f"{who}: .obs[{label_key!r}] has {len(classes)} class(es) {classes.tolist()}; "
            "at least two are needed"
        )
    check_classes(column, labels, classes, label_key, who, allow_many_classes)
    return labels, classes, label_key


def joint_targets(adata, label_key, who, allow_many_classes=False):
    """Targets of a model that learns several tasks jointly (shared factors).

    ``label_key`` is one ``.obs`` column (its classes: one task for two, one-vs-rest for more;
    see :func:`task_matrix`) or a list of columns, each a binary task (two distinct labels, the
    second in sorted order positive; e.g. 0/1 with NaN where unlabelled).

    Returns ``(labels or None, Y, classes, tasks, label_key)``: the 1-D labels (None for a list),
    the samples x tasks matrix with NaN where unlabelled, the classes (a dict task -> its two
    labels for a list) and the task names.
    """
    if not isinstance(label_key, list | tuple):
        labels, classes, key = labels_of(
            adata, label_key, who, allow_missing=True, allow_many_classes=allow_many_classes
        )
        Y, tasks = task_matrix(labels, classes)
        return labels, Y, classes, tasks, key
    columns, classes = [], {}
    for column in label_key:
        labels, pair, _ = labels_of(adata, column, who, allow_missing=True)
        if len(pair) != 2:
            raise ValueError(
                f"{who}: task column {column!r} has {len(pair)} classes {pair.tolist()[:5]}; "
                "each column of a list label_key is one binary task"
            )
        columns.append(task_matrix(labels, pair)[0][:, 0])
        classes[str(column)] = pair
    return None, np.column_stack(columns), classes, [str(c) for c in label_key], list(label_key)


def task_matrix(labels, classes):
    """``(samples x tasks float matrix with NaN where unlabelled, task names)``.

    Two classes: one task, 1 for ``classes[1]``; more: one-vs-rest, one task per class.
    """
    observed = np.array([v is not None for v in labels])
    tasks = classes[1:] if len(classes) == 2 else classes
    Y = np.column_stack([labels == c for c in tasks]).astype(float)
    Y[~observed] = np.nan
    return Y, [str(t) for t in tasks]


def _h5ad_safe(value):
    """A value ``anndata.write_h5ad`` can store (None stays None; other objects become strings)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return {str(k): _h5ad_safe(v) for k, v in value.items()}
    if isinstance(value, pd.DataFrame):
        return value
    if isinstance(value, np.ndarray) and value.dtype != object:
        return value
    if isinstance(value, bool | int | float | str | np.number | np.bool_):
        return value
    if isinstance(value, list | tuple | np.ndarray):
        items = list(value)
        if items and all(isinstance(v, bool | int | float | np.number) for v in items):
            return np.asarray(items)
        if all(isinstance(v, str) for v in items):
            return np.asarray(items, dtype=object) if items else np.array([], dtype=float)
    return str(value)


def write_results(
    adata, key, estimator, mask, scores=None, decision=None, tasks=(), extra=None, obsm=None
):
    """Write a fitted estimator's outputs into ``adata`` under ``key`` (see the module docstring).

    ``scores`` (samples x factors) default to the estimator's ``scores_`` / ``latent_``; loadings
    are read by :func:`loadings_of`, genes outside ``mask`` get NaN rows. ``decision`` is
    (samples,) or (samples, tasks) named by ``tasks``; ``extra`` entries go to ``.uns[key]``;
    ``obsm`` maps further ``.obsm`` names to sample-aligned matrices.
    """
    if scores is None:
        scores = fitted(estimator, *SCORES)
    if scores is not None and np.ndim(scores) == 2 and len(scores) == adata.n_obs:
        adata.obsm[f"X_{key}"] = np.asarray(scores, dtype=float)
    loadings = loadings_of(estimator, int(mask.sum()))
    if loadings is not None and loadings.shape[0] == mask.sum():
        full = np.full((adata.n_vars, loadings.shape[1]), np.nan)
        full[mask] = loadings
        adata.varm[f"{key}_loadings"] = full
    for name, value in (obsm or {}).items():
        adata.obsm[name] = np.asarray(value, dtype=float)
    if decision is not None:
        decision = np.asarray(decision, dtype=float).reshape(adata.n_obs, -1)
        names = (
            [f"{key}_decision"]
            if decision.shape[1] == 1
            else [f"{key}_decision_{t}" for t in tasks]
        )
        for j, name in enumerate(names):
            adata.obs[name] = decision[:, j]
    trace_name, trace = trace_of(estimator)
    uns = {
        "model": type(estimator).__name__,
        "params": estimator.get_params(deep=False),
        "var_mask": mask,
        "n_iter": fitted(estimator, "n_iter_"),
        "coef": fitted(estimator, "coef_"),
        "intercept": fitted(estimator, "intercept_"),
    }
    if trace is not None:
        uns["trace"], uns["trace_name"] = trace, trace_name
        uns["trace_label"] = trace_label(estimator, trace_name)
    idata = fitted(estimator, *IDATA)
    kept = _draws_trace(idata)
    if trace_name == "log_likelihood" and kept is not None:  # every chain, burn-in for figures
        chains, uns["burn_in"] = whole_chain_traces(trace, kept, fitted(estimator, "thin") or 1)
        full = fitted(estimator, "log_likelihood_chains_")  # every iteration of every chain
        if full is not None and np.shape(full) == chains.shape:
            chains = np.asarray(full, dtype=float)
        uns["trace"] = chains if len(chains) > 1 else trace
    if idata is not None:
        uns["diagnostics"] = mcmc_diagnostics(idata)
    uns.update(extra or {})
    adata.uns[key] = {k: _h5ad_safe(v) for k, v in uns.items() if v is not None}
    # what tl.predict needs to score a new cohort with this fit (kept in its fit file)
    setattr(estimator, ANNDATA_FIT, {
        "key_added": key, "layer": (extra or {}).get("layer"), "n_vars": int(adata.n_vars),
        "var_names": [str(v) for v in adata.var_names[mask]], "tasks": [str(t) for t in tasks],
    })  # fmt: skip


def run(adata, copy, fit, who):
    """Call ``fit(target)`` on ``adata`` or on a copy; return the estimator, or the copy if
    ``copy`` (scanpy's convention). TypeError, naming ``who``, when ``adata`` is no AnnData."""
    import anndata

    if not isinstance(adata, anndata.AnnData):
        raise TypeError(
            f"{who}: adata is a {type(adata).__module__}.{type(adata).__qualname__}; expected an "
            "anndata.AnnData (samples x genes; omicsbayes.io reads one from a file). The "
            "estimators of omicsbayes.models take a plain matrix"
        )
    target = adata.copy() if copy else adata
    estimator = fit(target)
    return target if copy else estimator
