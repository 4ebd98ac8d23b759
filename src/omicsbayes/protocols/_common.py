"""What every experiment kind shares: the error type, building an estimator from a config model
entry, the capability check and the split count of a protocol entry."""

import inspect

from .. import models
from ..models._capabilities import capabilities_of, models_with


class ExperimentError(ValueError):
    """A configuration or data problem found while setting up an experiment."""


def make_estimator(spec, random_state=None):
    """Build an estimator from a config model entry.

    Parameters
    ----------
    spec : dict
        ``{"class": name, "variant": optional Table-1 name, "params": {...}}``; the workflow keys
        ``side_information`` and ``grid`` are ignored here.
    random_state : int, optional
        Passed to the estimator when it takes a ``random_state``.
    """
    name = spec["class"]
    if name not in models.__all__:
        known = ", ".join(sorted(models.__all__))
        raise ExperimentError(f"model class {name!r} is unknown; expected one of: {known}")
    cls = getattr(models, name)
    params = dict(spec.get("params") or {})
    accepted = inspect.signature(cls.__init__).parameters
    if random_state is not None and "random_state" in accepted:
        params["random_state"] = int(random_state)
    if spec.get("variant"):
        return cls.from_variant(spec["variant"], **params)
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ExperimentError(
            f"model class {name!r} has no parameter(s) {unknown}; "
            f"expected some of {sorted(p for p in accepted if p != 'self')}"
        )
    return cls(**params)


def spec_capabilities(spec):
    """The capabilities of the estimator a config model entry builds (its scikit-learn tags:
    they may depend on its parameters, e.g. ``mcmc`` for a Gibbs-fitted rank factor model)."""
    return capabilities_of(make_estimator(spec))


def models_for(requires):
    """Names of the model classes that declare every capability in ``requires`` (every class
    when it is empty)."""
    return frozenset(models.__all__).intersection(*(models_with(c) for c in sorted(requires)))


def check_model(kind, requires, spec):
    """Raise :class:`ExperimentError` unless ``spec``'s class declares every capability in
    ``requires`` (the ``REQUIRES`` of experiment kind ``kind``)."""
    name = spec["class"]
    missing = sorted(set(requires) - capabilities_of(getattr(models, name)))
    if missing:
        raise ExperimentError(
            f"model class {name!r} lacks {missing}; a {kind} experiment takes models of class "
            f"{sorted(models_for(requires))}"
        )


def split_count(protocol, counts):
    """Number of splits of a protocol entry, from ``counts`` (type -> (key, default))."""
    from ..io._common import whole_number  # here: importing omicsbayes.io loads anndata

    key, default = counts[protocol["type"]]
    try:
        return whole_number(protocol.get(key, default), key, 1)
    except ValueError as err:
        raise ExperimentError(f"{protocol['type']} protocol: {err}") from None
