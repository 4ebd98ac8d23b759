"""Write the API reference pages (``docs/api/<package>.rst``) from the code.

Each page lists the names in the package's ``__all__``, then, module by module, the public names
of its public modules that the package does not re-export. Every object is documented once, under
the first public name found. The pages are regenerated on every build (they are not committed).
"""

import importlib
import inspect
import pkgutil
import shutil
from pathlib import Path

PACKAGES = ("io", "preprocess", "models", "tl", "pl", "evaluate", "protocols")


def _public(name):
    return not any(part.startswith("_") for part in name.split("."))


def _module_names(module):
    """Public names a module offers: its ``__all__``, else the functions and classes defined in
    it or in its private submodules."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    names = []
    for name, obj in vars(module).items():
        if name.startswith("_") or not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        home = getattr(obj, "__module__", "") or ""
        if home == module.__name__ or home.startswith(module.__name__ + "._"):
            names.append(name)
    return sorted(names)


def submodules(package):
    """Public modules below ``package``, depth first, in name order."""
    found = []
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if _public(info.name.removeprefix("omicsbayes.")):
            found.append(info.name)
    return sorted(found)


def api_entries(package_name):
    """``[(module name, [names])]`` for one package: the package's own ``__all__`` first."""
    package = importlib.import_module(f"omicsbayes.{package_name}")
    seen = set()
    entries = []
    for module_name in [package.__name__, *submodules(package)]:
        module = importlib.import_module(module_name)
        names = []
        for name in _module_names(module):
            obj = getattr(module, name)
            key = id(obj) if (inspect.isfunction(obj) or inspect.isclass(obj)) else None
            if key is not None and key in seen:
                continue
            seen.add(key)
            names.append(name)
        entries.append((module_name, names))
    return entries


def _autosummary(module_name, names):
    lines = [f".. currentmodule:: {module_name}", "", ".. autosummary::", "   :toctree: generated"]
    lines += ["   :nosignatures:", ""] + [f"   {n}" for n in names] + [""]
    return lines


def page(package_name):
    """The reStructuredText of one package's API page."""
    entries = api_entries(package_name)
    title = f"omicsbayes.{package_name}"
    lines = [title, "=" * len(title), "", f".. automodule:: {title}", ""]
    (_, names), rest = entries[0], entries[1:]
    if names:
        lines += _autosummary(title, names)
    for module_name, names in rest:
        lines += [module_name, "-" * len(module_name), "", f".. automodule:: {module_name}", ""]
        if names:
            lines += _autosummary(module_name, names)
    return "\n".join(lines) + "\n"


def write_api_pages(folder):
    """Write one page per package into ``folder`` (only where the text changed), and clear the
    stubs autosummary generated last time (``generated/``), so a removed name leaves no page."""
    folder = Path(folder)
    folder.mkdir(exist_ok=True)
    shutil.rmtree(folder / "generated", ignore_errors=True)
    for package_name in PACKAGES:
        path = folder / f"{package_name}.rst"
        text = page(package_name)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
