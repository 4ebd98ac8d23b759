"""Figures from the outputs an :mod:`omicsbayes.tl` function wrote into an AnnData.

Each function builds the table that the :mod:`omicsbayes.plotting` figure takes from
``.varm["<key>_loadings"]``, ``.obsm["X_<key>"]`` and ``.uns[key]``, and returns its
matplotlib Figure::

    omicsbayes.tl.rank_factor(adata, label_key="tissue")
    omicsbayes.pl.loadings(adata)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..plotting import bm2pca as bm2pca_plots
from ..plotting import rank_factor as rank_factor_plots
from ..plotting import rflvm as rflvm_plots
from ..plotting.diagnostics import trace_figure

__all__ = ["coefficients", "gene_network", "latent_heatmap", "loadings", "scores", "trace"]


def _uns(adata, key):
    if key not in adata.uns:
        fitted = sorted(k for k, v in adata.uns.items() if isinstance(v, dict) and "model" in v)
        raise ValueError(
            f"adata.uns has no {key!r}; run an omicsbayes.tl function with key_added={key!r} "
            f"first (fitted keys here: {fitted})"
        )
    return adata.uns[key]


def _loadings(adata, key):
    """Loadings of the genes the model was fitted on, as a genes x factors DataFrame."""
    _uns(adata, key)
    name = f"{key}_loadings"
    if name not in adata.varm:
        raise ValueError(f"adata.varm has no {name!r}: the {key!r} model has no gene loadings")
    values = np.asarray(adata.varm[name], dtype=float)
    fitted = ~np.isnan(values).all(axis=1)
    return pd.DataFrame(values[fitted], index=adata.var_names[fitted])


def _scores(adata, key):
    _uns(adata, key)
    if f"X_{key}" not in adata.obsm:
        raise ValueError(f"adata.obsm has no 'X_{key}': the {key!r} model wrote no sample scores")
    return np.asarray(adata.obsm[f"X_{key}"], dtype=float)


def _groups(adata, key, groupby):
    """The ``.obs`` column to group samples by: ``groupby``, else the label column of the fit."""
    groupby = groupby or _uns(adata, key).get("label_key") or adata.uns.get("label_column")
    if groupby is None:
        return np.full(adata.n_obs, "all", dtype=object)
    if groupby not in adata.obs:
        raise ValueError(f"groupby {groupby!r} is not in adata.obs; columns {list(adata.obs)}")
    return adata.obs[groupby].astype(str).to_numpy()


def loadings(adata, key="rank_factor", max_genes=200):
    """Heatmap of the loadings, the ``max_genes`` genes of largest norm (``loadings_heatmap``)."""
    return rank_factor_plots.loadings_heatmap(_loadings(adata, key), max_genes=max_genes)


def scores(adata, key="rank_factor", groupby=None, components=(1, 2)):
    """Samples in two score dimensions (1-based ``components``), one marker per group
    (``plotting.bm2pca.projection_figure``)."""
    Z = _scores(adata, key)
    i, j = (c - 1 for c in components)
    if not (0 <= i < Z.shape[1] and 0 <= j < Z.shape[1]):
        raise ValueError(f"components {components} outside 1..{Z.shape[1]} of X_{key}")
    table = pd.DataFrame(
        {"method": key, "z1": Z[:, i], "z2": Z[:, j], "label": _groups(adata, key, groupby)}
    )
    table["split"] = "train"
    fig = bm2pca_plots.projection_figure(table)
    fig.axes[0].set_xlabel(f"{key} {components[0]}")
    fig.axes[0].set_ylabel(f"{key} {components[1]}")
    return fig


def latent_heatmap(adata, key="rflvm", groupby=None):
    """Samples (sorted by group) x latent dimensions (``plotting.rflvm.latent_heatmaps``)."""
    return rflvm_plots.latent_heatmaps({key: _scores(adata, key)}, _groups(adata, key, groupby))


def trace(adata, key="rank_factor"):
    """The bound or log-likelihood trace of the fit (``plotting.diagnostics.trace_figure``),
    burn-in shaded for samplers whose trace covers every iteration."""
    uns = _uns(adata, key)
    if "trace" not in uns:
        raise ValueError(f"adata.uns[{key!r}] has no trace: the model keeps none")
    name = str(uns.get("trace_name", "objective")).replace("_", " ")
    burn_in = uns.get("params", {}).get("burn_in")
    whole_chain = uns.get("trace_name") == "log_likelihood"
    burn_in = int(burn_in) if whole_chain and isinstance(burn_in, int | np.integer) else None
    return trace_figure({key: uns["trace"]}, ylabel=name, title=uns["model"], burn_in=burn_in)


def coefficients(adata, key="rank_factor"):
    """Classifier coefficients over factors, one panel per task (Figures 3 and 6)."""
    uns = _uns(adata, key)
    if "coef" not in uns:
        raise ValueError(f"adata.uns[{key!r}] has no coefficients")
    coef = np.atleast_2d(np.asarray(uns["coef"], dtype=float))
    return rank_factor_plots.coefficient_figure(coef, task_names=uns.get("tasks"))


def gene_network(adata, key="rank_factor", n_genes=50, threshold=0.8, max_edges=100):
    """Figure 7: genes joined by strongly correlated loading vectors (``gene_network_figure``)."""
    frame = _loadings(adata, key)
    edges = rank_factor_plots.gene_network_edges(
        frame, frame.index, n_genes=n_genes, threshold=threshold, max_edges=max_edges
    )
    return rank_factor_plots.gene_network_figure(edges, loadings=frame)
