"""Metrics per split, their mean and sd, and seconds per fit for one experiment (any kind).

The metric tables hold only numbers that a rerun reproduces bit for bit; wall times go to the
separate timings table.
"""

import re

import numpy as np
import pandas as pd

from omicsbayes.evaluate.metrics import summarize
from omicsbayes.experiments import score_predictions
from omicsbayes.jobs import run_job, write_table

PATH = re.compile(
    r"(?:(?:fits|entries)/(?P<transform>[^/]+)|ranking|rating)/(?P<model>[^/]+)"
    r"/split(?P<split>\d+)\.tsv$"
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
    keys = ["transform", "model", "split"]
    if "seconds" in joined:
        per_fit = joined.groupby(keys, sort=True)["seconds"].first().reset_index()
        timings = summarize(per_fit, by=["transform", "model"], metrics=["seconds"])
    else:
        timings = pd.DataFrame(columns=["transform", "model", "seconds_mean", "seconds_sd"])
    timings.insert(0, "experiment", smk.wildcards.experiment)
    write_table(timings, smk.output.timings)
    joined = joined.drop(columns="seconds", errors="ignore")
    if kind == "disease_gene":  # paper 004: P@k and R@k curves per fold
        metrics = joined[[*keys, *joined.columns[:-3]]]
        columns, by = ["precision", "recall"], ["k"]
    elif kind == "rating":  # paper 004 section 5.2: RMSE and R@k per fold
        metrics = joined[[*keys, *joined.columns[:-3]]]
        columns, by = ["rmse", "recall", "rmse_training_mean"], ["k"]
    elif kind == "heldout_entries":
        metrics = joined[[*keys, *joined.columns[:-3]]]
        columns, by = ["log_likelihood_per_entry", "perplexity"], []
    else:
        metrics = score_predictions(joined)
        columns, by = ["auroc", "aupr", "accuracy", "error_rate"], ["task"]
    metrics.insert(0, "experiment", smk.wildcards.experiment)
    write_table(metrics, smk.output.metrics)
    summary = summarize(metrics, by=["experiment", "transform", "model", *by], metrics=columns)
    for c in columns:  # paper 002 reports the standard error over trials
        summary[f"{c}_se"] = summary[f"{c}_sd"] / np.sqrt(
            summary["n_splits"] - summary[f"{c}_n_nan"]
        )
    write_table(summary, smk.output.summary)


run_job(snakemake, main)  # noqa: F821
