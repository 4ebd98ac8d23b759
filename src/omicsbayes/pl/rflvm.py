"""Latent-space heatmaps with the samples sorted by their label (paper 002, Figures 1-2)."""

import matplotlib.pyplot as plt
import numpy as np


def latent_heatmaps(latents, labels, title="", label_names=None):
    """One heatmap per model: samples (rows, sorted by label) x latent dimensions.

    Parameters
    ----------
    latents : dict of str -> array_like (n_samples, n_dims)
        Posterior-mean latent matrices (e.g. ``RFLVM.latent_``), keyed by model name, all for
        the same samples in the same order.
    labels : array_like (n_samples,)
        Sample labels; used only to sort the rows and mark the group boundaries (not in fitting).
    title : str
        Figure title.
    label_names : dict, optional
        Display name for each label value.

    Returns
    -------
    matplotlib.figure.Figure
    """
    labels = np.asarray(labels)
    if not latents:
        raise ValueError("latents is empty; give at least one model's latent matrix")
    order = np.argsort(labels, kind="stable")
    sorted_labels = labels[order]
    values, starts = np.unique(sorted_labels, return_index=True)
    fig, axes = plt.subplots(
        1, len(latents), figsize=(2.2 + 1.6 * len(latents), 4.5), squeeze=False
    )
    for ax, (name, Z) in zip(axes[0], latents.items()):
        Z = np.asarray(Z, float)
        if Z.shape[0] != labels.size:
            raise ValueError(
                f"latent matrix of {name!r} has {Z.shape[0]} rows but labels has {labels.size}"
            )
        Z = Z[order]
        lim = max(np.abs(Z).max(), 1e-12)
        im = ax.imshow(Z, aspect="auto", cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation="none")
        for s in starts[1:]:
            ax.axhline(s - 0.5, color="k", lw=0.8)
        ax.set_xticks(range(Z.shape[1]), [str(d + 1) for d in range(Z.shape[1])])
        ax.set_xlabel("latent dimension")
        ax.set_title(name, fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.08)
    names = label_names or {}
    axes[0, 0].set_yticks(
        starts,
        [f"{names.get(v, v)} (n={n})" for v, n in zip(values, np.diff([*starts, labels.size]))],
    )
    fig.suptitle(title)
    fig.tight_layout()
    return fig
