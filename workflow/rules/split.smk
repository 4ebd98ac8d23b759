# Stage 3: fold definitions written once per cohort and protocol, shared by every model.


rule split:
    input:
        "results/{cohort}/raw.h5ad",
    output:
        "results/{cohort}/splits/{protocol}.tsv",
    params:
        protocol=lambda wc: config["protocols"][wc.protocol],
        label=lambda wc: config["cohorts"][wc.cohort].get("label"),
        seed=config["seed"],
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/split/{cohort}/{protocol}.log",
    script:
        "../scripts/split.py"
