"""Box-and-whisker plots of per-split metrics (the layout of paper 001's Figures 3-4)."""

import matplotlib.pyplot as plt

BOUNDED = frozenset({"auroc", "aupr", "accuracy", "error_rate"})


def metric_boxplots(metrics, title="", columns=("auroc", "aupr", "accuracy")):
    """One panel per metric, one box per transform x model, over splits (tasks averaged).

    Parameters
    ----------
    metrics : pandas.DataFrame
        Per-split table with columns transform, model, split, task and the metric columns.
    title : str
        Figure title (the experiment's name).
    columns : sequence of str
        Metrics to draw; a metric that is NaN everywhere (AUROC for a multiclass task, perplexity
        for real-valued data) is skipped. Metrics in [0, 1] share that axis range.

    Examples
    --------
    >>> import pandas as pd
    >>> from omicsbayes import pl
    >>> metrics = pd.DataFrame({
    ...     "transform": "zscore", "model": ["logistic"] * 3 + ["R-L-BSVM"] * 3,
    ...     "split": [0, 1, 2] * 2, "task": "ER+",
    ...     "auroc": [0.81, 0.84, 0.79, 0.86, 0.88, 0.83],
    ...     "accuracy": [0.75, 0.78, 0.74, 0.80, 0.82, 0.79],
    ... })
    >>> fig = pl.metric_boxplots(metrics, title="gse7390_er", columns=("auroc", "accuracy"))
    >>> len(fig.axes)  # one panel per metric
    2
    """
    import pandas as pd

    if not isinstance(metrics, pd.DataFrame):
        raise TypeError(
            f"metric_boxplots: metrics is a {type(metrics).__name__}; expected a DataFrame"
        )
    missing = [c for c in ("transform", "model", "split") if c not in metrics]
    if missing:
        raise ValueError(
            f"metric_boxplots: metrics has no column {missing[0]!r}; expected the per-split table "
            f"with transform, model, split and metric columns (it has {list(metrics.columns)})"
        )
    present = [c for c in columns if c in metrics and metrics[c].notna().any()]
    if not present:
        raise ValueError(
            f"metric_boxplots: none of the metrics {list(columns)} has a value in metrics"
        )
    per_split = metrics.groupby(["transform", "model", "split"], sort=True)[present].mean()
    groups = per_split.groupby(level=["transform", "model"], sort=True)
    labels = [f"{t}\n{m}" for (t, m), _ in groups]
    fig, axes = plt.subplots(
        1, len(present), figsize=(max(4.0, 1.1 * len(labels)) * len(present), 4), squeeze=False
    )
    for ax, column in zip(axes[0], present):
        data = [g[column].dropna().to_numpy() for _, g in groups]
        ax.boxplot(data, tick_labels=labels, showmeans=True)
        ax.set_title(column.upper() if column in ("auroc", "aupr") else column.replace("_", " "))
        if column in BOUNDED:
            ax.set_ylim(0.0, 1.02)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    return fig
