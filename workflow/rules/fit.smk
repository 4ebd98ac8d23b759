# Stage 4: one job per experiment x transform x model x split. On a cluster the fits are tiny next
# to a submission: `--group-components fit=N` sends N of them as one job (group "fit"; ignored
# locally, where Snakemake runs each job as its own process anyway).


rule fit:
    input:
        data=lambda wc: cohort_file(wc, "transformed"),
        splits=lambda wc: cohort_file(wc, "splits"),
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
        "../envs/omicsbayes.yaml"
    log:
        "logs/fit/{experiment}/{transform}/{model}/split{split}.log",
    benchmark:
        "logs/benchmarks/fit/{experiment}/{transform}/{model}/split{split}.tsv"
    threads: 1
    group:
        "fit"
    resources:
        mem_mb=lambda wc, input, attempt: max(2000, 20 * input.size_mb) * attempt,
        runtime=lambda wc, attempt: 60 * attempt,
    script:
        "../scripts/fit.py"


# Paper 002's protocol: held-out entries hidden from the sampler, then scored.
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
        model=lambda wc: config["models"][wc.model],
        steps=lambda wc: config["transforms"][wc.transform]["steps"],
        seed=config["seed"],
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/fit_entries/{experiment}/{transform}/{model}/split{split}.log",
    benchmark:
        "logs/benchmarks/fit_entries/{experiment}/{transform}/{model}/split{split}.tsv"
    threads: 1
    group:
        "fit"
    resources:
        mem_mb=lambda wc, input, attempt: max(2000, 40 * input.size_mb) * attempt,
        runtime=lambda wc, attempt: 120 * attempt,
    script:
        "../scripts/fit_entries.py"


# Paper 004's protocol: one fold of the disease-gene cross-validation per job.
rule fit_ranking:
    input:
        data=lambda wc: f"results/{EXPERIMENTS[wc.experiment]['cohort']}/raw.h5ad",
        splits=lambda wc: cohort_file(wc, "splits"),
    output:
        curves="results/{experiment}/ranking/{model}/split{split}.tsv",
        candidates="results/{experiment}/ranking/{model}/candidates{split}.tsv",
    wildcard_constraints:
        split=r"\d+",
    params:
        model=lambda wc: config["models"][wc.model],
        protocol=lambda wc: config["protocols"][EXPERIMENTS[wc.experiment]["protocol"]],
        seed=config["seed"],
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/fit_ranking/{experiment}/{model}/split{split}.log",
    benchmark:
        "logs/benchmarks/fit_ranking/{experiment}/{model}/split{split}.tsv"
    threads: 1
    group:
        "fit"
    resources:
        mem_mb=lambda wc, attempt: 4000 * attempt,
        runtime=lambda wc, attempt: 60 * attempt,
    script:
        "../scripts/fit_ranking.py"


# Paper 004's rating protocol (section 5.2): one fold of known- or new-user cross-validation per job.
rule fit_rating:
    input:
        data=lambda wc: f"results/{EXPERIMENTS[wc.experiment]['cohort']}/raw.h5ad",
        splits=lambda wc: cohort_file(wc, "splits"),
    output:
        "results/{experiment}/rating/{model}/split{split}.tsv",
    wildcard_constraints:
        split=r"\d+",
    params:
        model=lambda wc: config["models"][wc.model],
        protocol=lambda wc: config["protocols"][EXPERIMENTS[wc.experiment]["protocol"]],
        seed=config["seed"],
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/fit_rating/{experiment}/{model}/split{split}.log",
    benchmark:
        "logs/benchmarks/fit_rating/{experiment}/{model}/split{split}.tsv"
    threads: 1
    group:
        "fit"
    resources:
        mem_mb=lambda wc, attempt: 4000 * attempt,
        runtime=lambda wc, attempt: 60 * attempt,
    script:
        "../scripts/fit_rating.py"
