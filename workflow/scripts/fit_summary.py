"""Fit one RankFactorClassifier on the whole cohort and save its loadings, coefficients and scores.

The experiment's first transform is used; its steps that learn from samples are fitted on every
sample (there is no test split here: these tables feed paper 000's figures, not its metrics).
"""

import logging

import anndata as ad

from omicsbayes._seed import derive_seed
from omicsbayes.experiments import fit_summary_tables, task_targets
from omicsbayes.jobs import run_job, write_table
from omicsbayes.preprocess import build_pipeline, split_pipeline


def main(smk):
    wc = smk.wildcards
    adata = ad.read_h5ad(smk.input.data)
    label = smk.params.cohort.get("label")
    if label not in adata.obs:
        raise ValueError(
            f"{smk.input.data}: label column {label!r} is missing; columns are "
            f"{list(adata.obs.columns)}"
        )
    targets = task_targets(adata.obs[label], smk.params.experiment["task"])
    _, fold_steps = split_pipeline(smk.params.steps)
    seed = derive_seed(smk.params.seed, wc.experiment, wc.model, "figures")
    log = logging.getLogger("omicsbayes")
    log.info(
        "%s on all %d samples x %d features, tasks %s, seed %d",
        wc.model,
        adata.n_obs,
        adata.n_vars,
        list(targets.columns),
        seed,
    )
    loadings, coef, scores, seconds = fit_summary_tables(
        adata.X,
        targets,
        smk.params.model,
        adata.var_names.to_numpy(),
        adata.obs_names.to_numpy(),
        fold_pipeline=build_pipeline(fold_steps) if fold_steps else None,
        random_state=seed,
    )
    log.info("fitted in %.2f s", seconds)
    write_table(loadings, smk.output.loadings)
    write_table(coef, smk.output.coef)
    write_table(scores, smk.output.scores)


run_job(snakemake, main)  # noqa: F821
