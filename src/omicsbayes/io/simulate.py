"""Negative binomial RNA-seq counts with a planted class structure."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ._common import make_anndata, whole_number


def _class_counts(n_samples, n_classes):
    """``(n_samples, n_classes)`` as ints, checked: whole numbers >= 1, no more classes than
    samples (ValueError naming the parameter)."""
    n_samples = whole_number(n_samples, "n_samples", 1)
    n_classes = whole_number(n_classes, "n_classes", 1)
    if n_classes > n_samples:
        raise ValueError(f"n_classes={n_classes} exceeds n_samples={n_samples}")
    return n_samples, n_classes


def simulate_counts(
    n_samples=100,
    n_genes=500,
    n_classes=2,
    n_informative=50,
    fold_change=2.0,
    dispersion=0.2,
    mean_log=3.0,
    library_size_sd=0.3,
    random_state=0,
):
    """Simulate a count cohort (samples x genes) with class-specific up-regulated genes.

    Model, for sample i of class c_i and gene g:

    - baseline log mean ``b_g ~ Normal(mean_log, 1)``;
    - library size factor ``s_i = exp(e_i)``, ``e_i ~ Normal(0, library_size_sd)``;
    - informative gene g is assigned class ``k_g`` (round robin over classes) and
      ``mu_ig = s_i exp(b_g) * fold_change`` when ``c_i == k_g``, else ``s_i exp(b_g)``;
      other genes have ``mu_ig = s_i exp(b_g)``;
    - ``y_ig ~ NegativeBinomial(mean mu_ig, variance mu_ig + dispersion mu_ig^2)``
      (Poisson when ``dispersion == 0``).

    Classes are as balanced as possible (sizes differ by at most one), in shuffled order.

    Parameters
    ----------
    n_samples, n_genes : int
        Matrix size.
    n_classes : int
        Number of classes (labels "class_0", "class_1", ...), at least 1.
    n_informative : int
        Number of up-regulated genes, between 0 and ``n_genes``.
    fold_change : float
        Multiplicative effect on the mean of an informative gene in its class, > 0.
    dispersion : float
        Negative binomial dispersion phi >= 0.
    mean_log : float
        Mean of the genes' baseline log means.
    library_size_sd : float
        Standard deviation of the log library size factors, >= 0.
    random_state : int or None
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    anndata.AnnData
        ``layers["counts"]`` int64 and X float64; ``.obs`` "label" (categorical) and
        "size_factor"; ``.var`` "informative" (bool), "up_in" (class or ""), "base_mean".
    """
    n_samples, n_classes = _class_counts(n_samples, n_classes)
    n_genes = whole_number(n_genes, "n_genes", 1)
    n_informative = whole_number(n_informative, "n_informative", 0)
    if n_informative > n_genes:
        raise ValueError(f"n_informative={n_informative} exceeds n_genes={n_genes}")
    if not fold_change > 0:
        raise ValueError(f"fold_change={fold_change!r}; expected > 0")
    if not dispersion >= 0:
        raise ValueError(f"dispersion={dispersion!r}; expected >= 0")
    if not library_size_sd >= 0:
        raise ValueError(f"library_size_sd={library_size_sd!r}; expected >= 0")
    rng = np.random.default_rng(random_state)
    labels = rng.permutation(np.arange(n_samples) % n_classes)
    base_log = rng.normal(mean_log, 1.0, size=n_genes)
    size = np.exp(rng.normal(0.0, library_size_sd, size=n_samples))
    informative = np.zeros(n_genes, dtype=bool)
    informative[rng.choice(n_genes, size=n_informative, replace=False)] = True
    up_in = np.full(n_genes, -1)
    up_in[informative] = np.arange(n_informative) % n_classes
    effect = np.where(labels[:, None] == up_in[None, :], fold_change, 1.0)
    mu = size[:, None] * np.exp(base_log)[None, :] * effect
    if dispersion == 0:
        counts = rng.poisson(mu)
    else:
        r = 1.0 / dispersion
        counts = rng.poisson(rng.gamma(shape=r, scale=mu / r))
    names = [f"class_{k}" for k in range(n_classes)]
    width = len(str(n_samples - 1))
    obs = pd.DataFrame(
        {
            "label": pd.Categorical([names[k] for k in labels], categories=names),
            "size_factor": size,
        }
    )
    var = pd.DataFrame(
        {
            "informative": informative,
            "up_in": [names[k] if k >= 0 else "" for k in up_in],
            "base_mean": np.exp(base_log),
        }
    )
    samples = [f"sample_{i:0{width}d}" for i in range(n_samples)]
    genes = [f"gene_{g:0{len(str(n_genes - 1))}d}" for g in range(n_genes)]
    return make_anndata(counts, samples, genes, "counts", "simulate_counts", obs=obs, var=var)


def simulate_obs(n_samples=100, n_classes=2):
    """The ``label`` column :func:`simulate_counts` draws, in sample order up to its shuffle
    (class ``k`` holds the samples ``i`` with ``i % n_classes == k``), without simulating.

    Returns
    -------
    pandas.DataFrame
        ``label`` (categorical ``class_0``, ``class_1``, ...).
    """
    n_samples, n_classes = _class_counts(n_samples, n_classes)
    names = [f"class_{k}" for k in range(n_classes)]
    labels = [names[k] for k in np.arange(n_samples) % n_classes]
    return pd.DataFrame({"label": pd.Categorical(labels, categories=names)})
