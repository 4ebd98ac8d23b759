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


# Paper 002's Figures 1-2: each model's latent space of the first repeat, samples sorted by label.
rule latent_figure:
    input:
        cohort=lambda wc: f"results/{EXPERIMENTS[wc.experiment]['cohort']}/raw.h5ad",
        latents=lambda wc: experiment_protocol(wc.experiment).latent_tables(
            wc.experiment, EXPERIMENTS[wc.experiment]
        ),
    output:
        report(
            "results/{experiment}/figures/latent.png",
            caption="../report/latent_figure.rst",
            category="{experiment}",
            labels={"figure": "latent spaces"},
        ),
    params:
        label=lambda wc: config["cohorts"][EXPERIMENTS[wc.experiment]["cohort"]].get("label"),
        models=lambda wc: EXPERIMENTS[wc.experiment]["models"],
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/figures/{experiment}_latent.log",
    benchmark:
        "logs/benchmarks/figures/{experiment}_latent.tsv"
    script:
        "../scripts/latent_figure.py"
