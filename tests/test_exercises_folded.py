"""Every exercise has a self-check that ran, and its answer folded away.

The pattern in each notebook (DESIGN.md, "Notebooks"):

    ### Exercise N (练习 N)              markdown: the question
    answer = None  # replace None ...   code: a placeholder, then helpers.check_answer(..., hint="...")
    <details><summary>Answer ...        markdown: the answer, folded

The check cell's saved output says "not answered yet": the self-check ran in the committed
notebook without failing, and a learner who opens it sees the placeholder, not the answer.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
EXERCISE = re.compile(r"^###\s+Exercise\s+\d+", re.MULTILINE)
HEADING = re.compile(r"^#{1,3}\s", re.MULTILINE)
PLACEHOLDER = re.compile(r"^\s*\w+\s*=\s*None\b", re.MULTILINE)


def _text(cell) -> str:
    return "".join(output.get("text", "") for output in cell.get("outputs", []) if output.get("output_type") == "stream")


def exercises(notebook) -> list[tuple[str, list]]:
    """Each exercise's heading line and the cells after it, up to the next heading."""
    found = []
    cells = notebook.cells
    for k, cell in enumerate(cells):
        if cell.cell_type != "markdown" or not EXERCISE.search(cell.source):
            continue
        heading = EXERCISE.search(cell.source).group(0)
        rest = []
        for later in cells[k + 1:]:
            if later.cell_type == "markdown" and HEADING.search(later.source):
                break
            rest.append(later)
        found.append((heading, rest))
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_exercises_have_self_check_and_folded_answer(path):
    notebook = nbformat.read(path, as_version=4)
    found = exercises(notebook)
    if not path.stem.startswith("00"):
        assert found, f"{path.name}: no '### Exercise N' section"
    for heading, cells in found:
        where = f"{path.name}, {heading!r}"
        checks = [c for c in cells if c.cell_type == "code" and "check_answer(" in c.source]
        assert checks, f"{where}: no code cell calling helpers.check_answer after the question"
        for check in checks:
            assert PLACEHOLDER.search(check.source), f"{where}: the check cell has no `answer = None` placeholder"
            assert "hint=" in check.source, f"{where}: check_answer has no hint= to say what is wrong"
            assert "not answered yet" in _text(check), (
                f"{where}: the saved output of the check cell does not say 'not answered yet' "
                f"(not executed, or the check failed): {_text(check)[:200]!r}")
        first_check = cells.index(checks[0])
        folded = [c for c in cells[first_check + 1:] if c.cell_type == "markdown" and "<details>" in c.source]
        assert folded, f"{where}: no markdown cell with the answer in <details> after the check cell"
        answer = folded[0].source
        assert "<summary>" in answer and "</details>" in answer, f"{where}: <details> without <summary> or not closed"
        inside = re.sub(r"<summary>.*?</summary>|</?details>", "", answer, flags=re.DOTALL).strip()
        assert len(inside) >= 20, f"{where}: the folded answer is empty ({inside!r})"
        before = [c for c in cells[:first_check] if c.cell_type == "markdown"]
        assert not any("<details>" in c.source for c in before), f"{where}: the answer comes before the self-check"


ANY_EXERCISE_HEADING = re.compile(r"^#{1,6}[^\n]*(exercise|练习)[^\n]*", re.IGNORECASE | re.MULTILINE)
SECTION_HEADING = re.compile(r"^##\s+Exercises\s+\(练习\)\s*$", re.MULTILINE)


def stray_exercise_headings(notebook) -> list[str]:
    """Headings that name an exercise but do not follow the pattern, so the checks above would skip them."""
    stray = []
    for cell in notebook.cells:
        if cell.cell_type != "markdown":
            continue
        for line in (m.group(0) for m in ANY_EXERCISE_HEADING.finditer(cell.source)):
            if not (EXERCISE.match(line) or SECTION_HEADING.match(line)):
                stray.append(line)
    return stray


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_exercise_escapes_the_checks_by_its_heading(path):
    stray = stray_exercise_headings(nbformat.read(path, as_version=4))
    assert not stray, f"{path.name}: exercise headings the checks would skip (write '### Exercise N (练习 N)'): {stray}"


@pytest.mark.parametrize("heading", ["### Exercise four (练习 4)", "#### Exercise 2 (练习 2)", "### exercise 1", "### 练习 3",
                                     "## Exercise 1 (练习 1)"])
def test_a_heading_written_differently_is_caught(heading):
    notebook = nbformat.v4.new_notebook()
    notebook.cells.append(nbformat.v4.new_markdown_cell(heading + "\n\nCompute something."))
    assert stray_exercise_headings(notebook) == [heading]
