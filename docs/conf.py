"""Sphinx configuration of the omicsbayes documentation (``make docs``).

The API pages (``api/<package>.rst``) are written here from each package's ``__all__`` and its
public modules, so every public name is documented and none is listed by hand. The tutorials are
MyST notebooks executed by myst-nb at build time. The build is offline and warnings are errors.
"""

import argparse
import os
import sys
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
sys.path.insert(0, str(DOCS))
if (REPO / "src" / "omicsbayes").is_dir():
    sys.path.insert(0, str(REPO / "src"))

from api_pages import write_api_pages  # noqa: E402
from registry_tables import DIRECTIVES  # noqa: E402
from tables import TableDirective  # noqa: E402

import omicsbayes  # noqa: E402

project = "omicsbayes"
author = "the omicsbayes authors"
copyright = "the omicsbayes authors"
release = version = omicsbayes.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "myst_nb",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb"}
exclude_patterns = [
    "_build",
    "_generated",
    "**.ipynb_checkpoints",
    "api_pages.py",
    "tables.py",
    "registry_tables.py",
    "conf.py",
]
templates_path = ["_templates"]
root_doc = "index"
smartquotes = False  # command lines keep their "--"

# API reference
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": False}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks = set()

# MyST and the executed tutorials
myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_heading_anchors = 3
nb_execution_mode = os.environ.get("OMICSBAYES_DOCS_EXECUTE", "cache")
nb_execution_cache_path = str(DOCS / "_build" / ".jupyter_cache")
nb_execution_timeout = 600
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True
nb_output_stderr = "remove"  # progress bars and library warnings stay out of the pages

# HTML
html_theme = "pydata_sphinx_theme"
html_title = f"omicsbayes {release}"
html_theme_options = {
    "navigation_depth": 2,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "navbar_end": ["navbar-icon-links"],
}
html_static_path = []
html_show_sourcelink = False


class CommandHelp(Directive):
    """``.. command-help::`` renders ``omicsbayes --help`` and every subcommand's ``--help``.

    The text comes from :func:`omicsbayes.cli.build_parser` at build time, so the page shows what
    the installed command prints.
    """

    has_content = False

    def run(self):
        from omicsbayes.cli import build_parser

        parser = build_parser()
        os.environ["COLUMNS"] = "100"
        blocks = [("omicsbayes --help", parser.format_help())]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    blocks.append((f"omicsbayes {name} --help", sub.format_help()))
        out = []
        for title, text in blocks:
            section = nodes.section(ids=[nodes.make_id(title)])
            section += nodes.title(text=title)
            block = nodes.literal_block(text, text)
            block["language"] = "text"
            section += block
            out.append(section)
        return out


def drop_type_docstrings(app, what, name, obj, options, lines):
    """A constant without a ``#:`` comment gets its type's docstring (numpy's ``ndarray``,
    which opens with its constructor's signature): leave it out, the page shows the value."""
    first = next((line.strip() for line in lines if line.strip()), "")
    if what in ("data", "attribute") and first.startswith(f"{type(obj).__name__}("):
        lines[:] = []


def setup(app):
    write_api_pages(DOCS / "api")
    app.connect("autodoc-process-docstring", drop_type_docstrings, priority=100)  # before numpydoc
    app.add_directive("command-help", CommandHelp)
    app.add_directive("results-table", TableDirective)
    for name, directive in DIRECTIVES.items():
        app.add_directive(name, directive)
    return {"parallel_read_safe": True}
