# Stage 4: one job per experiment x transform x model x split.


rule fit:
    input:
        data=lambda wc: f"results/{EXPERIMENTS[wc.experiment]['cohort']}/transformed/{wc.transform}.h5ad",
        splits=lambda wc: (
            f"results/{EXPERIMENTS[wc.experiment]['cohort']}/splits/"
            f"{EXPERIMENTS[wc.experiment]['protocol']}.tsv"
        ),
    output:
        "results/{experiment}/fits/{transform}/{model}/split{split}.tsv",
    wildcard_constraints:
        split=r"\d+",
    params:
        experiment=lambda wc: EXPERIMENTS[wc.experiment],
        cohort=lambda wc: config["cohorts"][EXPERIMENTS[wc.experiment]["cohort"]],
        model=lambda wc: config["models"][wc.model],
        steps=lambda wc: config["transforms"][wc.transform]["steps"],
        seed=config["seed"],
    conda:
        "../../envs/omicsbayes.yaml"
    log:
        "logs/fit/{experiment}/{transform}/{model}/split{split}.log",
    benchmark:
        "benchmarks/fit/{experiment}/{transform}/{model}/split{split}.tsv"
    threads: 1
    resources:
        mem_mb=lambda wc, input, attempt: max(2000, 20 * input.size_mb) * attempt,
        runtime=lambda wc, attempt: 60 * attempt,
    script:
        "../scripts/fit.py"
