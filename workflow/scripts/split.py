"""Write the fold table of one cohort and protocol, stratified by the cohort's label."""

import logging

import anndata as ad

from omicsbayes._seed import derive_seed
from omicsbayes.evaluate.splitters import classification_splits, write_splits
from omicsbayes.jobs import run_job


def main(smk):
    obs = ad.read_h5ad(smk.input[0], backed="r").obs
    label = smk.params.label
    if label not in obs:
        raise ValueError(
            f"{smk.input[0]}: label column {label!r} is missing; columns are {list(obs.columns)}"
        )
    protocol = dict(smk.params.protocol)
    kind = protocol.pop("type")
    seed = derive_seed(smk.params.seed, smk.wildcards.cohort, smk.wildcards.protocol)
    table = classification_splits(obs[label].to_numpy(), kind, random_state=seed, **protocol)
    table.insert(2, "sample_id", obs.index.to_numpy()[table["sample"].to_numpy()])
    logging.getLogger("omicsbayes").info("%s: %d splits", kind, table["split"].nunique())
    write_splits(table, smk.output[0])


run_job(snakemake, main)  # noqa: F821
