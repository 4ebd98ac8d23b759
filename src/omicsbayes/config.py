"""Checks of a workflow config beyond its JSON schema, and the values the rules enumerate.

The schema (workflow/schemas/config.schema.yaml) checks types, names and ranges; this module
checks what a schema cannot: that every experiment refers to a defined cohort, transform, model
and protocol, that transform steps and model parameters exist, and how many splits a protocol
has. Each problem is one :class:`ConfigError` naming the config key.
"""

from .experiments import (
    HELDOUT_MODELS,
    RANKING_MODELS,
    RATING_MODELS,
    ExperimentError,
    make_estimator,
)

PROTOCOLS_OF_KIND = {
    "classification": ("stratified_kfold", "repeated_subsampling", "few_shot"),
    "heldout_entries": ("heldout_entries",),
    "disease_gene": ("known_rows", "new_rows"),
    "rating": ("known_users", "new_users"),
}
MODELS_OF_KIND = {
    "heldout_entries": HELDOUT_MODELS,
    "disease_gene": RANKING_MODELS,
    "rating": RATING_MODELS,
}
MATRIX_KINDS = ("disease_gene", "rating")  # fitted on the raw matrix: no transforms


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key and what was expected."""


def n_splits(protocol):
    """Number of splits a protocol entry defines (its split wildcard runs over ``range``)."""
    kind = protocol["type"]
    if kind == "few_shot":
        return int(protocol.get("n_repeats", 20))
    if kind == "heldout_entries":
        return int(protocol.get("n_repeats", 5))
    if kind in ("known_rows", "new_rows", "known_users", "new_users"):
        return int(protocol.get("n_splits", 5))
    default = 100 if kind == "repeated_subsampling" else 10
    return int(protocol.get("n_splits", default))


def check_config(config):
    """Raise :class:`ConfigError` for the first cross-reference or parameter problem found."""
    from .preprocess import build_pipeline

    config.setdefault("transforms", {})
    for name, transform in config["transforms"].items():
        try:
            build_pipeline(transform["steps"])
        except ValueError as err:
            raise ConfigError(f"config key transforms.{name}.steps: {err}") from None
    for name, spec in config["models"].items():
        try:
            make_estimator(spec)
        except (ExperimentError, TypeError, ValueError) as err:
            raise ConfigError(f"config key models.{name}: {err}") from None
    for name, experiment in config["experiments"].items():
        key = f"experiments.{name}"
        for field, section in (("cohort", "cohorts"), ("protocol", "protocols")):
            if experiment[field] not in config[section]:
                raise ConfigError(
                    f"config key {key}.{field}: {experiment[field]!r} is not defined under "
                    f"{section} (defined: {sorted(config[section])})"
                )
        for field in ("transforms", "models"):
            unknown = [v for v in experiment.get(field, []) if v not in config[field]]
            if unknown:
                raise ConfigError(
                    f"config key {key}.{field}: {unknown} not defined under {field} "
                    f"(defined: {sorted(config[field])})"
                )
        kind = experiment.get("kind", "classification")
        if kind not in MATRIX_KINDS and not experiment.get("transforms"):
            raise ConfigError(
                f"config key {key}.transforms: a {kind} experiment lists its transforms"
            )
        protocol_type = config["protocols"][experiment["protocol"]]["type"]
        if protocol_type not in PROTOCOLS_OF_KIND[kind]:
            raise ConfigError(
                f"config key {key}.protocol: a {kind} experiment needs a protocol of type "
                f"{PROTOCOLS_OF_KIND[kind]}; {experiment['protocol']!r} is {protocol_type!r}"
            )
        if kind in MODELS_OF_KIND:
            allowed = MODELS_OF_KIND[kind]
            wrong = [m for m in experiment["models"] if config["models"][m]["class"] not in allowed]
            if wrong:
                raise ConfigError(
                    f"config key {key}.models: {wrong} cannot be used here; a {kind} experiment "
                    f"takes models of class {sorted(allowed)}"
                )
            continue
        if "label" not in config["cohorts"][experiment["cohort"]]:
            raise ConfigError(
                f"config key cohorts.{experiment['cohort']}.label is required: experiment "
                f"{name!r} classifies that cohort's samples"
            )
        task = experiment.get("task")
        if task is None:
            raise ConfigError(f"config key {key}.task is required for a classification experiment")
        if task["kind"] == "binary" and not task.get("positive"):
            raise ConfigError(
                f"config key {key}.task.positive: a binary task lists its positive labels"
            )
