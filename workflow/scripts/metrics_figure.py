"""The figure of one experiment: box plots of per-split metrics (RMSE and R@k for a rating
experiment), or P@k / R@k curves."""

import matplotlib

matplotlib.use("Agg")
import pandas as pd  # noqa: E402

from omicsbayes.jobs import atomic_write, run_job  # noqa: E402
from omicsbayes.plotting import metric_boxplots  # noqa: E402
from omicsbayes.plotting.bam import bam_boxplots  # noqa: E402
from omicsbayes.plotting.mvgp import ranking_curves_figure  # noqa: E402

AUC_MODELS = {"BayesianProbitClassifier", "BAMClassifier"}  # paper 001: Figures 3-4 layout
COLUMNS = {
    "classification": ("auroc", "aupr", "accuracy"),
    "heldout_entries": ("log_likelihood_per_entry", "perplexity"),
}


def main(smk):
    metrics = pd.read_csv(smk.input[0], sep="\t")
    kind = smk.params.experiment.get("kind", "classification")
    title = smk.wildcards.experiment
    if kind == "disease_gene":
        fig = ranking_curves_figure(metrics, title=title)
    elif {m["class"] for m in smk.params.models} <= AUC_MODELS:
        # one panel per cohort x kernel x metric, one box per method, means printed (paper 001)
        cohort = smk.params.experiment["cohort"]
        fig = bam_boxplots(metrics.assign(cohort=cohort))
    elif kind == "rating":  # panel titles RMSE and R@k
        names = {"rmse": "RMSE", "recall": f"R@{int(metrics['k'].iloc[0])}"}
        fig = metric_boxplots(
            metrics.rename(columns=names), title=title, columns=tuple(names.values())
        )
    else:
        fig = metric_boxplots(metrics, title=title, columns=COLUMNS[kind])
    atomic_write(
        smk.output[0], lambda tmp: fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
    )


run_job(snakemake, main)  # noqa: F821
