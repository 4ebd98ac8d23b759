"""Why paper 002's held-out predictive is narrow on Wisconsin; what a log transform does.

The workflow's ``breast_cancer_heldout`` protocol (its five masks, its chain seeds, the config's
model entries) run per transform, with per-entry diagnostics of each Gaussian model's posterior
predictive (a mixture over the retained draws of N(mu_s, v_s)):

- ``loglik``: held-out log predictive per entry on the model's own scale (the workflow's metric);
- ``loglik_zscale``: the same density moved to the scale of the z-scored untransformed matrix by
  the change of variables (``+ log |du/dy|``), so that transforms compare on one scale;
- ``loglik_tail`` / ``loglik_bulk``: ``loglik_zscale`` of the held-out entries whose untransformed
  z-score exceeds 4 in absolute value, and of the rest (the same entries for every transform);
- ``train_mse``, ``heldout_mse`` (model scale), ``noise_var`` (mean over draws and features),
  ``pred_var`` (noise plus the spread of the mean over draws, averaged over held-out entries),
  ``beyond_3sd`` (fraction of held-out entries more than 3 predictive sds off; 0.0027 for a
  calibrated Gaussian predictive), ``cpu`` (process seconds of the fit).

Run ``OMP_NUM_THREADS=1 python -m benchmarks.rflvm_heldout --cohort wisconsin`` (or ``gse7390``:
GSE7390's shipped log2 intensities exponentiated back, the same transforms). Rows are appended to
``--out`` as each fit ends.
"""

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy.special import logsumexp

from omicsbayes._seed import derive_seed
from omicsbayes.io import load_demo
from omicsbayes.models.rflvm._updates import rff
from omicsbayes.preprocess.transforms import build_pipeline
from omicsbayes.protocols._common import make_estimator
from omicsbayes.protocols.heldout_entries import HeldoutEntries, heldout_mask

CONFIG = Path(__file__).resolve().parents[1] / "config" / "config.yaml"
EXPERIMENT = "breast_cancer_heldout"
# cohort -> (demo name, config cohort name used for the split seed, experiment name for the
# chain seeds, raw matrix from the demo matrix)
COHORTS = {
    "wisconsin": ("breast_cancer_wisconsin", "breast_cancer", EXPERIMENT, lambda X: X),
    "gse7390": ("gse7390", "gse7390", "gse7390_heldout", lambda X: 2.0**X),
}


def _draw_moments(est, rows, cols):
    """Per-draw mean and variance of the Gaussian predictive at entries (rows, cols)."""
    if hasattr(est, "draws_"):  # RFLVM
        pairs = [
            ((rff(d["XZ"], d["W"]) @ d["beta"] + est.offset_)[rows, cols], d["theta"][cols])
            for d in est.draws_
        ]
    else:  # IBPFactorModel
        draws = est._draws
        pairs = [
            (np.einsum("ik,ki->i", X[rows], W[:, cols]), 1.0 / lam[cols])
            for X, W, lam in zip(draws["latent"], draws["W"], draws["lam"])
        ]
    return np.stack([m for m, _ in pairs]), np.stack([v for _, v in pairs])


def _log_jacobian(pipe, raw, rows, cols):
    """log |du/dy| at the entries: u = (g(x) - m) / s the transformed value (g the log step, if
    any), y = (x - mean) / sd the z-scored raw value x, so du/dy = g'(x) sd / s."""
    steps = dict(pipe.steps)
    g_prime = np.ones(len(rows))
    if "log" in steps:
        log = steps["log"]
        g_prime = 1.0 / ((raw[rows, cols] + log.pseudocount) * np.log(log.base))
    return np.log(g_prime * raw.std(axis=0)[cols] / steps["zscore"].scale_[cols])


def run_one(raw, pipe_steps, mask, spec, seed):
    """Fit one model with the mask's entries hidden; the diagnostics of the module docstring."""
    pipe = build_pipeline(pipe_steps)
    Y = pipe.fit_transform(raw)
    est = make_estimator(spec, seed)
    t0 = time.process_time()
    est.fit(np.where(mask, np.nan, Y))
    cpu = time.process_time() - t0
    rows, cols = np.nonzero(mask)
    y = Y[rows, cols]
    mu, var = _draw_moments(est, rows, cols)
    per_draw = -0.5 * np.log(2 * np.pi * var) - 0.5 * (y - mu) ** 2 / var
    entry = logsumexp(per_draw, axis=0) - np.log(len(mu))
    zscale = entry + _log_jacobian(pipe, raw, rows, cols)
    z_raw = ((raw - raw.mean(0)) / raw.std(0))[rows, cols]
    tail = np.abs(z_raw) > 4
    mean = mu.mean(axis=0)
    pred_var = var.mean(axis=0) + mu.var(axis=0)
    tr_rows, tr_cols = np.nonzero(~mask)
    tr_mu, _ = _draw_moments(est, tr_rows, tr_cols)
    return {
        "loglik": entry.mean(),
        "loglik_zscale": zscale.mean(),
        "loglik_tail": zscale[tail].mean() if tail.any() else np.nan,
        "loglik_bulk": zscale[~tail].mean(),
        "n_tail": int(tail.sum()),
        "train_mse": np.mean((Y[tr_rows, tr_cols] - tr_mu.mean(axis=0)) ** 2),
        "heldout_mse": np.mean((y - mean) ** 2),
        "noise_var": var.mean(),
        "pred_var": pred_var.mean(),
        "beyond_3sd": np.mean(np.abs(y - mean) > 3 * np.sqrt(pred_var)),
        "cpu": cpu,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rflvm_heldout", description=__doc__)
    parser.add_argument("--cohort", choices=sorted(COHORTS), default="wisconsin")
    parser.add_argument("--transforms", nargs="+", default=["zscore", "log_zscore_positive"])
    parser.add_argument("--models", nargs="+", default=["IBP-RFLVM", "IBP-linear", "RFLVM"])
    parser.add_argument("--trials", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--n-iter", type=int, help="override every model's n_iter (smoke runs)")
    parser.add_argument("--out", default="results/rflvm_heldout.tsv")
    args = parser.parse_args(argv)

    config = yaml.safe_load(CONFIG.read_text())
    demo, cohort, experiment, to_raw = COHORTS[args.cohort]
    adata = load_demo(demo)
    raw = to_raw(np.asarray(adata.X, dtype=float))
    protocol = config["protocols"][config["experiments"][EXPERIMENT]["protocol"]]
    splits = HeldoutEntries().make_splits(
        adata, protocol, derive_seed(config["seed"], cohort, "heldout20")
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for model in args.models:
        for transform in args.transforms:
            for trial in args.trials:
                mask = heldout_mask(raw.shape, splits[splits["split"] == trial])
                seed = derive_seed(config["seed"], experiment, transform, model, trial)
                spec = config["models"][model]
                if args.n_iter:
                    n = args.n_iter
                    spec = {**spec, "params": {**spec["params"], "n_iter": n, "burn_in": n // 2}}
                row = run_one(
                    raw,
                    config["transforms"][transform]["steps"],
                    mask,
                    spec,
                    seed,
                )
                row = {
                    "cohort": args.cohort,
                    "transform": transform,
                    "model": model,
                    "trial": trial,
                    **row,
                }
                print(row, flush=True)
                pd.DataFrame([row]).to_csv(
                    out,
                    sep="\t",
                    index=False,
                    float_format="%.5g",
                    mode="a",
                    header=not out.exists(),
                )


if __name__ == "__main__":
    main()
