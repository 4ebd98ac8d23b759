# Stage 5: metric tables per experiment (every split) and their mean and sd.


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
    params:
        experiment=lambda wc: EXPERIMENTS[wc.experiment],
        protocol=lambda wc: config["protocols"][EXPERIMENTS[wc.experiment]["protocol"]],
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/evaluate/{experiment}.log",
    benchmark:
        "logs/benchmarks/evaluate/{experiment}.tsv"
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
    benchmark:
        "logs/benchmarks/evaluate/summary.tsv"
    script:
        "../scripts/summary.py"


rule candidates:
    input:
        lambda wc: experiment_protocol(wc.experiment).candidate_tables(
            wc.experiment, EXPERIMENTS[wc.experiment], experiment_splits(wc.experiment)
        ),
    output:
        report(
            "results/{experiment}/candidates.tsv",
            caption="../report/candidates.rst",
            category="{experiment}",
            labels={"table": "ranked candidates"},
        ),
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/evaluate/{experiment}_candidates.log",
    benchmark:
        "logs/benchmarks/evaluate/{experiment}_candidates.tsv"
    script:
        "../scripts/candidates.py"
