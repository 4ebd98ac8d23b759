"""Paper 003's Figures 2-3: a metric (mean and sd over repeats) against a varied setting.

Each point of the x axis is one experiment's summary table; each line is one model (or, with the
sweep's ``lines``, one label naming a model entry per point), with one panel per value of the
experiments' further summary key (their kind's ``summary_by``: ``task`` for classification). The
combined table holds exactly the values drawn.
"""

import matplotlib

matplotlib.use("Agg")
import pandas as pd  # noqa: E402

from omicsbayes.jobs import atomic_write, run_job, write_table  # noqa: E402
from omicsbayes.pl.bm2pca import accuracy_curves  # noqa: E402


def sweep_table(summaries, sweep, name, by):
    """Rows of the experiments' summaries at each point, with columns ``x`` and ``line`` (``by``:
    the further summary keys)."""
    metric = sweep.get("metric", "accuracy")
    lines = sweep.get("lines")
    rows = []
    for i, (experiment, value) in enumerate(zip(sweep["experiments"], sweep["values"])):
        summary = summaries[experiment]
        if f"{metric}_mean" not in summary:
            raise ValueError(
                f"sweeps.{name}.metric: {metric!r} is not in the summary of experiment "
                f"{experiment!r} (metrics: {[c[:-5] for c in summary if c.endswith('_mean')]})"
            )
        if lines:
            picked = [
                summary[summary["model"] == models[i]].assign(line=label)
                for label, models in lines.items()
            ]
            part = pd.concat(picked, ignore_index=True)
        else:
            part = summary.assign(line=summary["model"])
        rows.append(part.assign(x=value))
    table = pd.concat(rows, ignore_index=True)
    if table["transform"].nunique() > 1:
        table["line"] = table["line"] + " (" + table["transform"] + ")"
    columns = ["x", "line", "experiment", "transform", "model", *by]
    columns += [f"{metric}_mean", f"{metric}_sd", "n_splits"]
    order = {line: i for i, line in enumerate(dict.fromkeys(table["line"]))}  # config order
    table = table[columns].sort_values(
        ["line", *by, "x"], key=lambda c: c.map(order) if c.name == "line" else c, kind="stable"
    )
    table.insert(0, "sweep", name)
    return table.reset_index(drop=True)


def main(smk):
    sweep, name = smk.params.sweep, smk.wildcards.sweep
    metric = sweep.get("metric", "accuracy")
    summaries = {}
    for path in smk.input:
        summary = pd.read_csv(path, sep="\t")
        summaries[summary["experiment"].iloc[0]] = summary
    by = list(smk.params.by)
    table = sweep_table(summaries, sweep, name, by)
    write_table(table, smk.output.table)
    fig = accuracy_curves(
        table.rename(columns={f"{metric}_mean": metric}),
        "x",
        hue="line",
        panel=by[0] if by and table[by[0]].nunique() > 1 else None,
        metric=metric,
        sd=f"{metric}_sd",
        xlabel=sweep["x"],
        title=sweep.get("title", name),
    )
    atomic_write(
        smk.output.figure,
        lambda tmp: fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png"),
    )


run_job(snakemake, main)  # noqa: F821
