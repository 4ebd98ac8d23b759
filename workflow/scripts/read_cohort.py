"""Read one cohort through omicsbayes.io and write it as h5ad."""

import logging

from omicsbayes.io import read_cohort
from omicsbayes.jobs import atomic_write, run_job


def main(smk):
    spec = dict(smk.params.spec)
    adata = read_cohort(spec, base_dir=smk.params.base_dir)
    label = spec.get("label")
    if label and spec.get("label_map"):
        adata.obs[label] = adata.obs[label].astype("string").replace(spec["label_map"])
    logging.getLogger("omicsbayes").info(
        "read %s: %d samples x %d features", spec["format"], adata.n_obs, adata.n_vars
    )
    atomic_write(smk.output[0], adata.write_h5ad)


run_job(snakemake, main)  # noqa: F821
