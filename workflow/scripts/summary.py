"""All experiments side by side (mean over tasks per experiment x transform x model), and per
experiment the winning model, its margin over the runner-up and that margin's standard error
(:mod:`omicsbayes.evaluate.winners`), with the paper each experiment serves.

Ranking experiments enter with their values at k = 20 (P@20, R@20), as the papers' tables do.
"""

import pandas as pd

from omicsbayes.evaluate.winners import winners
from omicsbayes.jobs import run_job, write_table


def at_largest_k(table):
    """Rows at the largest k (ranking and rating tables), without the k column."""
    return table[table["k"] == table["k"].max()].drop(columns="k") if "k" in table else table


def main(smk):
    summary = pd.concat(
        [at_largest_k(pd.read_csv(p, sep="\t")) for p in smk.input.summaries], ignore_index=True
    )
    means = [c for c in summary.columns if c.endswith("_mean")]
    side_by_side = (
        summary.groupby(["experiment", "transform", "model"], sort=True)[means].mean().reset_index()
    )
    write_table(side_by_side, smk.output.summary)
    tables = {
        e: pd.read_csv(p, sep="\t") for e, p in zip(smk.params.experiments, smk.input.metrics)
    }
    write_table(winners(tables, smk.config["experiments"]), smk.output.winners)


run_job(snakemake, main)  # noqa: F821
