# Paper 000's figures of a fitted factor model: for every model an experiment lists under
# `figures:` (RankFactorClassifier only), one fit on the whole cohort by omicsbayes.tl, saved as
# fit.h5ad (the cohort with the tl outputs), fit.obfit (the estimator), tables and, for Gibbs
# fits, draws.nc; then the figures drawn from those files (never from a live model), the trace of
# each fit and one convergence-diagnostics table per experiment.
#
# The helpers (FIGURE_FOLDER, figure_models, model_figure_targets, ...) live in common.smk; the main
# Snakefile adds model_figure_targets() to rule all.


# One fit on every sample: the experiment's first transform, its fold steps fitted on all samples;
# the bound (VB) or log-likelihood (Gibbs) trace drawn from the fit.h5ad it has just written (one
# job: the trace alone would be a process start of its own).
rule fit_summary:
    input:
        data=lambda wc: (
            f"results/{EXPERIMENTS[wc.experiment]['cohort']}/transformed/"
            f"{EXPERIMENTS[wc.experiment]['transforms'][0]}.h5ad"
        ),
    output:
        loadings=_table("loadings", "loadings (features x factors)"),
        coef=_table("coef", "coefficients (tasks x factors)"),
        scores=_table("scores", "factor scores (samples x factors)"),
        fit=f"{FIGURE_FOLDER}/fit.h5ad",
        estimator=f"{FIGURE_FOLDER}/fit.obfit",
        trace=_figure("trace", "convergence trace"),
    wildcard_constraints:
        experiment=r"[^/]+",
        model=r"[^/]+",
    params:
        experiment=lambda wc: EXPERIMENTS[wc.experiment],
        cohort=lambda wc: config["cohorts"][EXPERIMENTS[wc.experiment]["cohort"]],
        model=lambda wc: config["models"][wc.model],
        steps=lambda wc: config["transforms"][EXPERIMENTS[wc.experiment]["transforms"][0]]["steps"],
        seed=config["seed"],
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/model_figures/{experiment}/{model}/fit_summary.log",
    threads: 1
    resources:
        mem_mb=lambda wc, input, attempt: max(2000, 20 * input.size_mb) * attempt,
        runtime=lambda wc, attempt: 60 * attempt,
    script:
        "../scripts/fit_summary.py"


# Figures 1, 3 and 7, the loadings heatmap and the top genes, from the saved tables only.
rule model_figures:
    input:
        loadings=f"{FIGURE_FOLDER}/loadings.tsv",
        coef=f"{FIGURE_FOLDER}/coef.tsv",
        cohort=lambda wc: f"results/{EXPERIMENTS[wc.experiment]['cohort']}/raw.h5ad",
    output:
        rank_vs_log=_figure("rank_vs_log", "Figure 1: log vs rank of the most discriminative gene"),
        coefficients=_figure("coefficients", "Figure 3: coefficients per task"),
        heatmap=_figure("loadings_heatmap", "loadings heatmap"),
        top_genes=_figure("top_genes", "top genes of each factor", suffix="tsv"),
        network=_figure("gene_network", "Figure 7: gene network"),
        edges=_figure("gene_network_edges", "gene network edges", suffix="tsv"),
    wildcard_constraints:
        experiment=r"[^/]+",
        model=r"[^/]+",
    params:
        experiment=lambda wc: EXPERIMENTS[wc.experiment],
        cohort=lambda wc: config["cohorts"][EXPERIMENTS[wc.experiment]["cohort"]],
        n_top=20,
        network={"n_genes": 50, "threshold": 0.8, "max_edges": 100},
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/model_figures/{experiment}/{model}/model_figures.log",
    script:
        "../scripts/model_figures.py"


# Figures 4-5: each factor's loadings as an image, for cohorts whose features are pixels.
rule model_loadings_images:
    input:
        loadings=f"{FIGURE_FOLDER}/loadings.tsv",
    output:
        _figure("loadings_images", "Figures 4-5: loadings as images"),
    wildcard_constraints:
        experiment=r"[^/]+",
        model=r"[^/]+",
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/model_figures/{experiment}/{model}/loadings_images.log",
    script:
        "../scripts/model_figures.py"


# The MCMC draws of a Gibbs fit as ArviZ netCDF, from the saved estimator.
rule fit_draws:
    input:
        f"{FIGURE_FOLDER}/fit.obfit",
    output:
        f"{FIGURE_FOLDER}/draws.nc",
    wildcard_constraints:
        experiment=r"[^/]+",
        model=r"[^/]+",
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/model_figures/{experiment}/{model}/fit_draws.log",
    script:
        "../scripts/model_diagnostics.py"


# R-hat and ESS of every figure model of an experiment (R-hat > 1.05 flagged), one table.
rule model_diagnostics:
    input:
        lambda wc: [
            f"{FIGURE_FOLDER}/fit.h5ad".format(experiment=wc.experiment, model=m)
            for m in figure_models(wc.experiment)
        ],
    output:
        report(
            "results/{experiment}/diagnostics.tsv",
            caption="../report/diagnostics.rst",
            category="{experiment}",
            labels={"table": "convergence diagnostics (R-hat, ESS)"},
        ),
    params:
        models=lambda wc: figure_models(wc.experiment),
    wildcard_constraints:
        experiment=r"[^/]+",
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/model_figures/{experiment}/diagnostics.log",
    script:
        "../scripts/model_diagnostics.py"
