"""Fit one model on every training split of a cohort and write the test-split predictions of all
splits as one table (column ``split``); each split's seed is derive_seed(seed, experiment,
transform, model, split), as when every split was its own job."""

import anndata as ad

from omicsbayes._seed import derive_seed
from omicsbayes.evaluate.splitters import read_splits
from omicsbayes.jobs import run_job, write_table
from omicsbayes.preprocess import split_pipeline
from omicsbayes.protocols.classification import fit_splits, task_targets


def main(smk):
    wc = smk.wildcards
    adata = ad.read_h5ad(smk.input.data)
    splits = read_splits(smk.input.splits)
    targets = task_targets(adata.obs[smk.params.cohort["label"]], smk.params.experiment["task"])
    _, fold_steps = split_pipeline(smk.params.steps)
    seeds = {
        s: derive_seed(smk.params.seed, wc.experiment, wc.transform, wc.model, s)
        for s in splits["split"].unique()
    }
    predictions = fit_splits(adata.X, targets, splits, smk.params.model, fold_steps, seeds)
    predictions.insert(2, "sample_id", adata.obs_names.to_numpy()[predictions["sample"]])
    write_table(predictions, smk.output[0])


run_job(snakemake, main)  # noqa: F821
