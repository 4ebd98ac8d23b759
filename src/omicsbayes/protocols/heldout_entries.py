"""Paper 002's held-out-entries protocol (Tables 1-2): a fraction of the observed entries hidden
from a latent variable model in every repeat, then scored by their posterior predictive log
likelihood (and, for count models, the perplexity); the samples' latent representation of the
first repeat is drawn as a figure.

The transform's steps are fitted on the whole matrix (as paper 002 standardises its data before
holding entries out); the held-out entries are then set to NaN, so the model never sees them
(:meth:`HeldoutEntries.fit_fold`, :func:`fit_heldout`).
"""

import logging
import time

import numpy as np
import pandas as pd

from ..evaluate import splitters
from ..evaluate.splitters import heldout_entry_splits
from ..models._capabilities import capabilities_of
from ..preprocess import build_pipeline, split_pipeline
from ..preprocess.transforms import dense_matrix
from ._base import ExperimentKind
from ._common import check_model, make_estimator

logger = logging.getLogger("omicsbayes")


class HeldoutEntries(ExperimentKind):
    """A ``fraction`` of the observed entries hidden from a latent variable model (set to NaN)
    in each of ``n_repeats`` repeats, then scored by their posterior predictive log likelihood
    (and perplexity, for counts) (paper 002)."""

    name = "heldout_entries"
    requires = frozenset({"heldout_scoring"})
    split_counts = {"heldout_entries": splitters.SPLIT_COUNTS["heldout_entries"]}
    transforms = True
    metrics = ("log_likelihood_per_entry", "perplexity")

    def make_splits(self, adata, protocol, random_state, label=None):
        """The held-out (row, col) entries of every repeat, drawn from the observed entries."""
        observed = np.isfinite(dense_matrix(adata.X, "held-out entry splits"))
        params = {k: v for k, v in protocol.items() if k != "type"}
        params["n_repeats"] = self.n_splits(protocol)
        return heldout_entry_splits(observed, random_state=random_state, **params)

    def latent_fits(self, name, experiment):
        """Wildcard values of the first repeat's fit of every model (first transform), whose
        latent tables the latent-space figure draws."""
        transform = experiment["transforms"][0]
        return [
            {"experiment": name, "transform": transform, "model": m, "split": 0}
            for m in experiment["models"]
        ]

    def fit_fold(self, adata, splits, params, wildcards, checkpoint=None):
        """One repeat: the transform's fold steps fitted on the whole matrix, the repeat's
        entries hidden and scored (:func:`fit_heldout`).

        ``params``: ``model``, ``steps`` and ``seed``. Returns ``{"scores": one row,
        "latent": the samples' latent representation with their ids}``.
        """
        Y = adata.X
        _, fold_steps = split_pipeline(params["steps"])
        if fold_steps:
            Y = build_pipeline(fold_steps).fit_transform(Y)
        split = wildcards["split"]
        mask = heldout_mask(Y.shape, splits[splits["split"] == int(split)])
        seed = self.seed(params["seed"], wildcards, split)
        logger.info(
            "split %s: %d of %d entries held out, seed %d", split, mask.sum(), mask.size, seed
        )
        row, latent = fit_heldout(
            Y, mask, params["model"], random_state=seed, checkpoint=checkpoint
        )
        logger.info(
            "held-out log likelihood per entry %.4f in %.2f s",
            row["log_likelihood_per_entry"],
            row["seconds"],
        )
        latent = np.zeros((Y.shape[0], 0)) if latent is None else latent
        table = pd.DataFrame(latent, columns=[f"dim{j}" for j in range(latent.shape[1])])
        table.insert(0, "sample_id", adata.obs_names.to_numpy())
        return {"scores": pd.DataFrame([row]), "latent": table}

    def primary_metric(self, experiment):
        """The metric the experiment is judged on and whether higher is better: the held-out
        log likelihood per entry (paper 002's Table 1)."""
        return "log_likelihood_per_entry", True


def takes_counts(estimator):
    """Whether a model's held-out entries are counts: the instance has the ``counts``
    capability (its scikit-learn tags; a Gaussian or Bernoulli RFLVM has not)."""
    return "counts" in capabilities_of(estimator)


def _perplexity(estimator, Y, mask):
    """Held-out perplexity of a count model; NaN, with the reason logged, for any other."""
    if takes_counts(estimator):
        return float(estimator.perplexity(Y, mask))
    logger.info(
        "perplexity skipped: %s is not a model of counts%s",
        type(estimator).__name__,
        f" (likelihood {estimator.likelihood!r})" if hasattr(estimator, "likelihood") else "",
    )
    return np.nan


def heldout_mask(shape, split_table):
    """Boolean mask (True = held out) of one split from a held-out-entries table."""
    mask = np.zeros(shape, dtype=bool)
    test = split_table[split_table["role"] == "test"]
    mask[test["row"].to_numpy(), test["col"].to_numpy()] = True
    return mask


def fit_heldout(Y, mask, spec, random_state=None, checkpoint=None):
    """Fit a latent variable model with held-out entries hidden and score those entries.

    Paper 002's protocol (Tables 1-2): the held-out entries are set to NaN before fitting, so
    the sampler never sees them, then scored by the posterior predictive log likelihood averaged
    over retained draws; count models also get the perplexity (:func:`takes_counts`).

    Parameters
    ----------
    Y : ndarray of shape (n_samples, n_features)
    mask : ndarray of bool, same shape, True where an entry is held out
    spec : dict
        Model entry of the config (a class declaring ``heldout_scoring``).
    checkpoint : str, optional
        Where the sampler saves its chain state every ``checkpoint_every`` iterations; a rerun
        after an interruption resumes from it and gives the same draws.

    Returns
    -------
    row : dict
        n_heldout, log_likelihood (sum over held-out entries), log_likelihood_per_entry,
        perplexity (NaN for a model of real-valued or binary data) and seconds.
    latent : ndarray or None
        The fitted latent representation of the samples (``latent_`` or ``scores_``).
    """
    check_model(HeldoutEntries.name, HeldoutEntries.requires, spec)
    start = time.perf_counter()
    Y = dense_matrix(Y, spec["class"])
    observed = np.where(mask, np.nan, Y)
    estimator = make_estimator(spec, random_state)
    if checkpoint is not None:
        estimator.set_params(checkpoint=str(checkpoint))
    estimator.fit(observed)
    score = estimator.log_likelihood
    total = float(score(Y, mask))
    n_heldout = int(mask.sum())
    row = {
        "n_heldout": n_heldout,
        "log_likelihood": total,
        "log_likelihood_per_entry": total / n_heldout,
        "perplexity": _perplexity(estimator, Y, mask),
        "seconds": time.perf_counter() - start,
    }
    latent = getattr(estimator, "latent_", getattr(estimator, "scores_", None))
    return row, None if latent is None else np.asarray(latent, dtype=float)
