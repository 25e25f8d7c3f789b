"""The committed notebooks are clean: executed in order, with outputs, no errors, no machine paths."""

from __future__ import annotations

import json
import pathlib
import re

import nbformat
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MACHINE_PATH = re.compile(r"(/root/|/tmp/|/home/|/Users/|/work/|site-packages|[A-Z]:\\\\Users)")
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
ids = [nb.name for nb in NOTEBOOKS]


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]


def test_the_collection_is_there():
    assert NOTEBOOKS and NOTEBOOKS[0].name.startswith("00_")
    numbers = [int(nb.name[:2]) for nb in NOTEBOOKS]
    assert numbers == list(range(len(numbers))), f"notebooks are not numbered 00, 01, ...: {numbers}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_valid_and_executed_once_top_to_bottom(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    counts = [c.execution_count for c in code_cells(nb)]
    assert counts == list(range(1, len(counts) + 1)), f"execution counts {counts}: run `make notebooks`"
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_outputs_are_clean(path):
    nb = nbformat.read(path, as_version=4)
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            assert out.output_type != "error", f"cell {index} saved an error: {out.get('ename')}"
            assert out.get("name") != "stderr", f"cell {index} saved stderr (a warning?): {out.get('text', '')[:200]}"
            text = json.dumps(out.get("data", {}).get("text/plain", "")) + json.dumps(out.get("text", ""))
            assert not MACHINE_PATH.search(text), f"cell {index} output shows a path of this machine"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_widget_metadata_is_absent_or_valid(path):
    nb = nbformat.read(path, as_version=4)
    widgets = nb.metadata.get("widgets")
    if widgets is None:
        return
    assert WIDGET_STATE in widgets, "metadata.widgets lacks the widget-state entry"
    state = widgets[WIDGET_STATE]
    assert "state" in state and isinstance(state["state"], dict), "GitHub refuses widget metadata without 'state'"
    assert "version_major" in state and "version_minor" in state


@pytest.mark.parametrize("path", [nb for nb in NOTEBOOKS if not nb.name.startswith("00_")],
                         ids=[nb.name for nb in NOTEBOOKS if not nb.name.startswith("00_")])
def test_every_lesson_saves_a_picture(path):
    nb = nbformat.read(path, as_version=4)
    pictures = [o for c in code_cells(nb) for o in c.outputs if "image/png" in o.get("data", {})]
    assert pictures, "no figure saved as a picture: GitHub readers would see none"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_ignored_outputs_are_few_and_justified(path):
    nb = nbformat.read(path, as_version=4)
    ignored = [c for c in code_cells(nb) if "NBVAL_IGNORE_OUTPUT" in c.source]
    for cell in ignored:
        assert re.search(r"explorer|default_device|device|perf_counter|time", cell.source, flags=re.I), (
            "NBVAL_IGNORE_OUTPUT is only for widgets, timings and device names:\n" + cell.source[:200]
        )
    assert len(ignored) <= 4


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_skeleton(path):
    nb = nbformat.read(path, as_version=4)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    title = nb.cells[0].source.splitlines()[0]
    assert title.startswith("# ") and re.search(r"[\u4e00-\u9fff]", title), "title needs the Chinese title beside it"
    assert re.search(r"[Rr]ead alongside", markdown)
    assert "import helpers" in "\n".join(c.source for c in code_cells(nb))
    assert "sys.path" not in "\n".join(c.source for c in code_cells(nb))
    for heading in re.findall(r"^## .*$", markdown, flags=re.M):
        assert re.search(r"[\u4e00-\u9fff]", heading), f"section heading without its Chinese term: {heading}"
