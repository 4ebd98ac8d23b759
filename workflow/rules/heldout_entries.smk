# Held-out-entries experiments (omicsbayes.protocols.heldout_entries; paper 002).


# Held-out entries hidden from the sampler, then scored: one job per split (a fit takes minutes).
rule fit_entries:
    input:
        data=lambda wc: cohort_file(wc, "transformed"),
        splits=lambda wc: cohort_file(wc, "splits"),
    output:
        scores="results/{experiment}/entries/{transform}/{model}/split{split}.tsv",
        latent="results/{experiment}/entries/{transform}/{model}/latent{split}.tsv",
    wildcard_constraints:
        split=r"\d+",
    params:
        experiment=lambda wc: EXPERIMENTS[wc.experiment],
        model=lambda wc: config["models"][wc.model],
        steps=lambda wc: config["transforms"][wc.transform]["steps"],
        seed=config["seed"],
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/fit_entries/{experiment}/{transform}/{model}/split{split}.log",
    threads: 1
    group:
        "fit"
    resources:
        mem_mb=lambda wc, input, attempt: max(2000, 40 * input.size_mb) * attempt,
        runtime=lambda wc, attempt: 120 * attempt,
    script:
        "../scripts/fit.py"


# Paper 002's Figures 1-2: each model's latent space of the first repeat, samples sorted by label.
rule latent_figure:
    input:
        cohort=lambda wc: cohort_file(wc, "raw"),
        latents=lambda wc: fill(
            rules.fit_entries.output.latent,
            experiment_protocol(wc.experiment).latent_fits(wc.experiment, EXPERIMENTS[wc.experiment]),
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
        "logs/latent_figure/{experiment}.log",
    script:
        "../scripts/latent_figure.py"


register_kind(
    "heldout_entries", fits=rules.fit_entries.output.scores, targets=[rules.latent_figure.output[0]]
)
