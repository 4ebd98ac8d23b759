"""Precision and recall at k curves (the layout of paper 004, Figures 3-4)."""

import matplotlib.pyplot as plt
import numpy as np


def ranking_curves_figure(curves, title="", group="model"):
    """Two panels, P@k and R@k against k, one line per ``group`` value, mean over splits.

    Parameters
    ----------
    curves : pandas.DataFrame
        Saved results with columns ``group``, ``k``, ``precision``, ``recall`` and optionally
        ``split`` (the output of ``protocols.disease_gene.disease_gene_cv`` with a model column
        added); the band is one standard error over splits when there is more than one.
    title : str
        Figure title (the experiment: known or new diseases, dataset).
    group : str
        Column naming the curves (for example ``"model"``).

    Returns
    -------
    matplotlib.figure.Figure
    """
    missing = {group, "k", "precision", "recall"} - set(curves.columns)
    if missing:
        raise ValueError(f"curves lacks columns {sorted(missing)}")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), squeeze=False)
    for ax, metric, label in zip(axes[0], ("precision", "recall"), ("Precision@k", "Recall@k")):
        for name, part in curves.groupby(group, sort=True):
            stats = part.groupby("k")[metric].agg(["mean", "std", "count"])
            k = stats.index.to_numpy()
            mean = stats["mean"].to_numpy()
            ax.plot(k, mean, marker="o", markersize=3, label=str(name))
            se = (stats["std"] / np.sqrt(stats["count"])).fillna(0).to_numpy()
            if np.any(se > 0):
                ax.fill_between(k, mean - se, mean + se, alpha=0.2)
        ax.set_xlabel("k")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[0][1].legend(fontsize=7, loc="lower right")
    fig.suptitle(title)
    fig.tight_layout()
    return fig
