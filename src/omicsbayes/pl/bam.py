"""Figures 3-4 of paper 001: box-and-whisker plots of AUROC and AUPR over repeated splits."""

import matplotlib.pyplot as plt

PAPER_ORDER = ("bprobit", "bam_p", "bam_l")
"""Box order of the paper (matched case-insensitively, ignoring ``_`` and ``-``); other model
names follow in alphabetical order."""


def _key(name):
    return str(name).lower().replace("_", "").replace("-", "")


def _order(models):
    rank = {_key(m): i for i, m in enumerate(PAPER_ORDER)}
    return sorted(models, key=lambda m: (rank.get(_key(m), len(rank)), str(m)))


def bam_boxplots(
    metrics,
    cohort="cohort",
    kernel="transform",
    model="model",
    metric_columns=("auroc", "aupr"),
):
    """One panel per cohort x kernel x metric, one box per method, the mean printed above.

    Parameters
    ----------
    metrics : pandas.DataFrame
        One row per (cohort, kernel, method, split) with the metric columns (tasks, if
        several, are averaged within a split). A missing ``cohort`` column means one cohort.
    cohort, kernel, model : str
        Column names of the cohort, the kernel (the workflow's transform) and the method.
    metric_columns : sequence of str
        Metrics to draw, one panel column each per kernel.

    Returns
    -------
    matplotlib.figure.Figure
        Rows are cohorts; columns are kernel x metric. Each panel's title names the cohort,
        kernel and metric; the number above each box is the mean over splits, as in the paper.
    """
    table = metrics.copy()
    if cohort not in table:
        table[cohort] = ""
    missing = [c for c in (kernel, model, "split", *metric_columns) if c not in table]
    if missing:
        raise ValueError(
            f"metrics table has no column(s) {missing}; expected {kernel!r}, {model!r}, 'split' "
            f"and the metric columns {list(metric_columns)}"
        )
    keys = [cohort, kernel, model, "split"]
    per_split = table.groupby(keys, sort=True)[list(metric_columns)].mean().reset_index()
    cohorts = sorted(per_split[cohort].unique(), key=str)
    kernels = sorted(per_split[kernel].unique(), key=str)
    methods = _order(per_split[model].unique())
    n_cols = len(kernels) * len(metric_columns)
    fig, axes = plt.subplots(
        len(cohorts),
        n_cols,
        figsize=(2.6 * n_cols, 3.2 * len(cohorts)),
        squeeze=False,
    )
    for i, name in enumerate(cohorts):
        for j, (kern, metric) in enumerate((k, m) for k in kernels for m in metric_columns):
            ax = axes[i, j]
            sub = per_split[(per_split[cohort] == name) & (per_split[kernel] == kern)]
            data = [sub.loc[sub[model] == m, metric].dropna().to_numpy() for m in methods]
            ax.boxplot(data, tick_labels=[str(m) for m in methods], widths=0.6)
            top = max((d.max() for d in data if d.size), default=1.0)
            for x, values in enumerate(data, start=1):
                if values.size:
                    ax.text(x, top + 0.02, f"{values.mean():.3f}", ha="center", fontsize=7)
            low = min((d.min() for d in data if d.size), default=0.0)
            ax.set_ylim(max(0.0, low - 0.05), min(1.08, top + 0.08))
            label = metric.upper() if metric in ("auroc", "aupr") else metric
            ax.set_title(" ".join(s for s in (str(name), str(kern), label) if s), fontsize=8)
            ax.tick_params(axis="x", labelsize=7)
            ax.grid(axis="y", alpha=0.3)
            ax.set_ylabel(label, fontsize=8)
    fig.tight_layout()
    return fig
