"""Figures of paper 003 from saved result tables (never from a live model).

- :func:`projection_figure`: Figure 1, two-dimensional latent scores of BM2PCA and of PCA,
  training and test samples, with BM2PCA's separating line.
- :func:`accuracy_curves`: Figures 2 and 3, mean test accuracy (error bars: sd over repeats)
  against the number of training samples per class, the number of components k or C.
"""

import matplotlib.pyplot as plt
import numpy as np

_MARKERS = ("x", "s", "o", "^", "v", "D")


def projection_figure(scores, eta=None, title=""):
    """Figure 1: one panel per method, samples in its 2-D latent space.

    Parameters
    ----------
    scores : pandas.DataFrame
        Columns ``method`` (e.g. "BM2PCA", "PCA"), ``z1``, ``z2``, ``label`` and ``split``
        ("train" / "test").  Training samples are drawn in red / black, test samples in
        blue / green (the paper's colours), one marker per class; the legend names the split
        only when both are drawn.
    eta : sequence of 3 floats, optional
        ``(eta_1, eta_2, bias)`` of the BM2PCA discriminant; drawn as the separating line on the
        "BM2PCA" panel.
    title : str
        Figure title.
    """
    methods = list(dict.fromkeys(scores["method"]))
    classes = sorted(scores["label"].unique(), key=str)
    colours = {"train": ("tab:red", "black"), "test": ("tab:blue", "tab:green")}
    both = scores["split"].nunique() > 1  # name the split in the legend only when there are two
    fig, axes = plt.subplots(1, len(methods), figsize=(4.5 * len(methods), 4.2), squeeze=False)
    for ax, method in zip(axes[0], methods):
        part = scores[scores["method"] == method]
        for split, pair in colours.items():
            for i, cls in enumerate(classes):
                pts = part[(part["split"] == split) & (part["label"] == cls)]
                if len(pts):
                    marker, colour = _MARKERS[i % len(_MARKERS)], pair[i % 2]
                    style = (
                        {"color": colour}
                        if marker == "x"
                        else {"facecolors": "none", "edgecolors": colour}
                    )
                    ax.scatter(
                        pts["z1"],
                        pts["z2"],
                        marker=marker,
                        s=28,
                        label=f"{split} {cls}" if both else str(cls),
                        **style,
                    )
        if eta is not None and method == "BM2PCA":
            e1, e2, b = (float(v) for v in eta)
            xs = np.linspace(part["z1"].min(), part["z1"].max(), 2)
            if abs(e2) > 1e-12:
                ax.plot(xs, -(e1 * xs + b) / e2, "k--", lw=1, label="separating line")
            else:
                ax.axvline(-b / e1, color="k", ls="--", lw=1, label="separating line")
        ax.set_title(method)
        ax.set_xlabel("component 1")
        ax.set_ylabel("component 2")
        ax.legend(fontsize=7, loc="best")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def accuracy_curves(
    results, x, hue="model", panel=None, metric="accuracy", title="", sd=None, xlabel=None
):
    """Figures 2-3: mean ``metric`` over repeats against ``x``, one line per ``hue`` value.

    Parameters
    ----------
    results : pandas.DataFrame
        Either one row per fitted split, with columns ``x``, the ``hue`` column(s), ``metric`` and
        optionally ``panel``; or, when ``sd`` is given, one row per line and x value already
        summarised over the repeats (``metric`` holds the mean, ``sd`` its standard deviation;
        lines keep the order of their first row).
    x : str
        Column on the horizontal axis: ``"n_per_class"`` (Figure 2), ``"n_components"``
        (Figure 2, against k) or ``"C"`` (Figure 3).
    hue : str or list of str
        Column(s) naming a line, e.g. ``["model", "n_components"]``; values of a ``"model"`` or
        ``"line"`` column are shown bare in the legend, others as ``column=value``.
    panel : str, optional
        Column splitting the figure into panels (e.g. the cohort).
    metric : str
        Column on the vertical axis.
    title : str
        Figure title.
    sd : str, optional
        Column of standard deviations over repeats, for a table of means (error bars).
    xlabel : str, optional
        Label of the horizontal axis (default: ``x``).
    """
    hue = [hue] if isinstance(hue, str) else list(hue)
    panels = [None] if panel is None else sorted(results[panel].unique(), key=str)
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for ax, value in zip(axes[0], panels):
        part = results if value is None else results[results[panel] == value]
        if sd is None:
            stats = part.groupby(hue + [x], sort=True)[metric].agg(["mean", "std"]).reset_index()
        else:
            repeated = part.duplicated(hue + [x])
            if repeated.any():
                raise ValueError(
                    f"{int(repeated.sum())} rows repeat a line and {x} value; a table of means "
                    f"(sd={sd!r}) needs one row per {hue + [x]}"
                    + ("" if panel is None else f" within each {panel}")
                )
            stats = part.rename(columns={metric: "mean", sd: "std"}).sort_values(x, kind="stable")
        for i, (key, line) in enumerate(stats.groupby(hue, sort=False)):
            key = key if isinstance(key, tuple) else (key,)
            name = ", ".join(
                str(k) if h in ("model", "line") else f"{h}={k}" for h, k in zip(hue, key)
            )
            ax.errorbar(
                line[x],
                line["mean"],
                yerr=line["std"].fillna(0.0),
                marker=_MARKERS[i % len(_MARKERS)],
                capsize=3,
                label=name,
            )
        ax.set_xticks(sorted(part[x].unique()))  # ticks at the swept values only
        ax.set_xlabel(x if xlabel is None else xlabel)
        ax.set_ylabel(f"test {metric}")
        if value is not None:
            ax.set_title(str(value))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return fig
