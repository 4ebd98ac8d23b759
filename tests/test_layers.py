"""The library's layering rules, read from the source: the protocols use MV-GP's public API
only, RFLVM's chain never branches on the likelihood's name (each family is an object chosen
once), and the figures live in one package, ``pl``."""

import ast
import importlib.util
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "omicsbayes"
LIKELIHOODS = {"gaussian", "bernoulli", "negative_binomial", "multinomial", "poisson"}


def _tree(path):
    return ast.parse(path.read_text(), filename=str(path))


@pytest.mark.parametrize("path", sorted((SRC / "protocols").glob("*.py")), ids=lambda p: p.name)
def test_protocols_import_only_public_names_of_mvgp(path):
    private = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and "mvgp" in (node.module or ""):
            parts = node.module.split(".")
            names = [a.name for a in node.names]
            private += [f"{node.module}: {n}" for n in names if n.startswith("_")]
            if any(p.startswith("_") for p in parts):
                private.append(node.module)
    assert private == []


def test_rflvm_chain_never_compares_a_likelihood_name():
    """The chain asks its family object; no ``==``/``in`` against a likelihood's name."""
    from omicsbayes.models.rflvm.estimator import RFLVM

    constraint = RFLVM._parameter_constraints["likelihood"][0]
    assert LIKELIHOODS == set(constraint.options)  # the names this test looks for
    compared = []
    for name in ("_chain.py", "_updates.py"):
        for node in ast.walk(_tree(SRC / "models" / "rflvm" / name)):
            if isinstance(node, ast.Compare | ast.Match):
                constants = {
                    c.value for c in ast.walk(node) if isinstance(c, ast.Constant)
                } & LIKELIHOODS
                compared += [f"{name}:{node.lineno} {sorted(constants)}"] if constants else []
    assert compared == []


def test_figures_live_in_pl_only():
    assert importlib.util.find_spec("omicsbayes.plotting") is None
    assert not (SRC / "plotting").exists()
    assert importlib.util.find_spec("omicsbayes.pl") is not None
