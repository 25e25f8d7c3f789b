"""The exercises: the checking machinery, every registered exercise, and how the notebooks use them.

Each notebook 01-08 has 3 to 5 exercises. In the notebook an exercise is

    ### Exercise k ★★ (练习 k)                 markdown: the question (with its parameters and precision)
    answer = None  # ...                       code: a placeholder, then as its last line
    helpers.exercises.check("NN.k", answer)    (the expected value lives in helpers.exercises._nbNN)
    <details><summary>Answer ...               markdown: the reasoning and a ```python block that
                                               replaces the placeholder

The saved output of the check says "not answered yet"; with the folded code put in place of the
placeholder, the notebook run top to bottom prints "correct" for every exercise (the answer key
run below).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

import helpers
from helpers.exercises import _core
from helpers.exercises._core import Exercise, Mistake

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
WITH_EXERCISES = [p for p in NOTEBOOKS if not p.stem.startswith("00")]
EXERCISE = re.compile(r"^###\s+Exercise\s+(\d+)\s+(★{1,3})\s+\(练习\s+(\d+)\)\s*(.*)$", re.MULTILINE)
ANY_EXERCISE_HEADING = re.compile(r"^#{1,6}[^\n]*(exercise|练习)[^\n]*", re.IGNORECASE | re.MULTILINE)
SECTION_HEADING = re.compile(r"^##\s+Exercises\s+\(练习\)\s*$", re.MULTILINE)
HEADING = re.compile(r"^#{1,3}\s", re.MULTILINE)
CHECK = re.compile(r"""^helpers\.exercises\.check\(\s*["'](\d\d\.\d+)["']\s*,\s*(\w+)\s*\)\s*$""")
FENCE = re.compile(r"```python\n(.*?)```", re.DOTALL)


# ----- the machinery, on exercises made up for the test ------------------------------------------


@pytest.fixture
def made_up():
    """Register made-up exercises under notebook 99 for one test, then remove them."""
    added = []

    def add(**fields):
        exercise = _core.register(Exercise(**fields))
        added.append(exercise.name)
        return exercise

    yield add
    for name in added:
        del _core._REGISTRY[name]


def test_a_number_is_accepted_to_the_digits_asked_and_no_further(made_up):
    made_up(
        name="99.1",
        title="t",
        kind="number",
        level=1,
        sig=3,
        params={"x": 0.53127},
        expected=lambda p: p["x"],
        hint="look again",
        mistakes=(Mistake("you get with log2 instead of ln.", value=lambda p: p["x"] / np.log(2)),),
    )
    v = helpers.exercises.verdict
    assert v("99.1", None).answered is False and "not answered yet" in v("99.1", None).message
    assert "to 3 significant figures" in v("99.1", None).message
    for right in (0.531, 0.53127, np.float32(0.5313), torch.tensor(0.5312), 0.5315):
        assert v("99.1", right).correct, right
    for wrong in (0.53, 0.532, 0.5305, -0.531):
        assert not v("99.1", wrong).correct, wrong
    assert "is not right (to 3 significant figures). Hint: look again" in v("99.1", 0.532).message
    assert "agrees with the answer to 2 significant figures" in v("99.1", 0.53).message
    assert "log2 instead of ln" in v("99.1", 0.7665).message and v("99.1", 0.7665).mistake is not None
    assert "expected a single number" in v("99.1", "0.531").message
    assert "expected a single number" in v("99.1", [0.531, 1.0]).message
    assert "finite" in v("99.1", float("nan")).message


def test_an_integer_is_compared_exactly(made_up):
    made_up(
        name="99.2",
        title="t",
        kind="integer",
        level=2,
        params={"n": 41},
        expected=lambda p: p["n"] + 1,
        mistakes=(Mistake("an off-by-one count gives.", value=lambda p: p["n"]),),
    )
    v = helpers.exercises.verdict
    assert v("99.2", 42).correct and v("99.2", 42.0).correct and v("99.2", torch.tensor(42)).correct
    assert not v("99.2", 43).correct
    assert "off-by-one" in v("99.2", 41).message
    assert "not a whole number" in v("99.2", 41.5).message


def test_an_array_reports_where_it_is_off(made_up):
    made_up(
        name="99.3",
        title="t",
        kind="array",
        level=1,
        expected=lambda p: np.arange(6.0).reshape(2, 3),
        mistakes=(Mistake("the transposed matrix gives.", value=lambda p: np.arange(6.0).reshape(3, 2).T),),
    )
    v = helpers.exercises.verdict
    assert v("99.3", torch.arange(6.0).reshape(2, 3)).correct
    assert "shape (2, 3)" in v("99.3", np.zeros(6)).message
    off = np.arange(6.0).reshape(2, 3)
    off[1, 2] = 9
    assert "index (1, 2)" in v("99.3", off).message
    assert "transposed" in v("99.3", np.arange(6.0).reshape(3, 2).T).message
    assert "expected an array" in v("99.3", 3.0).message


def test_a_choice_names_the_wrong_idea(made_up):
    made_up(
        name="99.4",
        title="t",
        kind="choice",
        level=1,
        options=("rises", "falls", "flat"),
        predict=True,
        expected=lambda p: "falls",
        mistakes=(Mistake("a rise would need ...", option="rises"),),
    )
    v = helpers.exercises.verdict
    assert v("99.4", " Falls").correct
    assert "a rise would need" in v("99.4", "rises").message
    assert "not an option" in v("99.4", "down").message and "'rises', 'falls', 'flat'" in v("99.4", "down").message
    assert "is not right" in v("99.4", "flat").message


def test_a_function_is_tested_on_inputs_and_may_not_call_the_forbidden_helper(made_up):
    def inputs(rng):
        return [{"x": torch.zeros(3)}] + [{"x": torch.from_numpy(rng.standard_normal(4))} for _ in range(5)]

    made_up(
        name="99.5",
        title="t",
        kind="function",
        level=3,
        expected=lambda p: torch.sin,
        inputs=inputs,
        forbid=("torch.sin",),
        mistakes=(Mistake("cos gives, not sin.", function=torch.cos),),
    )
    v = helpers.exercises.verdict

    def right(x):
        return torch.tensor([float(np.sin(float(t))) for t in x], dtype=torch.float64)

    assert v("99.5", right).correct and "all 6 inputs" in v("99.5", right).message
    assert "calls torch.sin" in v("99.5", lambda x: torch.sin(x)).message
    assert torch.sin(torch.zeros(1)).item() == 0.0  # restored after the check
    assert "not answered yet" in v("99.5", lambda x: None).message
    assert "cos gives" in v("99.5", lambda x: torch.tensor([float(np.cos(float(t))) for t in x])).message
    wrong = v("99.5", lambda x: right(x) * (1 + (x.abs() > 0.5)))
    assert "first difference on input" in wrong.message and "index" in wrong.message
    assert "raised ZeroDivisionError" in v("99.5", lambda x: 1 / 0).message
    assert "expected a function" in v("99.5", 3.0).message


def test_a_forbidden_helper_refuses_under_any_name_and_comes_back(made_up):
    def inputs(rng):
        return [{"d": d, "base": float(rng.uniform(100, 1e5))} for d in (2, 8, 64)]

    made_up(
        name="99.6",
        title="t",
        kind="function",
        level=2,
        inputs=inputs,
        forbid=("helpers.frequencies",),
        rtol=1e-10,
        atol=1e-12,
        expected=lambda p: lambda d, base: base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d),
        mistakes=(
            Mistake(
                "the exponent without the 2 gives.",
                function=lambda d, base: base ** (-torch.arange(0, d // 2, dtype=torch.float64) / d),
            ),
        ),
    )
    v = helpers.exercises.verdict
    bound_before = helpers.frequencies
    from helpers.sinusoidal import frequencies as imported_before

    for cheat in (
        lambda d, base: helpers.frequencies(d, base),
        lambda d, base: bound_before(d, base),
        lambda d, base: imported_before(d, base),
    ):
        assert "calls helpers.frequencies" in v("99.6", cheat).message
    assert helpers.frequencies(4, 100.0).tolist() == [1.0, 0.1]  # restored, under every name
    assert imported_before(4, 100.0).tolist() == [1.0, 0.1]

    def right(d, base):
        return torch.tensor([base ** (-2 * i / d) for i in range(d // 2)], dtype=torch.float64)

    assert v("99.6", right).correct
    assert (
        "without the 2"
        in v("99.6", lambda d, base: base ** (-torch.arange(0, d // 2, dtype=torch.float64) / d)).message
    )
    single = v("99.6", lambda d, base: right(d, base).float())
    assert "only to about float32 precision (your function returns float32)" in single.message
    assert "compute in float64" in single.message


def test_a_rounded_answer_with_too_few_digits_is_told_so(made_up):
    made_up(
        name="99.7",
        title="t",
        kind="number",
        level=1,
        sig=3,
        expected=lambda p: -0.50485,
        mistakes=(Mistake("the sign flipped gives.", value=lambda p: 0.50485),),
    )
    v = helpers.exercises.verdict
    shorter = v("99.7", -0.5).message
    assert "agrees with the answer to 2 significant figures; give it to 3 significant figures" in shorter
    assert "not right" in v("99.7", -0.51).message  # wrong in its second digit: not a shorter right answer
    assert "-0.5055 is not right" in v("99.7", -0.5055).message  # shown as given, not rounded to look right
    assert v("99.7", -0.505).correct


def test_bad_names_are_refused():
    with pytest.raises(TypeError, match="name=6.4"):
        helpers.exercises.check(6.4, 1.0)
    with pytest.raises(ValueError, match="name='06.99'"):
        helpers.exercises.check("06.99", 1.0)
    with pytest.raises(ValueError, match="expected 'NN.k'"):
        _core.register(Exercise(name="6.4", title="t", kind="integer", level=1, expected=lambda p: 1))
    with pytest.raises(ValueError, match="sig="):
        Exercise(name="99.9", title="t", kind="number", level=1, expected=lambda p: 1.0)


# ----- every registered exercise ------------------------------------------------------------------

EXERCISES = list(helpers.exercises.registered().values())


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.name)
def test_every_recorded_mistake_is_told_apart_from_the_answer(exercise):
    """The right answer passes; each common wrong idea fails with its own message."""
    assert len(exercise.mistakes) >= 2, f"{exercise.name}: record at least two common wrong answers"
    right = exercise.answer()
    # The reference and the wrong variants may call the helpers the learner may not: lift the ban here.
    forbid, exercise.forbid = exercise.forbid, ()
    try:
        _told_apart(exercise, right)
    finally:
        exercise.forbid = forbid


def _told_apart(exercise, right):
    assert helpers.exercises.verdict(exercise.name, right).correct
    for mistake in exercise.mistakes:
        if exercise.kind == "function":
            wrong = mistake.function
        elif exercise.kind == "choice":
            wrong = mistake.option
        else:
            wrong = mistake.value(dict(exercise.params))
        assert wrong is not None, f"{exercise.name}: the mistake {mistake.message!r} has no value for this kind"
        found = helpers.exercises.verdict(exercise.name, wrong)
        assert not found.correct, f"{exercise.name}: the wrong idea {mistake.message!r} is accepted"
        assert found.mistake is mistake, f"{exercise.name}: {mistake.message!r} is answered with {found.message!r}"


# ----- the notebooks ----------------------------------------------------------------------------


def _sections(notebook):
    """(number, stars, heading line, cells up to the next heading) for each exercise."""
    found = []
    cells = notebook.cells
    for k, cell in enumerate(cells):
        if cell.cell_type != "markdown":
            continue
        match = EXERCISE.search(cell.source)
        if not match:
            continue
        rest = [cell]
        for later in cells[k + 1 :]:
            if later.cell_type == "markdown" and HEADING.search(later.source):
                break
            rest.append(later)
        found.append((int(match.group(1)), match.group(2), match.group(0), rest))
    return found


def _check_cell(cells, where):
    checks = [c for c in cells if c.cell_type == "code" and "helpers.exercises.check(" in c.source]
    assert len(checks) == 1, (
        f"{where}: expected one code cell ending in helpers.exercises.check(...), found {len(checks)}"
    )
    last = checks[0].source.rstrip().splitlines()[-1]
    match = CHECK.match(last)
    assert match, f'{where}: the check cell\'s last line must be helpers.exercises.check("NN.k", name), not {last!r}'
    return checks[0], match.group(1), match.group(2)


def _text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def _number_formats(value, sig):
    """How a value would be written if a notebook printed it at the precision asked."""
    forms = {f"{value:.{sig}g}", f"{value:.{sig - 1}e}"}
    if abs(value) >= 1000 and float(value).is_integer():
        forms.add(f"{int(value):,}")
    return {f for f in forms if sum(ch.isdigit() for ch in f) >= 2}


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda p: p.stem)
def test_exercises_are_checked_by_name_with_the_answer_folded(path):
    notebook = nbformat.read(path, as_version=4)
    number = path.stem[:2]
    sections = _sections(notebook)
    assert 3 <= len(sections) <= 5, f"{path.name}: {len(sections)} exercises; each notebook has 3 to 5"
    assert [s[0] for s in sections] == list(range(1, len(sections) + 1)), f"{path.name}: exercises not numbered 1..n"
    names = []
    for k, stars, heading, cells in sections:
        where = f"{path.name}, {heading!r}"
        assert f"练习 {k})" in heading, f"{where}: the Chinese number differs from the exercise number"
        check, name, variable = _check_cell(cells, where)
        assert name == f"{number}.{k}", f"{where}: checks exercise {name}, expected {number}.{k}"
        exercise = helpers.exercises.get(name)
        names.append(name)
        assert stars == exercise.stars, f"{where}: heading has {stars}, the registry says level {exercise.level}"
        assert "not answered yet" in _text(check), f"{where}: saved output of the check is {_text(check)[:200]!r}"
        assert "check_answer(" not in check.source, f"{where}: the old check_answer is still used"
        index = cells.index(check)
        question = "\n".join(c.source for c in cells[: index + 1])
        if exercise.kind == "number":
            assert f"{exercise.sig} significant figure" in question, (
                f"{where}: the question does not say '{exercise.precision}'"
            )
        if exercise.kind == "choice":
            for option in exercise.options:
                assert option in question.lower(), f"{where}: the question does not list the option {option!r}"
        for key, value in exercise.params.items():
            if key.startswith("_") or not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            forms = {str(value), f"{value:g}", f"{value:,}"}
            assert any(f in question for f in forms), f"{where}: parameter {key}={value} is not in the question"
        folded = [c for c in cells[index + 1 :] if c.cell_type == "markdown" and "<details>" in c.source]
        assert folded, f"{where}: no <details> answer after the check cell"
        answer = folded[0].source
        assert "<summary>" in answer and "</details>" in answer, f"{where}: <details> without <summary> or not closed"
        assert FENCE.search(answer), (
            f"{where}: the folded answer has no ```python block to put in place of the placeholder"
        )
        prose = FENCE.sub("", re.sub(r"<summary>.*?</summary>|</?details>", "", answer, flags=re.DOTALL)).strip()
        assert len(prose.split()) >= 15, f"{where}: the folded answer should explain the reasoning, not only give code"
        before = [c for c in notebook.cells[: notebook.cells.index(check)]]
        if exercise.kind in ("number", "integer"):
            value = float(exercise.answer())
            if exercise.kind == "integer" and abs(value) < 100:
                continue
            forms = _number_formats(value, exercise.sig or len(str(int(abs(value)))))
            pattern = re.compile(r"(?<![\d.,])(" + "|".join(re.escape(f) for f in forms) + r")(?![\d])")
            for cell in before:
                if cell in cells:
                    continue
                seen = (
                    cell.source
                    + "\n"
                    + _text(cell)
                    + "".join("".join(o.get("data", {}).get("text/plain", "")) for o in cell.get("outputs", []))
                )
                hit = pattern.search(seen)
                assert not hit, (
                    f"{where}: the answer {hit.group(0)} is already written before the exercise: {seen[:120]!r}"
                )
    kinds = [helpers.exercises.get(n) for n in names]
    assert any(e.kind == "function" for e in kinds), f"{path.name}: no exercise asks for a function"
    assert any(e.predict for e in kinds), f"{path.name}: no 'predict, then run' exercise"
    registered = sorted(n for n in helpers.exercises.registered() if n.startswith(number + "."))
    assert sorted(names) == registered, f"{path.name}: notebook has {sorted(names)}, registry has {registered}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_exercise_escapes_the_checks_by_its_heading(path):
    stray = stray_exercise_headings(nbformat.read(path, as_version=4))
    assert not stray, (
        f"{path.name}: exercise headings the checks would skip (write '### Exercise N ★ (练习 N)'): {stray}"
    )


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


@pytest.mark.parametrize(
    "heading",
    [
        "### Exercise four ★ (练习 4)",
        "#### Exercise 2 ★ (练习 2)",
        "### exercise 1",
        "### 练习 3",
        "## Exercise 1 ★ (练习 1)",
        "### Exercise 1 (练习 1)",
    ],
)
def test_a_heading_written_differently_is_caught(heading):
    notebook = nbformat.v4.new_notebook()
    notebook.cells.append(nbformat.v4.new_markdown_cell(heading + "\n\nCompute something."))
    assert stray_exercise_headings(notebook) == [heading]


# ----- the answer key: the folded answers, run in the notebook --------------------------------------


def answer_key(notebook):
    """A copy of the notebook with each placeholder replaced by the folded answer's code."""
    notebook = nbformat.from_dict(notebook)
    for _, _, heading, cells in _sections(notebook):
        check, _, _ = _check_cell(cells, heading)
        index = cells.index(check)
        folded = next(c for c in cells[index + 1 :] if c.cell_type == "markdown" and "<details>" in c.source)
        code = "\n".join(FENCE.findall(folded.source))
        last = check.source.rstrip().splitlines()[-1]
        check.source = code.rstrip() + "\n" + last
    return notebook


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda p: p.stem)
def test_the_folded_answers_pass_when_run_top_to_bottom(path):
    from nbclient import NotebookClient

    notebook = answer_key(nbformat.read(path, as_version=4))
    os.environ.setdefault("HELPERS_DEVICE", "cpu")
    NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    for _, _, heading, cells in _sections(notebook):
        check, name, _ = _check_cell(cells, heading)
        said = _text(check)
        assert f"Exercise {name}: correct" in said, f"{path.name}, {heading!r}: the folded answer gives {said!r}"
