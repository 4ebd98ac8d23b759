"""All experiments side by side: mean over tasks per experiment x transform x model."""

import pandas as pd

from omicsbayes.jobs import run_job, write_table


def main(smk):
    tables = [pd.read_csv(path, sep="\t") for path in smk.input]
    summary = pd.concat(tables, ignore_index=True)
    means = [c for c in summary.columns if c.endswith("_mean")]
    side_by_side = (
        summary.groupby(["experiment", "transform", "model"], sort=True)[means].mean().reset_index()
    )
    write_table(side_by_side, smk.output[0])


run_job(snakemake, main)  # noqa: F821
