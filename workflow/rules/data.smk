# Stage 1: read each cohort through omicsbayes.io into results/{cohort}/raw.h5ad (its files, the
# cohort entry's path keys, are the inputs: checked in common.smk, a change reruns the job).
#
# A file key may be a URL (http, https, ftp; s3, gs with their Snakemake storage plugin
# installed). Rule fetch declares every URL of the config as a storage input: Snakemake's
# storage plugin downloads it into the local storage cache (--local-storage-prefix, default
# .snakemake/storage/<plugin>/<host>/<path>) and keeps it there; a later run reads the cached
# copy and needs no network (delete the copy to fetch the file again). The fetch job checks
# every file (pinned sha256, format) and writes results/downloads.tsv; every data job waits for
# it, so a refused file stops the run before any model job.
include: "downloads.smk"


if REMOTE:

    localrules:
        fetch,

    rule fetch:
        input:
            [storage_input for storage_input, _ in REMOTE_INPUTS.values()],
        output:
            report(
                "results/downloads.tsv",
                caption="../report/downloads.rst",
                category="Inputs",
                labels={"table": "downloaded cohort files"},
            ),
        params:
            files=[{**vars(r), "local_path": REMOTE_PATHS[r.url]} for r in REMOTE],
            checks=fetch_checks(),
        priority: 100
        conda:
            "../envs/omicsbayes.yaml"
        log:
            "logs/fetch.log",
        script:
            "../scripts/check_downloads.py"


rule data:
    input:
        lambda wc: COHORT_PATHS.get(wc.cohort, []) + (["results/downloads.tsv"] if REMOTE else []),
    output:
        "results/{cohort}/raw.h5ad",
    params:
        spec=lambda wc: local_spec(config["cohorts"][wc.cohort], REMOTE_PATHS),
        remote=lambda wc: remote_keys(wc.cohort),
    conda:
        "../envs/omicsbayes.yaml"
    log:
        "logs/data/{cohort}.log",
    resources:
        mem_mb=4000,
        runtime=20,
    script:
        "../scripts/read_cohort.py"
