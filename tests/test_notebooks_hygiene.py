"""The committed notebooks are clean: executed in order, with outputs, no errors, no machine paths,
and no printed number that depends on floating-point round-off."""

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
# A number as printed: 12, -0.5, 3.6e-16, 1.2E+03 (not part of a name such as x2 or float32).
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])")
# Words after which a tiny number is a stated bound, not a measured residual: "below 1e-12: True".
BOUND = re.compile(r"(below|under|within|tolerance|atol|rtol|<|≤|<=)\s*$", re.I)
# float32 carries about 7 significant digits; a number printed with more cannot be promised everywhere.
MAX_DIGITS = 7
SMALLEST = 1e-9
ids = [nb.name for nb in NOTEBOOKS]


def roundoff_problems(nb) -> list[str]:
    """Printed numbers that would differ between CPUs, thread counts, BLAS libraries or SIMD levels.

    Reads the text a reader sees (streams and ``text/plain``) of every cell whose output is compared
    (cells marked ``NBVAL_IGNORE_OUTPUT`` are not). Flags a nonzero number below ``SMALLEST`` in
    magnitude unless it follows a bound word ("below 1e-12"), a zero written in exponent form
    (``0.0e+00``: a residual that happened to vanish here), and any number with more than
    ``MAX_DIGITS`` significant digits.
    """
    problems = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "NBVAL_IGNORE_OUTPUT" in cell.source:
            continue
        for out in cell.get("outputs", []):
            text = out.get("text", "") + out.get("data", {}).get("text/plain", "")
            for line in text.splitlines():
                for match in NUMBER.finditer(line):
                    shown = match.group(0)
                    mantissa, _, exponent = shown.lower().partition("e")
                    value = float(shown)
                    digits = mantissa.lstrip("+-").replace(".", "").lstrip("0")
                    where = f"cell {index}: {shown!r} in {line.strip()[:120]!r}"
                    if value == 0 and exponent:
                        problems.append(f"{where}: a vanishing residual; print a verdict against a tolerance")
                    elif value != 0 and abs(value) < SMALLEST and not BOUND.search(line[: match.start()]):
                        problems.append(f"{where}: a round-off-sized number; print a verdict against a tolerance")
                    elif "." in mantissa and len(digits) > MAX_DIGITS:
                        problems.append(f"{where}: {len(digits)} significant digits; round to what every CPU agrees on")
    return problems


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
            # Every textual form a reader may see (plain text, HTML, widget views), not pictures.
            shown = {k: v for k, v in out.get("data", {}).items() if not k.startswith("image/")}
            text = json.dumps(shown) + json.dumps(out.get("text", ""))
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


@pytest.mark.parametrize(
    "path",
    [nb for nb in NOTEBOOKS if not nb.name.startswith("00_")],
    ids=[nb.name for nb in NOTEBOOKS if not nb.name.startswith("00_")],
)
def test_every_lesson_saves_a_picture(path):
    nb = nbformat.read(path, as_version=4)
    pictures = [o for c in code_cells(nb) for o in c.outputs if "image/png" in o.get("data", {})]
    assert pictures, "no figure saved as a picture: GitHub readers would see none"


# The only reasons an output may escape comparison, each with what the cell must then contain.
IGNORE_REASONS = {
    "a live widget": re.compile(r"helpers\.widgets\.\w+\("),
    "a timing": re.compile(r"perf_counter|timeit|time\.time\("),
    "the device name depends on the machine": re.compile(r"default_device\(|torch\.cuda\.|__version__"),
}
IGNORE_MARK = re.compile(r"^# NBVAL_IGNORE_OUTPUT: (.+)$")


def ignore_problems(nb) -> list[str]:
    """Cells that skip nbval's comparison without one of IGNORE_REASONS, stated and true."""
    problems = []
    for index, cell in enumerate(code_cells(nb)):
        if "NBVAL_IGNORE_OUTPUT" not in cell.source:
            continue
        mark = IGNORE_MARK.match(cell.source.splitlines()[0])
        if not mark or mark.group(1) not in IGNORE_REASONS:
            problems.append(
                f"code cell {index}: the first line must be '# NBVAL_IGNORE_OUTPUT: <reason>' with a reason "
                f"from {sorted(IGNORE_REASONS)}: {cell.source.splitlines()[0][:80]!r}"
            )
        elif not IGNORE_REASONS[mark.group(1)].search(cell.source):
            problems.append(f"code cell {index}: says {mark.group(1)!r} but does not do what that reason needs")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_ignored_outputs_are_few_and_justified(path):
    nb = nbformat.read(path, as_version=4)
    problems = ignore_problems(nb)
    assert not problems, "\n".join(problems)
    assert len([c for c in code_cells(nb) if "NBVAL_IGNORE_OUTPUT" in c.source]) <= 4


@pytest.mark.parametrize(
    "source",
    [
        "# NBVAL_IGNORE_OUTPUT\nhelpers.widgets.alibi_explorer()",
        "# NBVAL_IGNORE_OUTPUT: a live widget\nprint(kappa)",
        "# NBVAL_IGNORE_OUTPUT: the timing matters\nstart = time.perf_counter()",
        "x = 1  # NBVAL_IGNORE_OUTPUT: a timing\nprint(x)",
    ],
)
def test_an_unjustified_ignore_is_caught(source):
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(source))
    assert ignore_problems(nb)


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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_no_printed_number_depends_on_roundoff(path):
    problems = roundoff_problems(nbformat.read(path, as_version=4))
    assert not problems, "\n".join(problems)


def _notebook_printing(*lines: str, source: str = "print(x)"):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="".join(line + "\n" for line in lines))]
    nb.cells.append(cell)
    return nb


@pytest.mark.parametrize(
    "line",
    [
        "spread along the diagonals: 3.6e-16",
        "special 0.0e+00   general 4.11",
        "largest difference: -1.1E-16",
        "p_0 · p_5 = 23.503971",
        "kernel +0.97396277",
        "sqrt(d/2) = 5.656854249492381",
    ],
)
def test_the_roundoff_check_catches_a_broken_notebook(line):
    assert roundoff_problems(_notebook_printing(line)), f"not flagged: {line}"


@pytest.mark.parametrize(
    "line",
    [
        "spread along the diagonals below 1e-12: True",
        "largest change is below 1e-11: True",
        "error < 1e-15: True",
        "float32 angles: 3 of 8 entries wrong; exact 0 elsewhere: 0",
        "41,829.37 tokens, ratio 1.333521, 1000000 positions, float32",
        "mean -0.002, slope 2^-8 = 0.00390625",
    ],
)
def test_the_roundoff_check_accepts_stable_output(line):
    assert not roundoff_problems(_notebook_printing(line)), roundoff_problems(_notebook_printing(line))


def test_the_roundoff_check_skips_cells_whose_output_is_not_compared():
    nb = _notebook_printing("took 3.6e-16 s", source="# NBVAL_IGNORE_OUTPUT: a timing\nprint(x)")
    assert not roundoff_problems(nb)
