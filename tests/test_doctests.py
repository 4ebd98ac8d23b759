"""The Examples sections of the library's docstrings run as doctests (scikit-learn style), and
every public estimator and every ``tl`` and ``pl`` function has one."""

import doctest
import importlib
import pkgutil
import warnings

import matplotlib
import pytest

import omicsbayes
from omicsbayes import models, pl, tl

matplotlib.use("Agg")

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _modules():
    names = [omicsbayes.__name__]
    for info in pkgutil.walk_packages(omicsbayes.__path__, omicsbayes.__name__ + "."):
        if not info.name.endswith("__main__"):
            names.append(info.name)
    return sorted(names)


def _doctests(module_name):
    module = importlib.import_module(module_name)
    return doctest.DocTestFinder(exclude_empty=True).find(module, module_name)


DOCTESTS = [test for name in _modules() for test in _doctests(name) if test.examples]


@pytest.mark.parametrize("test", DOCTESTS, ids=[t.name for t in DOCTESTS])
def test_docstring_example(test):
    import matplotlib.pyplot as plt

    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runner.run(test, out=report.append)
    plt.close("all")
    assert runner.failures == 0, "".join(report)


def _public():
    for name in models.__all__:
        yield f"omicsbayes.models.{name}", getattr(models, name)
    for module in (tl, pl):
        for name in module.__all__:
            yield f"{module.__name__}.{name}", getattr(module, name)


@pytest.mark.parametrize("name, obj", list(_public()), ids=[n for n, _ in _public()])
def test_every_public_estimator_and_tl_pl_function_has_an_example(name, obj):
    doc = obj.__doc__ or ""
    assert "Examples\n" in doc and ">>> " in doc.split("Examples\n", 1)[1], name
