"""The committed notebooks are clean: executed in order, with outputs, no errors, no machine paths,
and no printed number that depends on floating-point round-off."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import warnings
from xml.etree import ElementTree

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

    Reads the text a reader sees (streams and ``text/plain``) of every code cell, those whose output
    nbval does not compare included (a reader still reads them). Flags a nonzero number below ``SMALLEST`` in
    magnitude unless it follows a bound word ("below 1e-12"), a zero written in exponent form
    (``0.0e+00``: a residual that happened to vanish here), and any number with more than
    ``MAX_DIGITS`` significant digits.
    """
    problems = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
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


def code_cells_all(nb):
    """Every code cell, empty ones included, in the order nbval numbers them ("Cell N")."""
    return [c for c in nb.cells if c.cell_type == "code"]


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
# How a cell asks nbval not to compare its output: nbval reads a comment marker only when the whole
# comment line is the marker, so the reason goes on the next line, where a reader sees it too.
IGNORE_MARKER = "# NBVAL_IGNORE_OUTPUT"
REASON_LINE = re.compile(r"^# Not compared by the tests: (.+)\.$")


def nbval_options(cell) -> dict:
    """nbval's options for one code cell, read by nbval's own parser as its collector merges them
    (metadata tags first, comment markers over them); ``check`` is False where it ignores the output."""
    from nbval.plugin import find_comment_markers, find_metadata_tags

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        options = dict(find_metadata_tags(cell.get("metadata", {})) or ())
        options.update(find_comment_markers(cell.source))
    return options


def ignore_problems(nb) -> list[str]:
    """Cells whose output nbval does not compare without one of IGNORE_REASONS stated and true, and
    cells that mention an nbval marker that nbval does not honour."""
    problems = []
    for index, cell in enumerate(code_cells(nb)):
        options = nbval_options(cell)
        lines = cell.source.splitlines()
        tags = [t for t in cell.get("metadata", {}).get("tags", []) if "nbval" in t or "exception" in t]
        if set(options) - {"check"}:
            problems.append(f"code cell {index}: nbval options {sorted(options)}; only an ignored output is allowed")
        elif options.get("check", True):
            if "NBVAL" in cell.source or tags:
                problems.append(
                    f"code cell {index}: mentions an nbval marker that nbval does not honour (it compares this "
                    f"cell): the first line must be exactly {IGNORE_MARKER!r}, the reason on the next"
                )
            continue
        elif lines[0] != IGNORE_MARKER or tags:
            problems.append(f"code cell {index}: ignored by a tag or a later line; write {IGNORE_MARKER!r} first")
        else:
            reason = REASON_LINE.match(lines[1]) if len(lines) > 1 else None
            if not reason or reason.group(1) not in IGNORE_REASONS:
                problems.append(
                    f"code cell {index}: the second line must be '# Not compared by the tests: <reason>.' with a "
                    f"reason from {sorted(IGNORE_REASONS)}: {(lines[1:] or [''])[0][:80]!r}"
                )
            elif not IGNORE_REASONS[reason.group(1)].search(cell.source):
                problems.append(f"code cell {index}: says {reason.group(1)!r} but does not do what that reason needs")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_ignored_outputs_are_few_and_justified(path):
    nb = nbformat.read(path, as_version=4)
    problems = ignore_problems(nb)
    assert not problems, "\n".join(problems)
    assert len([c for c in code_cells(nb) if not nbval_options(c).get("check", True)]) <= 4


def _ignored(reason: str, body: str) -> str:
    return f"{IGNORE_MARKER}\n# Not compared by the tests: {reason}.\n{body}"


@pytest.mark.parametrize(
    "source",
    [
        # the form nbval 0.11 does not read: a reason after the marker on the same line
        "# NBVAL_IGNORE_OUTPUT: a live widget\nhelpers.widgets.alibi_explorer()",
        "x = 1  # NBVAL_IGNORE_OUTPUT\nprint(x)",
        "# NBVAL_IGNORE_OUTPUT\nhelpers.widgets.alibi_explorer()",
        "helpers.widgets.alibi_explorer()\n# NBVAL_IGNORE_OUTPUT\n# Not compared by the tests: a live widget.",
        _ignored("a live widget", "print(kappa)"),
        _ignored("the timing matters", "start = time.perf_counter()"),
        "# NBVAL_SKIP\nprint(1)",
        "# NBVAL_RAISES_EXCEPTION\nraise ValueError",
    ],
)
def test_an_unjustified_or_unread_ignore_is_caught(source):
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(source))
    assert ignore_problems(nb)


@pytest.mark.parametrize("tag", ["nbval-ignore-output", "nbval-skip", "raises-exception", "nbval-ignore"])
def test_a_tag_is_caught_whether_or_not_nbval_reads_it(tag):
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("helpers.widgets.alibi_explorer()", metadata={"tags": [tag]}))
    assert ignore_problems(nb)


@pytest.mark.parametrize(
    "source",
    [
        _ignored("a live widget", "helpers.widgets.alibi_explorer()"),
        _ignored("a timing", "start = time.perf_counter()"),
        _ignored("the device name depends on the machine", 'print("torch", torch.__version__)'),
        "print(1)",
    ],
)
def test_a_justified_ignore_passes(source):
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(source))
    assert not ignore_problems(nb)


def _collect_with_nbval(paths, out):
    """Let pytest with nbval collect the notebooks, recording for every cell whether nbval compares it."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))
    env["NBVAL_PROBE_OUT"] = str(out)
    command = [sys.executable, "-m", "pytest", "--nbval", "--collect-only", "-q", "-p", "no:cacheprovider"]
    command += ["-p", "_nbval_probe", "--rootdir", str(ROOT), *map(str, paths)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(out.read_text())


def test_nbval_itself_ignores_exactly_the_cells_we_mark(tmp_path):
    """nbval's own collection (not our reading of its rules) decides which cells are compared."""
    compared = _collect_with_nbval(NOTEBOOKS, tmp_path / "probe.json")
    for path in NOTEBOOKS:
        cells = code_cells_all(nbformat.read(path, as_version=4))
        marked = [c.source.splitlines()[:1] == [IGNORE_MARKER] for c in cells]
        assert compared[path.name] == [not m for m in marked], f"{path.name}: nbval compares {compared[path.name]}"
    assert sum(not c for cells in compared.values() for c in cells) >= 12, "the explorers and the device cell"


def _cell_printing(source: str, saved: str, count: int):
    cell = nbformat.v4.new_code_cell(source, execution_count=count)  # nbval fails an unrun cell with outputs
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=saved + "\n")]
    return cell


def test_nbval_runs_an_ignored_cell_without_comparing_and_fails_a_checked_one(tmp_path):
    """The whole chain on a fixture notebook: each cell prints something other than its saved output.
    Under strict ``pytest --nbval`` the cell marked as the notebooks mark it passes; an unmarked cell
    and a cell with the reason on the marker's line (which nbval 0.11 does not read) fail."""
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}})
    nb.cells = [
        _cell_printing(_ignored("the device name depends on the machine", 'print("fresh", "__version__")'), "saved", 1),
        _cell_printing('print("fresh")', "saved", 2),
        _cell_printing('# NBVAL_IGNORE_OUTPUT: a timing\nprint("fresh")', "saved", 3),
        _cell_printing('print("same")', "same", 4),
    ]
    nbformat.write(nb, tmp_path / "fixture.ipynb")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    report = tmp_path / "report.xml"
    command = [sys.executable, "-m", "pytest", "--nbval", "-p", "no:cacheprovider", "-p", "no:xdist", "-q"]
    command += ["-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), f"--junitxml={report}", "fixture.ipynb"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    outcomes = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        failed = case.find("failure") is not None or case.find("error") is not None
        outcomes[case.get("name")] = "failed" if failed else "passed"
    assert outcomes == {"Cell 0": "passed", "Cell 1": "failed", "Cell 2": "failed", "Cell 3": "passed"}, (
        outcomes,
        done.stdout[-3000:],
    )


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


@pytest.mark.parametrize("path", NOTEBOOKS[:-1], ids=ids[:-1])
def test_each_notebook_ends_with_a_link_to_the_next(path):
    """The README promises that every notebook ends with a link to the next; notebook 07 lost its
    link once and nothing noticed."""
    nb = nbformat.read(path, as_version=4)
    last = [c.source for c in nb.cells if c.cell_type == "markdown"][-1]
    following = NOTEBOOKS[NOTEBOOKS.index(path) + 1].name
    assert f"]({following})" in last, f"the last markdown cell of {path.name} does not link to {following}"


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


def test_the_roundoff_check_reads_cells_whose_output_is_not_compared_too():
    nb = _notebook_printing("took 3.6e-16 s", source=_ignored("a timing", "print(x)"))
    assert roundoff_problems(nb)


def test_notebook_kernels_start_one_at_a_time():
    """notebooks/conftest.py holds a file lock around nbval's kernel start, so that xdist workers do
    not pick the same ports: while one process starts a kernel, another cannot take the lock."""
    import importlib.util
    import types

    pytest.importorskip("fcntl")
    spec = importlib.util.spec_from_file_location("notebooks_conftest", ROOT / "notebooks" / "conftest.py")
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    probe = "import fcntl, sys; f = open(sys.argv[1], 'a')\ntry: fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
    probe += "except BlockingIOError: sys.exit(3)"

    def try_the_lock():
        return subprocess.run([sys.executable, "-c", probe, str(plugin.LOCK)], timeout=60).returncode

    seen = []
    kernel = types.SimpleNamespace(start_new_kernel=lambda **kw: seen.append(try_the_lock()) or "km, kc")
    plugin.serialise(kernel)
    assert kernel.start_new_kernel(kernel_name="python3") == "km, kc"
    assert (seen, try_the_lock()) == ([3], 0), "the lock must be held during the start and free after it"
    plugin.serialise(kernel)  # a second configure (xdist) wraps once
    assert kernel.start_new_kernel.__wrapped__.__name__ == "<lambda>"


def test_the_kernel_lock_does_not_shadow_the_planted_copy():
    """A conftest.py at the repository's root would put the root first on sys.path in every pytest
    run, and tests/test_planted_bugs.py would import the real helpers instead of its copy."""
    assert not (ROOT / "conftest.py").exists()


# Readable in one sitting: a reader meets a check of what they just read (an assert, a printed
# verdict or an exercise) at least every MAX_UNCHECKED cells.
MAX_UNCHECKED = 12
CHECK_IN = re.compile(r"\bassert\b|\bcheck\(|\bverdict\(|: True\b")


def longest_unchecked_run(nb) -> tuple[int, int]:
    """The longest run of consecutive cells with no check-in, and the index of the cell it ends at.

    A check-in is a code cell that asserts, calls an exercise check, or prints a verdict (": True").
    """
    longest, run, end = 0, 0, -1
    for index, cell in enumerate(nb.cells):
        text = cell.source if cell.cell_type == "code" else ""
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            text += out.get("text", "")
        if cell.cell_type == "code" and CHECK_IN.search(text):
            run = 0
            continue
        run += 1
        if run > longest:
            longest, end = run, index
    return longest, end


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_a_check_in_at_least_every_dozen_cells(path):
    nb = nbformat.read(path, as_version=4)
    longest, end = longest_unchecked_run(nb)
    assert longest <= MAX_UNCHECKED, (
        f"{path.name}: {longest} cells in a row, ending at cell {end}, with no assert, exercise check or printed"
        f" verdict; readers need a check-in at least every {MAX_UNCHECKED} cells"
    )


def test_the_check_in_rule_catches_a_long_unchecked_stretch():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Title")]
    nb.cells += [nbformat.v4.new_markdown_cell(f"Paragraph {i}.") for i in range(MAX_UNCHECKED)]
    assert longest_unchecked_run(nb)[0] == MAX_UNCHECKED + 1
    nb.cells.insert(6, nbformat.v4.new_code_cell("assert 1 + 1 == 2"))
    assert longest_unchecked_run(nb)[0] <= MAX_UNCHECKED
    printed = nbformat.v4.new_code_cell("print('within 1e-12:', ok)")
    printed.outputs = [nbformat.v4.new_output("stream", name="stdout", text="within 1e-12: True\n")]
    assert CHECK_IN.search(printed.outputs[0]["text"]) and not CHECK_IN.search("print(x)")
