# Stage 6: figures, each a function of saved tables (never of a live model).


rule metrics_figure:
    input:
        "results/{experiment}/metrics.tsv",
    output:
        report(
            "results/{experiment}/figures/metrics.png",
            caption="../report/metrics_figure.rst",
            category="{experiment}",
            labels={"figure": "metrics by model"},
        ),
    params:
        experiment=lambda wc: EXPERIMENTS[wc.experiment],
        models=lambda wc: [config["models"][m] for m in EXPERIMENTS[wc.experiment]["models"]],
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/figures/{experiment}.log",
    benchmark:
        "logs/benchmarks/figures/{experiment}.tsv"
    script:
        "../scripts/metrics_figure.py"
