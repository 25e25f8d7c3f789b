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
