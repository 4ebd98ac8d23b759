# Rating experiments (omicsbayes.protocols.rating; paper 004, section 5.2).


# Paper 004's rating protocol (section 5.2): one fold of known- or new-user cross-validation per job.
rule fit_rating:
    input:
        data=lambda wc: cohort_file(wc, "raw"),
        splits=lambda wc: cohort_file(wc, "splits"),
    output:
        metrics="results/{experiment}/rating/{model}/split{split}.tsv",
    wildcard_constraints:
        split=r"\d+",
    params:
        experiment=lambda wc: EXPERIMENTS[wc.experiment],
        model=lambda wc: config["models"][wc.model],
        protocol=lambda wc: config["protocols"][EXPERIMENTS[wc.experiment]["protocol"]],
        seed=config["seed"],
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/fit_rating/{experiment}/{model}/split{split}.log",
    threads: 1
    group:
        "fit"
    resources:
        mem_mb=lambda wc, attempt: 4000 * attempt,
        runtime=lambda wc, attempt: 60 * attempt,
    script:
        "../scripts/fit.py"


register_kind("rating", fits=rules.fit_rating.output.metrics)
