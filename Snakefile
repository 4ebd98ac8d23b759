# omicsbayes: cohort -> preprocess -> split -> fit -> evaluate -> figures -> report.
# Run with `make run`, or `snakemake --cores N` (add `--profile profiles/slurm` on a cluster).
include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/preprocess.smk"
include: "workflow/rules/split.smk"
include: "workflow/rules/fit.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/report.smk"
