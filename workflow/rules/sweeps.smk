# Paper 003's Figures 2-3: a metric against a varied setting (training samples per class, number
# of components k, regularisation C), drawn from the summary tables of several experiments.
#
# Each entry of the optional config section `sweeps:` lists one experiment per point of the x axis
# (`experiments`, an experiment may repeat) and the x value of each point (`values`). Without
# `lines`, every model of those experiments is one line; with `lines`, each line label names one
# model entry per point (e.g. BM2PCA_k2, BM2PCA_k4, ... drawn as one line "BM2PCA").
#
# The checks and sweep_targets() live in common.smk; the main Snakefile adds sweep_targets() to
# rule all.


rule sweep_figure:
    input:
        lambda wc: [
            f"results/{e}/summary.tsv" for e in dict.fromkeys(SWEEPS[wc.sweep]["experiments"])
        ],
    output:
        figure=report(
            "results/sweeps/{sweep}.png",
            caption="../report/sweep_figure.rst",
            category="Sweeps",
            subcategory="{sweep}",
            labels={"sweep": "{sweep}", "figure": "metric against the varied setting"},
        ),
        table=report(
            "results/sweeps/{sweep}.tsv",
            caption="../report/sweep_table.rst",
            category="Sweeps",
            subcategory="{sweep}",
            labels={"sweep": "{sweep}", "table": "mean and sd per point and line"},
        ),
    params:
        sweep=lambda wc: SWEEPS[wc.sweep],
        by=lambda wc: list(
            dict.fromkeys(
                key
                for e in SWEEPS[wc.sweep]["experiments"]
                for key in experiment_protocol(e).summary_by
            )
        ),
    wildcard_constraints:
        sweep="[^/]+",
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/sweeps/{sweep}.log",
    script:
        "../scripts/sweep_figure.py"
