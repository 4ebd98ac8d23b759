# Classification experiments (omicsbayes.protocols.classification; papers 000, 001 and 003).
#
# One job per experiment x transform x model fits every split of the fold table in one process
# (each split's seed is derive_seed(seed, experiment, transform, model, split)) and writes the
# test-split predictions of all splits as one table with a `split` column: most fits take well
# under a second, next to about 2 s of imports per job process. On a cluster, `--group-components
# fit=N` still sends N of these jobs as one submission (group "fit"; ignored locally).


rule fit:
    input:
        data=lambda wc: cohort_file(wc, "transformed"),
        splits=lambda wc: cohort_file(wc, "splits"),
    output:
        predictions="results/{experiment}/fits/{transform}/{model}/predictions.tsv",
    params:
        experiment=lambda wc: EXPERIMENTS[wc.experiment],
        cohort=lambda wc: config["cohorts"][EXPERIMENTS[wc.experiment]["cohort"]],
        model=lambda wc: config["models"][wc.model],
        steps=lambda wc: config["transforms"][wc.transform]["steps"],
        seed=config["seed"],
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/fit/{experiment}/{transform}/{model}.log",
    threads: 1
    group:
        "fit"
    resources:
        mem_mb=lambda wc, input, attempt: max(2000, 20 * input.size_mb) * attempt,
        runtime=lambda wc, attempt: (20 + 10 * len(experiment_splits(wc.experiment))) * attempt,
    script:
        "../scripts/fit.py"


register_kind("classification", fits=rules.fit.output.predictions)
