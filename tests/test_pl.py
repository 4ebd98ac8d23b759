"""omicsbayes.pl draws what the tl functions wrote: groups told apart by colour with the legend
outside, top genes named, every chain's trace with its burn-in, honest trace labels; Figure 7's
labels do not collide."""

import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from test_tl import RF, planted  # noqa: E402

from omicsbayes import pl, tl  # noqa: E402
from omicsbayes.inference import chain  # noqa: E402
from omicsbayes.pl import rank_factor as rp  # noqa: E402


@pytest.fixture(scope="module")
def fitted():
    adata = planted(n=60, d=30, n_classes=3)
    tl.rank_factor(adata, "group", mask_var="highly_variable", **RF)
    tl.ibp_factor(adata, n_iter=12, burn_in=4)
    with pytest.MonkeyPatch.context() as patch:  # one core: chains in turn, no worker start-up
        patch.setattr(chain.os, "sched_getaffinity", lambda pid: {0}, raising=False)
        tl.ibp_factor(adata, key_added="ibp_chains", n_iter=12, n_chains=2)  # burn_in None: 6
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a short fit on purpose
        tl.bam(adata, "group", max_iter=20)
    return adata


def _burn_in_span(ax):
    (span,) = [p for p in ax.patches if p.get_label() == "burn-in"]
    x0 = span.get_x()  # a Rectangle in data x, axes y
    return x0, x0 + span.get_width()


def test_trace_draws_the_stored_trace_with_what_it_is(fitted):
    fig = pl.trace(fitted, "rank_factor")  # a VB objective that is not a lower bound
    (line,) = fig.axes[0].get_lines()
    np.testing.assert_array_equal(line.get_ydata(), fitted.uns["rank_factor"]["trace"])
    assert fig.axes[0].get_ylabel() == "objective"
    assert any("need not increase" in t.get_text() for t in fig.texts)
    fig = pl.trace(fitted, "bam")  # BAM's is the full evidence lower bound
    assert fig.axes[0].get_ylabel() == "lower bound"
    assert not fig.texts and len(fig.axes[0].get_lines()) == 3  # one per one-vs-rest problem
    fig = pl.trace(fitted, "ibp_factor")  # a sampler: burn-in shaded
    assert fig.axes[0].get_ylabel() == "log likelihood" and not fig.texts
    assert _burn_in_span(fig.axes[0]) == (0.5, 4.5)
    plt.close("all")


def test_trace_draws_every_chain_and_the_fits_burn_in(fitted):
    fig = pl.trace(fitted, "ibp_chains")
    ax = fig.axes[0]
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["chain 1", "chain 2"]
    for line in lines:  # every chain at every iteration, burn-in included
        assert list(line.get_xdata()) == list(range(1, 13))
        assert np.isfinite(line.get_ydata()).all()
    draws = fitted.uns["ibp_chains"]["diagnostics"]
    assert (draws["n_chains"] == 2).all() and (draws["n_draws"] == 6).all()
    assert _burn_in_span(ax) == (0.5, 6.5)  # burn_in=None: the fit's n_iter // 2
    assert _burn_in_span(pl.trace(fitted, "ibp_chains", burn_in=3).axes[0]) == (0.5, 3.5)
    plt.close("all")


def test_loadings_name_the_top_genes(fitted):
    fig = pl.loadings(fitted)
    names = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert sorted(names) == sorted(fitted.var_names[fitted.var["highly_variable"]])
    fig = pl.loadings(fitted, n_labels=5)
    named = {t.get_text() for t in fig.axes[0].get_yticklabels()}
    stored = fitted.varm["rank_factor_loadings"]
    top = np.argsort(-np.nan_to_num(np.linalg.norm(stored, axis=1), nan=-1.0))[:5]
    assert named == set(fitted.var_names[top])
    assert fig.axes[0].get_ylabel() == "20 genes (5 of largest norm named)"
    plt.close("all")


def test_loadings_heatmap_shows_the_fitted_genes_only(fitted):
    fig = pl.loadings(fitted, max_genes=50)
    image = fig.axes[0].get_images()[0].get_array()
    assert image.shape == (20, 3)  # 20 highly variable genes fitted, NaN rows left out
    ours = np.sort(np.abs(image).ravel())
    stored = fitted.varm["rank_factor_loadings"][:20]
    np.testing.assert_allclose(ours, np.sort(np.abs(stored).ravel()))
    plt.close("all")


def test_scores_by_group_and_latent_heatmap(fitted):
    fig = pl.scores(fitted, "rank_factor", components=(1, 3))
    points = np.vstack([c.get_offsets() for c in fig.axes[0].collections])
    Z = fitted.obsm["X_rank_factor"][:, [0, 2]]
    assert points.shape == Z.shape
    np.testing.assert_allclose(np.sort(points, axis=0), np.sort(Z, axis=0))
    legend = fig.axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["g0", "g1", "g2"]
    assert legend.get_title().get_text() == "group"
    fig = pl.scores(fitted, "rank_factor", style="paper")  # the papers' black and red
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["g0", "g1", "g2"]  # no "train" prefix
    fig = pl.latent_heatmap(fitted, "rank_factor")
    image = fig.axes[0].get_images()[0].get_array()
    order = np.argsort(fitted.obs["group"].astype(str).to_numpy(), kind="stable")
    np.testing.assert_allclose(image, fitted.obsm["X_rank_factor"][order])
    with pytest.raises(ValueError, match="components"):
        pl.scores(fitted, "rank_factor", components=(1, 4))
    with pytest.raises(ValueError, match="style='poster'"):
        pl.scores(fitted, "rank_factor", style="poster")
    plt.close("all")


@pytest.mark.parametrize("n_groups", [10, 20])
def test_scores_tell_up_to_twenty_groups_apart_with_the_legend_outside(fitted, n_groups):
    adata = fitted.copy()
    adata.obs["cell_type"] = [f"type {i % n_groups}" for i in range(adata.n_obs)]
    fig = pl.scores(adata, "rank_factor", groupby="cell_type")
    ax = fig.axes[0]
    colours = {tuple(np.round(c.get_facecolor()[0], 6)) for c in ax.collections}
    assert len(ax.collections) == n_groups and len(colours) == n_groups
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    assert legend.x0 >= ax.get_window_extent(renderer).x1  # right of the axes, covers no point
    assert legend.x1 <= fig.bbox.x1 + 1  # and inside the figure
    plt.close("all")


def test_coefficients_and_clear_errors(fitted):
    fig = pl.coefficients(fitted, "rank_factor")
    assert [ax.get_ylabel() for ax in fig.axes] == ["g0", "g1", "g2"]
    with pytest.raises(ValueError, match="adata.uns has no 'pfa'"):
        pl.trace(fitted, "pfa")
    with pytest.raises(ValueError, match="'rflvm' model has no gene loadings|no 'rflvm'"):
        pl.loadings(fitted, "rflvm")
    with pytest.raises(TypeError, match="adata is a ndarray; expected the AnnData"):
        pl.scores(fitted.X)
    plt.close("all")


def test_metric_boxplots_refuses_a_table_it_cannot_draw():
    table = pd.DataFrame({"transform": "log", "model": ["a", "b"], "split": 0, "auroc": [0.6, 0.7]})
    assert len(pl.metric_boxplots(table, columns=("auroc",)).axes) == 1
    with pytest.raises(ValueError, match="metrics has no column 'split'; expected the per-split"):
        pl.metric_boxplots(table.drop(columns="split"))
    with pytest.raises(ValueError, match=r"none of the metrics \['aupr'\] has a value"):
        pl.metric_boxplots(table, columns=("aupr",))
    with pytest.raises(TypeError, match="metrics is a list; expected a DataFrame"):
        pl.metric_boxplots([0.6, 0.7])
    plt.close("all")


def _overlaps(boxes, fixed=None):
    """Pairs of (x0, y0, x1, y1) boxes that overlap (pairs of two ``fixed`` boxes left out)."""
    b = np.asarray(boxes)
    fixed = np.zeros(len(b), bool) if fixed is None else fixed
    apart = (
        (b[:, None, 2] <= b[None, :, 0])
        | (b[None, :, 2] <= b[:, None, 0])
        | (b[:, None, 3] <= b[None, :, 1])
        | (b[None, :, 3] <= b[:, None, 1])
    )
    return int(np.triu(~apart & ~(fixed[:, None] & fixed[None, :]), k=1).sum())


def test_place_labels_separates_boxes_and_keeps_fixed_ones():
    rng = np.random.default_rng(3)
    anchors = rng.uniform(0, 100, size=(40, 2))
    sizes = rng.uniform(10, 30, size=(40, 2))
    fixed = np.arange(40) < 10
    placed = rp.place_labels(anchors, sizes, fixed=fixed)
    np.testing.assert_array_equal(placed[fixed], anchors[fixed])
    assert _overlaps(np.hstack([anchors - sizes / 2, anchors + sizes / 2]), fixed) > 10
    assert _overlaps(np.hstack([placed - sizes / 2, placed + sizes / 2]), fixed) == 0
    assert np.median(np.linalg.norm(placed - anchors, axis=1)) < 30  # labels stay near
    np.testing.assert_array_equal(
        rp.place_labels(anchors[:2] + [[0, 0], [500, 0]], sizes[:2]),
        anchors[:2] + [[0, 0], [500, 0]],
    )  # nothing to move


def test_gene_network_labels_do_not_collide_and_sizes_follow_loadings():
    rng = np.random.default_rng(4)
    modules = np.repeat(np.arange(4), 15)  # 60 genes in 4 modules of correlated loadings
    centres = rng.normal(size=(4, 6))
    A = centres[modules] + 0.15 * rng.normal(size=(60, 6))
    A *= rng.uniform(0.5, 2.0, size=(60, 1))
    genes = [f"GENE{i}LONGNAME" for i in range(60)]
    loadings = pd.DataFrame(A, index=genes)
    edges = rp.gene_network_edges(loadings, genes, n_genes=60, threshold=0.9)
    fig = rp.gene_network_figure(edges, loadings=loadings, n_labels=25)
    ax = fig.axes[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    labels = [t for t in ax.texts if t.get_text()]
    assert len(labels) == 25
    assert _overlaps([t.get_window_extent(renderer).extents for t in labels]) == 0
    nodes = ax.collections[-1]
    sizes = nodes.get_sizes()
    in_graph = list(
        dict.fromkeys(g for pair in edges[["gene_a", "gene_b"]].to_numpy() for g in pair)
    )
    norms = np.linalg.norm(loadings.loc[in_graph].to_numpy(), axis=1)
    expected = 40 + 260 * (norms - norms.min()) / np.ptp(norms)  # size grows with the norm
    np.testing.assert_allclose(sizes, expected)
    plt.close(fig)


def test_gene_network_from_the_anndata(fitted):
    fig = pl.gene_network(fitted, "rank_factor", n_genes=20, threshold=0.5)
    assert "gene network" in fig.axes[0].get_title()
    plt.close(fig)


def test_gene_network_layout_does_not_depend_on_string_hashing():
    """The network's positions are the same in processes with different ``PYTHONHASHSEED`` (the
    genes are strings; a component's nodes keep the graph's order, not a set's)."""
    import os
    import subprocess
    import sys

    code = (
        "import hashlib, networkx as nx, numpy as np\n"
        "from omicsbayes.pl.rank_factor import _packed_layout\n"
        "genes = [f'GENE{i}' for i in range(40)]\n"
        "g = nx.Graph()\n"
        "for i in range(0, 40, 8):\n"
        "    for j in range(8):\n"
        "        g.add_edge(genes[i + j], genes[i + (j + 1) % 8])\n"
        "        g.add_edge(genes[i + j], genes[i + (j + 3) % 8])\n"
        "pos = _packed_layout(g, 0)\n"
        "print(hashlib.sha1(np.array([pos[n] for n in genes]).tobytes()).hexdigest())\n"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
        ).stdout
        for seed in (0, 1)
    }
    assert len(digests) == 1, digests
