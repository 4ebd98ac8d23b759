"""Checks of a workflow config beyond its JSON schema.

The schema (workflow/schemas/config.schema.yaml) checks types, names and ranges; this module
checks what a schema cannot: that every experiment refers to a defined cohort, transform, model
and protocol, that transform steps and model parameters exist, and what its experiment kind
asks (:func:`omicsbayes.protocols.check_experiment`: protocol type, transforms, model
capabilities). Each problem is one :class:`ConfigError` naming the config key.
"""

from . import protocols
from .protocols import ExperimentError, make_estimator


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key and what was expected."""


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
        try:
            protocols.check_experiment(name, config)
        except ExperimentError as err:
            raise ConfigError(str(err)) from None
