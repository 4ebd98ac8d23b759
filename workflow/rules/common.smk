# Config validation, shared helpers and the default target.
import os

from snakemake.utils import min_version, validate

from omicsbayes.config import ConfigError, check_config, n_splits

min_version("9.0")


configfile: "config/config.yaml"


validate(config, "../schemas/config.schema.yaml")
try:
    check_config(config)
except ConfigError as err:
    raise WorkflowError(str(err)) from None

EXPERIMENTS = config["experiments"]


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

