"""The exercise registry and the checks that say what is wrong, not only that something is.

Each exercise of the notebooks is registered here under its name, ``"NN.k"`` (notebook NN,
exercise k), with its own parameters, a function that computes the expected answer from them,
the precision asked for, and the common wrong ideas with what they give. A notebook calls

    helpers.exercises.check("06.4", answer)

and sees one line: "not answered yet", "correct", the likely mistake, or a hint. The expected
value is computed here at the moment of the check and never printed; it appears nowhere in the
notebook.

Kinds of exercise:

- ``number``: a real number, asked to ``sig`` significant figures. Accepted when it lies within
  half a unit of the last asked digit of the expected value, so the correctly rounded answer and
  any more precise one pass, and nothing further off does.
- ``integer``: a whole number, compared exactly.
- ``array``: a vector or matrix, compared entry by entry within ``rtol`` / ``atol``.
- ``choice``: one of a few named options (a prediction, a yes / no, a letter).
- ``function``: the learner writes a function; it is called on fixed and random inputs beside
  the reference built from ``helpers`` and the first input where the two differ is reported.
  Names listed in ``forbid`` raise while the learner's function runs ("build it without calling
  ``helpers.apply_rope``").

A ``Mistake`` records a common wrong idea: for values, the value it gives (computed from the
same parameters); for functions, a wrong variant. When the answer matches one, its message is
printed instead of the generic hint.
"""

from __future__ import annotations

import math
import numbers
import types
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

__all__ = ["Exercise", "Mistake", "Verdict", "check", "verdict", "registered", "get", "register"]

KINDS = ("number", "integer", "array", "choice", "function")


@dataclass(frozen=True)
class Mistake:
    """A common wrong idea and what it gives.

    ``value(params)`` is the value the mistake produces (value kinds); ``function`` is a wrong
    variant with the reference's signature (function kind); ``option`` is a wrong option (choice
    kind). ``message`` names the mistake in a sentence that does not give the answer away.
    """

    message: str
    value: Callable[[dict], Any] | None = None
    function: Callable | None = None
    option: str | None = None


@dataclass(frozen=True)
class Verdict:
    """What a check found: whether the answer was given, whether it is right, and the sentence."""

    name: str
    answered: bool
    correct: bool
    message: str
    mistake: Mistake | None = None

    def __str__(self) -> str:
        return self.message


@dataclass
class Exercise:
    """One exercise: its name, parameters, expected answer and the wrong ideas it recognises.

    ``expected(params)`` returns the answer (value kinds), the right option (choice) or the
    reference function (function kind). ``inputs(rng)`` (function kind) returns the list of
    keyword dicts the learner's function is called with: fixed edge cases first, then random ones.
    """

    name: str
    title: str
    kind: str
    level: int
    expected: Callable[[dict], Any]
    params: dict = field(default_factory=dict)
    mistakes: tuple[Mistake, ...] = ()
    hint: str = ""
    sig: int | None = None
    rtol: float = 1e-6
    atol: float = 1e-9
    options: tuple[str, ...] = ()
    inputs: Callable[[np.random.Generator], list[dict]] | None = None
    forbid: tuple[str, ...] = ()
    predict: bool = False
    seed: int = 0
    explain: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind={self.kind!r}: expected one of {KINDS}")
        if self.level not in (1, 2, 3):
            raise ValueError(f"level={self.level!r}: expected 1, 2 or 3 (the number of stars)")
        if self.kind == "number" and (not isinstance(self.sig, int) or not 1 <= self.sig <= 8):
            raise ValueError(
                f"sig={self.sig!r} for exercise {self.name}: a number exercise needs 1 to 8 significant figures"
            )
        if self.kind == "choice" and len(self.options) < 2:
            raise ValueError(f"options={self.options!r} for exercise {self.name}: a choice needs at least two options")
        if self.kind == "function" and self.inputs is None:
            raise ValueError(f"exercise {self.name}: a function exercise needs inputs=")
        self.options = tuple(_norm(o) for o in self.options)

    @property
    def precision(self) -> str:
        """The precision asked for, in the words the notebook's question uses."""
        if self.kind == "number":
            return f"to {self.sig} significant figure" + ("s" if self.sig > 1 else "")
        if self.kind == "integer":
            return "a whole number"
        if self.kind == "array":
            return f"within a relative error of {self.rtol:g}"
        if self.kind == "choice":
            return "one of " + ", ".join(repr(o) for o in self.options)
        return "a function"

    @property
    def stars(self) -> str:
        return "★" * self.level

    def answer(self):
        """The expected answer (for tests and for the registry's own checks; never printed)."""
        return self.expected(dict(self.params))


_REGISTRY: dict[str, Exercise] = {}


def register(exercise: Exercise) -> Exercise:
    """Add an exercise to the registry; its name must be new and of the form ``"NN.k"``."""
    parts = exercise.name.split(".")
    if len(parts) != 2 or not (len(parts[0]) == 2 and parts[0].isdigit() and parts[1].isdigit()):
        raise ValueError(f"name={exercise.name!r}: expected 'NN.k', for example '06.4'")
    if exercise.name in _REGISTRY:
        raise ValueError(f"name={exercise.name!r}: an exercise of that name is already registered")
    _REGISTRY[exercise.name] = exercise
    return exercise


def registered() -> dict[str, Exercise]:
    """Every registered exercise by name, in notebook order."""
    return dict(sorted(_REGISTRY.items(), key=lambda item: tuple(int(p) for p in item[0].split("."))))


def get(name: str) -> Exercise:
    if not isinstance(name, str):
        raise TypeError(f"name={name!r}: expected the exercise's name as a string, for example '06.4'")
    if name not in _REGISTRY:
        known = ", ".join(registered())
        raise ValueError(f"name={name!r}: no exercise of that name; known: {known}")
    return _REGISTRY[name]


def check(name: str, answer) -> None:
    """Check ``answer`` to exercise ``name`` and print one line that explains. Returns nothing."""
    print(verdict(name, answer).message)


def verdict(name: str, answer) -> Verdict:
    """Check ``answer`` to exercise ``name`` and return the :class:`Verdict` (``check`` prints it)."""
    exercise = get(name)
    prefix = f"Exercise {name}: "
    if _unanswered(answer):
        what = "your function" if exercise.kind == "function" else f"your answer ({exercise.precision})"
        return Verdict(
            name,
            False,
            False,
            prefix + f"not answered yet. Replace the placeholder with {what} and run the cell again.",
        )
    try:
        if exercise.kind == "function":
            return _check_function(exercise, answer, prefix)
        if exercise.kind == "choice":
            return _check_choice(exercise, answer, prefix)
        return _check_value(exercise, answer, prefix)
    except _NotAnswered:
        return Verdict(name, False, False, prefix + "not answered yet: your function still returns None.")


class _NotAnswered(Exception):
    pass


def _unanswered(answer) -> bool:
    return answer is None or answer is Ellipsis


def _norm(option) -> str:
    return str(option).strip().lower()


# ----- values ---------------------------------------------------------------------------------


def _as_array(value) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().double().numpy()
    return np.asarray(value, dtype=float)


def _unit(expected: float, sig: int) -> float:
    """One unit in the last of ``sig`` significant figures of ``expected``."""
    if expected == 0:
        return 10.0 ** (1 - sig)
    return 10.0 ** (math.floor(math.log10(abs(expected))) - sig + 1)


def _matches(exercise: Exercise, got, want) -> bool:
    if exercise.kind == "number":
        got, want = float(got), float(want)
        return abs(got - want) <= 0.5 * _unit(want, exercise.sig) * (1 + 1e-9)
    if exercise.kind == "integer":
        return float(got) == float(want)
    got, want = _as_array(got), _as_array(want)
    return got.shape == want.shape and bool(np.all(np.abs(got - want) <= exercise.atol + exercise.rtol * np.abs(want)))


def _scalar(answer):
    """The answer as a Python number, or None when it is not one."""
    if isinstance(answer, bool):
        return None
    if isinstance(answer, torch.Tensor):
        return answer.item() if answer.numel() == 1 else None
    if isinstance(answer, np.ndarray):
        return answer.item() if answer.size == 1 else None
    if isinstance(answer, numbers.Number):
        return answer.real if isinstance(answer, complex) and answer.imag == 0 else answer
    return None


def _check_value(exercise: Exercise, answer, prefix: str) -> Verdict:
    name, params = exercise.name, dict(exercise.params)
    want = exercise.expected(params)
    hint = f" Hint: {exercise.hint}" if exercise.hint else ""
    if exercise.kind in ("number", "integer"):
        got = _scalar(answer)
        if got is None or isinstance(got, complex):
            return Verdict(
                name, True, False, prefix + f"expected a single number ({exercise.precision}), got {_describe(answer)}."
            )
        if not math.isfinite(float(got)):
            return Verdict(name, True, False, prefix + f"your answer is {got}; expected a finite number.")
        if exercise.kind == "integer" and float(got) != round(float(got)):
            return Verdict(
                name, True, False, prefix + f"{float(got):.10g} is not a whole number; the answer is one.{hint}"
            )
        shown = f"{float(got):.10g}" if exercise.kind == "number" else f"{int(round(float(got)))}"
    else:
        if (
            isinstance(answer, (str, bytes))
            or _scalar(answer) is not None
            and not isinstance(answer, (list, tuple, np.ndarray, torch.Tensor))
        ):
            return Verdict(name, True, False, prefix + f"expected an array, got {_describe(answer)}.")
        try:
            got = _as_array(answer)
        except (TypeError, ValueError):
            return Verdict(name, True, False, prefix + f"expected an array of numbers, got {_describe(answer)}.")
        if got.shape != _as_array(want).shape:
            return Verdict(
                name, True, False, prefix + f"expected shape {_as_array(want).shape}, got shape {got.shape}.{hint}"
            )
        if not np.all(np.isfinite(got)):
            return Verdict(name, True, False, prefix + "your answer contains NaN or infinity.")
        shown = "your array"
    if _matches(exercise, got, want):
        return Verdict(name, True, True, prefix + "correct." + (f" {exercise.explain}" if exercise.explain else ""))
    for mistake in exercise.mistakes:
        if mistake.value is not None and _matches_mistake(exercise, got, mistake.value(params)):
            return Verdict(name, True, False, prefix + f"not yet: {shown} is what {mistake.message}", mistake)
    if exercise.kind == "array":
        error = np.abs(got - _as_array(want)) - (exercise.atol + exercise.rtol * np.abs(_as_array(want)))
        worst = tuple(int(k) for k in np.unravel_index(np.argmax(error), got.shape))
        wrong = int(np.sum(error > 0))
        return Verdict(
            name,
            True,
            False,
            prefix + f"{wrong} of {got.size} entries are off; the first to look at is index "
            f"{worst} (you have {got[worst]:.6g}).{hint}",
        )
    if exercise.kind == "number":
        digits = _fewer_digits(float(got), float(want), exercise.sig)
        if digits:
            return Verdict(
                name,
                True,
                False,
                prefix + f"{shown} agrees with the answer to {digits} significant "
                f"figure{'s' if digits > 1 else ''}; give it {exercise.precision}.",
            )
    return Verdict(name, True, False, prefix + f"{shown} is not right ({exercise.precision}).{hint}")


def _round_sig(value: float, digits: int) -> float:
    return float(f"{value:.{digits}g}")


def _fewer_digits(got: float, want: float, sig: int) -> int:
    """The number of significant figures (fewer than asked) to which ``got`` is ``want`` rounded, or 0."""
    for digits in range(sig - 1, 0, -1):
        if got == _round_sig(got, digits) and abs(got - _round_sig(want, digits)) <= 1e-12 * max(abs(want), 1e-300):
            return digits
    return 0


def _matches_mistake(exercise: Exercise, got, value) -> bool:
    try:
        return _matches(exercise, got, value)
    except (TypeError, ValueError):
        return False


def _describe(answer) -> str:
    if isinstance(answer, (torch.Tensor, np.ndarray)):
        return f"an array of shape {tuple(answer.shape)}"
    if isinstance(answer, (list, tuple)):
        return f"a {type(answer).__name__} of length {len(answer)}"
    return f"{type(answer).__name__} {answer!r}"[:80]


# ----- choices --------------------------------------------------------------------------------


def _check_choice(exercise: Exercise, answer, prefix: str) -> Verdict:
    name = exercise.name
    if not isinstance(answer, (str, bool, numbers.Integral)):
        return Verdict(name, True, False, prefix + f"expected {exercise.precision}, got {_describe(answer)}.")
    got = _norm(answer)
    if got not in exercise.options:
        return Verdict(name, True, False, prefix + f"{answer!r} is not an option; expected {exercise.precision}.")
    if got == _norm(exercise.expected(dict(exercise.params))):
        return Verdict(name, True, True, prefix + "correct." + (f" {exercise.explain}" if exercise.explain else ""))
    for mistake in exercise.mistakes:
        if mistake.option is not None and _norm(mistake.option) == got:
            return Verdict(name, True, False, prefix + f"not yet: {mistake.message}", mistake)
    hint = f" Hint: {exercise.hint}" if exercise.hint else ""
    return Verdict(name, True, False, prefix + f"{answer!r} is not right.{hint}")


# ----- functions ------------------------------------------------------------------------------


class _Forbidden(Exception):
    pass


def _resolve(dotted: str):
    import importlib

    module_name, _, attr = dotted.rpartition(".")
    return importlib.import_module(module_name), attr


def _refuser_code(dotted: str):
    """The code of a function that raises ``_Forbidden(dotted)`` whatever the globals it runs with."""
    source = (
        "def refuse(*args, **kwargs):\n"
        "    import helpers.exercises._core as core\n"
        f"    raise core._Forbidden({dotted!r})\n"
    )
    namespace: dict = {}
    exec(compile(source, f"<forbidden {dotted}>", "exec"), namespace)
    return namespace["refuse"].__code__


def _call_forbidding(function, kwargs: dict, forbid: tuple[str, ...]):
    """Call ``function`` while every function named in ``forbid`` raises ``_Forbidden``.

    A Python function is switched off by swapping its code object, so that a name bound to it
    earlier (``from helpers import apply_rope as f``) refuses too; anything else (a builtin) is
    replaced on its module. Everything is restored afterwards, whatever happens.
    """
    swapped, replaced = [], []
    try:
        for dotted in forbid:
            owner, attr = _resolve(dotted)
            target = getattr(owner, attr)
            if isinstance(target, types.FunctionType) and not target.__code__.co_freevars:
                if any(target is done for done, _ in swapped):
                    continue
                swapped.append((target, target.__code__))
                target.__code__ = _refuser_code(dotted)
            else:

                def refuse(*args, _dotted=dotted, **kw):
                    raise _Forbidden(_dotted)

                replaced.append((owner, attr, target))
                setattr(owner, attr, refuse)
        return function(*kwargs.values())
    finally:
        for target, code in reversed(swapped):
            target.__code__ = code
        for owner, attr, original in reversed(replaced):
            setattr(owner, attr, original)


def _show(value) -> str:
    if isinstance(value, torch.Tensor):
        if value.numel() <= 8:
            if value.is_floating_point():
                shown = [round(float(v), 4) for v in value.flatten()]
            else:
                shown = [int(v) for v in value.flatten()]
            return f"tensor({shown}, shape={tuple(value.shape)})"
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    if isinstance(value, np.ndarray):
        return _show(torch.from_numpy(value))
    if isinstance(value, float):
        return f"{value:.6g}"
    return repr(value)


def _same(exercise: Exercise, got, want) -> tuple[bool, str]:
    try:
        got_a = _as_array(got)
    except (TypeError, ValueError, RuntimeError):
        return False, f"it returned {_describe(got)}, not an array of numbers"
    want_a = _as_array(want)
    if got_a.shape != want_a.shape:
        return False, f"it returned shape {got_a.shape}, expected {want_a.shape}"
    if not np.all(np.isfinite(got_a)):
        return False, "it returned NaN or infinity"
    error = np.abs(got_a - want_a) - (exercise.atol + exercise.rtol * np.abs(want_a))
    if np.all(error <= 0):
        return True, ""
    worst = tuple(int(k) for k in np.unravel_index(np.argmax(error), got_a.shape))
    where = f"at index {worst} it returned {got_a[worst]:.10g} where {want_a[worst]:.10g} is expected"
    if np.all(np.abs(got_a - want_a) <= 1e-4 + 1e-4 * np.abs(want_a)):
        low = _dtype_name(got)
        return False, (
            f"{where}: close, but only to about float32 precision"
            + (f" (your function returns {low})" if low else "")
            + f"; the check asks for a relative error below {exercise.rtol:g}: compute in float64"
        )
    return False, where


def _dtype_name(value) -> str:
    dtype = getattr(value, "dtype", None)
    name = str(dtype).replace("torch.", "") if dtype is not None else ""
    return name if name in ("float32", "float16", "bfloat16") else ""


def _check_function(exercise: Exercise, function, prefix: str) -> Verdict:
    name = exercise.name
    if not callable(function):
        return Verdict(name, True, False, prefix + f"expected a function, got {_describe(function)}.")
    reference = exercise.expected(dict(exercise.params))
    rng = np.random.default_rng(exercise.seed)
    cases = exercise.inputs(rng)
    for number, kwargs in enumerate(cases):
        shown = ", ".join(f"{k}={_show(v)}" for k, v in kwargs.items())
        try:
            got = _call_forbidding(function, _copy(kwargs), exercise.forbid)
        except _Forbidden as forbidden:
            return Verdict(
                name,
                True,
                False,
                prefix + f"your function calls {forbidden.args[0]}; this exercise asks you to "
                "build the result without it.",
            )
        except Exception as error:  # the learner's code may raise anything; say what and where
            return Verdict(
                name,
                True,
                False,
                prefix + f"your function raised {type(error).__name__}: {error} "
                f"(input {number + 1} of {len(cases)}: {shown}).",
            )
        if got is None:
            if number == 0:
                raise _NotAnswered
            return Verdict(name, True, False, prefix + f"your function returned None for input {number + 1}: {shown}.")
        want = reference(*_copy(kwargs).values())
        ok, why = _same(exercise, got, want)
        if ok:
            continue
        for mistake in exercise.mistakes:
            if mistake.function is not None and _same(exercise, got, mistake.function(*_copy(kwargs).values()))[0]:
                return Verdict(
                    name,
                    True,
                    False,
                    prefix + f"not yet: on input {number + 1} ({shown}) your function gives what {mistake.message}",
                    mistake,
                )
        # A near miss in precision is not a wrong idea: the hint about the idea would mislead.
        hint = f" Hint: {exercise.hint}" if exercise.hint and "float32 precision" not in why else ""
        return Verdict(
            name,
            True,
            False,
            prefix + f"first difference on input {number + 1} of {len(cases)} ({shown}): {why}.{hint}",
        )
    return Verdict(
        name,
        True,
        True,
        prefix + f"correct on all {len(cases)} inputs." + (f" {exercise.explain}" if exercise.explain else ""),
    )


def _copy(kwargs: dict) -> dict:
    return {
        k: (v.clone() if isinstance(v, torch.Tensor) else v.copy() if isinstance(v, np.ndarray) else v)
        for k, v in kwargs.items()
    }
