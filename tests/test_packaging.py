"""Packaging: dependency ranges agree with the lock, one version string, and a wheel that works
on its own (demo cohorts and a model fit from an environment that cannot see the checkout)."""

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import omicsbayes
from omicsbayes.io.demo import DEMOS

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
DEMO_SHAPES = {
    "tissue_gene_expression": [189, 500],
    "gse7390": [198, 76],
    "digits": [1797, 64],
    "breast_cancer_wisconsin": [569, 30],
}


def _lock():
    pins = {}
    for line in (REPO / "requirements.lock").read_text().splitlines():
        name, version = line.split("==")
        pins[canonicalize_name(name)] = version
    return pins


def test_every_dependency_is_a_range_holding_its_locked_pin():
    pins = _lock()
    project = PYPROJECT["project"]
    groups = {"dependencies": project["dependencies"], **project["optional-dependencies"]}
    assert {"workflow", "dev", "bench"} <= set(groups)
    for group, requirements in groups.items():
        for text in requirements:
            req = Requirement(text)
            name = canonicalize_name(req.name)
            assert "==" not in text, f"{group}: {text} is an exact pin; ranges go in pyproject"
            assert name in pins, f"{group}: {req.name} has no pin in requirements.lock"
            assert req.specifier.contains(pins[name]), (
                f"{group}: locked {req.name}=={pins[name]} is outside {req.specifier}"
            )
    workflow = {canonicalize_name(Requirement(r).name) for r in groups["workflow"]}
    library = {canonicalize_name(Requirement(r).name) for r in groups["dependencies"]}
    assert "snakemake" in workflow and not any(n.startswith("snakemake") for n in library)


def test_version_has_one_source():
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    attr = PYPROJECT["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "omicsbayes.__version__"
    assert re.fullmatch(r"\d+\.\d+\.\d+", omicsbayes.__version__)


# Runs inside the fresh environment; prints one JSON line (the fit is a scanpy-style tl call).
SCRIPT = """
import json
from importlib import import_module
import numpy as np
import omicsbayes
from omicsbayes.io import load_demo
from omicsbayes.io.demo import DEMOS

shapes = {name: list(load_demo(name).shape) for name in DEMOS}
adata = load_demo("breast_cancer_wisconsin")
y = adata.obs["diagnosis"].to_numpy()
MODEL = {"n_factors": 3, "max_iter": 30, "random_state": 0}
est = import_module("omicsbayes.tl").rank_factor(adata, label_key="diagnosis", **MODEL)
print(json.dumps({
    "file": omicsbayes.__file__,
    "version": omicsbayes.__version__,
    "shapes": shapes,
    "accuracy": float(np.mean(est.predict(adata.X) == y)),
    "scores_finite": bool(np.isfinite(est.scores_).all()),
    "scores_in_obsm": adata.obsm["X_rank_factor"].shape[0] == adata.n_obs,
}))
"""


def _build_wheel(tmp_path):
    """Build the wheel from a copy of the sources (the checkout gets no build/ or egg-info)."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    shutil.copytree(REPO / "src", source / "src", ignore=ignore)
    dist = tmp_path / "dist"
    # no build isolation: the build backend (setuptools, pinned in the dev extra) is already
    # installed, so the test runs offline
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(dist), str(source)],
        check=True, capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    (wheel,) = dist.glob("omicsbayes-*.whl")
    return wheel


@pytest.mark.slow
def test_wheel_works_outside_the_checkout(tmp_path):
    wheel = _build_wheel(tmp_path)
    assert wheel.name == f"omicsbayes-{omicsbayes.__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        info = f"omicsbayes-{omicsbayes.__version__}.dist-info"
        metadata = z.read(f"{info}/METADATA").decode()
        entry_points = z.read(f"{info}/entry_points.txt").decode()
    assert "omicsbayes/py.typed" in names
    for name in DEMOS:
        assert {f"omicsbayes/data/{name}.tsv.gz", f"omicsbayes/data/{name}.samples.tsv"} <= names
    assert f"{info}/licenses/LICENSE" in names and "License-Expression: MIT" in metadata
    assert "omicsbayes = omicsbayes.cli:main" in entry_points
    assert "Requires-Dist: snakemake" in metadata and 'extra == "workflow"' in metadata

    # A fresh environment that sees the project's installed dependencies (one path line in a .pth
    # file; the .pth files there, such as an editable omicsbayes, are not processed) but not the
    # checkout, with the wheel installed into it without dependencies.
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    Path(site, "project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--no-index", "-q", str(wheel)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    assert (env_dir / "bin" / "omicsbayes").is_file()  # the console script

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONNOUSERSITE="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    run = subprocess.run(
        [python, "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    imported = Path(out["file"]).resolve()
    assert imported.is_relative_to(env_dir.resolve())
    assert not imported.is_relative_to(REPO)
    assert out["version"] == omicsbayes.__version__
    assert out["shapes"] == DEMO_SHAPES
    assert out["scores_finite"] and out["scores_in_obsm"] and out["accuracy"] > 0.9
