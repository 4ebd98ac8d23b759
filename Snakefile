# omicsbayes: cohort -> preprocess -> split -> fit -> evaluate -> figures -> report.
# Run with `make run`, or `snakemake --cores N` (add `--profile profiles/slurm` on a cluster).
# The rules live in workflow/rules/, one file per stage; the default target stays here because
# Snakemake only takes a default target from the main Snakefile.
include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/preprocess.smk"
include: "workflow/rules/split.smk"
include: "workflow/rules/fit.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/model_figures.smk"
include: "workflow/rules/sweeps.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        expand("results/{experiment}/summary.tsv", experiment=EXPERIMENTS),
        expand("results/{experiment}/figures/metrics.png", experiment=EXPERIMENTS),
        "results/summary.tsv",
        model_figure_targets(),
        sweep_targets(),
        kind_targets(),
