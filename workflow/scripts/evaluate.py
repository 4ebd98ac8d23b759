"""Metrics per split and their mean and sd for one experiment (either kind)."""

import re

import numpy as np
import pandas as pd

from omicsbayes.evaluate.metrics import summarize
from omicsbayes.experiments import score_predictions
from omicsbayes.jobs import run_job, write_table

PATH = re.compile(
    r"(?:(?:fits|entries)/(?P<transform>[^/]+)|ranking)/(?P<model>[^/]+)/split(?P<split>\d+)\.tsv$"
)


def main(smk):
    tables = []
    for path in smk.input:
        keys = PATH.search(path).groupdict()
        table = pd.read_csv(path, sep="\t")
        tables.append(
            table.assign(
                transform=keys["transform"] or "none", model=keys["model"], split=int(keys["split"])
            )
        )
    joined = pd.concat(tables, ignore_index=True)
    kind = smk.params.experiment.get("kind", "classification")
    if kind == "disease_gene":  # paper 004: P@k and R@k curves per fold
        metrics = joined[["transform", "model", "split", *joined.columns[:-3]]]
        columns, by = ["precision", "recall"], ["k"]
    elif kind == "heldout_entries":
        metrics = joined[["transform", "model", "split", *joined.columns[:-3]]]
        columns, by = ["log_likelihood_per_entry", "perplexity", "seconds"], []
    else:
        metrics = score_predictions(joined)
        columns, by = ["auroc", "aupr", "accuracy", "error_rate", "seconds"], ["task"]
    metrics.insert(0, "experiment", smk.wildcards.experiment)
    write_table(metrics, smk.output.metrics)
    summary = summarize(metrics, by=["experiment", "transform", "model", *by], metrics=columns)
    for c in columns:  # paper 002 reports the standard error over trials
        summary[f"{c}_se"] = summary[f"{c}_sd"] / np.sqrt(
            summary["n_splits"] - summary[f"{c}_n_nan"]
        )
    write_table(summary, smk.output.summary)


run_job(snakemake, main)  # noqa: F821
