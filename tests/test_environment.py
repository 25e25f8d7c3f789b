"""The package lists agree: requirements.txt (the notebooks' packages, what `make lab` installs) with
environment.yml, requirements.txt with requirements-dev.txt (the tests and tools, what `make test`
adds) with environment-dev.yml; the notebooks import nothing that `make lab` leaves out."""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import json
import pathlib
import re
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONDA_NAMES = {"pytorch": "torch"}


def _parse(lines):
    found = {}
    for line in lines:
        line = line.split("#")[0].strip()
        match = re.match(r"^([A-Za-z0-9_.-]+)\s*(.*)$", line)
        if match:
            name = CONDA_NAMES.get(match.group(1).lower(), match.group(1).lower())
            found[name] = match.group(2).replace(" ", "")
    return found


def _pip(name):
    lines = (ROOT / name).read_text().splitlines()
    return _parse(line for line in lines if not line.startswith("-r"))


def _conda(name):
    dependencies = (ROOT / name).read_text().split("dependencies:", 1)[1]
    conda = _parse(line.strip()[2:] for line in dependencies.splitlines() if line.strip().startswith("- "))
    assert conda.pop("python") == ">=3.10" and conda.pop("pip") == ""
    return conda


def test_requirements_and_environments_agree():
    lab, dev = _pip("requirements.txt"), _pip("requirements-dev.txt")
    assert (ROOT / "requirements-dev.txt").read_text().count("-r requirements.txt") == 1
    assert not lab.keys() & dev.keys(), "a package named in both files"
    assert _conda("environment.yml") == lab
    assert _conda("environment-dev.yml") == {**lab, **dev}


def test_torch_is_a_range_not_a_pin():
    pip = _pip("requirements.txt")
    assert ">=" in pip["torch"] and "==" not in pip["torch"]


def _pyproject_list(name):
    """A list of pyproject.toml's ``[project]`` (``dependencies``) or of its optional dependencies
    (``teaching``), parsed as the requirement lines are (Python 3.10 has no tomllib)."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert pyproject.count(f"\n{name} = [") == 1, f"pyproject.toml should hold one list {name!r}"
    block = pyproject.split(f"\n{name} = [", 1)[1].split("]", 1)[0]
    return _parse(re.findall(r'"([^"]+)"', block))


def test_runtime_dependencies_are_in_the_requirements():
    pyproject = (ROOT / "pyproject.toml").read_text()
    runtime, teaching = _pyproject_list("dependencies"), _pyproject_list("teaching")
    assert runtime.items() <= _pip("requirements.txt").items()
    assert teaching.items() <= _pip("requirements.txt").items()
    assert not runtime.keys() & teaching.keys(), "a package both a dependency and in the teaching extra"
    assert "python_requires" not in pyproject and 'requires-python = ">=3.10"' in pyproject
    # The distribution is not PyPI's `helpers` (another project); the import name stays helpers.
    assert re.search(r'^name = "posenc-helpers"$', pyproject, re.M)


@functools.cache
def _loaded_by_import_helpers():
    """The files of ``helpers`` that ``import helpers`` loads, in a fresh Python."""
    import subprocess

    code = (
        "import sys, helpers\n"
        "for name, module in list(sys.modules.items()):\n"
        "    if name.split('.')[0] == 'helpers' and getattr(module, '__file__', None):\n"
        "        print(module.__file__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return {pathlib.Path(line).resolve() for line in out.split()}


def test_the_dependencies_are_what_the_maths_imports():
    """Every package a module loaded by ``import helpers`` imports is a dependency in pyproject.toml;
    every package the rest of ``helpers`` (plots, widgets, exercises, the experiment) imports comes
    with the dependencies and the ``teaching`` extra. A maths module that starts importing
    matplotlib, or a dependency no longer imported, fails here."""
    runtime, teaching = set(_pyproject_list("dependencies")), set(_pyproject_list("teaching"))
    with_teaching = _installed_closure(runtime | teaching)
    providers = _module_providers()
    loaded = _loaded_by_import_helpers()
    imported_by_maths, outside = set(), {}
    for path in sorted((ROOT / "helpers").rglob("*.py")):
        modules = _imported_modules(path.read_text()) - set(sys.stdlib_module_names) - {"helpers", "__future__"}
        for module in modules:
            dists = {d.lower().replace("_", "-") for d in providers.get(module, [])}
            if path.resolve() in loaded:
                imported_by_maths |= dists & runtime
                if not dists & runtime:
                    outside[f"{path.relative_to(ROOT)}: {module}"] = "not in dependencies"
            elif not dists & with_teaching:
                outside[f"{path.relative_to(ROOT)}: {module}"] = "not in dependencies or the teaching extra"
    assert not outside, outside
    assert imported_by_maths == runtime, f"dependencies that import helpers does not use: {runtime - imported_by_maths}"


def _installed_closure(names):
    """The distributions ``names`` pull in, read from the installed packages' own metadata."""
    from packaging.requirements import Requirement

    seen, todo = set(), [n.lower().replace("_", "-") for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for text in importlib.metadata.requires(name) or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name.lower().replace("_", "-"))
    return seen


@functools.cache
def _module_providers():
    """Top-level module name -> the distributions whose installed files provide it, read from each
    distribution's RECORD (Python 3.10's ``packages_distributions`` reads only ``top_level.txt``,
    which wheels built with meson, such as numpy's, scipy's and matplotlib's, do not carry)."""
    providers: dict[str, set[str]] = {}
    for dist in importlib.metadata.distributions():
        tops = {line.split(",", 1)[0].split("/", 1)[0] for line in (dist.read_text("RECORD") or "").splitlines()}
        for top in tops:
            if top.endswith((".dist-info", ".egg-info", ".data", ".pth")) or top in ("..", "__pycache__", ""):
                continue
            providers.setdefault(top[:-3] if top.endswith(".py") else top, set()).add(dist.metadata["Name"])
        for top in (dist.read_text("top_level.txt") or "").split():  # an editable install (helpers) has no files
            providers.setdefault(top, set()).add(dist.metadata["Name"])
    return providers


def _imported_modules(source):
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a cell with IPython syntax (%matplotlib)
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def _lab_modules():
    """Top-level modules the notebooks and ``helpers`` import (the site builder lives in tools/)."""
    found = set()
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        for cell in cells:
            if cell["cell_type"] == "code":
                found |= _imported_modules("".join(cell["source"]))
    for path in sorted((ROOT / "helpers").rglob("*.py")):
        found |= _imported_modules(path.read_text())
    return found - set(sys.stdlib_module_names) - {"helpers", "__future__"}


def test_the_notebooks_import_only_what_make_lab_installs():
    """A notebook or ``helpers`` that imports (say) transformers would fail for a learner after
    ``make lab``, which installs requirements.txt alone."""
    closure = _installed_closure(_pip("requirements.txt"))
    providers = _module_providers()
    missing = {}
    for module in sorted(_lab_modules()):
        dists = {d.lower().replace("_", "-") for d in providers.get(module, [])}
        if not dists & closure:
            missing[module] = sorted(dists) or "not installed"
    assert not missing, f"imported by a notebook or helpers but not installed by make lab: {missing}"


@pytest.mark.parametrize("module", ["transformers", "hypothesis", "nbval"])
def test_the_import_check_catches_a_development_package(module, monkeypatch):
    real = _lab_modules()
    monkeypatch.setattr(sys.modules[__name__], "_lab_modules", lambda: real | {module})
    with pytest.raises(AssertionError, match=module):
        test_the_notebooks_import_only_what_make_lab_installs()


def test_a_notebook_diff_reads_as_cells(tmp_path):
    """nbdime (``make diff-setup``) shows a changed sentence as text and a changed picture as one line."""
    import shutil
    import subprocess

    import nbformat

    nbdiff = pathlib.Path(sys.executable).parent / "nbdiff"
    assert nbdiff.exists(), "nbdime is not installed in this environment (requirements-dev.txt names it)"
    before = ROOT / "notebooks" / "02_one_clock.ipynb"
    after = tmp_path / "after.ipynb"
    shutil.copy(before, after)
    notebook = nbformat.read(after, as_version=4)
    notebook.cells[0].source += "\n\nA sentence added for the diff."
    pictures = [
        o for c in notebook.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})
    ]
    pictures[0]["data"]["image/png"] = pictures[0]["data"]["image/png"][:-8] + "AAAAAAA="
    nbformat.write(notebook, after)
    shown = subprocess.run(
        [str(nbdiff), "--no-color", str(before), str(after)], capture_output=True, text=True, check=True
    ).stdout
    assert "+A sentence added for the diff." in shown
    assert "snip base64" in shown and len(shown) < 5000, "a picture should be one summarised line, not base64"
    assert '"cell_type"' not in shown, "the diff should be by cell, not JSON"
