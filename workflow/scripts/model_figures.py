"""Paper 000's figures from the saved tables of one whole-cohort fit (never from a live model).

Rule ``model_figures``: Figure 1 (log versus rank of the most discriminative gene, by group, from
the cohort's raw values), Figure 3 (coefficients per task), the loadings heatmap, the top genes of
each factor and the gene network (Figure 7). Rule ``model_loadings_images``: Figures 4-5, the
loadings as images, for pixel features.
"""

import logging

import matplotlib

matplotlib.use("Agg")
import anndata as ad  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from omicsbayes.jobs import atomic_write, run_job, write_table  # noqa: E402
from omicsbayes.plotting import rank_factor as rp  # noqa: E402
from omicsbayes.protocols.classification import task_targets  # noqa: E402


def save(fig, path):
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png"))
    plt.close(fig)


def read(path, key):
    return pd.read_csv(path, sep="\t", dtype={key: str}).set_index(key)


def rank_vs_log(smk, loadings, coef):
    """Figure 1 for the gene of largest |A beta_t| over all tasks t."""
    weights = rp.discriminative_weights(loadings, coef)
    g, t = np.unravel_index(np.argmax(np.abs(weights.to_numpy())), weights.shape)
    gene, task = weights.index[g], weights.columns[t]
    raw = ad.read_h5ad(smk.input.cohort)
    label = smk.params.label
    if label not in raw.obs:
        raise ValueError(f"{smk.input.cohort}: label column {label!r} is missing")
    target = task_targets(raw.obs[label], smk.params.task)[task].to_numpy()
    labelled = ~np.isnan(target)
    negatives = set(raw.obs[label].astype(str).to_numpy()[target == 0])
    rest = negatives.pop() if len(negatives) == 1 else "rest"
    values = np.asarray(raw.obs_vector(gene), dtype=float)[labelled]
    offset = 0.0 if values.min() > 0 else 1.0 - values.min()
    groups = np.where(target[labelled] == 1, str(task), rest)
    logging.getLogger("omicsbayes").info(
        "most discriminative gene %s (task %s, weight %.4g); log offset %g",
        gene,
        task,
        weights.iloc[g, t],
        offset,
    )
    title = f"{gene} (task {task}, weight {weights.iloc[g, t]:.3g})"
    return rp.rank_vs_log_figure(values, groups, gene=title, offset=offset)


def main(smk):
    loadings = read(smk.input.loadings, "feature")
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
    save(rank_vs_log(smk, loadings, coef), smk.output.rank_vs_log)
    save(rp.coefficient_figure(coef), smk.output.coefficients)
    save(rp.loadings_heatmap(loadings), smk.output.heatmap)
    write_table(
        rp.top_genes_table(loadings, loadings.index, smk.params.n_top), smk.output.top_genes
    )
    edges = rp.gene_network_edges(loadings, loadings.index, **smk.params.network)
    logging.getLogger("omicsbayes").info("gene network: %d edges", len(edges))
    write_table(edges, smk.output.edges)
    save(rp.gene_network_figure(edges, loadings=loadings), smk.output.network)


run_job(snakemake, main)  # noqa: F821
