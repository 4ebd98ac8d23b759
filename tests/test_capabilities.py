"""The lists of models by capability are the estimators' own declarations.

Each model class declares ``capabilities`` (names from ``models._capabilities.CAPABILITIES``); the
config schema's ``models.class`` enum must equal the union of ``models_with(capability)`` over the
runnable capabilities (a list that disagrees fails here, naming the classes on each side), and
every experiment kind (omicsbayes.protocols) asks for the capabilities in its ``requires``.
"""

from pathlib import Path

import pytest
import yaml

from omicsbayes import models, protocols
from omicsbayes.config import ConfigError, config_schema, validate_config
from omicsbayes.models import rflvm
from omicsbayes.models._capabilities import CAPABILITIES, capabilities_of, models_with

SCHEMA = Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml"
# capabilities that make a model runnable by some experiment kind of the workflow
RUNNABLE = ("classifier", "heldout_scoring", "matrix_completion")


def _disagreement(listed, declared):
    return (
        f"listed but not declaring it: {sorted(set(listed) - declared)}; "
        f"declaring it but not listed: {sorted(declared - set(listed))}"
    )


@pytest.mark.parametrize("name", models.__all__)
def test_every_model_declares_known_capabilities(name):
    declared = capabilities_of(getattr(models, name))
    assert declared, f"{name} declares no capabilities (class attribute `capabilities`)"
    assert declared <= set(CAPABILITIES)


def test_unknown_capabilities_are_refused():
    with pytest.raises(ValueError, match="unknown capability 'teleport'"):
        models_with("teleport")

    class Odd:
        capabilities = frozenset({"classifier", "teleport"})

    with pytest.raises(ValueError, match=r"Odd declares unknown capabilities \['teleport'\]"):
        capabilities_of(Odd)


def _enums(schema):
    properties = schema["properties"]
    return {
        section: properties[section]["additionalProperties"]["properties"][key].get("enum")
        for section, key in (("models", "class"), ("experiments", "kind"), ("protocols", "type"))
    }


def test_schema_model_enum_is_every_runnable_model():
    """The schema file keeps no list; the schema the workflow validates with has the registry's."""
    assert set(_enums(yaml.safe_load(SCHEMA.read_text())).values()) == {None}
    enums = _enums(config_schema(SCHEMA))
    runnable = frozenset().union(*(models_with(c) for c in RUNNABLE))
    assert set(enums["models"]) == runnable, _disagreement(enums["models"], runnable)
    assert len(enums["models"]) == len(set(enums["models"])), "the enum repeats a class"
    assert enums["experiments"] == list(protocols.KINDS)
    types = [t for kind in protocols.KINDS for t in protocols.get(kind).split_counts]
    assert enums["protocols"] == types and "heldout_entries" in types


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [("models", "class", "RandomForest"), ("experiments", "kind", "survival")],
)
def test_validate_config_refuses_what_no_registry_knows(section, key, value, tiny_config):
    name = next(iter(tiny_config[section]))
    tiny_config[section][name][key] = value
    with pytest.raises(
        ConfigError, match=rf"^config key {section}\.{name}\.{key}: '{value}' is not one of"
    ):
        validate_config(tiny_config, SCHEMA)


def test_validate_config_fills_in_the_schema_defaults(tiny_config):
    experiment = next(iter(tiny_config["experiments"].values()))
    experiment.pop("kind", None)
    validate_config(tiny_config, SCHEMA)
    assert experiment["kind"] == "classification"


@pytest.mark.parametrize("kind", protocols.KINDS)
def test_every_kind_requires_known_capabilities_some_model_has(kind):
    requires = protocols.get(kind).requires
    assert requires and requires <= set(CAPABILITIES)
    assert protocols.models_for(requires), f"no model can run a {kind} experiment"


def test_config_refuses_a_model_its_kind_cannot_run():
    """check_config asks the kind's ``requires``: a classifier in a held-out experiment, an RFLVM
    in a classification experiment."""
    from omicsbayes.config import ConfigError, check_config

    def config(kind, model):
        experiment = {"cohort": "c", "models": ["m"], "protocol": "p", "transforms": ["t"]}
        if kind == "classification":
            experiment["task"] = {"kind": "multiclass"}
            protocol = {"type": "stratified_kfold"}
        else:
            experiment["kind"] = kind
            protocol = {"type": "heldout_entries"}
        return {
            "cohorts": {"c": {"format": "demo", "name": "digits", "label": "digit"}},
            "transforms": {"t": {"steps": []}},
            "protocols": {"p": protocol},
            "models": {"m": {"class": model}},
            "experiments": {"e": experiment},
        }

    check_config(config("heldout_entries", "RFLVM"))
    check_config(config("classification", "LogisticBaseline"))
    with pytest.raises(ConfigError, match=r"experiments\.e\.models: \['m'\] cannot be used"):
        check_config(config("heldout_entries", "LogisticBaseline"))
    with pytest.raises(ConfigError, match="takes models of class .*LogisticBaseline"):
        check_config(config("classification", "RFLVM"))


def test_count_likelihoods_agree():
    """The held-out experiment takes RFLVM's own list of count likelihoods (a Bernoulli
    RFLVM was a count model to one and not to the other)."""
    from omicsbayes.models import RFLVM
    from omicsbayes.protocols.heldout_entries import takes_counts

    for likelihood in ("gaussian", "bernoulli", "poisson", "negative_binomial", "multinomial"):
        expected = likelihood in rflvm.COUNT_LIKELIHOODS
        assert takes_counts(RFLVM(likelihood=likelihood)) == expected, likelihood


def test_cli_lists_every_matrix_completion_model():
    """The command line's model table takes the matrix-completion models from the registry."""
    from omicsbayes import cli

    declared = models_with("matrix_completion")
    listed = {name for name, (func, _, _) in cli.models().items() if func == "mvgp"}
    assert listed == declared, "cli.models(): " + _disagreement(listed, declared)
