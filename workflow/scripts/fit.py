"""Fit one model on one training split and write its test-split predictions."""

import logging

import anndata as ad

from omicsbayes._seed import derive_seed
from omicsbayes.evaluate.splitters import read_splits
from omicsbayes.jobs import run_job, write_table
from omicsbayes.preprocess import build_pipeline, split_pipeline
from omicsbayes.protocols.classification import fit_split, task_targets


def main(smk):
    wc = smk.wildcards
    adata = ad.read_h5ad(smk.input.data)
    splits = read_splits(smk.input.splits)
    split = splits[splits["split"] == int(wc.split)]
    train = split.loc[split["role"] == "train", "sample"].to_numpy()
    test = split.loc[split["role"] == "test", "sample"].to_numpy()
    targets = task_targets(adata.obs[smk.params.cohort["label"]], smk.params.experiment["task"])
    _, fold_steps = split_pipeline(smk.params.steps)
    seed = derive_seed(smk.params.seed, wc.experiment, wc.transform, wc.model, wc.split)
    log = logging.getLogger("omicsbayes")
    log.info("split %s: %d train, %d test, seed %d", wc.split, len(train), len(test), seed)
    predictions, seconds = fit_split(
        adata.X,
        targets,
        train,
        test,
        smk.params.model,
        fold_pipeline=build_pipeline(fold_steps) if fold_steps else None,
        random_state=seed,
    )
    predictions.insert(1, "sample_id", adata.obs_names.to_numpy()[predictions["sample"]])
    predictions["seconds"] = seconds
    log.info("fitted and predicted in %.2f s", seconds)
    write_table(predictions, smk.output[0])


run_job(snakemake, main)  # noqa: F821
