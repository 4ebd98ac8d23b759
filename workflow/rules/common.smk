# Config validation, shared helpers and the default target.
import os

from snakemake.utils import min_version, validate

from omicsbayes import protocols
from omicsbayes.config import ConfigError, check_config

min_version("9.0")


configfile: "config/config.yaml"


validate(config, "../schemas/config.schema.yaml")
try:
    check_config(config)
except ConfigError as err:
    raise WorkflowError(str(err)) from None

EXPERIMENTS = config["experiments"]


def experiment_splits(experiment):
    return range(protocols.n_splits(config["protocols"][EXPERIMENTS[experiment]["protocol"]]))


def experiment_kind(experiment):
    return protocols.kind_of(EXPERIMENTS[experiment])


def experiment_protocol(experiment):
    """The module of an experiment's kind (omicsbayes.protocols), which names its files."""
    return protocols.get(experiment_kind(experiment))


def fit_outputs(wildcards):
    """Every fold table of an experiment, as its kind names them."""
    e = wildcards.experiment
    return experiment_protocol(e).fold_tables(e, EXPERIMENTS[e], experiment_splits(e))


def kind_targets():
    """The files each experiment's kind adds to the default target (candidates, latent figure)."""
    return [t for e in EXPERIMENTS for t in experiment_protocol(e).targets(e, EXPERIMENTS[e])]


def cohort_file(wildcards, folder):
    """The transformed cohort or the split table an experiment's fit jobs read."""
    e = EXPERIMENTS[wildcards.experiment]
    if folder == "transformed":
        return f"results/{e['cohort']}/transformed/{wildcards.transform}.h5ad"
    return f"results/{e['cohort']}/splits/{e['protocol']}.tsv"

