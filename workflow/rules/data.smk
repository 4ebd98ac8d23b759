# Stage 1: read each cohort through omicsbayes.io into results/{cohort}/raw.h5ad.


rule data:
    output:
        "results/{cohort}/raw.h5ad",
    params:
        spec=lambda wc: config["cohorts"][wc.cohort],
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/data/{cohort}.log",
    benchmark:
        "benchmarks/data/{cohort}.tsv"
    resources:
        mem_mb=4000,
        runtime=20,
    script:
        "../scripts/read_cohort.py"
