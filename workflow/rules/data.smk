# Stage 1: read each cohort through omicsbayes.io into results/{cohort}/raw.h5ad (its files, the
# cohort entry's path keys, are the inputs: checked in common.smk, a change reruns the job).


rule data:
    input:
        lambda wc: COHORT_PATHS.get(wc.cohort, []),
    output:
        "results/{cohort}/raw.h5ad",
    params:
        spec=lambda wc: config["cohorts"][wc.cohort],
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/data/{cohort}.log",
    resources:
        mem_mb=4000,
        runtime=20,
    script:
        "../scripts/read_cohort.py"
