"""Read one cohort through omicsbayes.io and write it as h5ad."""

import logging

from omicsbayes.io import read_cohort
from omicsbayes.jobs import atomic_write, run_job


def main(smk):
    spec = dict(smk.params.spec)
    try:
        _read(smk, spec)
    except Exception as err:
        if not smk.params.remote:
            raise
        urls = ", ".join(f"{key} = {url}" for key, url in smk.params.remote.items())
        err.args = (f"{err} (the cohort's fetched files: {urls})",)
        raise


def _read(smk, spec):
    label_map = spec.pop("label_map", None)
    keep_labels = spec.pop("keep_labels", None)
    adata = read_cohort(spec, base_dir=".")  # paths relative to the working directory
    label = spec.get("label")
    if label and label_map:
        adata.obs[label] = adata.obs[label].astype("string").replace(label_map)
    if keep_labels is not None:  # a declared subset (e.g. digits 3 and 5), reported in the log
        if not label:
            raise ValueError("cohort key keep_labels needs the cohort's label column (key label)")
        values = adata.obs[label].astype("string")
        wanted = [str(v) for v in keep_labels]
        absent = sorted(set(wanted) - set(values.dropna()))
        if absent:
            raise ValueError(f"cohort key keep_labels: {absent} not among the {label!r} values")
        keep = values.isin(wanted).to_numpy()
        logging.getLogger("omicsbayes").info(
            "keep_labels %s: kept %d of %d samples", wanted, keep.sum(), adata.n_obs
        )
        adata = adata[keep].copy()
    logging.getLogger("omicsbayes").info(
        "read %s: %d samples x %d features", spec["format"], adata.n_obs, adata.n_vars
    )
    atomic_write(smk.output[0], adata.write_h5ad)


run_job(snakemake, main)  # noqa: F821
