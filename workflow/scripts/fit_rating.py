"""One fold of the rating protocol (paper 004, section 5.2): RMSE and R@k of one model."""

import logging

import anndata as ad
import pandas as pd

from omicsbayes._seed import derive_seed
from omicsbayes.evaluate.splitters import read_splits
from omicsbayes.jobs import run_job, write_table
from omicsbayes.protocols.entries import row_kernel
from omicsbayes.protocols.rating import rating_fold_metrics


def main(smk):
    wc = smk.wildcards
    adata = ad.read_h5ad(smk.input.data)
    spec, protocol = smk.params.model, smk.params.protocol
    splits = read_splits(smk.input.splits)
    seed = derive_seed(smk.params.seed, wc.experiment, wc.model, wc.split)
    row = rating_fold_metrics(
        adata.X,
        splits[splits["split"] == int(wc.split)],
        protocol["type"],
        spec,
        row_kernel=row_kernel(adata, spec, smk.input.data, wc.model),
        relevant_above=protocol.get("relevant_above", 4.0),
        k=protocol.get("k", 20),
        random_state=seed,
    )
    logging.getLogger("omicsbayes").info(
        "fold %s: RMSE %.4f (training mean %.4f), R@%d %.4f over %d users",
        wc.split,
        row["rmse"],
        row["rmse_training_mean"],
        row["k"],
        row["recall"],
        row["n_rows"],
    )
    write_table(pd.DataFrame([row]), smk.output[0])


run_job(snakemake, main)  # noqa: F821
