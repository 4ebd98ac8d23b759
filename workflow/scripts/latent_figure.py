"""Latent-space heatmaps of a held-out-entries experiment, samples sorted by their label."""

import matplotlib

matplotlib.use("Agg")
import anndata as ad  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from omicsbayes.jobs import atomic_write, run_job  # noqa: E402
from omicsbayes.pl.rflvm import latent_heatmaps  # noqa: E402


def main(smk):
    obs = ad.read_h5ad(smk.input.cohort, backed="r").obs
    label = smk.params.label
    labels = obs[label].astype(str).to_numpy() if label else np.zeros(len(obs), dtype=int)
    latents = {
        model: pd.read_csv(path, sep="\t").set_index("sample_id").loc[obs.index].to_numpy()
        for model, path in zip(smk.params.models, smk.input.latents)
    }
    fig = latent_heatmaps(latents, labels, title=smk.wildcards.experiment)
    atomic_write(
        smk.output[0], lambda tmp: fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
    )


run_job(snakemake, main)  # noqa: F821
