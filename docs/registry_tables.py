"""Tables generated from the code's registries, so the pages cannot drift from it.

``model-table``: every class of :mod:`omicsbayes.models` with its module and capabilities.
``capability-table``: the capability names and what each promises.
``kinds-table``: every experiment kind with its class, protocol types and required
capabilities.
"""

import importlib

import pandas as pd
from docutils.parsers.rst import Directive
from tables import table_node


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
}
