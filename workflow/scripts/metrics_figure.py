"""Box plots of the per-split metrics of one experiment."""

import matplotlib

matplotlib.use("Agg")
import pandas as pd  # noqa: E402

from omicsbayes.jobs import atomic_write, run_job  # noqa: E402
from omicsbayes.plotting import metric_boxplots  # noqa: E402


def main(smk):
    metrics = pd.read_csv(smk.input[0], sep="\t")
    heldout = smk.params.experiment.get("kind", "classification") == "heldout_entries"
    columns = (
        ("log_likelihood_per_entry", "perplexity") if heldout else ("auroc", "aupr", "accuracy")
    )
    fig = metric_boxplots(metrics, title=smk.wildcards.experiment, columns=columns)
    atomic_write(
        smk.output[0], lambda tmp: fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
    )


run_job(snakemake, main)  # noqa: F821
