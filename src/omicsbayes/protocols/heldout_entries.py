"""Paper 002's held-out-entries protocol (Tables 1-2): a fraction of the observed entries hidden
from a latent variable model in every repeat, then scored by their posterior predictive log
likelihood (and, for count models, the perplexity); the samples' latent representation of the
first repeat is drawn as a figure.

The transform's steps are fitted on the whole matrix (as paper 002 standardises its data before
holding entries out); the held-out entries are then set to NaN, so the model never sees them.
"""

import logging
import time

import numpy as np

from ..evaluate import splitters
from ..evaluate.splitters import heldout_entry_splits
from ..models._capabilities import capabilities_of
from ..preprocess.transforms import dense_matrix
from ._common import check_model, make_estimator, per_split_tables, split_count

logger = logging.getLogger("omicsbayes")

KIND = "heldout_entries"
REQUIRES = frozenset({"heldout_scoring"})
SPLIT_COUNTS = {"heldout_entries": splitters.SPLIT_COUNTS["heldout_entries"]}
TRANSFORMS = True
METRICS = ("log_likelihood_per_entry", "perplexity")


def make_splits(adata, protocol, random_state, label=None):
    """The held-out (row, col) entries of every repeat, drawn from the observed entries."""
    observed = np.isfinite(dense_matrix(adata.X, "held-out entry splits"))
    params = {k: v for k, v in protocol.items() if k != "type"}
    params["n_repeats"] = split_count(protocol, SPLIT_COUNTS)
    return heldout_entry_splits(observed, random_state=random_state, **params)


def fold_tables(name, experiment, splits):
    """The scores row of every transform x model x repeat."""
    return per_split_tables(name, experiment, splits, "entries")


def latent_tables(name, experiment):
    """The first repeat's latent table of every model (first transform), for the figure."""
    transform = experiment["transforms"][0]
    return [f"results/{name}/entries/{transform}/{m}/latent0.tsv" for m in experiment["models"]]


def targets(name, experiment):
    """The latent-space figure."""
    return [f"results/{name}/figures/latent.png"]


def check(name, experiment, config):
    """Nothing beyond the shared checks."""


def primary_metric(experiment):
    """The metric the experiment is judged on and whether higher is better: the held-out log
    likelihood per entry (paper 002's Table 1)."""
    return "log_likelihood_per_entry", True


def metric_table(joined):
    """The fold rows as they are (log likelihood per entry and perplexity)."""
    keys = ["transform", "model", "split"]
    return joined[[*keys, *joined.columns[:-3]]], METRICS, []


def figure(metrics, title, experiment, specs):
    """Box plots of the held-out log likelihood per entry and the perplexity per repeat."""
    from ..pl.metrics import metric_boxplots

    return metric_boxplots(metrics, title=title, columns=METRICS)


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
    check_model(KIND, REQUIRES, spec)
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
