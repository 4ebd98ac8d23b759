"""The lists of models by capability are the estimators' own declarations (issue 15).

Each model class declares ``capabilities`` (names from ``models._base.CAPABILITIES``); the
config schema's ``models.class`` enum and every list of model names the config checks and the
experiment kinds keep must equal ``models_with(capability)``. A list that disagrees fails here,
naming the classes on each side.
"""

import importlib
from pathlib import Path

import pytest
import yaml

from omicsbayes import models
from omicsbayes.models._base import CAPABILITIES, capabilities_of, models_with

SCHEMA = Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml"
# capabilities that make a model runnable by some experiment kind of the workflow
RUNNABLE = ("classifier", "heldout_scoring", "matrix_completion")
# hand-kept lists of model names -> the capability they stand for
NAME_LISTS = {
    ("omicsbayes.experiments", "MULTI_TASK_MODELS"): "multi_task",
    ("omicsbayes.experiments", "HELDOUT_MODELS"): "heldout_scoring",
    ("omicsbayes.experiments", "RANKING_MODELS"): "matrix_completion",
    ("omicsbayes.experiments", "RATING_MODELS"): "matrix_completion",
}


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


@pytest.mark.parametrize(("where", "capability"), list(NAME_LISTS.items()), ids=str)
def test_hand_kept_model_lists_match_capabilities(where, capability):
    module, attribute = where
    listed = getattr(importlib.import_module(module), attribute, None)
    if listed is None:
        pytest.skip(f"{module}.{attribute} is gone (the list comes from models_with now)")
    declared = models_with(capability)
    assert set(listed) == declared, f"{module}.{attribute}: " + _disagreement(listed, declared)


def test_config_kinds_list_the_same_models_as_the_capabilities():
    config = importlib.import_module("omicsbayes.config")
    kinds = getattr(config, "MODELS_OF_KIND", None)
    if kinds is None:
        pytest.skip("omicsbayes.config.MODELS_OF_KIND is gone")
    need = {"heldout_entries": "heldout_scoring", "disease_gene": "matrix_completion"}
    need["rating"] = "matrix_completion"
    for kind, listed in kinds.items():
        declared = models_with(need[kind])
        assert set(listed) == declared, f"MODELS_OF_KIND[{kind!r}]: " + _disagreement(
            listed, declared
        )


def test_count_likelihoods_agree():
    """The held-out experiment and RFLVM agree on which likelihoods are counts (issue 15: a
    Bernoulli RFLVM was a count model to one and not to the other)."""
    experiments = importlib.import_module("omicsbayes.experiments")
    rflvm = importlib.import_module("omicsbayes.models.rflvm")
    if not hasattr(experiments, "COUNT_LIKELIHOODS"):
        pytest.skip("omicsbayes.experiments.COUNT_LIKELIHOODS is gone")
    assert set(experiments.COUNT_LIKELIHOODS) == set(rflvm.COUNT_LIKELIHOODS)
