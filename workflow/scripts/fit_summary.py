"""Fit one RankFactorClassifier on the whole cohort with ``omicsbayes.tl.rank_factor``.

Writes the cohort with the tl outputs (``fit.h5ad``: scores, loadings, decision values, the
trace and, for Gibbs fits, the R-hat / ESS table), the fitted estimator (``fit.obfit``) and its
loadings (with the features' ``gene_symbol`` when the cohort has one), coefficients and scores as
tables for paper 000's figures. The experiment's first
transform is used; its steps that learn from samples are fitted on every sample (there is no test
split here: these outputs show the fitted structure, not its metrics), and a gene-selecting step
(``top_genes``) keeps the genes it selects on all samples, which the tables and figures then
name. The experiment's kind says what the fit learns
(:meth:`~omicsbayes.protocols.ExperimentKind.figure_labels`); all tasks are learned jointly.
"""

import logging
import time

import matplotlib

matplotlib.use("Agg")
import anndata as ad  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from omicsbayes import pl, protocols, tl  # noqa: E402
from omicsbayes._seed import derive_seed  # noqa: E402
from omicsbayes.io import save_fit  # noqa: E402
from omicsbayes.jobs import atomic_write, run_job, write_table  # noqa: E402
from omicsbayes.preprocess import build_pipeline, split_pipeline  # noqa: E402
from omicsbayes.preprocess.transforms import dense_matrix  # noqa: E402

KEY = "rank_factor"


def table(name, keys, values):
    """``name`` column then ``factor_1 .. factor_K``."""
    values = np.asarray(values, dtype=float)
    frame = pd.DataFrame(values, columns=[f"factor_{k + 1}" for k in range(values.shape[1])])
    frame.insert(0, name, np.asarray(keys, dtype=object))
    return frame


def fold_transformed(adata, fold_steps):
    """``adata`` with its fold steps fitted on every sample and applied; a step that selects
    genes (``top_genes``, ``max_zero_fraction``) keeps only the selected features in ``.var``.

    Raises ValueError when a step makes columns that are not features (a kernel map).
    """
    pipeline = build_pipeline(fold_steps)
    X = pipeline.fit_transform(dense_matrix(adata.X, "the whole-cohort fit"))
    kept = pd.Index(pipeline.get_feature_names_out(adata.var_names.to_numpy(dtype=object)))
    if len(kept) != X.shape[1] or not kept.isin(adata.var_names).all():
        raise ValueError(
            f"transform steps {fold_steps} turned {adata.n_vars} features into {X.shape[1]} "
            "columns that are not features; loadings need a transform that keeps or selects "
            "features (not a kernel map)"
        )
    if len(kept) < adata.n_vars:
        logging.getLogger("omicsbayes").info(
            "%d of %d features selected by %s", len(kept), adata.n_vars, fold_steps
        )
    out = adata[:, kept].copy()
    out.X = X
    return out


def main(smk):
    wc = smk.wildcards
    adata = ad.read_h5ad(smk.input.data)
    experiment = smk.params.experiment
    kind = protocols.get(protocols.kind_of(experiment))
    try:
        label_key, tasks = kind.figure_labels(adata, experiment, smk.params.cohort)
    except protocols.ExperimentError as err:  # the console's one line names the file
        raise protocols.ExperimentError(f"{smk.input.data}: {err}") from None
    _, fold_steps = split_pipeline(smk.params.steps)
    seed = derive_seed(smk.params.seed, wc.experiment, wc.model, "figures")
    log = logging.getLogger("omicsbayes")
    log.info(
        "%s on all %d samples x %d features, labels %s, seed %d",
        wc.model,
        adata.n_obs,
        adata.n_vars,
        label_key,
        seed,
    )
    start = time.perf_counter()
    if fold_steps:
        adata = fold_transformed(adata, fold_steps)
    spec = smk.params.model
    estimator = tl.rank_factor(
        adata,
        label_key,
        variant=spec.get("variant"),
        random_state=seed,
        **(spec.get("params") or {}),
    )
    log.info("fitted in %.2f s", time.perf_counter() - start)
    uns = adata.uns[KEY]
    tasks = tasks or [str(t) for t in uns["tasks"]]
    loadings = table("feature", adata.var_names, adata.varm[f"{KEY}_loadings"])
    if "gene_symbol" in adata.var:  # a GEO platform annotation: probes keep their IDs in feature
        loadings.insert(1, "gene_symbol", adata.var["gene_symbol"].to_numpy(dtype=object))
    write_table(loadings, smk.output.loadings)
    write_table(table("task", tasks, np.atleast_2d(uns["coef"])), smk.output.coef)
    write_table(table("sample_id", adata.obs_names, adata.obsm[f"X_{KEY}"]), smk.output.scores)
    if "diagnostics" in uns:
        log.info("convergence diagnostics:\n%s", uns["diagnostics"].to_string())
    atomic_write(smk.output.fit, lambda tmp: adata.write_h5ad(tmp))
    save_fit(estimator, smk.output.estimator)
    # the trace from the file as written (as a job reading fit.h5ad would draw it)
    fig = pl.trace(ad.read_h5ad(smk.output.fit), KEY)
    atomic_write(
        smk.output.trace, lambda tmp: fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
    )


run_job(snakemake, main)  # noqa: F821
