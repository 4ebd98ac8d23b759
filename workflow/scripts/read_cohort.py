"""Read one cohort through omicsbayes.io and write it as h5ad."""

import logging

from omicsbayes.io import read_cohort
from omicsbayes.jobs import atomic_write, run_job


def main(smk):
    spec = dict(smk.params.spec)
    label_map = spec.pop("label_map", None)
    adata = read_cohort(spec, base_dir=".")  # paths relative to the working directory
    label = spec.get("label")
    if label and label_map:
        adata.obs[label] = adata.obs[label].astype("string").replace(label_map)
    logging.getLogger("omicsbayes").info(
        "read %s: %d samples x %d features", spec["format"], adata.n_obs, adata.n_vars
    )
    atomic_write(smk.output[0], adata.write_h5ad)


run_job(snakemake, main)  # noqa: F821
