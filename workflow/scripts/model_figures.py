"""Paper 000's figures from the saved tables of one whole-cohort fit (never from a live model).

Rule ``model_figures``: Figure 1 (log versus rank of the most discriminative gene, by group, from
the cohort's raw values), Figure 3 (coefficients per task), the loadings heatmap, the top genes of
each factor and the gene network (Figure 7). Rule ``model_loadings_images``: Figures 4-5, the
loadings as images, for pixel features. Genes are named by their symbol when the loadings table
has a ``gene_symbol`` column (a GEO platform annotation without ``collapse``); the tables keep the
probe IDs in ``feature`` columns.
"""

import logging

import matplotlib

matplotlib.use("Agg")
import anndata as ad  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from omicsbayes import protocols  # noqa: E402
from omicsbayes.jobs import atomic_write, run_job, write_table  # noqa: E402
from omicsbayes.pl import rank_factor as rp  # noqa: E402


def save(fig, path):
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png"))
    plt.close(fig)


def read(path, key):
    return pd.read_csv(path, sep="\t", dtype={key: str}).set_index(key)


def rank_vs_log(smk, loadings, coef, labels):
    """Figure 1 for the gene of largest |A beta_t| over all tasks t (``labels``: its name), its
    samples grouped as the experiment's kind groups them in task t."""
    weights = rp.discriminative_weights(loadings, coef)
    g, t = np.unravel_index(np.argmax(np.abs(weights.to_numpy())), weights.shape)
    feature, gene, task = weights.index[g], labels[g], weights.columns[t]
    raw = ad.read_h5ad(smk.input.cohort)
    experiment = smk.params.experiment
    kind = protocols.get(protocols.kind_of(experiment))
    try:
        groups = kind.figure_groups(raw.obs, experiment, smk.params.cohort, task)
    except protocols.ExperimentError as err:  # the console's one line names the file
        raise protocols.ExperimentError(f"{smk.input.cohort}: {err}") from None
    labelled = pd.notna(groups)
    values = np.asarray(raw.obs_vector(feature), dtype=float)[labelled]
    offset = 0.0 if values.min() > 0 else 1.0 - values.min()
    groups = groups[labelled].astype(str)
    logging.getLogger("omicsbayes").info(
        "most discriminative gene %s (task %s, weight %.4g); log offset %g",
        gene,
        task,
        weights.iloc[g, t],
        offset,
    )
    title = f"{gene} (task {task}, weight {weights.iloc[g, t]:.3g})"
    return rp.rank_vs_log_figure(values, groups, gene=title, offset=offset)


def with_features(table, labels, features, columns):
    """``table`` with a probe-ID column ``feature[_x]`` after each gene column (when the genes
    are named by symbols, i.e. ``labels`` differ from ``features``)."""
    if labels.equals(features):
        return table
    probe = dict(zip(labels, features))
    for column in columns:
        suffix = column.removeprefix("gene")
        at = table.columns.get_loc(column) + 1
        table.insert(at, f"feature{suffix}", table[column].map(probe))
    return table


def main(smk):
    loadings = read(smk.input.loadings, "feature")
    symbols = loadings.pop("gene_symbol") if "gene_symbol" in loadings else None
    if smk.rule == "model_loadings_images":
        grid = rp.pixel_grid(loadings.index)
        if grid is None:
            raise ValueError(
                f"{smk.input.loadings}: features are not a pixel grid (names pixel_<row>_<col>); "
                f"first names {list(loadings.index[:3])}"
            )
        shape, order = grid
        save(rp.loadings_images(loadings.to_numpy()[order], shape), smk.output[0])
        return
    coef = read(smk.input.coef, "task")
    labels = rp.feature_labels(loadings.index, symbols)
    named = loadings.set_axis(labels)
    save(rank_vs_log(smk, loadings, coef, labels), smk.output.rank_vs_log)
    save(rp.coefficient_figure(coef), smk.output.coefficients)
    save(rp.loadings_heatmap(named), smk.output.heatmap)
    top = rp.top_genes_table(named, labels, smk.params.n_top)
    write_table(with_features(top, labels, loadings.index, ["gene"]), smk.output.top_genes)
    edges = rp.gene_network_edges(named, labels, **smk.params.network)
    logging.getLogger("omicsbayes").info("gene network: %d edges", len(edges))
    table = with_features(edges.copy(), labels, loadings.index, ["gene_a", "gene_b"])
    write_table(table, smk.output.edges)
    save(rp.gene_network_figure(edges, loadings=named), smk.output.network)


run_job(snakemake, main)  # noqa: F821
