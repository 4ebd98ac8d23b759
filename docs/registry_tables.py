"""Tables generated from the code's registries, so the pages cannot drift from it.

``model-table``: every class of :mod:`omicsbayes.models` with its module and capabilities.
``capability-table``: the capability names and what each promises.
``kinds-table``: every experiment kind with its class, protocol types and required
capabilities.
``kinds-workflow-table``: every experiment kind as a config uses it: its protocol types, models,
what it measures, its metrics and figure (from the kind's class), the optional sections it
allows, and the rules and outputs of its rule file ``workflow/rules/<kind>.smk``.
"""

import importlib
import re
from pathlib import Path

import pandas as pd
from docutils.parsers.rst import Directive
from tables import table_node

RULES = Path(__file__).resolve().parents[1] / "workflow" / "rules"
EXPERIMENT_FOLDER = "results/{experiment}/"
OPTIONAL_SECTIONS = {"figures": "model_figures", "sweeps": "sweeps"}
"""Config section that may name an experiment (``experiments.<name>.figures``, a ``sweeps:``
entry) -> the kind's class attribute saying whether it allows that."""


def model_rows():
    """One row per estimator class: class, module, capabilities, first docstring line."""
    models = importlib.import_module("omicsbayes.models")
    base = importlib.import_module("omicsbayes.models._capabilities")
    rows = []
    for name in models.__all__:
        cls = getattr(models, name)
        first_paragraph = (cls.__doc__ or "").strip().split("\n\n")[0]
        summary = " ".join(first_paragraph.split()).replace("``", "")
        rows.append(
            {
                "class": name,
                "module": cls.__module__.split("._")[0],
                "capabilities": ", ".join(sorted(base.capabilities_of(cls))),
                "summary": summary,
            }
        )
    return pd.DataFrame(rows)


def capability_rows():
    base = importlib.import_module("omicsbayes.models._capabilities")
    return pd.DataFrame(
        [
            {
                "capability": k,
                "what it promises": v,
                "models": ", ".join(sorted(base.models_with(k))),
            }
            for k, v in base.CAPABILITIES.items()
        ]
    )


def kind_rows():
    protocols = importlib.import_module("omicsbayes.protocols")
    rows = []
    for kind in protocols.KINDS:
        experiment_kind = protocols.get(kind)
        types = ", ".join(
            f"{t} ({key}, default {default})"
            for t, (key, default) in experiment_kind.split_counts.items()
        )
        cls = type(experiment_kind)
        rows.append(
            {
                "kind": kind,
                "class": f"{cls.__module__.removeprefix('omicsbayes.')}.{cls.__name__}",
                "protocol types (split count key, default)": types,
                "model must declare": ", ".join(sorted(experiment_kind.requires)),
            }
        )
    return pd.DataFrame(rows)


def rule_outputs(path):
    """Rule name -> its output paths, read from the text of a rule file (the quoted paths under
    each rule's ``output:``, ``report(...)`` wrappers included)."""
    parts = re.split(r"^rule (\w+):\n", Path(path).read_text(), flags=re.M)
    outputs = {}
    for name, body in zip(parts[1::2], parts[2::2]):
        section = re.search(r"^    output:\n((?:        .*\n|\n)+)", body, flags=re.M)
        outputs[name] = re.findall(r'"(results/[^"]+)"', section.group(1)) if section else []
    return outputs


def _paragraph(text):
    """The first paragraph of a docstring on one line."""
    return " ".join((text or "").strip().split("\n\n")[0].split())


def kind_workflow_rows():
    """One row per experiment kind as a config uses it (``kinds-workflow-table``)."""
    protocols = importlib.import_module("omicsbayes.protocols")
    rows = []
    for name in protocols.KINDS:
        kind = protocols.get(name)
        cls = type(kind)
        types = ", ".join(
            f"``{t}`` (``{key}``, default {default})"
            for t, (key, default) in kind.split_counts.items()
        )
        if cls.figure is protocols.ExperimentKind.figure:
            figure = f"Box plots of {', '.join(kind.metrics)} per split."
        else:
            figure = _paragraph(cls.figure.__doc__)
        rules = "; ".join(
            f"rule ``{rule}``: "
            + ", ".join(f"``{p.removeprefix(EXPERIMENT_FOLDER)}``" for p in paths)
            for rule, paths in rule_outputs(RULES / f"{name}.smk").items()
        )
        sections = [
            f"``{s}``" for s, allowed in OPTIONAL_SECTIONS.items() if getattr(kind, allowed)
        ]
        rows.append(
            {
                "kind": f"``{name}``" + (" (default)" if protocols.kind_of({}) == name else ""),
                "protocol types (split count key, default)": types,
                "models": ", ".join(sorted(protocols.models_for(kind.requires))),
                "what it measures": _paragraph(cls.__doc__),
                "fits transformed cohorts (``transforms``)": "yes" if kind.transforms else "no",
                "metrics (per split)": ", ".join(kind.metrics),
                "figures/metrics.png": figure,
                "optional sections": ", ".join(sections),
                f"rule file: rules and outputs (under {EXPERIMENT_FOLDER})": rules,
            }
        )
    return pd.DataFrame(rows)


def _directive(make_rows):
    class TableFromRegistry(Directive):
        has_content = False

        def run(self):
            return [table_node(make_rows())]

    return TableFromRegistry


DIRECTIVES = {
    "model-table": _directive(model_rows),
    "capability-table": _directive(capability_rows),
    "kinds-table": _directive(kind_rows),
    "kinds-workflow-table": _directive(kind_workflow_rows),
}
