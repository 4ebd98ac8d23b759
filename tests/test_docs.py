"""The documentation: the site builds with warnings as errors (tutorials executed), the pages agree
with the code's registries, and the project speaks of itself without a diary."""

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from omicsbayes import pl, protocols, tl
from omicsbayes.io.cohort import READERS, RENAMES

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
sys.path.insert(0, str(DOCS))

import api_pages  # noqa: E402
import registry_tables  # noqa: E402


def _section(path, heading):
    """The text of the markdown section under ``heading`` up to the next heading."""
    text = Path(path).read_text()
    start = text.index(heading + "\n") + len(heading) + 1
    following = re.search(r"^#{1,6} ", text[start:], flags=re.M)
    return text[start : start + following.start()] if following else text[start:]


def _table(section):
    """Rows of the first markdown table in ``section``, as lists of cell strings."""
    lines = []
    for line in section.splitlines():
        if line.startswith("|"):
            lines.append(line)
        elif lines:
            break
    rows = [[c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))] for line in lines]
    return rows[2:]


def _code_names(cell):
    return re.findall(r"`([^`]+)`", cell)


@pytest.mark.slow
def test_the_site_builds_with_warnings_as_errors(tmp_path):
    """``make docs``'s build, into a temporary folder, executing every tutorial."""
    env = {**os.environ, "OMICSBAYES_DOCS_EXECUTE": "force"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", "-q"]
    command += ["-d", str(tmp_path / "doctrees"), str(DOCS), str(tmp_path / "html")]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr[-5000:]
    html = tmp_path / "html"
    for page in ["index", "api/tl", "api/cli", "tutorials/notebook", "tutorials/workflow"]:
        assert (html / f"{page}.html").is_file(), page
    cli = (html / "api" / "cli.html").read_text()
    assert "omicsbayes fit --help" in cli and "usage: omicsbayes fit" in cli
    for name in tl.__all__:
        assert (html / "api" / "generated" / f"omicsbayes.tl.{name}.html").is_file(), name


def test_api_pages_list_every_exported_name():
    for package in api_pages.PACKAGES:
        text = api_pages.page(package)
        module = __import__(f"omicsbayes.{package}", fromlist=["__all__"])
        names = set(re.findall(r"^   (\w+)$", text, flags=re.M))
        assert set(module.__all__) <= names, package


def test_model_table_covers_every_model_with_its_capabilities():
    from omicsbayes import models
    from omicsbayes.models._capabilities import CAPABILITIES

    rows = registry_tables.model_rows()
    assert list(rows["class"]) == list(models.__all__)
    for _, row in rows.iterrows():
        declared = [c for c in row["capabilities"].split(", ") if c]
        assert declared and set(declared) <= set(CAPABILITIES), row["class"]
    readme_table = _table(_section(REPO / "README.md", "# omicsbayes"))
    in_readme = {name for row in readme_table for name in _code_names(row[1])}
    assert in_readme == set(models.__all__)


def test_adding_a_model_names_the_registries_a_model_must_join():
    from omicsbayes import models
    from omicsbayes.models._capabilities import CAPABILITIES, models_with

    steps = _section(DOCS / "models.md", "## Adding a model")
    for name in [
        "BaseOmicsEstimator",
        "_WHERE",
        "capabilities",
        "CAPABILITIES",
        "requires",
    ]:
        assert f"`{name}" in steps or name in steps, name
    assert set(models._WHERE) == set(models.__all__)
    from omicsbayes.models._base import BaseOmicsEstimator, MCMCEstimator, VBEstimator

    assert issubclass(VBEstimator, BaseOmicsEstimator)
    assert issubclass(MCMCEstimator, BaseOmicsEstimator)
    from omicsbayes.config import config_schema

    schema = config_schema(REPO / "workflow" / "schemas" / "config.schema.yaml")
    enum = schema["properties"]["models"]["additionalProperties"]["properties"]["class"]["enum"]
    runnable = set()
    for kind in protocols.KINDS:
        required = protocols.get(kind).requires
        runnable |= set.intersection(*(set(models_with(c)) for c in required))
    assert set(enum) == runnable
    assert set(CAPABILITIES) == set(registry_tables.capability_rows()["capability"])


def test_experiment_kinds_tables_are_drawn_from_the_registry():
    """docs/workflow.md and docs/usage.md render the kinds tables from omicsbayes.protocols and
    the kinds' rule files (registry_tables): no hand-kept row to edit when a kind is added."""
    from omicsbayes.protocols import models_for

    section = _section(DOCS / "workflow.md", "### Experiment kinds")
    assert "```{kinds-workflow-table}\n```" in section and _table(section) == []
    usage = _section(DOCS / "usage.md", "## Experiment kinds: `omicsbayes.protocols`")
    assert "```{kinds-table}\n```" in usage and _table(usage) == []
    assert list(registry_tables.kind_rows()["kind"]) == list(protocols.KINDS)
    rows = registry_tables.kind_workflow_rows()
    assert [re.match(r"``(\w+)``", k)[1] for k in rows["kind"]] == list(protocols.KINDS)
    assert sum("(default)" in k for k in rows["kind"]) == 1
    for name, (_, row) in zip(protocols.KINDS, rows.iterrows()):
        kind = protocols.get(name)
        cells = dict(zip(rows.columns, row))
        types = cells["protocol types (split count key, default)"]
        assert all(f"``{t}`` (``{key}``," in types for t, (key, _) in kind.split_counts.items())
        assert cells["models"].split(", ") == sorted(models_for(kind.requires))
        assert cells["metrics (per split)"].split(", ") == list(kind.metrics)
        assert ("``figures``" in cells["optional sections"]) == kind.model_figures
        assert ("``sweeps``" in cells["optional sections"]) == kind.sweeps
        assert cells["what it measures"] and cells["figures/metrics.png"]
        # every results path the rule file names is an output of one of its rules
        text = (REPO / "workflow" / "rules" / f"{name}.smk").read_text()
        outputs = registry_tables.rule_outputs(REPO / "workflow" / "rules" / f"{name}.smk")
        assert len(outputs) == len(re.findall(r"^rule \w+:", text, flags=re.M)) >= 1
        paths = [p for rule_paths in outputs.values() for p in rule_paths]
        assert sorted(paths) == sorted(re.findall(r'"(results/[^"]+)"', text)), name
        rules = cells["rule file: rules and outputs (under results/{experiment}/)"]
        for rule, rule_paths in outputs.items():
            assert rule_paths and f"rule ``{rule}``" in rules, (name, rule)
            assert all(p.removeprefix("results/{experiment}/") in rules for p in rule_paths)


def test_cohort_formats_table_matches_the_readers():
    rows = _table(_section(DOCS / "workflow.md", "### Cohort formats"))
    formats = [_code_names(row[0])[0] for row in rows]
    assert sorted(formats) == sorted(READERS)
    for fmt, row in zip(formats, rows):
        allowed = set(inspect.signature(READERS[fmt]).parameters) | set(RENAMES.get(fmt, {}))
        keys = {k for k in _code_names(re.sub(r"\([^)]*\)", "", row[1])) if k != "..."}
        assert keys <= allowed, (fmt, keys - allowed)


def test_usage_page_lists_every_tl_and_pl_function():
    tl_section = _section(DOCS / "usage.md", "## `omicsbayes.tl`")
    tl_rows = _table(tl_section[tl_section.index("| function |") :])
    pl_rows = _table(_section(DOCS / "usage.md", "## `omicsbayes.pl`"))
    tl_named = {_code_names(row[0])[0].split("(")[0] for row in tl_rows}
    pl_named = {_code_names(row[0])[0].split("(")[0] for row in pl_rows}
    assert tl_named == set(tl.__all__) - {"mcmc_diagnostics", "predict"}
    usage = (DOCS / "usage.md").read_text()
    assert "`tl.mcmc_diagnostics(idata)`" in usage and "`tl.predict(adata, fit" in usage
    assert pl_named == set(pl.__all__)


DIARY = re.compile(r"session[ _-]?[0-9]+|sessions? [0-9]|work" r"\s" "period", re.I)
PROJECT_TEXT = [
    "README.md",
    "CHANGELOG.md",
    "docs",
    "src",
    "workflow",
    "config",
    "tests",
    "benchmarks",
]


def _project_files():
    """The repository's tracked files under :data:`PROJECT_TEXT` (build output such as an
    egg-info folder is not the project's text)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", *PROJECT_TEXT],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [REPO / name for name in listed.split("\0") if name]


def test_no_line_dates_anything_by_a_work_period():
    hits = []
    for path in _project_files():
        if not path.is_file() or path.suffix in {".gz", ".png", ".h5ad", ".pyc", ".nc"}:
            continue
        if "_build" in path.parts or "generated" in path.parts:
            continue
        for number, line in enumerate(path.read_text(errors="ignore").splitlines(), 1):
            if DIARY.search(line):
                hits.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not hits, "\n".join(hits)


def test_readme_links_point_at_files_of_the_repository():
    text = (REPO / "README.md").read_text()
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert local, "the README links into the docs"
    missing = [link for link in local if not (REPO / link).exists()]
    assert not missing, missing
    assert len(text.splitlines()) <= 200


@pytest.mark.slow
def test_readme_notebook_example_runs(tmp_path):
    code = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)[0]
    env = {**os.environ, "MPLBACKEND": "Agg"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "pbmc.obfit").is_file()
