"""Figures, each returning a matplotlib Figure.

From an AnnData, after an :mod:`omicsbayes.tl` function wrote ``.varm["<key>_loadings"]``,
``.obsm["X_<key>"]`` and ``.uns[key]``: :func:`scores`, :func:`loadings`, :func:`trace`,
:func:`coefficients`, :func:`latent_heatmap`, :func:`gene_network`::

    omicsbayes.tl.rank_factor(adata, label_key="tissue")
    omicsbayes.pl.loadings(adata)

From saved result tables (the workflow's figures), one module per model family and one for
the workflow-wide figures: :mod:`.rank_factor`, :mod:`.bam`, :mod:`.bm2pca`, :mod:`.rflvm`,
:mod:`.mvgp`, :mod:`.metrics` and :mod:`.diagnostics` (traces).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..inference.chain import TRACE_LABELS
from . import bm2pca as bm2pca_plots
from . import rank_factor as rank_factor_plots
from . import rflvm as rflvm_plots
from ._palette import group_styles
from .diagnostics import trace_figure
from .metrics import metric_boxplots

__all__ = [
    "coefficients",
    "gene_network",
    "group_styles",
    "latent_heatmap",
    "loadings",
    "metric_boxplots",
    "scores",
    "trace",
]

OBJECTIVE_NOTE = (
    "An objective, not a lower bound: it need not increase from one iteration to the next."
)


def _uns(adata, key):
    import anndata

    if not isinstance(adata, anndata.AnnData):
        raise TypeError(
            f"adata is a {type(adata).__name__}; expected the AnnData an omicsbayes.tl function "
            "wrote its results into"
        )
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
    """``(group of each sample, the groups in order, the column name)``: ``groupby``, else the
    label column of the fit; a categorical column keeps its category order."""
    groupby = groupby or _uns(adata, key).get("label_key") or adata.uns.get("label_column")
    if groupby is None:
        return np.full(adata.n_obs, "all", dtype=object), ["all"], None
    if groupby not in adata.obs:
        raise ValueError(f"groupby {groupby!r} is not in adata.obs; columns {list(adata.obs)}")
    column = adata.obs[groupby]
    values = column.astype(str).to_numpy()
    if isinstance(column.dtype, pd.CategoricalDtype):
        order = [str(c) for c in column.cat.categories if str(c) in set(values)]
    else:
        order = sorted(set(values))
    return values, order, str(groupby)


def loadings(adata, key="rank_factor", max_genes=50, n_labels=50, gene_symbols=None):
    """Heatmap of the loadings of the ``max_genes`` genes of largest norm, the ``n_labels``
    largest named (``rank_factor.loadings_heatmap``).

    ``gene_symbols`` names a ``.var`` column of gene symbols to name the genes by (e.g.
    ``"gene_symbol"`` of a GEO platform); by default the ``var_names``.

    Examples
    --------
    >>> from omicsbayes import io, pl, tl
    >>> adata = io.load_demo("tissue_gene_expression")
    >>> est = tl.rank_factor(adata, label_key="tissue", variant="G-L-Probit", n_factors=2,
    ...                      max_iter=5)
    >>> fig = pl.loadings(adata, max_genes=20, n_labels=5)
    >>> fig.axes[0].get_ylabel()  # 20 rows drawn, the 5 of largest loading norm named
    '20 genes (5 of largest norm named)'
    """
    frame = _loadings(adata, key)
    if gene_symbols is not None:
        if gene_symbols not in adata.var:
            raise ValueError(f"gene_symbols {gene_symbols!r} is not in adata.var")
        frame.index = rank_factor_plots.feature_labels(
            frame.index, adata.var.loc[frame.index, gene_symbols]
        )
    return rank_factor_plots.loadings_heatmap(frame, max_genes=max_genes, n_labels=n_labels)


def scores(adata, key="rank_factor", groupby=None, components=(1, 2), style="groups"):
    """Samples in two score dimensions (1-based ``components``), coloured by group.

    ``style="groups"``: a qualitative palette that tells up to 20 groups apart
    (:func:`group_styles`), the legend, titled by the group column, outside the axes.
    ``style="paper"``: the black-and-red markers of the papers' figures
    (``bm2pca.projection_figure``).

    Examples
    --------
    >>> from omicsbayes import io, pl, tl
    >>> adata = io.load_demo("tissue_gene_expression")
    >>> est = tl.rank_factor(adata, label_key="tissue", variant="G-L-Probit", n_factors=2,
    ...                      max_iter=5)
    >>> fig = pl.scores(adata, components=(2, 1))  # factor 2 across, factor 1 up
    >>> legend = fig.axes[0].get_legend()  # groups: the fit's label column
    >>> legend.get_title().get_text(), len(legend.get_texts())
    ('tissue', 7)
    >>> fig.axes[0].get_xlabel()
    'rank_factor 2'
    """
    Z = _scores(adata, key)
    i, j = (c - 1 for c in components)
    if not (0 <= i < Z.shape[1] and 0 <= j < Z.shape[1]):
        raise ValueError(f"components {components} outside 1..{Z.shape[1]} of X_{key}")
    groups, order, column = _groups(adata, key, groupby)
    if style == "paper":
        table = pd.DataFrame(
            {"method": key, "z1": Z[:, i], "z2": Z[:, j], "label": groups, "split": "train"}
        )
        fig = bm2pca_plots.projection_figure(table)
        ax = fig.axes[0]
    elif style == "groups":
        fig, ax = plt.subplots(figsize=(6.5, 4.5), layout="constrained")
        for group, (colour, marker) in zip(order, group_styles(len(order))):
            sel = groups == group
            ax.scatter(Z[sel, i], Z[sel, j], s=12, color=colour, marker=marker, label=group)
        ax.legend(
            title=column,
            loc="upper left",
            bbox_to_anchor=(1.02, 1.0),
            borderaxespad=0.0,
            frameon=False,
            fontsize=8,
            markerscale=1.5,
            ncols=1 if len(order) <= 16 else 2,
        )
    else:
        raise ValueError(f"style={style!r}; expected 'groups' or 'paper'")
    ax.set_xlabel(f"{key} {components[0]}")
    ax.set_ylabel(f"{key} {components[1]}")
    return fig


def latent_heatmap(adata, key="rflvm", groupby=None):
    """Samples (sorted by group) x latent dimensions (``rflvm.latent_heatmaps``).

    Examples
    --------
    >>> from omicsbayes import io, pl, tl
    >>> adata = io.load_demo("breast_cancer_wisconsin")[:60].copy()
    >>> est = tl.ibp_factor(adata, n_iter=10)
    >>> fig = pl.latent_heatmap(adata, key="ibp_factor", groupby="diagnosis")
    >>> image = fig.axes[0].images[0]  # samples (sorted by diagnosis) x latent features
    >>> image.get_array().shape == adata.obsm["X_ibp_factor"].shape
    True
    """
    return rflvm_plots.latent_heatmaps({key: _scores(adata, key)}, _groups(adata, key, groupby)[0])


def trace(adata, key="rank_factor", burn_in=None):
    """The trace of the fit against the iteration (``diagnostics.trace_figure``).

    Every chain of a sampler is drawn (the first at every iteration, the others at their
    retained draws) and the burn-in shaded: ``burn_in``, by default the fit's. The axis says
    what the trace is: a lower bound only where the model's is one; any other VB history is an
    objective, and a note under the axes says it need not increase.

    Examples
    --------
    >>> from omicsbayes import io, pl, tl
    >>> adata = io.load_demo("tissue_gene_expression")
    >>> est = tl.rank_factor(adata, label_key="tissue", variant="G-L-Probit", n_factors=2,
    ...                      max_iter=5)
    >>> fig = pl.trace(adata)  # G-L-Probit's VB history is an objective, not a lower bound
    >>> fig.axes[0].get_ylabel(), len(fig.axes[0].lines[0].get_xdata())  # one point a sweep
    ('objective', 5)
    >>> print(fig.texts[0].get_text())
    An objective, not a lower bound: it need not increase from one iteration to the next.
    """
    uns = _uns(adata, key)
    if "trace" not in uns:
        raise ValueError(f"adata.uns[{key!r}] has no trace: the model keeps none")
    name = str(uns.get("trace_name", "objective"))
    label = str(uns.get("trace_label") or TRACE_LABELS.get(name, name.replace("_", " ")))
    chains = name in ("log_likelihood", "draws_log_likelihood")
    if name == "log_likelihood":
        fitted_burn_in = uns.get("burn_in", uns.get("params", {}).get("burn_in"))
        burn_in = fitted_burn_in if burn_in is None else burn_in
        burn_in = int(burn_in) if isinstance(burn_in, int | np.integer) else None
    else:
        burn_in = None
    return trace_figure(
        {key: uns["trace"]},
        ylabel=label,
        title=uns["model"],
        burn_in=burn_in,
        note=OBJECTIVE_NOTE if label == "objective" else None,
        rows="chain" if chains else None,
    )


def coefficients(adata, key="rank_factor"):
    """Classifier coefficients over factors, one panel per task (Figures 3 and 6).

    Examples
    --------
    >>> from omicsbayes import io, pl, tl
    >>> adata = io.load_demo("tissue_gene_expression")
    >>> est = tl.rank_factor(adata, label_key="tissue", variant="G-L-Probit", n_factors=2,
    ...                      max_iter=5)
    >>> fig = pl.coefficients(adata)  # a one-vs-rest task per tissue, a panel per task
    >>> [ax.get_ylabel() for ax in fig.axes][:3]
    ['cerebellum', 'colon', 'endometrium']
    >>> len(fig.axes), len(fig.axes[0].patches)  # 7 panels of one bar per factor
    (7, 2)
    """
    uns = _uns(adata, key)
    if "coef" not in uns:
        raise ValueError(f"adata.uns[{key!r}] has no coefficients")
    coef = np.atleast_2d(np.asarray(uns["coef"], dtype=float))
    return rank_factor_plots.coefficient_figure(coef, task_names=uns.get("tasks"))


def gene_network(adata, key="rank_factor", n_genes=50, threshold=0.8, max_edges=100):
    """Figure 7: genes joined by strongly correlated loading vectors (``gene_network_figure``).

    Examples
    --------
    >>> from omicsbayes import io, pl, tl
    >>> adata = io.load_demo("tissue_gene_expression")
    >>> est = tl.rank_factor(adata, label_key="tissue", variant="G-L-Probit", n_factors=2,
    ...                      max_iter=5)
    >>> fig = pl.gene_network(adata, n_genes=20, threshold=0.8, max_edges=30)
    >>> print(fig.axes[0].get_title().splitlines()[0])  # at most 30 of the strongest edges
    gene network from the factor loadings: ... genes, 30 edges, ... modules
    """
    frame = _loadings(adata, key)
    edges = rank_factor_plots.gene_network_edges(
        frame, frame.index, n_genes=n_genes, threshold=threshold, max_edges=max_edges
    )
    return rank_factor_plots.gene_network_figure(edges, loadings=frame)
