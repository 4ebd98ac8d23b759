"""Experiment kinds, one class each: the splits, the fold fit, the metrics, the figure and the
model capabilities of one evaluation protocol.

An experiment kind is one subclass of :class:`ExperimentKind` (``protocols/_base.py``) in a
module of this package; defining it registers it, so :data:`KINDS`, :func:`get` and the config
schema's ``kind`` and protocol ``type`` enums (:func:`omicsbayes.config.config_schema`) come from
the subclasses. Its rule file ``workflow/rules/<name>.smk`` (the Snakefile includes one per kind)
holds its fit rule, which runs the one fit script ``workflow/scripts/fit.py``, and owns every
output path: the kind returns tables and wildcard values, the rule file fills its paths with them
and registers them (``register_kind`` of ``workflow/rules/common.smk``). Adding a kind is one
module here, one rule file and, in ``workflow/schemas/config.schema.yaml``, any config keys its
protocols or experiments read.

What a kind has (the workflow's rules and scripts use only this):

``name``, ``requires``, ``split_counts``, ``transforms``, ``metrics``, ``summary_by``
    Class attributes: the config's ``kind``, the capabilities a model must declare, protocol type
    -> (split count key, default), whether it fits transformed cohorts, the metric columns and
    further summary keys.
``reads_labels``, ``model_figures``, ``sweeps``
    Class attributes: whether the config check reads its cohorts' labels (then
    ``check_labels``), whether an experiment may list ``figures:`` and whether a ``sweeps:``
    entry may draw it (:func:`kinds_with` names the kinds that do).
``make_splits(adata, protocol, random_state, label=None)``
    The split table of a cohort for a protocol entry (the ``split`` rule).
``fits(name, experiment, splits)``
    Wildcard values of every fit output the ``evaluate`` rule reads.
``fit_fold(adata, splits, params, wildcards, checkpoint=None)``
    One fit job: its tables by output name (``workflow/scripts/fit.py`` writes them).
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
``check_labels(name, experiment, config, labels)``
    Checks against the cohort's labels before any job, for a kind that ``reads_labels``.
``figure_labels(adata, experiment, cohort)``, ``figure_groups(obs, experiment, cohort, task)``
    For a kind that sets ``model_figures``: what the whole-cohort fit learns and the samples'
    groups in one of its tasks (``workflow/scripts/fit_summary.py`` and ``model_figures.py``).

:data:`KINDS` names the kinds in the order they were defined; the documentation's kinds tables
(``docs/registry_tables.py``) are drawn from them.
"""

import importlib
import pkgutil

from . import _base
from ._base import ExperimentKind
from ._common import (
    ExperimentError,
    check_model,
    make_estimator,
    models_for,
    spec_capabilities,
)

__all__ = [
    "KINDS",
    "ExperimentError",
    "ExperimentKind",
    "check_experiment",
    "check_model",
    "get",
    "kind_of",
    "kinds_with",
    "make_estimator",
    "models_for",
    "n_splits",
    "of_protocol",
    "spec_capabilities",
]

for _module in pkgutil.iter_modules(__path__):  # each kind registers itself when defined
    if not _module.name.startswith("_"):
        importlib.import_module(f".{_module.name}", __name__)


def __getattr__(name):
    """``KINDS``: the names of the registered kinds, in the order they were defined."""
    if name == "KINDS":
        return tuple(_base._REGISTRY)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get(kind):
    """The :class:`ExperimentKind` registered as ``kind``."""
    try:
        return _base._REGISTRY[kind]
    except (KeyError, TypeError):  # TypeError: a list or dict, which no kind's name is
        raise ExperimentError(
            f"experiment kind {kind!r} is unknown; expected one of {tuple(_base._REGISTRY)}"
        ) from None


def kinds_with(attribute):
    """Names of the registered kinds whose class attribute ``attribute`` is true (for
    example ``"sweeps"``), in :data:`KINDS` order."""
    return tuple(name for name, kind in _base._REGISTRY.items() if getattr(kind, attribute))


def kind_of(experiment):
    """The kind name of a config experiment entry (``classification`` when it names none)."""
    return experiment.get("kind", "classification")


def of_protocol(protocol):
    """The :class:`ExperimentKind` whose protocol types include that of protocol entry
    ``protocol``."""
    for kind in _base._REGISTRY.values():
        if protocol["type"] in kind.split_counts:
            return kind
    raise ExperimentError(f"protocol type {protocol['type']!r} belongs to no experiment kind")


def n_splits(protocol):
    """Number of splits a protocol entry defines (its split wildcard runs over ``range``)."""
    return of_protocol(protocol).n_splits(protocol)


def check_experiment(name, config):
    """Check experiment ``name`` of ``config`` against its kind: the protocol type, the
    transforms, the models' capabilities, then the kind's own checks (:class:`ExperimentError`
    naming the config key)."""
    experiment = config["experiments"][name]
    key = f"experiments.{name}"
    kind = get(kind_of(experiment))
    if kind.transforms and not experiment.get("transforms"):
        raise ExperimentError(
            f"config key {key}.transforms: a {kind.name} experiment lists its transforms"
        )
    protocol_type = config["protocols"][experiment["protocol"]]["type"]
    if protocol_type not in kind.split_counts:
        raise ExperimentError(
            f"config key {key}.protocol: a {kind.name} experiment needs a protocol of type "
            f"{tuple(kind.split_counts)}; {experiment['protocol']!r} is {protocol_type!r}"
        )
    allowed = models_for(kind.requires)
    wrong = [m for m in experiment["models"] if config["models"][m]["class"] not in allowed]
    if wrong:
        raise ExperimentError(
            f"config key {key}.models: {wrong} cannot be used here; a {kind.name} experiment "
            f"takes models of class {sorted(allowed)}"
        )
    kind.check(name, experiment, config)
