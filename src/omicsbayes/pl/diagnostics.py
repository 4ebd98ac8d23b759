"""Convergence figures from saved traces (never from a live model)."""

import matplotlib.pyplot as plt
import numpy as np


def trace_figure(traces, ylabel="lower bound", title="", burn_in=None, note=None, rows=None):
    """The monitored objective against the iteration, one line per trace.

    Parameters
    ----------
    traces : dict of str -> array_like
        One 1-D trace per name (a VB lower bound, an MCMC log likelihood per iteration); a 2-D
        array is several traces (one per row: one-vs-rest problems or chains), NaN where a row
        has no value (its line joins the values it has).
    ylabel : str
    title : str
    burn_in : int, optional
        Iterations discarded by a sampler, shaded.
    note : str, optional
        One line under the axes (e.g. that an objective need not increase).
    rows : str, optional
        What the rows of a 2-D trace are (``"chain"``): lines are labelled ``"chain 1"``, ...
    """
    if not traces:
        raise ValueError("traces is empty; give at least one trace")
    fig, ax = plt.subplots(figsize=(6, 3.8 if note else 3.5))
    for name, values in traces.items():
        values = np.atleast_2d(np.asarray(values, dtype=float))
        for i, row in enumerate(values):
            if len(values) == 1:
                label = name
            elif rows is None:
                label = f"{name} {i + 1}"
            else:
                label = f"{rows} {i + 1}" if len(traces) == 1 else f"{name} {rows} {i + 1}"
            iterations = np.flatnonzero(~np.isnan(row))
            ax.plot(iterations + 1, row[iterations], lw=1, label=label)
    if burn_in:
        ax.axvspan(0.5, burn_in + 0.5, color="0.9", zorder=0, label="burn-in")
    ax.set_xlabel("iteration")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7, loc="best")
    if note:
        fig.text(0.01, 0.01, note, fontsize=7, style="italic", va="bottom")
    fig.tight_layout(rect=(0, 0.05 if note else 0, 1, 1))
    return fig
