"""Figures and tables of paper 000 from saved results (never from a live model).

- :func:`rank_vs_log_figure`: Figure 1, log(x) against rank(x) of one gene by group, with the
  group-wise distributions of each axis in the margins.
- :func:`coefficient_figure`: Figures 3 and 6, classifier coefficients beta per task.
- :func:`loadings_heatmap`: the loadings matrix A (genes x factors).
- :func:`loadings_images`: Figures 4 and 5, columns of A reshaped to images (digit data).
- :func:`top_genes_table`: the top genes of each factor by |loading|, as a table.
- :func:`discriminative_weights`: each gene's weight ``A beta_t`` in each task's decision.
- :func:`pixel_grid`: image shape and order of pixel features (``pixel_<row>_<col>``).
- :func:`gene_network_edges` and :func:`gene_network_figure`: Figure 7, a gene network from the
  loadings (genes joined when their loading vectors are strongly correlated).
"""

import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats


def _as_frame(matrix, index=None, columns=None):
    if isinstance(matrix, pd.DataFrame):
        return matrix
    matrix = np.asarray(matrix, float)
    return pd.DataFrame(matrix, index=index, columns=columns)


def rank_vs_log_figure(values, groups, gene="", bins=20, offset=0.0):
    """Figure 1: ``log(x)`` (horizontal) against ``rank(x)`` (vertical) by group.

    Parameters
    ----------
    values : array_like of shape (n_samples,)
        Positive intensities of one gene.
    groups : array_like of shape (n_samples,)
        Group label of each sample (e.g. active TB / latent TB).
    gene : str
        Gene name for the title.
    bins : int
        Histogram bins of the marginal panels.
    offset : float
        Plot ``log(x + offset)``, for values with zeros (e.g. pixel counts: offset 1).
    """
    values = np.asarray(values, float)
    groups = np.asarray(groups)
    if np.any(values + offset <= 0):
        raise ValueError(
            f"rank_vs_log_figure plots log(x + offset) and needs x + offset > 0; the smallest "
            f"value is {values.min():g} with offset {offset:g}"
        )
    logx = np.log(values + offset)
    rank = stats.rankdata(values)
    fig = plt.figure(figsize=(6, 6))
    grid = fig.add_gridspec(4, 4, hspace=0.05, wspace=0.05)
    main = fig.add_subplot(grid[1:, :3])
    top = fig.add_subplot(grid[0, :3], sharex=main)
    right = fig.add_subplot(grid[1:, 3], sharey=main)
    for label in sorted(np.unique(groups), key=str):
        sel = groups == label
        main.scatter(logx[sel], rank[sel], s=14, alpha=0.7, label=str(label))
        top.hist(logx[sel], bins=bins, alpha=0.5, density=True)
        right.hist(rank[sel], bins=bins, alpha=0.5, density=True, orientation="horizontal")
    main.set_xlabel(f"log(x + {offset:g})" if offset else "log(x)")
    main.set_ylabel("rank(x)")
    main.legend(fontsize=8)
    top.tick_params(labelbottom=False)
    right.tick_params(labelleft=False)
    top.set_title(f"log versus rank{': ' + gene if gene else ''}")
    return fig


def coefficient_figure(coef, task_names=None):
    """Figures 3 and 6: one bar panel per task of the coefficients beta over factors.

    Parameters
    ----------
    coef : array_like or DataFrame of shape (n_tasks, n_factors)
        ``RankFactorClassifier.coef_``; a DataFrame's index names the tasks.
    task_names : sequence of str, optional
    """
    frame = _as_frame(coef)
    if task_names is not None:
        frame.index = list(task_names)
    n_tasks, n_factors = frame.shape
    fig, axes = plt.subplots(
        n_tasks, 1, figsize=(max(6, 0.35 * n_factors), 1.8 * n_tasks), sharex=True, squeeze=False
    )
    factors = np.arange(1, n_factors + 1)
    for ax, (task, values) in zip(axes[:, 0], frame.iterrows()):
        ax.bar(factors, values.to_numpy(), color=np.where(values.to_numpy() >= 0, "C0", "C3"))
        ax.axhline(0, color="black", lw=0.5)
        ax.set_ylabel(str(task), fontsize=8)
    axes[-1, 0].set_xlabel("factor")
    axes[-1, 0].set_xticks(factors)
    fig.suptitle("classifier coefficients per task")
    return fig


def loadings_heatmap(loadings, gene_names=None, max_genes=200):
    """Heatmap of the loadings (genes x factors), the ``max_genes`` genes of largest norm,
    grouped by the factor of their largest |loading|, ordered within a group by that loading."""
    frame = _as_frame(loadings, index=gene_names)
    norm = np.linalg.norm(frame.to_numpy(), axis=1)
    keep = frame.iloc[np.argsort(-norm)[:max_genes]]
    values = keep.to_numpy()
    dominant = np.abs(values).argmax(axis=1)
    # grouped by dominant factor, within a group from the most positive to the most negative
    order = np.lexsort((-values[np.arange(len(values)), dominant], dominant))
    keep = keep.iloc[order]
    limit = np.abs(keep.to_numpy()).max() or 1.0
    fig, ax = plt.subplots(figsize=(0.3 * keep.shape[1] + 3, min(0.06 * len(keep) + 2, 14)))
    image = ax.imshow(keep.to_numpy(), aspect="auto", cmap="RdBu_r", vmin=-limit, vmax=limit)
    ax.set_xticks(np.arange(keep.shape[1]))
    ax.set_xticklabels(np.arange(1, keep.shape[1] + 1))
    ax.set_xlabel("factor")
    if len(keep) <= 60:
        ax.set_yticks(np.arange(len(keep)))
        ax.set_yticklabels([str(g) for g in keep.index], fontsize=6)
    else:
        ax.set_yticks([])
        ax.set_ylabel(f"{len(keep)} genes")
    fig.colorbar(image, ax=ax, label="loading")
    return fig


def loadings_images(loadings, image_shape, n_columns=None, per_row=6):
    """Figures 4 and 5: columns of A reshaped to ``image_shape`` (e.g. (16, 16) for USPS)."""
    A = np.asarray(loadings, float)
    if A.shape[0] != int(np.prod(image_shape)):
        raise ValueError(
            f"loadings have {A.shape[0]} rows; image_shape {tuple(image_shape)} needs "
            f"{int(np.prod(image_shape))}"
        )
    n = A.shape[1] if n_columns is None else min(n_columns, A.shape[1])
    rows = int(np.ceil(n / per_row))
    fig, axes = plt.subplots(rows, per_row, figsize=(1.6 * per_row, 1.6 * rows), squeeze=False)
    for j, ax in enumerate(axes.ravel()):
        ax.axis("off")
        if j < n:
            column = A[:, j].reshape(image_shape)
            limit = np.abs(column).max() or 1.0
            ax.imshow(column, cmap="RdBu_r", vmin=-limit, vmax=limit)
            ax.set_title(f"factor {j + 1}", fontsize=7)
    return fig


def top_genes_table(loadings, gene_names, n_top=200):
    """Top ``n_top`` genes of each factor by |loading|: columns factor, rank, gene, loading."""
    frame = _as_frame(loadings, index=list(gene_names))
    pieces = []
    for j, column in enumerate(frame.columns):
        values = frame[column].to_numpy()
        top = np.argsort(-np.abs(values))[:n_top]
        pieces.append(
            pd.DataFrame(
                {
                    "factor": j + 1,
                    "rank": np.arange(1, len(top) + 1),
                    "gene": frame.index[top],
                    "loading": values[top],
                }
            )
        )
    return pd.concat(pieces, ignore_index=True)


def gene_network_edges(loadings, gene_names, n_genes=60, threshold=0.8, max_edges=None):
    """Edges of the gene network of Figure 7: among the ``n_genes`` genes with the largest
    loading norms, pairs whose loading vectors have correlation (cosine of the centred rows of
    A, i.e. of A A^T) above ``threshold``; with ``max_edges``, only that many of the strongest
    (few factors make many pairs correlated).  Columns gene_a, gene_b, weight."""
    frame = _as_frame(loadings, index=list(gene_names))
    A = frame.to_numpy()
    keep = np.argsort(-np.linalg.norm(A, axis=1))[:n_genes]
    sub = A[keep] - A[keep].mean(axis=1, keepdims=True)
    unit = sub / np.maximum(np.linalg.norm(sub, axis=1, keepdims=True), 1e-300)
    corr = unit @ unit.T
    i, j = np.triu_indices(len(keep), k=1)
    strong = np.flatnonzero(np.abs(corr[i, j]) >= threshold)
    if max_edges is not None:
        strong = strong[np.argsort(-np.abs(corr[i, j][strong]), kind="stable")[:max_edges]]
    names = frame.index[keep]
    return pd.DataFrame(
        {"gene_a": names[i[strong]], "gene_b": names[j[strong]], "weight": corr[i, j][strong]}
    )


def discriminative_weights(loadings, coef):
    """Weight of each gene in each task's decision, ``A beta_t`` (genes x tasks).

    The classifier acts on the factor scores, ``beta_t^T z``, and ``w = A z`` links scores to
    (latent) gene values, so ``A beta_t`` is the direction in gene space that the task reads;
    the gene of largest |weight| is the most discriminative one (Figure 1).

    Parameters
    ----------
    loadings : DataFrame of shape (n_genes, n_factors), indexed by gene
    coef : DataFrame of shape (n_tasks, n_factors), indexed by task
    """
    if loadings.shape[1] != coef.shape[1]:
        raise ValueError(f"loadings have {loadings.shape[1]} factors but coef has {coef.shape[1]}")
    return pd.DataFrame(
        loadings.to_numpy(float) @ coef.to_numpy(float).T,
        index=loadings.index,
        columns=coef.index,
    )


def pixel_grid(names):
    """Image shape and row order of features named ``pixel_<row>_<col>`` (e.g. the digits).

    Returns ``(shape, order)`` such that ``loadings[order]`` is in row-major image order, or
    ``None`` when the names are not a complete pixel grid.
    """
    parsed = [re.fullmatch(r"pixel_(\d+)_(\d+)", str(n)) for n in names]
    if not parsed or not all(parsed):
        return None
    rc = np.array([[int(m.group(1)), int(m.group(2))] for m in parsed])
    shape = tuple(int(v) for v in rc.max(axis=0) + 1)
    if shape[0] * shape[1] != len(rc) or len({tuple(p) for p in rc}) != len(rc):
        return None
    return shape, np.lexsort((rc[:, 1], rc[:, 0]))


def gene_network_figure(edges, seed=0):
    """Figure 7: draw the network of :func:`gene_network_edges` (spring layout; positive
    correlations blue, negative red)."""
    import networkx as nx

    graph = nx.Graph()
    for a, b, w in edges[["gene_a", "gene_b", "weight"]].itertuples(index=False):
        graph.add_edge(a, b, weight=float(w))
    fig, ax = plt.subplots(figsize=(8, 8))
    ax.axis("off")
    if graph.number_of_nodes() == 0:
        ax.set_title("gene network: no edge above the threshold")
        return fig
    pos = nx.spring_layout(graph, seed=seed)
    colours = ["C0" if d["weight"] > 0 else "C3" for _, _, d in graph.edges(data=True)]
    nx.draw_networkx_edges(graph, pos, ax=ax, edge_color=colours, alpha=0.6)
    nx.draw_networkx_nodes(graph, pos, ax=ax, node_size=60, node_color="lightgray")
    nx.draw_networkx_labels(graph, pos, ax=ax, font_size=6)
    ax.set_title("gene network from the factor loadings")
    return fig
