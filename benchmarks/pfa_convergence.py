"""Is claim ``a_pfa``'s rival under-fitted? PFA-L-BSVM with a longer Gibbs chain.

Claim run ``a_pfa_long`` of ``python -m benchmarks.fidelity`` (``--only a_pfa_long``): on run
``a_rank``'s splits and fit seeds (the splits of run ``a_pfa``), PFA-L-BSVM at its default
chain (``n_iter`` 200) and with :data:`LONG_SWEEPS` sweeps (half of each chain burn-in, as by
default). The default chain's AUROC repeats run ``a_pfa``'s rows (the same seeds); the long
chain's AUROC against it says whether the ``a_pfa`` verdicts are the rival's under-fitting. The
rows carry claim ``a_rank``, so the long chain also pairs with R-L-BSVM and G-L-BSVM.

The long chain is also run on the intensities divided by each of :data:`COUNT_DIVISORS` before
PFA-L-BSVM rounds them (paper 000 rounds the raw intensities, which on GSE7390 reach 2 x 10^4):
each count's data augmentation (the multinomial split among factors, then phi and theta given the
split) moves the chain by about its conditional's spread, which shrinks as the counts grow, so a
chain that converges on smaller counts and not on the paper's says the size of the counts, not
the model, keeps the rival's chain from converging.

Metrics (per split): ``auroc`` (held-out), and the PFA chain's worst identifiable diagnostics
(:func:`omicsbayes.tl.mcmc_diagnostics`: the log likelihood and each training sample's expected
total count): ``r_hat`` (largest split R-hat) and ``ess_bulk`` (smallest bulk ESS).
"""

import numpy as np
import pandas as pd

from omicsbayes._seed import derive_seed
from omicsbayes.evaluate.metrics import auroc
from omicsbayes.evaluate.splitters import classification_splits
from omicsbayes.inference.convergence import mcmc_diagnostics
from omicsbayes.protocols._common import make_estimator
from omicsbayes.protocols.classification import task_targets

SPLIT_COLUMNS = ["claim", "protocol", "cohort", "model", "metric", "split", "value"]
RUN = "a_rank"  # the run whose splits and fit seeds the chains use
COHORTS = ("GSE7390 grade (poor vs rest)",)
LONG_SWEEPS = 1000  # five times PFAClassifier's default n_iter
COUNT_DIVISORS = (16, 256)  # the intensities' scale for the long chain: 2**4 and 2**8 smaller
_LONG = {"class": "PFAClassifier", "params": {"n_iter": LONG_SWEEPS}}
MODELS = {
    "PFA-L-BSVM 200 sweeps/intensity": {"class": "PFAClassifier"},
    f"PFA-L-BSVM {LONG_SWEEPS} sweeps/intensity": _LONG,
    **{f"PFA-L-BSVM {LONG_SWEEPS} sweeps/intensity/{d}": _LONG for d in COUNT_DIVISORS},
}


def count_divisor(name):
    """What model ``name`` divides the intensities by before rounding (1: the paper's counts)."""
    scale = name.rsplit("/", 1)[-1]
    return int(scale) if scale.isdigit() else 1


def chain_diagnostics(idata):
    """The largest R-hat and the smallest bulk ESS over the identifiable quantities of a fit."""
    table = mcmc_diagnostics(idata)
    table = table[table["identifiable"].astype(bool)]
    return float(table["r_hat"].astype(float).max()), float(table["ess_bulk"].astype(float).min())


def long_chain_runs(tasks, models, settings, seed):
    """Per-split rows (:data:`SPLIT_COLUMNS`, claim :data:`RUN`, ``default`` protocol) of
    ``models`` on the intensities of ``tasks`` (``{cohort: (logs, inverse, labels, positive)}``,
    as ``benchmarks.fidelity._paper000_tasks`` returns them), on run :data:`RUN`'s
    ``settings["n_splits"]`` splits with its fit seeds."""
    rows = []
    for cohort, (logs, inverse, labels, positive) in tasks.items():
        labels = pd.Series(np.asarray(labels, dtype=object)).reset_index(drop=True)
        y = task_targets(labels, {"kind": "binary", "positive": positive}).to_numpy(float)[:, 0]
        X = inverse(logs)
        splits = classification_splits(
            labels.to_numpy(),
            "repeated_subsampling",
            random_state=derive_seed(seed, RUN, cohort),
            n_splits=settings["n_splits"],
        )
        for name, spec in models.items():
            scaled = X / count_divisor(name)
            for split, table in splits.groupby("split"):
                train = table.loc[table["role"] == "train", "sample"].to_numpy()
                test = table.loc[table["role"] == "test", "sample"].to_numpy()
                fit = make_estimator(spec, derive_seed(seed, RUN, cohort, split))
                fit.fit(scaled[train], y[train].astype(int))
                r_hat, ess_bulk = chain_diagnostics(fit.idata_)
                values = {
                    "auroc": auroc(y[test], fit.decision_function(scaled[test])),
                    "r_hat": r_hat,
                    "ess_bulk": ess_bulk,
                }
                print(f"  a_pfa_long {cohort} {name} split {split}: {values}", flush=True)
                rows += [
                    (RUN, "default", cohort, name, metric, split, value)
                    for metric, value in values.items()
                ]
    return pd.DataFrame(rows, columns=SPLIT_COLUMNS)
