# Cohort files given by URL, for the fetch and data jobs (data.smk): which keys are URLs, their
# storage inputs and the cached copies the data jobs read.
from omicsbayes.downloads import DownloadError, local_spec, missing_plugin, remote_files

try:
    REMOTE = remote_files(config["cohorts"], sorted(COHORT_PATHS))
except DownloadError as err:
    raise WorkflowError(f"config key {err}") from None


def remote_input(remote):
    """The storage input of a URL, or the cached copy's path when a run has fetched it before;
    and the cached copy's path.

    Before the first download the main process asks the plugin whether the file exists, so an
    unreachable host or an HTTP error is one message naming the cohort key and the URL, before
    any job; so is a URL whose scheme's storage plugin is not installed.
    """
    package = missing_plugin(remote.url)
    if package:
        raise WorkflowError(
            f"config key {remote.key}: {remote.url}: no installed Snakemake storage plugin reads "
            f"{remote.url.split('://', 1)[0]}:// addresses; expected the package {package} "
            f"(pip install {package}) in the environment that runs snakemake"
        )
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


def fetch_checks():
    """What the fetch job checks the fetched sample sheets against: the URL cohorts, their
    experiments and those experiments' protocols (a change to any of them reruns the job)."""
    cohorts = {r.cohort for r in REMOTE}
    experiments = {n: e for n, e in EXPERIMENTS.items() if e["cohort"] in cohorts}
    used = {e["protocol"] for e in experiments.values()}
    return {
        "cohorts": {c: config["cohorts"][c] for c in sorted(cohorts)},
        "experiments": experiments,
        "protocols": {p: config["protocols"][p] for p in sorted(used)},
    }


def remote_keys(cohort):
    """The cohort's URL keys, for the data job's error message."""
    return {r.key: r.url for r in REMOTE if r.cohort == cohort}


try:  # URL cohorts fetched by an earlier run: what their sample sheets tell, before any job
    if workflow.is_main_process and REMOTE:
        check_cohort_labels(config, REMOTE_PATHS, {r.cohort for r in REMOTE})
except ConfigError as err:
    raise WorkflowError(str(err)) from None
