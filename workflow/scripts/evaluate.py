"""Metrics per split (as the experiment's kind computes them), their mean and sd, seconds per fit
and the metrics figure (as the kind draws it: box plots per split, or P@k / R@k curves) for one
experiment.

The metric tables hold only numbers that a rerun reproduces bit for bit; wall times go to the
separate timings table.
"""

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from omicsbayes import protocols  # noqa: E402
from omicsbayes.evaluate.metrics import summarize  # noqa: E402
from omicsbayes.jobs import atomic_write, run_job, write_table  # noqa: E402


def fold_keys(wildcards):
    """transform ("none" for a kind without transforms), model and, for a one-split table, split
    of a fold table, from its fit job's wildcard values; a table of every split
    (``predictions.tsv``) carries its own ``split`` column."""
    keys = {"transform": wildcards.get("transform", "none"), "model": wildcards["model"]}
    return {**keys, "split": int(wildcards["split"])} if "split" in wildcards else keys


def main(smk):
    tables = []
    for path, wildcards in zip(smk.input, smk.params.folds, strict=True):
        table = pd.read_csv(path, sep="\t")
        tables.append(table.assign(**fold_keys(wildcards)))
    joined = pd.concat(tables, ignore_index=True)
    kind = protocols.get(protocols.kind_of(smk.params.experiment))
    keys = ["transform", "model", "split"]
    if "seconds" in joined:
        per_fit = joined.groupby(keys, sort=True)["seconds"].first().reset_index()
        timings = summarize(per_fit, by=["transform", "model"], metrics=["seconds"])
    else:
        timings = pd.DataFrame(columns=["transform", "model", "seconds_mean", "seconds_sd"])
    timings.insert(0, "experiment", smk.wildcards.experiment)
    write_table(timings, smk.output.timings)
    joined = joined.drop(columns="seconds", errors="ignore")
    metrics, columns, by = kind.metric_table(joined)
    metrics.insert(0, "experiment", smk.wildcards.experiment)
    write_table(metrics, smk.output.metrics)
    summary = summarize(
        metrics, by=["experiment", "transform", "model", *by], metrics=list(columns)
    )
    for c in columns:  # paper 002 reports the standard error over trials
        summary[f"{c}_se"] = summary[f"{c}_sd"] / np.sqrt(
            summary["n_splits"] - summary[f"{c}_n_nan"]
        )
    write_table(summary, smk.output.summary)
    # the figure from the table as written (as a job reading metrics.tsv would draw it)
    written = pd.read_csv(smk.output.metrics, sep="\t")
    fig = kind.figure(written, smk.wildcards.experiment, smk.params.experiment, smk.params.models)
    atomic_write(
        smk.output.figure,
        lambda tmp: fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png"),
    )


run_job(snakemake, main)  # noqa: F821
