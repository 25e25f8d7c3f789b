"""What every detector returns (``CheckReport``, ``Finding``) and the helpers they share: calling
the code under test, validating what it returns, tolerances and number formatting."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# An angle formed as a float32 product ``m * θ`` (Hugging Face's and Meta's RoPE code, the PyTorch
# tutorial's sinusoidal table) is off by up to about ``1.2e-7 m θ`` radians; tables built that way
# are accepted with twice that margin (a choice: such tables drift by a few hundredths at a million
# tokens, about 0.04 for a 64-wide head at base 10,000, as notebook 10 prints; far below the radians
# that bfloat16 or float16 angles are off by, which is reported).
FLOAT32_ANGLE = 4.0 * 2.0**-24


class CheckFailed(AssertionError):
    """Raised by :meth:`CheckReport.raise_if_failed`; its message is the whole report."""


@dataclass(frozen=True)
class Finding:
    """One property a detector checked: its name, whether it held, and what was found."""

    name: str
    passed: bool
    detail: str
    #: For a failure caused by another finding's fault: that finding's name (the report counts the
    #: fault once, under that finding, and lists this one as folded into it).
    folded_into: str = ""

    def __str__(self) -> str:
        if self.folded_into:
            return f"FAIL {self.name}: also fails, from the fault the {self.folded_into} finding names"
        return f"{'ok  ' if self.passed else 'FAIL'} {self.name}: {self.detail}"


@dataclass(frozen=True, repr=False)
class CheckReport:
    """What a detector found: ``name`` (the detector), ``findings`` (one per property)."""

    name: str
    findings: tuple[Finding, ...]
    skipped: tuple[str, ...] = ()
    #: Failures explained by another finding's fault (``Finding.folded_into``): not counted again.
    folded: tuple[Finding, ...] = ()

    @property
    def passed(self) -> bool:
        return all(f.passed for f in self.findings) and not self.folded

    @property
    def failures(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if not f.passed)

    @property
    def verdict(self) -> str:
        """One line: passed, or which properties failed (and which were not checked after a failure)."""
        names = ", ".join(f.name for f in self.findings)
        if self.passed:
            return f"{self.name}: passed ({names})"
        failed = ", ".join(f.name for f in self.failures)
        held = f"{len(self.findings) - len(self.failures)} of {len(self.findings) + len(self.folded)} held"
        for f in self.folded:
            held += f"; {f.name} fails too, from the same fault"
        if self.skipped:
            held += f"; not checked: {', '.join(self.skipped)}"
        return f"{self.name}: FAILED on {failed} ({held})"

    @property
    def diagnosis(self) -> str:
        """The first failure's explanation, or an empty string when everything held."""
        return self.failures[0].detail if self.failures else ""

    def finding(self, name: str) -> Finding:
        """The finding of the property ``name`` (for example ``"layout"``), a folded one included."""
        for f in (*self.findings, *self.folded):
            if f.name == name:
                return f
        raise KeyError(f"name={name!r}: this report has {[f.name for f in self.findings]}")

    def raise_if_failed(self) -> CheckReport:
        """Raise :class:`CheckFailed` with the whole report if a property failed; else return the report."""
        if not self.passed:
            raise CheckFailed(str(self))
        return self

    def __str__(self) -> str:
        lines = [self.verdict, *(f"  {f}" for f in self.findings), *(f"  {f}" for f in self.folded)]
        if self.skipped:
            lines.append(f"  (not checked: {', '.join(self.skipped)}: an earlier failure makes them meaningless)")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)


def _report(name: str, findings, properties: tuple[str, ...]) -> CheckReport:
    """A report whose ``skipped`` lists the detector's properties that no finding covers."""
    findings = tuple(findings)
    folded = tuple(f for f in findings if f.folded_into)
    findings = tuple(f for f in findings if not f.folded_into)
    seen = {f.name for f in findings} | {f.name for f in folded}
    return CheckReport(name, findings, tuple(p for p in properties if p not in seen), folded)


class _Bad(Exception):
    """The implementation under test returned something unusable; carries the finding."""

    def __init__(self, finding: Finding):
        super().__init__(finding.detail)
        self.finding = finding


def _num(x: float) -> str:
    """A number to 3 significant figures (what every machine agrees on for these comparisons)."""
    x = float(x)
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    return f"{x:.3g}"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _check_device(device) -> torch.device:
    if device is None:
        return torch.device("cpu")
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device must be None or a torch device such as 'cpu' or 'cuda', got {device!r}") from error


def _check_callable(name: str, fn):
    if not callable(fn):
        raise TypeError(f"{name} must be a callable, got {type(fn).__name__}")
    return fn


def _call(fn, fn_name: str, args: tuple, shown: str):
    try:
        return fn(*args)
    except Exception as error:  # the code under test may raise anything: report it as a finding
        raise _Bad(
            Finding("output", False, f"{fn_name} raised {type(error).__name__}: {error} (called with {shown})")
        ) from error


def _tensor_out(out, fn_name: str, shape: tuple, shown: str, *, dtype=None, integer=False) -> torch.Tensor:
    """Validate a returned tensor: its type, shape, dtype and finiteness; raise ``_Bad`` naming what was expected."""
    what = "an integer" if integer else "a floating-point"
    if not isinstance(out, torch.Tensor):
        raise _Bad(
            Finding("output", False, f"{fn_name} returned {type(out).__name__} for {shown}; expected {what} tensor")
        )
    if tuple(out.shape) != tuple(shape):
        raise _Bad(
            Finding(
                "output", False, f"{fn_name} returned shape {tuple(out.shape)} for {shown}; expected {tuple(shape)}"
            )
        )
    if integer:
        if out.is_floating_point() or out.is_complex() or out.dtype == torch.bool:
            raise _Bad(
                Finding("output", False, f"{fn_name} returned dtype {out.dtype} for {shown}; expected {what} tensor")
            )
        return out
    if not out.is_floating_point():
        raise _Bad(
            Finding("output", False, f"{fn_name} returned dtype {out.dtype} for {shown}; expected {what} tensor")
        )
    if dtype is not None and out.dtype != dtype:
        raise _Bad(Finding("output", False, f"{fn_name} returned dtype {out.dtype} for {shown}; expected {dtype}"))
    if bool(torch.isnan(out).any()):
        raise _Bad(Finding("output", False, f"{fn_name} returned NaN for {shown}; expected finite values"))
    return out


def _eps(dtype: torch.dtype) -> float:
    return float(torch.finfo(dtype).eps)


def _unwrap(angle: torch.Tensor) -> torch.Tensor:
    """Unwrap angles along dimension 0 (steps taken to lie in (-π, π])."""
    step = torch.diff(angle, dim=0)
    step = step - 2.0 * math.pi * torch.round(step / (2.0 * math.pi))
    return torch.cat((angle[:1], angle[:1] + torch.cumsum(step, dim=0)), dim=0)
