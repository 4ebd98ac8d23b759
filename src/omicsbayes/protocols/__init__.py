"""Experiment kinds, one module each: the splits, the fold fit, the metrics, the figure and the
model capabilities of one evaluation protocol.

=====================  ====================================================================
kind                   protocol
=====================  ====================================================================
``classification``     tasks from a label column, predictions of test samples (papers 000,
                       001, 003)
``heldout_entries``    entries hidden from a latent variable model, then scored (paper 002)
``disease_gene``       P@k / R@k of held-out associations over sampled negatives (paper 004,
                       section 5.1)
``rating``             RMSE and R@k of held-out ratings (paper 004, section 5.2)
=====================  ====================================================================

The interface every kind module has (the workflow's rules and scripts use only this; adding a
kind means one module here and its name in :data:`KINDS`, and its rule file
``workflow/rules/<kind>.smk`` (the Snakefile includes one per kind); the config schema's ``kind``
and protocol ``type`` enums come from these modules, :func:`omicsbayes.config.config_schema`):

``KIND`` : str
    The name a config's ``experiments.<name>.kind`` gives.
``REQUIRES`` : frozenset of str
    Capabilities (:data:`omicsbayes.models._capabilities.CAPABILITIES`) a model class must declare.
``SPLIT_COUNTS`` : dict
    Protocol type (``protocols.<name>.type``) -> (config key of its split count, default).
``TRANSFORMS`` : bool
    Whether the experiment fits the transformed cohort (and lists ``transforms``).
``make_splits(adata, protocol, random_state, label=None)``
    The split table of a cohort for a protocol entry (the ``split`` rule).
``fold_tables(name, experiment, splits)``
    Paths of the per-fold tables the ``evaluate`` rule reads.
``targets(name, experiment)``
    Further files of the kind that the default target asks for.
``metric_table(joined)``
    Per-split metrics from the concatenated fold tables; returns (table, metric columns,
    extra grouping keys of the summary).
``primary_metric(experiment)``
    The metric column an experiment is judged on (the report's winner) and whether higher is
    better.
``figure(metrics, title, experiment, specs)``
    The metrics figure of one experiment (``specs``: its model entries).
``check(name, experiment, config)``
    Kind-specific config checks, raising :class:`ExperimentError` with the config key.
"""

import importlib

from ._common import (
    ExperimentError,
    check_model,
    make_estimator,
    models_for,
    spec_capabilities,
    split_count,
)

KINDS = ("classification", "heldout_entries", "disease_gene", "rating")

__all__ = [
    "KINDS",
    "ExperimentError",
    "check_experiment",
    "check_model",
    "get",
    "kind_of",
    "make_estimator",
    "models_for",
    "n_splits",
    "of_protocol",
    "spec_capabilities",
]


def get(kind):
    """The module of experiment kind ``kind``."""
    if kind not in KINDS:
        raise ExperimentError(f"experiment kind {kind!r} is unknown; expected one of {KINDS}")
    return importlib.import_module(f".{kind}", __name__)


def kind_of(experiment):
    """The kind of a config experiment entry (``classification`` when it names none)."""
    return experiment.get("kind", "classification")


def of_protocol(protocol):
    """The kind module whose protocols include the type of protocol entry ``protocol``."""
    for kind in KINDS:
        module = get(kind)
        if protocol["type"] in module.SPLIT_COUNTS:
            return module
    raise ExperimentError(f"protocol type {protocol['type']!r} belongs to no experiment kind")


def n_splits(protocol):
    """Number of splits a protocol entry defines (its split wildcard runs over ``range``)."""
    return split_count(protocol, of_protocol(protocol).SPLIT_COUNTS)


def check_experiment(name, config):
    """Check experiment ``name`` of ``config`` against its kind: the protocol type, the
    transforms, the models' capabilities, then the kind's own checks (:class:`ExperimentError`
    naming the config key)."""
    experiment = config["experiments"][name]
    key = f"experiments.{name}"
    kind = kind_of(experiment)
    module = get(kind)
    if module.TRANSFORMS and not experiment.get("transforms"):
        raise ExperimentError(
            f"config key {key}.transforms: a {kind} experiment lists its transforms"
        )
    protocol_type = config["protocols"][experiment["protocol"]]["type"]
    if protocol_type not in module.SPLIT_COUNTS:
        raise ExperimentError(
            f"config key {key}.protocol: a {kind} experiment needs a protocol of type "
            f"{tuple(module.SPLIT_COUNTS)}; {experiment['protocol']!r} is {protocol_type!r}"
        )
    allowed = models_for(module.REQUIRES)
    wrong = [m for m in experiment["models"] if config["models"][m]["class"] not in allowed]
    if wrong:
        raise ExperimentError(
            f"config key {key}.models: {wrong} cannot be used here; a {kind} experiment "
            f"takes models of class {sorted(allowed)}"
        )
    module.check(name, experiment, config)
