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
from omicsbayes.downloads import DownloadError, local_spec, remote_files

try:
    REMOTE = remote_files(config["cohorts"], sorted(COHORT_PATHS))
except DownloadError as err:
    raise WorkflowError(f"config key {err}") from None


def remote_input(remote):
    """The storage input of a URL, or the cached copy's path when a run has fetched it before;
    and the cached copy's path.

    Before the first download the main process asks the plugin whether the file exists, so an
    unreachable host or an HTTP error is one message naming the cohort key and the URL, before
    any job.
    """
    try:
        flagged = storage(remote.url, keep_local=True)
    except WorkflowError as err:
        raise WorkflowError(
            f"config key {remote.key}: {remote.url}: no installed Snakemake storage plugin reads "
            f"this address ({err}); expected http, https or ftp, or the plugin for its scheme"
        ) from None
    obj = flagged.flags["storage_object"]
    cached = str(obj.local_path())
    if os.path.exists(cached):
        return cached, cached
    if workflow.is_main_process:
        try:
            found = obj.exists()
        except Exception as err:
            raise WorkflowError(
                f"config key {remote.key}: {remote.url} cannot be reached "
                f"({type(err).__name__}: {err}); nothing was downloaded"
            ) from None
        if not found:
            raise WorkflowError(
                f"config key {remote.key}: {remote.url} not found (the server answered with an "
                "error such as HTTP 404); nothing was downloaded"
            )
    return flagged, cached


REMOTE_INPUTS = {r.url: remote_input(r) for r in REMOTE}  # URL -> (input, cached copy)
REMOTE_PATHS = {url: cached for url, (_, cached) in REMOTE_INPUTS.items()}


def remote_keys(cohort):
    """The cohort's URL keys, for the data job's error message."""
    return {r.key: r.url for r in REMOTE if r.cohort == cohort}


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
        priority: 100
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
