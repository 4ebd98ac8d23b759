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


def fit_outputs(wildcards):
    e = EXPERIMENTS[wildcards.experiment]
    return [
        f"results/{wildcards.experiment}/fits/{t}/{m}/split{s}.tsv"
        for t in e["transforms"]
        for m in e["models"]
        for s in experiment_splits(wildcards.experiment)
    ]

