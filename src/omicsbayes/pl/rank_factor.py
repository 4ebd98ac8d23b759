"""Figures and tables of paper 000 from saved results (never from a live model).

- :func:`rank_vs_log_figure`: Figure 1, log(x) against rank(x) of one gene by group, with the
  group-wise distributions of each axis in the margins.
- :func:`coefficient_figure`: Figures 3 and 6, classifier coefficients beta per task.
- :func:`loadings_heatmap`: the loadings matrix A (genes x factors).
- :func:`loadings_images`: Figures 4 and 5, columns of A reshaped to images (digit data).
- :func:`top_genes_table`: the top genes of each factor by ``|loading|``, as a table.
- :func:`discriminative_weights`: each gene's weight ``A beta_t`` in each task's decision.
- :func:`pixel_grid`: image shape and order of pixel features (``pixel_<row>_<col>``).
- :func:`feature_labels`: gene symbols (a GEO platform's ``.var["gene_symbol"]``) in place of
  probe IDs, unique.
- :func:`gene_network_edges` and :func:`gene_network_figure`: Figure 7, a gene network from the
  loadings (genes joined when their loading vectors are strongly correlated), force-directed,
  modules coloured, hubs labelled without collisions (:func:`place_labels`).
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


def loadings_heatmap(loadings, gene_names=None, max_genes=200, n_labels=60):
    """Heatmap of the loadings (genes x factors), the ``max_genes`` genes of largest norm,
    grouped by the factor of their largest ``|loading|``, ordered within a group by that loading.

    The ``n_labels`` genes of largest norm are named on the vertical axis (all of them when
    there are no more); the label says how many genes are drawn and how many named.
    """
    frame = _as_frame(loadings, index=gene_names)
    norm = np.linalg.norm(frame.to_numpy(), axis=1)
    keep = frame.iloc[np.argsort(-norm)[:max_genes]]
    values = keep.to_numpy()
    dominant = np.abs(values).argmax(axis=1)
    # grouped by dominant factor, within a group from the most positive to the most negative
    order = np.lexsort((-values[np.arange(len(values)), dominant], dominant))
    named = np.sort(np.flatnonzero(order < n_labels))  # rows of the n_labels largest norms
    keep = keep.iloc[order]
    limit = np.abs(keep.to_numpy()).max() or 1.0
    fig, ax = plt.subplots(
        figsize=(0.3 * keep.shape[1] + 3, min(0.12 * len(named) + 2, 14)), layout="constrained"
    )
    image = ax.imshow(keep.to_numpy(), aspect="auto", cmap="RdBu_r", vmin=-limit, vmax=limit)
    ax.set_xticks(np.arange(keep.shape[1]))
    ax.set_xticklabels(np.arange(1, keep.shape[1] + 1))
    ax.set_xlabel("factor")
    ax.set_yticks(named)
    ax.set_yticklabels([str(g) for g in keep.index[named]], fontsize=6)
    if len(named) < len(keep):
        ax.set_ylabel(f"{len(keep)} genes ({len(named)} of largest norm named)")
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
    """Top ``n_top`` genes of each factor by ``|loading|``: columns factor, rank, gene, loading."""
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
    the gene of largest ``|weight|`` is the most discriminative one (Figure 1).

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


def feature_labels(features, symbols=None):
    """Names of features for tables and figures: the gene symbol where a feature has one, else
    the feature's own name; a symbol several features share gets the feature name in brackets
    (``"STAT1 (ILMN_1)"``), so the labels stay unique.

    Parameters
    ----------
    features : sequence of str
        Feature names (``var_names``, e.g. probe IDs).
    symbols : sequence, optional
        One gene symbol per feature (``.var["gene_symbol"]``), missing or empty for none.

    Returns
    -------
    labels : pandas.Index of str
    """
    features = pd.Index(features).astype(str)
    if symbols is None:
        return features
    symbols = pd.Series(np.asarray(symbols, dtype=object)).astype("string").str.strip()
    has = (symbols.notna() & (symbols != "")).to_numpy(dtype=bool)
    labels = np.where(has, symbols.fillna("").to_numpy(dtype=object), features.to_numpy(object))
    shared = pd.Index(labels).duplicated(keep=False) & has
    labels[shared] = [f"{s} ({f})" for s, f in zip(labels[shared], features[shared])]
    return pd.Index(labels.astype(str))


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


def place_labels(anchors, sizes, fixed=None, n_rings=40, gap=2.0):
    """Box centres near their ``anchors`` such that no two boxes overlap.

    Greedy: the ``fixed`` boxes (e.g. the nodes) stay where they are; every other box, in
    order (most important first), takes the first free position on a spiral of rings around its
    anchor (16 directions per ring, rings one smallest box height apart), free meaning clear of
    every box placed before it. If all ``n_rings`` rings are taken, the position of least
    overlap is used.

    Parameters
    ----------
    anchors : ndarray (n, 2)
        Where each box wants to be (display units, e.g. pixels).
    sizes : ndarray (n, 2)
        Width and height of each box in the same units.
    fixed : ndarray of bool (n,), optional
    n_rings : int
    gap : float
        Free space kept between boxes.

    Returns
    -------
    ndarray (n, 2)
    """
    anchors = np.asarray(anchors, dtype=float)
    half = (np.asarray(sizes, dtype=float) + gap) / 2
    fixed = np.zeros(len(anchors), bool) if fixed is None else np.asarray(fixed, bool)
    step = max(2 * half[~fixed, 1].min(), 1.0) if (~fixed).any() else 1.0
    angles = np.linspace(0, 2 * np.pi, 16, endpoint=False) + np.pi / 2  # above first
    rings = step * np.arange(1, n_rings + 1)
    offsets = np.vstack(
        [
            [0.0, 0.0],
            (
                rings[:, None, None] * np.stack([np.cos(angles), np.sin(angles)], axis=1)[None]
            ).reshape(-1, 2),
        ]
    )
    pos = anchors.copy()
    placed = fixed.copy()
    for i in np.flatnonzero(~fixed):
        centres = anchors[i] + offsets  # candidates x 2
        reach = half[i] + half[placed]  # placed x 2
        overlap = reach[None] - np.abs(centres[:, None, :] - pos[placed][None])
        area = np.prod(np.clip(overlap, 0, None), axis=2).sum(axis=1)
        free = np.flatnonzero(area == 0)
        pos[i] = centres[free[0] if free.size else np.argmin(area)]
        placed[i] = True
    return pos


def _packed_layout(graph, seed):
    """Force-directed positions per connected component (Fruchterman-Reingold, unit edge
    weights), each component scaled to the square root of its size and the components packed
    in rows, largest first (one global layout throws small components to the far edges)."""
    import networkx as nx

    components = sorted(nx.connected_components(graph), key=lambda c: (-len(c), sorted(c)))
    radii = np.sqrt([len(c) for c in components])
    width = 1.3 * np.sqrt(np.sum((2 * radii + 1) ** 2))
    pos, x, y, row = {}, 0.0, 0.0, 0.0
    for component, r in zip(components, radii):
        if x > 0 and x + 2 * r > width:
            x, y, row = 0.0, y - row - 1, 0.0
        sub = nx.Graph()  # nodes in the graph's order: a subgraph view may follow the set's,
        sub.add_nodes_from(g for g in graph if g in component)  # which string hashing varies
        sub.add_edges_from(graph.edges(sub.nodes))
        k = 2.5 / np.sqrt(len(component))  # twice networkx's default spacing: dense modules open
        local = nx.spring_layout(sub, weight=None, k=k, iterations=500, seed=seed, scale=r)
        for g, xy in local.items():
            pos[g] = np.asarray(xy) + [x + r, y - r]
        x, row = x + 2 * r + 1, max(row, 2 * r)
    return pos


def gene_network_figure(edges, loadings=None, seed=0, n_labels=15):
    """Figure 7: draw the network of :func:`gene_network_edges` so modules and hubs show.

    Force-directed layout per connected component, components packed (:func:`_packed_layout`);
    node colour: module (greedy modularity communities); node size: the gene's
    loading norm (from ``loadings``, genes x factors) or, without it, its degree; edge colour:
    sign of the correlation (blue positive, red negative), width: its size. Only the
    ``n_labels`` largest hubs (degree, then loading; each module's first) are labelled, placed by
    :func:`place_labels` so that labels do not collide, with a leader line when moved.
    """
    import networkx as nx

    graph = nx.Graph()
    for a, b, w in edges[["gene_a", "gene_b", "weight"]].itertuples(index=False):
        graph.add_edge(a, b, weight=float(w), strength=abs(float(w)))
    fig, ax = plt.subplots(figsize=(8, 8))
    ax.axis("off")
    if graph.number_of_nodes() == 0:
        ax.set_title("gene network: no edge above the threshold")
        return fig
    nodes = list(graph.nodes)
    n = len(nodes)
    pos = _packed_layout(graph, seed)
    modules = nx.community.greedy_modularity_communities(graph, weight="strength")
    module_of = {g: m for m, members in enumerate(modules) for g in members}
    degree = np.array([graph.degree(g) for g in nodes], dtype=float)
    if loadings is not None:
        frame = _as_frame(loadings)
        norms = np.linalg.norm(frame.loc[nodes].to_numpy(float), axis=1)
    else:
        norms = degree
    spread = np.ptp(norms)
    size = 40 + 260 * ((norms - norms.min()) / spread if spread > 0 else np.ones(n))
    cmap = plt.get_cmap("tab10")
    colours = [cmap(module_of[g] % 10) if len(modules) > 1 else "0.6" for g in nodes]
    weights = np.array([d["weight"] for _, _, d in graph.edges(data=True)])
    nx.draw_networkx_edges(
        graph,
        pos,
        ax=ax,
        edge_color=np.where(weights > 0, "tab:blue", "tab:red").tolist(),
        width=0.4 + 1.6 * np.abs(weights),
        alpha=0.45,
    )
    nx.draw_networkx_nodes(
        graph,
        pos,
        nodelist=nodes,
        ax=ax,
        node_size=size,
        node_color=colours,
        edgecolors="black",
        linewidths=0.5,
    )
    order = np.lexsort((-norms, -degree))  # hubs: most edges, then largest loading
    module = np.array([module_of[g] for g in nodes])
    firsts = order[np.sort(np.unique(module[order], return_index=True)[1])]
    hubs = np.array(list(dict.fromkeys([*firsts, *order]))[:n_labels])  # each module's hub first
    ax.margins(0.08)
    fig.canvas.draw()
    ax.autoscale(False)  # leader lines must not rescale the axes the labels were placed in
    to_display = ax.transData
    anchors = to_display.transform(np.array([pos[nodes[i]] for i in hubs]))
    texts = [ax.text(0, 0, str(nodes[i]), fontsize=7) for i in hubs]
    renderer = fig.canvas.get_renderer()
    boxes = np.array(
        [[t.get_window_extent(renderer).width, t.get_window_extent(renderer).height] for t in texts]
    )
    radius = np.sqrt(size) / 2 * fig.dpi / 72  # marker radii in pixels (size: diameter^2, pt)
    wanted = anchors + np.column_stack([np.zeros(len(hubs)), radius[hubs] + boxes[:, 1] / 2 + 2])
    markers = to_display.transform(np.array([pos[g] for g in nodes]))
    placed = place_labels(
        np.vstack([wanted, markers]),
        np.vstack([boxes, np.column_stack([2 * radius, 2 * radius])]),
        fixed=np.r_[np.zeros(len(hubs), bool), np.ones(n, bool)],
    )[: len(hubs)]
    data = to_display.inverted().transform(placed)
    for text, xy, anchor, want in zip(texts, data, anchors, wanted):
        text.set_position(xy)
        text.set_ha("center")
        text.set_va("center")
        text.set_bbox({"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8})
        moved = np.linalg.norm(to_display.transform(xy) - want)
        if moved > 4:
            ax.plot(
                *to_display.inverted().transform(np.vstack([anchor, to_display.transform(xy)])).T,
                color="0.4",
                lw=0.5,
                zorder=1,
            )
    ax.set_title(
        f"gene network from the factor loadings: {n} genes, {graph.number_of_edges()} edges, "
        f"{len(modules)} modules\n(size: loading norm; edges: blue positive, red negative "
        "correlation; labels: hubs)",
        fontsize=9,
    )
    return fig
