"""All experiments side by side: mean over tasks per experiment x transform x model.

Ranking experiments enter with their values at k = 20 (P@20, R@20), as the papers' tables do.
"""

import pandas as pd

from omicsbayes.jobs import run_job, write_table


def main(smk):
    tables = []
    for path in smk.input:
        table = pd.read_csv(path, sep="\t")
        if "k" in table:
            table = table[table["k"] == table["k"].max()].drop(columns="k")
        tables.append(table)
    summary = pd.concat(tables, ignore_index=True)
    means = [c for c in summary.columns if c.endswith("_mean")]
    side_by_side = (
        summary.groupby(["experiment", "transform", "model"], sort=True)[means].mean().reset_index()
    )
    write_table(side_by_side, smk.output[0])


run_job(snakemake, main)  # noqa: F821
