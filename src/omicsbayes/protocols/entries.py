"""Folds over the stored entries of a sparse matrix, shared by paper 004's two protocols
(``disease_gene`` and ``rating``): the entries in row-major order, k-fold over the entries
(known rows) or over the rows (new rows), one fold as a mask over the entries, and
:class:`EntryFoldKind`, what the two experiment kinds have in common."""

from typing import NamedTuple

import numpy as np

from ..evaluate.splitters import entry_kfold_splits, row_kfold_splits
from ..models.mvgp.selection import grid_params
from ._base import ExperimentKind
from ._common import ExperimentError, make_estimator

#: protocol type or the cross-validation functions' ``protocol`` -> whether it folds the rows
NEW_ROWS = {
    "known": False,
    "new": True,
    "known_rows": False,
    "new_rows": True,
    "known_users": False,
    "new_users": True,
}


class Fold(NamedTuple):
    """One outer fold: which entries are tested, which rows are scored, which rows are new
    (every entry held out, no sampled negative; None for known rows)."""

    is_test: np.ndarray
    score_rows: np.ndarray
    new_rows: np.ndarray | None


def matrix_entries(matrix):
    """``(rows, cols, values)`` of the stored entries of a sparse matrix (explicit zeros
    included) in row-major order, the order the split tables' ``entry`` ids index."""
    coo = matrix.tocoo()
    order = np.lexsort((coo.col, coo.row))
    return (
        coo.row[order].astype(np.int64),
        coo.col[order].astype(np.int64),
        np.asarray(coo.data[order], dtype=float),
    )


def entry_folds(protocol, rows, cols, n_rows, n_splits, random_state):
    """The split table: k-fold over the entries (known rows) or over the ``n_rows`` rows."""
    if NEW_ROWS[protocol]:
        return row_kfold_splits(n_rows, n_splits, random_state=random_state)
    return entry_kfold_splits(rows, cols, n_splits, random_state=random_state)


def fold_of(protocol, split_table, rows):
    """The :class:`Fold` of one split of a split table, over the entries' ``rows``."""
    new = NEW_ROWS[protocol]
    ids = split_table.loc[split_table["role"] == "test", "row" if new else "entry"].to_numpy()
    if new:
        return Fold(np.isin(rows, ids), np.sort(ids), np.sort(ids))
    is_test = np.zeros(rows.size, dtype=bool)
    is_test[ids] = True
    return Fold(is_test, np.unique(rows[is_test]), None)


def folds(protocol, rows, cols, n_rows, n_splits, random_state):
    """Yield ``(split, Fold)`` for every split of :func:`entry_folds`."""
    table = entry_folds(protocol, rows, cols, n_rows, n_splits, random_state)
    for split, fold in table.groupby("split", sort=True):
        yield int(split), fold_of(protocol, fold, rows)


def make_splits(adata, protocol_type, n_splits, random_state):
    """The split table of a matrix cohort for a known-/new-row protocol type."""
    rows, cols, _ = matrix_entries(adata.X)
    return entry_folds(protocol_type, rows, cols, adata.n_obs, n_splits, random_state)


def row_kernel(adata, spec, source, model):
    """The row covariance a model entry asks for: the diffusion kernel of the cohort's row graph
    (``side_information: diffusion``) or None (identity)."""
    from ..preprocess import diffusion_kernel

    if spec.get("side_information", "identity") != "diffusion":
        return None
    if "graph" not in adata.obsp:
        raise ValueError(
            f"{source}: model {model!r} asks for the diffusion kernel of the row graph, but the "
            "cohort has none (give the cohort a row_graph)"
        )
    return diffusion_kernel(adata.obsp["graph"], rank=100 if adata.n_obs > 2000 else None)


def estimator_of(spec, where="grid", random_state=None):
    """The estimator of a config model entry, its ``grid`` entry (if any) applied: the grid is
    the estimator's own selection (``"paper"``: ``lam`` / ``sigma2`` "auto"; a list of settings:
    each parameter's values, see :func:`omicsbayes.models.mvgp.selection.grid_params`)."""
    estimator = make_estimator(spec, random_state)
    if spec.get("grid") is None:
        return estimator
    try:
        return estimator.set_params(**grid_params(estimator, spec["grid"]))
    except ValueError as err:
        raise ExperimentError(f"{where}: {err}") from None


class EntryFoldKind(ExperimentKind):
    """The part paper 004's kinds (``disease_gene``, ``rating``) share: k-fold over a matrix
    cohort's stored entries (known rows) or over its rows (new rows), every model's ``grid``
    checked, and the inputs of one fold's fit. Sets no ``name``, so it is no kind itself."""

    def make_splits(self, adata, protocol, random_state, label=None):
        """K-fold over the stored entries (known rows, row-major order) or over the rows."""
        return make_splits(adata, protocol["type"], self.n_splits(protocol), random_state)

    def check(self, name, experiment, config):
        """Every model's ``grid`` entry is one the estimator can search (:func:`estimator_of`)."""
        for model in experiment["models"]:
            estimator_of(config["models"][model], f"models.{model}.grid")

    def fold_arguments(self, adata, splits, params, wildcards):
        """What one fit job passes its kind's fold function: ``(matrix, the split's rows of the
        split table, protocol type, model entry)`` and the keywords ``row_kernel``
        (:func:`row_kernel`) and ``random_state`` (:meth:`seed`).

        ``params``: ``experiment`` (its ``cohort``), ``model``, ``protocol`` and ``seed``.
        """
        spec, split = params["model"], wildcards["split"]
        source = f"cohort {params['experiment']['cohort']!r}"
        args = (adata.X, splits[splits["split"] == int(split)], params["protocol"]["type"], spec)
        return args, {
            "row_kernel": row_kernel(adata, spec, source, wildcards["model"]),
            "random_state": self.seed(params["seed"], wildcards, split),
        }
