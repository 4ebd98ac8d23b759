"""Apply a transform's sample-wise steps to a cohort (fitted steps run per split in fit.py)."""

import logging

import anndata as ad

from omicsbayes.jobs import atomic_write, run_job
from omicsbayes.preprocess import build_pipeline, split_pipeline


def main(smk):
    adata = ad.read_h5ad(smk.input[0])
    sample_wise, fold_steps = split_pipeline(smk.params.steps)
    X = adata.X  # sparse stays sparse through the steps that keep it
    if sample_wise:
        X = build_pipeline(sample_wise).fit_transform(X)
    out = ad.AnnData(X=X, obs=adata.obs.copy(), var=adata.var.copy())
    out.uns["fold_steps"] = [str(s) for s in fold_steps]
    logging.getLogger("omicsbayes").info(
        "sample-wise steps %s applied; %d steps run per split", sample_wise, len(fold_steps)
    )
    atomic_write(smk.output[0], out.write_h5ad)


run_job(snakemake, main)  # noqa: F821
