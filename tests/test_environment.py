"""requirements.txt and environment.yml name the same packages with the same bounds."""

from __future__ import annotations

import pathlib
import re

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


def test_requirements_and_environment_agree():
    pip = _parse((ROOT / "requirements.txt").read_text().splitlines())
    dependencies = (ROOT / "environment.yml").read_text().split("dependencies:", 1)[1]
    conda_lines = [line.strip()[2:] for line in dependencies.splitlines() if line.strip().startswith("- ")]
    conda = _parse(conda_lines)
    conda.pop("python")
    conda.pop("pip")
    assert pip == conda


def test_torch_is_a_range_not_a_pin():
    pip = _parse((ROOT / "requirements.txt").read_text().splitlines())
    assert ">=" in pip["torch"] and "==" not in pip["torch"]


def test_runtime_dependencies_are_in_the_requirements():
    pyproject = (ROOT / "pyproject.toml").read_text()
    block = pyproject.split("dependencies = [", 1)[1].split("]", 1)[0]
    runtime = _parse(re.findall(r'"([^"]+)"', block))
    pip = _parse((ROOT / "requirements.txt").read_text().splitlines())
    assert runtime.items() <= pip.items()


def test_a_notebook_diff_reads_as_cells(tmp_path):
    """nbdime (``make diff-setup``) shows a changed sentence as text and a changed picture as one line."""
    import shutil
    import subprocess
    import sys

    import nbformat

    nbdiff = pathlib.Path(sys.executable).parent / "nbdiff"
    assert nbdiff.exists(), "nbdime is not installed in this environment (requirements.txt names it)"
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
