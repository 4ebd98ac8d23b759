"""The metrics figure of one experiment, as its kind draws it (box plots per split, or P@k / R@k
curves)."""

import matplotlib

matplotlib.use("Agg")
import pandas as pd  # noqa: E402

from omicsbayes import protocols  # noqa: E402
from omicsbayes.jobs import atomic_write, run_job  # noqa: E402


def main(smk):
    metrics = pd.read_csv(smk.input[0], sep="\t")
    experiment = smk.params.experiment
    kind = protocols.get(protocols.kind_of(experiment))
    fig = kind.figure(metrics, smk.wildcards.experiment, experiment, smk.params.models)
    atomic_write(
        smk.output[0], lambda tmp: fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
    )


run_job(snakemake, main)  # noqa: F821
