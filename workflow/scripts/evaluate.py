"""Metrics per split and their mean and sd for one experiment."""

import re

import pandas as pd

from omicsbayes.evaluate.metrics import summarize
from omicsbayes.experiments import score_predictions
from omicsbayes.jobs import run_job, write_table

PATH = re.compile(r"fits/(?P<transform>[^/]+)/(?P<model>[^/]+)/split(?P<split>\d+)\.tsv$")


def main(smk):
    tables = []
    for path in smk.input:
        keys = PATH.search(path).groupdict()
        table = pd.read_csv(path, sep="\t")
        tables.append(table.assign(transform=keys["transform"], model=keys["model"],
                                   split=int(keys["split"])))
    metrics = score_predictions(pd.concat(tables, ignore_index=True))
    metrics.insert(0, "experiment", smk.wildcards.experiment)
    write_table(metrics, smk.output.metrics)
    summary = summarize(
        metrics,
        by=["experiment", "transform", "model", "task"],
        metrics=["auroc", "aupr", "accuracy", "error_rate", "seconds"],
    )
    write_table(summary, smk.output.summary)


run_job(snakemake, main)  # noqa: F821
