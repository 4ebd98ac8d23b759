# Config validation, shared helpers and the default target.
import glob
import os

from snakemake.utils import min_version, validate

from omicsbayes.config import ConfigError, check_config, n_splits
from omicsbayes.io.cohort import PATH_KEYS

min_version("9.0")


# The default run only when no --configfile is given: Snakemake merges --configfile into a
# `configfile:` it loads, so `--configfile my.yaml` would drag the default experiments along.
# --config KEY=VALUE still overrides either. Under `module`, the importing workflow's config wins.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


def config_source():
    """The config file(s) in use, for error messages."""
    files = workflow.overwrite_configfiles or ["config/config.yaml"]
    return ", ".join(map(str, files))


def cohort_paths(cohort):
    """The files a cohort entry names (keys in omicsbayes.io.cohort.PATH_KEYS), globs expanded.

    Raises WorkflowError naming the key and the file when one is missing, so a run stops before
    any job; relative paths are relative to the working directory, as the reader resolves them.
    """
    found = []
    for key in PATH_KEYS:
        values = config["cohorts"][cohort].get(key)
        for value in [values] if isinstance(values, str) else values or []:
            matches = sorted(glob.glob(value)) if glob.has_magic(value) else [value]
            if not matches or not os.path.exists(matches[0]):
                raise WorkflowError(
                    f"config key cohorts.{cohort}.{key}: file {value!r} not found (relative to "
                    f"{os.getcwd()}; config {config_source()}); expected the cohort's file"
                )
            found += matches
    return found


if not config.get("experiments"):
    raise WorkflowError(
        f"config key experiments: {config_source()} names no experiment; expected at least one "
        "under experiments (see config/README.md)"
    )
validate(config, "../schemas/config.schema.yaml")
try:
    check_config(config)
except ConfigError as err:
    raise WorkflowError(str(err)) from None

EXPERIMENTS = config["experiments"]
COHORT_PATHS = {c: cohort_paths(c) for c in {e["cohort"] for e in EXPERIMENTS.values()}}


def experiment_splits(experiment):
    return range(n_splits(config["protocols"][EXPERIMENTS[experiment]["protocol"]]))


def experiment_kind(experiment):
    return EXPERIMENTS[experiment].get("kind", "classification")


def fit_outputs(wildcards):
    """Every fit table of an experiment (fits/, entries/, ranking/ or rating/ by its kind)."""
    e = EXPERIMENTS[wildcards.experiment]
    matrix_folder = {"disease_gene": "ranking", "rating": "rating"}
    if experiment_kind(wildcards.experiment) in matrix_folder:
        folder = matrix_folder[experiment_kind(wildcards.experiment)]
        return [
            f"results/{wildcards.experiment}/{folder}/{m}/split{s}.tsv"
            for m in e["models"]
            for s in experiment_splits(wildcards.experiment)
        ]
    folder = "entries" if experiment_kind(wildcards.experiment) == "heldout_entries" else "fits"
    return [
        f"results/{wildcards.experiment}/{folder}/{t}/{m}/split{s}.tsv"
        for t in e["transforms"]
        for m in e["models"]
        for s in experiment_splits(wildcards.experiment)
    ]


def cohort_file(wildcards, folder):
    """The transformed cohort or the split table an experiment's fit jobs read."""
    e = EXPERIMENTS[wildcards.experiment]
    if folder == "transformed":
        return f"results/{e['cohort']}/transformed/{wildcards.transform}.h5ad"
    return f"results/{e['cohort']}/splits/{e['protocol']}.tsv"

