"""Convergence figures from saved traces (never from a live model)."""

import matplotlib.pyplot as plt
import numpy as np


def trace_figure(traces, ylabel="lower bound", title="", burn_in=None):
    """The monitored objective against the iteration, one line per trace.

    Parameters
    ----------
    traces : dict of str -> array_like
        One 1-D trace per name (a VB lower bound, an MCMC log likelihood per iteration); a 2-D
        array is several traces (one per row: one-vs-rest problems or chains), NaN-padded.
    ylabel : str
    title : str
    burn_in : int, optional
        Iterations discarded by a sampler, shaded.
    """
    if not traces:
        raise ValueError("traces is empty; give at least one trace")
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, values in traces.items():
        values = np.atleast_2d(np.asarray(values, dtype=float))
        for i, row in enumerate(values):
            label = name if len(values) == 1 else f"{name} {i + 1}"
            ax.plot(np.arange(1, row.size + 1), row, lw=1, label=label)
    if burn_in:
        ax.axvspan(0.5, burn_in + 0.5, color="0.9", zorder=0, label="burn-in")
    ax.set_xlabel("iteration")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig
