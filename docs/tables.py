"""``.. results-table:: results/NAME.tsv`` renders a results table a command wrote.

The table is read at build time from the repository's ``results/`` folder. Where the file is
absent (a fresh clone: ``results/`` is not committed) the page says which command writes it
instead of showing numbers.
"""

import datetime
from pathlib import Path

import pandas as pd
from docutils import nodes
from docutils.parsers.rst import Directive, directives

REPO = Path(__file__).resolve().parents[1]


def cell_paragraph(text):
    """A paragraph of a table cell's text, its ````code```` spans as inline literals."""
    paragraph = nodes.paragraph()
    for i, part in enumerate(text.split("``")):
        if part:
            paragraph += nodes.literal(text=part) if i % 2 else nodes.Text(part)
    return paragraph


def table_node(frame):
    """A docutils table of a DataFrame (header row plus one row per record)."""
    table = nodes.table()
    group = nodes.tgroup(cols=frame.shape[1])
    table += group
    for _ in frame.columns:
        group += nodes.colspec(colwidth=1)
    head = nodes.thead()
    group += head
    body = nodes.tbody()
    group += body

    def add_row(parent, cells):
        row = nodes.row()
        for cell in cells:
            entry = nodes.entry()
            entry += cell_paragraph(str(cell))
            row += entry
        parent += row

    add_row(head, frame.columns)
    for record in frame.itertuples(index=False):
        add_row(body, ["" if pd.isna(v) else v for v in record])
    return table


class TableDirective(Directive):
    """Render ``results/<file>.tsv``; option ``command``: the command that writes it."""

    required_arguments = 1
    option_spec = {"command": directives.unchanged_required}

    def run(self):
        path = REPO / self.arguments[0]
        command = self.options["command"]
        if not path.exists():
            text = f"{self.arguments[0]} is not in this checkout; `{command}` writes it."
            return [nodes.paragraph(text=text)]
        frame = pd.read_csv(path, sep="\t")
        written = datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.UTC)
        caption = f"{self.arguments[0]}, written {written:%Y-%m-%d %H:%M} UTC by `{command}`."
        return [nodes.paragraph(text=caption), table_node(frame.round(4))]
