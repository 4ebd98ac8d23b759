"""Scoring a new cohort with a fit: genes aligned by name, outputs written as the fit was."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from .._attributes import ANNDATA_FIT
from ..preprocess.transforms import dense_matrix
from ._anndata import _h5ad_safe, run, values_of

__all__ = ["aligned_matrix", "predict"]

_FIT_LAYER = "the fit's layer"  # sentinel default of predict(layer=...)
_SHOWN = 5  # missing genes named in the message


def _feature_names(estimator, who):
    record = getattr(estimator, ANNDATA_FIT, None)
    if record is not None:
        return list(record["var_names"]), record
    names = getattr(estimator, "feature_names_in_", None)
    if names is None:
        raise ValueError(
            f"{who}: the {type(estimator).__name__} fit keeps no gene names, so a new cohort's "
            "genes cannot be matched to it; fit it with an omicsbayes.tl function (or on a "
            "DataFrame with one column per gene) and save it again"
        )
    return [str(v) for v in names], {}


def aligned_matrix(adata, names, layer, who):
    """``adata.X`` or a layer on the genes ``names``, in that order, as a dense float array.

    Genes of ``adata`` not in ``names`` are ignored; raises ValueError naming how many of
    ``names`` are missing and the first few.
    """
    var_names = pd.Index(adata.var_names.astype(str))
    if not var_names.is_unique:
        dup = ", ".join(var_names[var_names.duplicated()].unique()[:_SHOWN])
        raise ValueError(
            f"{who}: adata.var_names has duplicated gene names ({dup}); "
            "genes are matched by name, so make them unique (adata.var_names_make_unique())"
        )
    index = var_names.get_indexer(pd.Index(names))
    missing = [n for n, i in zip(names, index) if i < 0]
    if missing:
        more = ", ..." if len(missing) > _SHOWN else ""
        raise ValueError(
            f"{who}: {len(missing)} of the fit's {len(names)} genes are not in adata.var_names "
            f"({', '.join(missing[:_SHOWN])}{more}); the new cohort needs every gene the model "
            "was fitted on"
        )
    return dense_matrix(values_of(adata, layer, who)[:, index], who)


def predict(adata, fit, key_added=None, *, layer=_FIT_LAYER, copy=False):
    """Score the samples of a new cohort with a fitted model, matching genes by name.

    The fit's genes are taken from ``adata`` by name, in the fit's order (genes the fit does
    not know are ignored; a missing gene is an error naming how many are missing and the first
    few), from the layer the fit was made on.

    Parameters
    ----------
    adata : anndata.AnnData
        The new cohort, samples x genes.
    fit : estimator, str or Path
        A fitted estimator returned by an :mod:`omicsbayes.tl` function (or fitted on a DataFrame
        with gene columns), or the path of a fit file written by :func:`omicsbayes.io.save_fit`.
    key_added : str or None
        Names the outputs; None: the ``key_added`` the fit was made with (or ``"predict"``).
    layer : str or None
        The values to score: default the layer the fit was made on; None: ``adata.X``.
    copy : bool
        Write into a copy of ``adata`` and return it instead of the estimator.

    Returns
    -------
    The estimator, or the AnnData copy if ``copy``. Written: ``.obsm["X_<key>"]`` (scores of a
    model with ``transform``), ``.obs["<key>_decision[_<task>]"]`` (decision values),
    ``.obs["<key>_prediction"]`` (predicted labels of a single-task classifier) and
    ``.uns[key]`` (model, params, fit file, layer, genes used and ignored).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import numpy as np
    >>> from omicsbayes import io, tl
    >>> adata = io.load_demo("tissue_gene_expression")
    >>> is_new = np.random.default_rng(0).random(adata.n_obs) < 0.2
    >>> train, new = adata[~is_new].copy(), adata[is_new].copy()
    >>> est = tl.rank_factor(train, label_key="tissue", variant="G-L-Probit", n_factors=3,
    ...                      max_iter=10)
    >>> path = Path(tempfile.mkdtemp()) / "tissue.obfit"
    >>> fit_file = io.save_fit(est, path)
    >>> new = new[:, ::-1].copy()  # genes are matched by name, in any order
    >>> est = tl.predict(new, fit_file)
    >>> new.obs.filter(like="rank_factor_decision").shape[1]  # one column per tissue
    7
    """
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    from ..io import load_fit

    who = "tl.predict"
    path = fit if isinstance(fit, str | os.PathLike) else None
    if path is None and not hasattr(fit, "get_params"):
        raise TypeError(
            f"{who}: fit is a {type(fit).__name__}; expected a fitted estimator or the path of a "
            "fit file (omicsbayes.io.save_fit)"
        )
    estimator = load_fit(path) if path is not None else fit
    try:
        check_is_fitted(estimator)
    except NotFittedError as exc:
        raise NotFittedError(f"{who}: {exc}") from None
    names, record = _feature_names(estimator, who)
    scorers = [m for m in ("transform", "decision_function") if hasattr(estimator, m)]
    if not scorers:
        raise ValueError(
            f"{who}: {type(estimator).__name__} has no transform or decision_function to score "
            "new samples with"
        )
    key = key_added or record.get("key_added") or "predict"
    layer = record.get("layer") if layer is _FIT_LAYER else layer

    def score(target):
        X = aligned_matrix(target, names, layer, who)
        if getattr(estimator, "feature_names_in_", None) is not None:
            X = pd.DataFrame(X, columns=names, index=target.obs_names)
        if "transform" in scorers:
            scores = np.asarray(estimator.transform(X), dtype=float)
            if scores.ndim == 2 and len(scores) == target.n_obs:
                target.obsm[f"X_{key}"] = scores
        if "decision_function" in scorers:
            decision = np.asarray(estimator.decision_function(X), dtype=float)
            decision = decision.reshape(target.n_obs, -1)
            tasks = _tasks(estimator, record, decision.shape[1])
            if decision.shape[1] == 1:
                target.obs[f"{key}_decision"] = decision[:, 0]
            else:
                for j, task in enumerate(tasks):
                    target.obs[f"{key}_decision_{task}"] = decision[:, j]
            labels = np.asarray(estimator.predict(X)) if hasattr(estimator, "predict") else None
            if labels is not None and labels.ndim == 1:
                target.obs[f"{key}_prediction"] = pd.Categorical(labels.astype(str))
        params = estimator.get_params(deep=False) if hasattr(estimator, "get_params") else {}
        uns = {
            "model": type(estimator).__name__,
            "params": params,
            "fit": None if path is None else str(path),
            "layer": layer,
            "n_genes_used": len(names),
            "n_genes_ignored": int(target.n_vars - len(names)),
        }
        target.uns[key] = {k: _h5ad_safe(v) for k, v in uns.items() if v is not None}
        return estimator

    return run(adata, copy, score, who)


def _tasks(estimator, record, n_columns):
    """Names of the decision columns: the fit's tasks, else its classes."""
    tasks = list(record.get("tasks") or [])
    if len(tasks) != n_columns:
        classes = getattr(estimator, "classes_", None)
        classes = [] if classes is None else [str(c) for c in np.ravel(classes)]
        tasks = classes if len(classes) == n_columns else [str(j) for j in range(n_columns)]
    return tasks
