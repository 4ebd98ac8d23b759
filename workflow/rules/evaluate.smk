# Stage 5: metric tables per experiment (every split), their mean and sd, and the metrics figure
# drawn from the metric table (one job: the figure alone would be a process start of its own).


rule evaluate:
    input:
        fit_outputs,
    output:
        metrics=report(
            "results/{experiment}/metrics.tsv",
            caption="../report/metrics.rst",
            category="{experiment}",
            labels={"table": "metrics per split"},
        ),
        summary=report(
            "results/{experiment}/summary.tsv",
            caption="../report/summary.rst",
            category="{experiment}",
            labels={"table": "summary"},
        ),
        timings=report(
            "results/{experiment}/timings.tsv",
            caption="../report/timings.rst",
            category="{experiment}",
            labels={"table": "seconds per fit"},
        ),
        figure=report(
            "results/{experiment}/figures/metrics.png",
            caption="../report/metrics_figure.rst",
            category="{experiment}",
            labels={"figure": "metrics by model"},
        ),
    params:
        experiment=lambda wc: EXPERIMENTS[wc.experiment],
        folds=lambda wc: fold_wildcards(wc.experiment),
        models=lambda wc: [config["models"][m] for m in EXPERIMENTS[wc.experiment]["models"]],
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/evaluate/{experiment}.log",
    script:
        "../scripts/evaluate.py"


rule summary:
    input:
        summaries=expand("results/{experiment}/summary.tsv", experiment=EXPERIMENTS),
        metrics=expand("results/{experiment}/metrics.tsv", experiment=EXPERIMENTS),
    output:
        summary=report(
            "results/summary.tsv",
            caption="../report/all_summary.rst",
            category="Summary",
            labels={"table": "all experiments"},
        ),
        winners=report(
            "results/winners.tsv",
            caption="../report/winners.rst",
            category="Summary",
            labels={"table": "winner per experiment and paper"},
        ),
    params:
        experiments=list(EXPERIMENTS),
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/evaluate/summary.log",
    script:
        "../scripts/summary.py"
