"""Convergence of the whole-cohort fits (rules fit_draws, model_diagnostics; the trace figure is
drawn by fit_summary).

``fit_draws``: the MCMC draws of the saved estimator as ArviZ netCDF. ``model_diagnostics``: the
R-hat / ESS tables ``omicsbayes.tl`` stored in each model's ``fit.h5ad``, one row per model and
quantity (a VB fit has no draws: one row saying so), R-hat above 1.05 or bulk ESS below 100
flagged.
"""

import logging

import anndata as ad
import pandas as pd

from omicsbayes.io import load_fit, save_draws
from omicsbayes.jobs import run_job, write_table

KEY = "rank_factor"


def diagnostics_table(paths, models):
    rows = []
    for path, model in zip(paths, models):
        uns = ad.read_h5ad(path).uns[KEY]
        table = uns.get("diagnostics")
        if table is None or len(table) == 0:
            rows.append(pd.DataFrame({"model": [model], "inference": "vb", "variable": "none"}))
            continue
        table = table.reset_index().rename(columns={"index": "variable"})
        table.insert(0, "inference", "mcmc")
        table.insert(0, "model", model)
        rows.append(table)
    out = pd.concat(rows, ignore_index=True)
    flagged = out[out.get("flagged", pd.Series(False, index=out.index)).fillna(False).astype(bool)]
    for row in flagged.itertuples():
        logging.getLogger("omicsbayes").warning(
            "%s: %s has not converged (R-hat %.3f, bulk ESS %.3g)",
            row.model,
            row.variable,
            row.r_hat,
            row.ess_bulk,
        )
    return out


def main(smk):
    if smk.rule == "fit_draws":
        save_draws(load_fit(smk.input[0]), smk.output[0])
    else:
        write_table(diagnostics_table(smk.input, smk.params.models), smk.output[0])


run_job(snakemake, main)  # noqa: F821
