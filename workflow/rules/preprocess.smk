# Stage 2: sample-wise transforms of each cohort (steps that learn from samples run per split).


rule preprocess:
    input:
        "results/{cohort}/raw.h5ad",
    output:
        "results/{cohort}/transformed/{transform}.h5ad",
    params:
        steps=lambda wc: config["transforms"][wc.transform]["steps"],
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/preprocess/{cohort}/{transform}.log",
    resources:
        mem_mb=lambda wc, input, attempt: max(2000, 8 * input.size_mb) * attempt,
        runtime=20,
    script:
        "../scripts/preprocess.py"
