# Disease-gene experiments (omicsbayes.protocols.disease_gene; paper 004, section 5.1).


# Paper 004's protocol: one fold of the disease-gene cross-validation per job.
rule fit_ranking:
    input:
        data=lambda wc: cohort_file(wc, "raw"),
        splits=lambda wc: cohort_file(wc, "splits"),
    output:
        curves="results/{experiment}/ranking/{model}/split{split}.tsv",
        candidates="results/{experiment}/ranking/{model}/candidates{split}.tsv",
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
        "logs/fit_ranking/{experiment}/{model}/split{split}.log",
    threads: 1
    group:
        "fit"
    resources:
        mem_mb=lambda wc, attempt: 4000 * attempt,
        runtime=lambda wc, attempt: 60 * attempt,
    script:
        "../scripts/fit.py"


# The candidates of every fold ranked into one table.
rule candidates:
    input:
        lambda wc: fill(rules.fit_ranking.output.candidates, fold_wildcards(wc.experiment)),
    output:
        report(
            "results/{experiment}/candidates.tsv",
            caption="../report/candidates.rst",
            category="{experiment}",
            labels={"table": "ranked candidates"},
        ),
    params:
        folds=lambda wc: fold_wildcards(wc.experiment),
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/candidates/{experiment}.log",
    script:
        "../scripts/candidates.py"


register_kind(
    "disease_gene", fits=rules.fit_ranking.output.curves, targets=[rules.candidates.output[0]]
)
