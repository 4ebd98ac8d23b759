"""Fit a latent variable model with one repeat's held-out entries hidden; score those entries.

The transform's steps are fitted on the whole matrix (as paper 002 standardises its data before
holding entries out); the held-out entries are then set to NaN, so the model never sees them.
"""

import logging

import anndata as ad
import numpy as np
import pandas as pd

from omicsbayes._seed import derive_seed
from omicsbayes.evaluate.splitters import read_splits
from omicsbayes.jobs import run_job, write_table
from omicsbayes.preprocess import build_pipeline, split_pipeline
from omicsbayes.protocols.heldout_entries import fit_heldout, heldout_mask


def main(smk):
    wc = smk.wildcards
    adata = ad.read_h5ad(smk.input.data)
    Y = adata.X
    _, fold_steps = split_pipeline(smk.params.steps)
    if fold_steps:
        Y = build_pipeline(fold_steps).fit_transform(Y)
    splits = read_splits(smk.input.splits)
    mask = heldout_mask(Y.shape, splits[splits["split"] == int(wc.split)])
    seed = derive_seed(smk.params.seed, wc.experiment, wc.transform, wc.model, wc.split)
    log = logging.getLogger("omicsbayes")
    log.info("split %s: %d of %d entries held out, seed %d", wc.split, mask.sum(), mask.size, seed)
    checkpoint = f"{smk.output.scores}.checkpoint"  # resumed if this job was interrupted
    row, latent = fit_heldout(Y, mask, smk.params.model, random_state=seed, checkpoint=checkpoint)
    log.info(
        "held-out log likelihood per entry %.4f in %.2f s",
        row["log_likelihood_per_entry"],
        row["seconds"],
    )
    write_table(pd.DataFrame([row]), smk.output.scores)
    latent = np.zeros((Y.shape[0], 0)) if latent is None else latent
    table = pd.DataFrame(latent, columns=[f"dim{j}" for j in range(latent.shape[1])])
    table.insert(0, "sample_id", adata.obs_names.to_numpy())
    write_table(table, smk.output.latent)


run_job(snakemake, main)  # noqa: F821
