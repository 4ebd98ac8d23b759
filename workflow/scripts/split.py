"""Write the fold table of one cohort and protocol, as the protocol's experiment kind draws it
(:func:`omicsbayes.protocols.of_protocol`, its ``make_splits``)."""

import logging

import anndata as ad

from omicsbayes import protocols
from omicsbayes._seed import derive_seed
from omicsbayes.evaluate.splitters import write_splits
from omicsbayes.jobs import run_job


def main(smk):
    adata = ad.read_h5ad(smk.input[0])
    protocol = dict(smk.params.protocol)
    seed = derive_seed(smk.params.seed, smk.wildcards.cohort, smk.wildcards.protocol)
    try:
        table = protocols.of_protocol(protocol).make_splits(
            adata, protocol, seed, label=smk.params.label
        )
    except protocols.ExperimentError as err:
        raise ValueError(f"{smk.input[0]}: {err}") from None
    n = table["split"].nunique()
    logging.getLogger("omicsbayes").info("%s: %d splits", protocol["type"], n)
    write_splits(table, smk.output[0])


run_job(snakemake, main)  # noqa: F821
