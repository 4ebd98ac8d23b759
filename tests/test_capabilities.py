"""The lists of models by capability are the estimators' own declarations (issue 15).

Each model class declares ``capabilities`` (names from ``models._capabilities.CAPABILITIES``); the
config schema's ``models.class`` enum must equal the union of ``models_with(capability)`` over the
runnable capabilities (a list that disagrees fails here, naming the classes on each side), and
every experiment kind (omicsbayes.protocols) asks for the capabilities in its ``REQUIRES``.
"""

from pathlib import Path

import pytest
import yaml

from omicsbayes import models, protocols
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


def test_schema_model_enum_is_every_runnable_model():
    schema = yaml.safe_load(SCHEMA.read_text())
    enum = schema["properties"]["models"]["additionalProperties"]["properties"]["class"]["enum"]
    runnable = frozenset().union(*(models_with(c) for c in RUNNABLE))
    assert set(enum) == runnable, _disagreement(enum, runnable)
    assert len(enum) == len(set(enum)), "the enum repeats a class"


@pytest.mark.parametrize("kind", protocols.KINDS)
def test_every_kind_requires_known_capabilities_some_model_has(kind):
    module = protocols.get(kind)
    assert module.REQUIRES and module.REQUIRES <= set(CAPABILITIES)
    assert protocols.models_for(module.REQUIRES), f"no model can run a {kind} experiment"


def test_config_refuses_a_model_its_kind_cannot_run():
    """check_config asks the kind's REQUIRES: a classifier in a held-out experiment, an RFLVM
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
    """The held-out experiment takes RFLVM's own list of count likelihoods (issue 15: a Bernoulli
    RFLVM was a count model to one and not to the other)."""
    from omicsbayes.models import RFLVM
    from omicsbayes.protocols.heldout_entries import takes_counts

    for likelihood in ("gaussian", "bernoulli", "poisson", "negative_binomial", "multinomial"):
        expected = likelihood in rflvm.COUNT_LIKELIHOODS
        assert takes_counts(RFLVM(likelihood=likelihood)) == expected, likelihood


def test_cli_lists_every_matrix_completion_model():
    """The command line keeps its own list (it imports no model module before a fit)."""
    from omicsbayes import cli

    declared = models_with("matrix_completion")
    assert set(cli._MVGP) == declared, "cli._MVGP: " + _disagreement(cli._MVGP, declared)
