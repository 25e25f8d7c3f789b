"""Detectors for positional-encoding bugs: run them on your own implementation (notebook 10).

Each ``check_*`` function calls the implementation under test on probe inputs, compares what it
returns with ``helpers``' own functions (``rope_cos_sin``, ``apply_rope``, ``alibi_slopes``,
``alibi_bias``, ``sinusoidal_pe``, ``relative_position_bucket``, ``attention``) and returns a
:class:`CheckReport`: one :class:`Finding` per property, each saying whether it held and, where
it did not, the first input where the implementation differs, by how much, and what that usually
means. Nothing is printed; ``print(report)`` shows it, ``report.verdict`` is its one-line summary,
``report.diagnosis`` the first failure's explanation and ``report.raise_if_failed()`` turns a
failure into an exception (for a test suite).

Notation as in the rest of the package: ``d`` head width, ``θ_i`` the speed of pair ``i``
(radians per token), ``m`` and ``n`` the positions of a query and a key, ``H`` heads, ``Tq``
queries, ``Tk`` keys, ``m_h`` ALiBi's slope of head ``h``.

The detectors and the bugs they catch:

- ``check_rope``: layout (which dimensions pair up), a table built for one layout used with the
  other's rotation, speeds (base ignored, a wrong exponent, a scaling of the wrong type), the
  relative property, the norm, and precision at long positions (tables from low-precision angles).
- ``check_alibi``: slopes for every head count, the sign, the decoding step (``Tq = 1``) and the
  alignment of fewer queries than keys.
- ``check_position_ids``: position ids of a left-padded batch.
- ``check_cached_decoding``: decoding with a key/value cache against the full causal pass (a
  forgotten position offset, a causal mask aligned top-left).
- ``check_sinusoidal``: the sinusoidal table (sin/cos order, concatenated halves, the exponent of
  ``div_term``).
- ``check_t5_bias``: T5's relative-position buckets (sign convention, bidirectional flag).
"""

from __future__ import annotations

import functools
import inspect
import math
from dataclasses import dataclass

import torch

from ._validate import check_base, check_dtype, check_even_dim, check_int
from .alibi import alibi_bias, alibi_slopes
from .relative import relative_position_bucket
from .rope import LAYOUTS, apply_rope, rope_cos_sin, rope_frequencies
from .self_attention import attention
from .sinusoidal import sinusoidal_pe

__all__ = [
    "CheckFailed",
    "CheckReport",
    "Finding",
    "check_alibi",
    "check_cached_decoding",
    "check_position_ids",
    "check_rope",
    "check_sinusoidal",
    "check_t5_bias",
]

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


# ----- RoPE -------------------------------------------------------------------------------------


def _pairs_text(pairs: list[tuple[int, int]]) -> str:
    return ", ".join(f"({a}, {b})" for a, b in pairs[:3]) + ", ..."


_LAYOUT_NAMES = {
    "interleaved": "the interleaved layout (RoFormer, Meta): pairs (x_2i, x_2i+1)",
    "half": "the half layout (GPT-NeoX, Hugging Face's code for Llama 1 to 3): pairs (x_i, x_i+d/2)",
}


def _pair_index(layout: str, d: int) -> list[tuple[int, int]]:
    h = d // 2
    return [(2 * i, 2 * i + 1) for i in range(h)] if layout == "interleaved" else [(i, i + h) for i in range(h)]


def _speed_story(speed: torch.Tensor, d: int, base: float, scaling, theta: torch.Tensor, full_width=None) -> str:
    """What a set of measured speeds most likely is, in words (empty when nothing fits)."""
    close = lambda a, b: bool(torch.allclose(a, b, rtol=2e-3, atol=1e-9))  # noqa: E731
    ratio = speed / theta
    if full_width is not None:
        over_full = rope_frequencies(full_width, base, scaling=scaling)[0][: speed.shape[0]]  # b^(-2i/d), i < r/2
        if close(speed, over_full):
            return (
                f"the speeds are b^(-2i/d) over the whole head, d = {full_width}, where partial rotary uses the "
                f"rotated width: b^(-2i/r) with r = {d}."
            )
    if close(speed, -theta):
        return "every pair turns backwards (sin with the wrong sign: R_(-m) instead of R_m)."
    plain = rope_frequencies(d, base)[0]
    if scaling is not None and close(speed, plain):
        return f"these are plain RoPE's speeds with base {base:g}: the scaling {scaling} is ignored."
    factor = (scaling or {}).get("factor") if isinstance(scaling, dict) else None
    if factor is not None:
        for kind in ("linear", "ntk", "dynamic", "yarn", "llama3"):
            other = {**scaling, "type": kind}
            other.pop("rope_type", None)
            try:
                candidate = rope_frequencies(d, base, scaling=other)[0]
            except (TypeError, ValueError):
                continue
            if candidate.shape == speed.shape and close(speed, candidate) and not close(candidate, theta):
                kind_now = scaling.get("type", scaling.get("rope_type"))
                extra = ""
                if kind == "linear" and kind_now == "llama3":
                    high = scaling.get("high_freq_factor", 4.0)
                    extra = (
                        " llama3 divides only the slow pairs (wavelength above original_max_len / low_freq_factor) "
                        f"by the factor, keeps the fast ones (below original_max_len / {high:g}) and blends in "
                        "between."
                    )
                return f"these are the speeds of {kind} scaling with factor {factor:g}, not of {kind_now}.{extra}"
    if close(ratio, ratio.mean().expand_as(ratio)):
        c = float(ratio.mean())
        if abs(c - 1.0) > 1e-3:
            return (
                f"every pair turns {_num(c)} times helpers' speed: linear scaling (position interpolation) "
                f"by {_num(1 / c)}."
            )
    if bool((speed > 0).all()) and speed.shape[0] >= 3:
        i = torch.arange(speed.shape[0], dtype=torch.float64)
        log = torch.log(speed)
        slope = float(((i - i.mean()) * (log - log.mean())).sum() / ((i - i.mean()) ** 2).sum())
        intercept = float(log.mean() - slope * i.mean())
        fitted = intercept + slope * i
        if abs(intercept) < 1e-3 and float((fitted - log).abs().max()) < 2e-3 and slope < 0:
            fit = math.exp(-slope * d / 2.0)
            shown = f"{float(f'{fit:.3g}'):,.0f}" if 100 <= fit < 1e9 else _num(fit)  # 3 figures, written out
            if abs(fit / base - 1.0) < 1e-3:
                return (
                    f"the speeds fit b^(-2i/d) with the configured base {shown}: the exponent and the base are "
                    "right, the difference is rounding (an angle or a speed formed in a low precision)."
                )
            told = f"the speeds are those of base {shown} (b^(-2i/d) with b = {shown}), not {base:,.0f}"
            if abs(fit / 10000.0 - 1.0) < 1e-3 and abs(base / 10000.0 - 1.0) > 1e-3:
                return told + ": the configured base is ignored and the default 10000 used."
            if abs(fit / math.sqrt(base) - 1.0) < 1e-3:
                return told + ": the exponent is -i/d, not -2i/d (its 2 is missing)."
            if abs(fit / base**2 - 1.0) < 1e-3:
                return (
                    told + ": the exponent is -4i/d, not -2i/d (2i divided by d/2, or i counted in steps of 2 twice)."
                )
            return told + "."
    return ""


def _effective_positions(cos: torch.Tensor, sin: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """The position each row of a table was built for, read back from its angles: ``(P,)`` float64.

    ``cos``, ``sin``: ``(P, d/2)`` (any magnitude); ``theta``: ``(d/2,)`` the speeds the table
    should have. The slowest pair gives a first estimate (exact while its angle stays below π),
    and each faster pair refines it by the wrapped difference between its angle and the estimate's:
    an angle is only known up to a turn, so the pairs are read from slow to fast.
    """
    angle = torch.atan2(sin, cos)  # (P, d/2) in (-π, π]
    order = torch.argsort(theta)  # slowest first
    slow = order[0]
    p = angle[:, slow] / theta[slow]  # (P,)
    for i in order[1:]:
        delta = torch.remainder(angle[:, i] - p * theta[i] + math.pi, 2 * math.pi) - math.pi
        p = p + delta / theta[i]
    return p


def _low_precision_explains(got_cos, got_sin, probe, theta, rows) -> bool:
    """Whether the tables at the probed positions ``rows`` are those of an angle formed in a low
    precision: positions, speeds or their product rounded to bfloat16 or float16 (the float16
    range ends at 65,504, beyond which it cannot hold a position)."""
    m = probe[rows].double()[:, None]  # (P, 1)
    got = torch.atan2(got_sin[rows], got_cos[rows])  # (P, d/2)
    for dt in (torch.bfloat16, torch.float16):

        def r(t, dt=dt):
            return t.to(dt).double()

        for angle in (r(m) * theta, m * r(theta), r(m) * r(theta), r(r(m) * r(theta))):
            gap = torch.remainder(got - angle + math.pi, 2 * math.pi) - math.pi
            # 0.02 rad, plus the rounding of a float32 product m θ where the low-precision factors
            # are multiplied in float32 (bfloat16 positions times float32 speeds, for example).
            allowed = 0.02 + FLOAT32_ANGLE * angle.abs()
            if bool(torch.isfinite(angle).all()) and bool((gap.abs() <= allowed).all()):
                return True
    return False


def _one_fault(findings: list, fault: Finding | None, names=("relative",), into: str | None = None) -> list:
    """``findings`` with ``fault`` added and the failures of ``names`` folded into it (or into the
    finding ``into``): an offset, integer steps, a clamped table or low precision also break the
    relative property, a broken rotation breaks the norm too, and one fault is told once."""
    target = into or fault.name
    out = []
    for f in findings:
        if f.name in names and not f.passed and not f.folded_into:
            f = Finding(f.name, False, f.detail, folded_into=target)
        out.append(f)
    if fault is not None:
        out.append(fault)
    return out


def _position_story(p: torch.Tensor, m: torch.Tensor, tol: float) -> str:
    """What a map from probed positions ``m`` to the positions the table used, ``p``, most likely is
    (empty when it is the identity or a plain scaling, which the speeds finding reads)."""
    dev = p - m
    if float(dev.abs().max()) <= tol:
        return ""
    k = float(dev.mean())
    if float((dev - k).abs().max()) <= tol and abs(k - round(k)) <= tol:
        k = round(k)
        start = "1 (as if position_ids started at 1)" if k == 1 else f"{k}"
        return (
            f"every position is off by {k:+d}: the table at position m holds the angles of m {'+' if k > 0 else '-'} "
            f"{abs(k)}, positions counted from {start} instead of 0. The speeds are right; the positions "
            "passed to the table are not."
        )
    near = lambda a, b: bool(((a - b).abs() <= tol).all())  # noqa: E731
    for n in range(2, int(m[-1]) + 1):  # a table of n rows, clamped to its last one, or indexed modulo n
        if near(p, m.clamp(max=n - 1)):
            return (
                f"from position {n} on every position gets the angles of position {n - 1}: the tables stop there "
                f"(a table of {n} positions indexed with positions clamped to its last row)."
            )
        if near(p, torch.remainder(m, n)):
            return (
                f"position m gets the angles of m mod {n}: the tables wrap around after {n} positions (a table of "
                f"{n} rows indexed modulo its length)."
            )
    changes = (p[1:] - p[:-1]).abs() > tol  # (P - 1,)
    if bool(changes.any()) and not bool(changes.all()) and int(m[0]) == 0:
        step = int(changes.nonzero()[0]) + 1  # the first position whose angle differs from position 0's
        size = float(p[step] - p[0])
        blocks = torch.div(m, step, rounding_mode="floor")
        if step >= 2 and float((p - p[0] - size * blocks).abs().max()) <= tol:
            return (
                f"positions come in blocks of {step} that share one angle (positions 0 to {step - 1} are all "
                f"read as {_num(p[0])}): the positions are divided in integer arithmetic (m // {step}) instead "
                f"of scaled in floating point (m / {step})."
            )
        if bool((p[1:] - p[:-1] >= -tol).all()):  # non-decreasing, in runs of unequal length
            runs = torch.unique_consecutive(torch.round(p / tol), return_counts=True)[1][:-1]  # the last may be cut
            return (
                f"positions come in runs of {int(runs.min())} to {int(runs.max())} that share one angle: the "
                "positions are rounded down (a floor or an integer division) before the tables, instead of scaled "
                "in floating point."
            )
    return ""


def check_rope(
    rope_fn,
    *,
    d: int = 64,
    base: float = 10000.0,
    scaling=None,
    layout: str | None = None,
    max_position: int = 1_000_000,
    dtype: torch.dtype = torch.float32,
    device=None,
) -> CheckReport:
    """Check a RoPE implementation against ``helpers.rope_cos_sin`` and ``helpers.apply_rope``.

    Args:
        rope_fn: ``rope_fn(x, positions) -> rotated x``, with ``x`` of shape ``(T, d)`` and dtype
            ``dtype`` and ``positions`` a 1-D int64 tensor of ``T`` positions (not necessarily
            ``0 .. T-1``, and several rows may share a position). It must return a tensor of
            ``x``'s shape and dtype. RoPE is linear in ``x``, so rotating the unit vectors
            ``e_j`` shows which dimensions pair up and how far each pair turns.
        d: head width (even, at least 4), every dimension rotated.
        base, scaling: the settings the implementation is meant to have, as for
            ``helpers.rope_cos_sin`` (``scaling`` may be a Hugging Face ``rope_scaling`` dict).
        layout: ``"interleaved"`` or ``"half"`` if the implementation must have that layout;
            None accepts either (the finding says which one it has).
        max_position: the largest position probed for precision (positions up to about
            ``max_position - 1``).
        dtype: the dtype of ``x``; tolerances follow it.
        device: where ``x`` and ``positions`` are created (default the CPU), for an implementation
            that runs on an accelerator; what it returns is compared on the CPU in float64.

    A base that the implementation ignores is invisible at the base it ignores it for (an
    implementation that always uses 10,000 is right at ``base=10000``). So when ``rope_fn`` takes a
    ``base`` keyword (``rope_fn(x, positions, base=...)``), a last finding, ``base``, probes it once
    more at a second base (``base * 50``, or ``base / 50`` above 100,000: 10,000 and 500,000, the
    bases of Llama 2 and Llama 3) and checks it against helpers' tables for that base. Without such a
    keyword that finding is absent: check each base the implementation is configured with.

    With a ``partial_rotary_factor`` ``p`` in ``scaling``, only the first ``r = int(d p)``
    dimensions must turn: a first finding, ``slice``, checks that they do and that the rest pass
    through unchanged (naming the last ``r`` rotated instead of the first, or the factor ignored),
    and the findings below are then made on those ``r`` dimensions.

    Findings, in order: ``rotation`` (each pair turns as one rigid rotation; fails when a table
    built for one layout meets the other's rotation), ``norm`` (``|R_m x| = a |x|``, ``a`` the
    attention factor of ``scaling``, 1 without it), ``relative`` (``<R_m q, R_n k>`` depends only
    on ``n - m``, at small and large ``m``), ``layout``, ``speeds`` (each pair's speed against
    helpers', with the likely cause of a mismatch) and ``precision`` (the tables against helpers'
    float64 ones at positions up to ``max_position``; a float32 angle ``m θ`` is accepted, a
    coarser one is not, and the first position where the error passes the tolerance is named).
    """
    name = "check_rope"
    rope_fn = _check_callable("rope_fn", rope_fn)
    d = check_even_dim("d", d)
    if d < 4:
        raise ValueError(f"d must be an even int >= 4 (at least two pairs to tell layouts apart), got {d}")
    base = check_base("base", base)
    if layout is not None and layout not in LAYOUTS:
        raise ValueError(f"layout must be None or one of {LAYOUTS}, got {layout!r}")
    max_position = check_int("max_position", max_position, minimum=128)
    dtype = check_dtype("dtype", dtype)
    device = _check_device(device)
    theta, factor = rope_frequencies(d, base, scaling=scaling)  # (r/2,) float64, the reference speeds
    r = 2 * theta.shape[0]  # the rotated width: d, or int(d p) with a partial_rotary_factor p
    second_base = _takes_base(rope_fn)
    given_fn, given_scaling = rope_fn, scaling
    try:
        findings = []
        if r < d:
            findings.append(_slice_finding(rope_fn, d, r, dtype, device))
            if not findings[0].passed:
                return _report(name, findings, ("slice", *_ROPE_PROPERTIES))
            inner = {k: v for k, v in scaling.items() if k != "partial_rotary_factor"}
            scaling = inner or None
            rope_fn = _first_dims(rope_fn, d, r)
        findings += _rope_findings(
            rope_fn,
            r,
            base,
            scaling,
            layout,
            max_position,
            dtype,
            device,
            theta,
            factor,
            full_width=d if r < d else None,
        )
        if second_base and all(f.passed for f in findings):
            findings.append(_base_finding(given_fn, d, r, base, given_scaling, layout, max_position, dtype, device))
    except _Bad as bad:
        finding = bad.finding
        if "IndexError" in finding.detail:
            finding = Finding(
                finding.name,
                False,
                finding.detail + ". If its tables stop at a fixed length (a table precomputed for the first N "
                "positions), pass max_position=N so that no position beyond it is probed.",
            )
        findings = [*findings, finding]
    return _report(name, findings, ("slice", *_ROPE_PROPERTIES) if r < d else _ROPE_PROPERTIES)


def _takes_base(fn) -> bool:
    """Whether ``fn`` has a parameter named ``base`` that can be passed by keyword."""
    try:
        parameter = inspect.signature(fn).parameters.get("base")
    except (TypeError, ValueError):  # a callable without a signature (some builtins)
        return False
    return parameter is not None and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)


def _base_finding(rope_fn, d, r, base, scaling, layout, max_position, dtype, device) -> Finding:
    """``rope_fn`` called with a second ``base``: do its tables follow it?"""
    other = base / 50.0 if base > 100_000 else base * 50.0
    fn = functools.partial(rope_fn, base=other)
    inner = scaling
    if r < d:
        fn = _first_dims(fn, d, r)
        inner = {k: v for k, v in scaling.items() if k != "partial_rotary_factor"} or None
    theta, factor = rope_frequencies(r, other, scaling=inner)
    try:
        found = _rope_findings(fn, r, other, inner, layout, max_position, dtype, device, theta, factor)
    except _Bad as bad:
        found = [bad.finding]
    wrong = [f for f in found if not f.passed]
    if not wrong:
        return Finding(
            "base",
            True,
            f"called with base={_num_int(other)} as well, its tables are helpers' for that base: the base "
            "argument is used",
        )
    return Finding("base", False, f"called with base={_num_int(other)}, {wrong[0].name}: {wrong[0].detail}")


def _num_int(x: float) -> str:
    """A base for a message: 500,000 or 0.5."""
    return f"{int(x):,}" if float(x).is_integer() else _num(x)


def _first_dims(rope_fn, d: int, r: int):
    """``rope_fn`` seen on its first ``r`` dimensions: ``x`` ``(T, r)`` padded with zeros to ``d``."""

    def rope(x, positions):
        padded = torch.cat((x, x.new_zeros(x.shape[0], d - r)), dim=-1)  # (T, d)
        out = rope_fn(padded, positions)
        if isinstance(out, torch.Tensor) and out.dim() == 2 and out.shape[-1] == d:
            return out[:, :r]
        return out  # the output check below names what is wrong with it

    return rope


def _slice_finding(rope_fn, d: int, r: int, dtype, device) -> Finding:
    """Partial rotary: the first ``r`` dimensions turn, the last ``d - r`` pass through unchanged."""
    n = 3
    eye = torch.eye(d, dtype=torch.float64).repeat(n, 1)  # (3 d, d)
    pos = torch.tensor([5, 37, 1001], dtype=torch.int64).repeat_interleave(d)  # (3 d,)
    J = _rope_call(rope_fn, eye, pos, dtype, device).reshape(n, d, d)  # (3, d, d): row j the image of e_j
    still = (J - torch.eye(d, dtype=torch.float64)).abs().amax(dim=(0, 2)) <= 4 * _eps(dtype)  # (d,)
    moved = [j for j in range(d) if not bool(still[j])]
    if moved == list(range(r)):
        return Finding("slice", True, f"dimensions 0 to {r - 1} turn and {r} to {d - 1} pass through unchanged")
    if moved == list(range(d - r, d)):
        return Finding(
            "slice",
            False,
            f"dimensions {d - r} to {d - 1} turn and 0 to {d - r - 1} pass through: the last {r} dimensions are "
            f"rotated instead of the first {r} (x[..., -r:] where x[..., :r] is meant; the weights put the "
            "rotary part first).",
        )
    if len(moved) == d:
        return Finding(
            "slice",
            False,
            f"every one of the {d} dimensions turns: the partial_rotary_factor is ignored (expected only the "
            f"first {r} to turn).",
        )
    return Finding(
        "slice",
        False,
        f"dimensions {_pairs_text([(j, j) for j in moved[:3]]).replace('(', '').replace(')', '')}... turn "
        f"({len(moved)} of them): expected exactly the first {r}.",
    )


_ROPE_PROPERTIES = ("rotation", "norm", "relative", "layout", "positions", "speeds", "precision")


def _rope_call(rope_fn, x: torch.Tensor, positions: torch.Tensor, dtype, device) -> torch.Tensor:
    shown = f"x of shape {tuple(x.shape)} and dtype {dtype}, positions {_positions_text(positions)}"
    x = x.to(dtype=dtype, device=device, copy=True)  # a fresh copy: the implementation may work in place
    out = _call(rope_fn, "rope_fn", (x, positions.to(device, copy=True)), shown)
    try:
        return _tensor_out(out, "rope_fn", tuple(x.shape), shown, dtype=dtype).detach().to("cpu", torch.float64)
    except _Bad as bad:
        f = bad.finding
        if ("NaN" in f.detail or "inf" in f.detail) and positions.numel() and int(positions.max()) > 65_504:
            f = Finding(
                f.name,
                False,
                f.detail + ". Positions above 65,504 were probed: a float16 position overflows there to inf, and "
                "cos(inf) is NaN (positions cast to float16?). Form the angle in float32 or float64; pass "
                "max_position=60000 to see how float16 positions do below the overflow.",
            )
        raise _Bad(f) from bad


def _positions_text(positions: torch.Tensor) -> str:
    values = positions.tolist()
    if len(values) <= 4:
        return str(values)
    return f"[{values[0]}, {values[1]}, ..., {values[-1]}] ({len(values)} of them)"


def _rope_findings(rope_fn, d, base, scaling, layout, max_position, dtype, device, theta, factor, full_width=None):
    h = d // 2
    eps = _eps(dtype)
    gen = torch.Generator().manual_seed(0)
    # The same vector at the same position, three times: rows must agree (positions are read).
    v = torch.randn(1, d, generator=gen, dtype=torch.float64).expand(3, d)
    same = _rope_call(rope_fn, v, torch.full((3,), 9, dtype=torch.int64), dtype, device)
    if not torch.allclose(same[1:], same[:1].expand(2, d), rtol=0, atol=4 * eps * float(same.abs().max())):
        raise _Bad(
            Finding(
                "positions",
                False,
                "one vector rotated at position 9 in three rows gave three different results: rope_fn reads the "
                "position from the row index (arange(T)), not from positions.",
            )
        )

    # The map at positions 0..64: row j of J[m] is the image of the unit vector e_j.
    n_probe = 65
    eye = torch.eye(d, dtype=torch.float64).repeat(n_probe, 1)  # (65 d, d)
    pos = torch.arange(n_probe, dtype=torch.int64).repeat_interleave(d)  # (65 d,)
    J = _rope_call(rope_fn, eye, pos, dtype, device).reshape(n_probe, d, d)  # (65, d, d)

    # Pairs: each dimension's partner is the one it mixes with most (off the diagonal).
    off = J[1:].abs().sum(0)  # (d, d)
    off.fill_diagonal_(0.0)
    partner = off.argmax(dim=1)  # (d,)
    lone = [j for j in range(d) if float(off[j].max()) == 0.0]
    if lone:
        raise _Bad(
            Finding(
                "rotation",
                False,
                f"dimension {lone[0]} is never mixed with another ({len(lone)} of {d} dimensions are not rotated): "
                "expected every dimension to turn with a partner.",
            )
        )
    if any(int(partner[int(partner[j])]) != j for j in range(d)):
        j = next(j for j in range(d) if int(partner[int(partner[j])]) != j)
        raise _Bad(
            Finding(
                "rotation",
                False,
                f"dimension {j} mixes mostly with {int(partner[j])}, which mixes mostly with "
                f"{int(partner[int(partner[j])])}: not a rotation of pairs.",
            )
        )
    pairs = sorted({(min(j, int(partner[j])), max(j, int(partner[j]))) for j in range(d)})
    if all(b == a + 1 and a % 2 == 0 for a, b in pairs):
        found = "interleaved"
    elif all(b == a + h for a, b in pairs):
        found = "half"
    else:
        found = None

    # Each dimension's own cos and sin (a consistent rotation gives both members of a pair the same).
    first = torch.tensor([a for a, _ in pairs])
    second = torch.tensor([b for _, b in pairs])
    cos = torch.empty(n_probe, d, dtype=torch.float64)
    sin = torch.empty(n_probe, d, dtype=torch.float64)
    cos[:, first], cos[:, second] = J[:, first, first], J[:, second, second]
    sin[:, first], sin[:, second] = -J[:, second, first], J[:, first, second]
    speed = _unwrap(torch.atan2(sin, cos))  # (65, d) angles, unwrapped along the positions
    m = torch.arange(n_probe, dtype=torch.float64)[:, None]
    dim_speed = (m * speed).sum(0) / (m**2).sum()  # (d,) least-squares slope through the origin
    entry_tol = 4 * eps * max(factor, 1.0)
    gap = ((cos[:, first] - cos[:, second]).abs() + (sin[:, first] - sin[:, second]).abs()).amax(0)  # (d/2,)
    findings = []
    if bool((gap > entry_tol).any()):
        k = int((gap > entry_tol).nonzero()[0])  # the first pair that is not a rotation
        a, b = pairs[k]
        story = ""
        if found is not None:
            by_half = theta.repeat(2)  # cat(θ, θ): the half layout's full-width table
            by_inter = theta.repeat_interleave(2)  # (θ0, θ0, θ1, θ1, ...): the interleaved layout's table
            tol = 2e-3 * theta.min() + 1e-6
            if found == "interleaved" and bool(((dim_speed - by_half).abs() <= tol * 10 + 1e-3 * by_half).all()):
                story = (
                    " The speeds are laid out as cat(θ, θ), the half layout's table, while the rotation pairs "
                    "(x_2i, x_2i+1): a table built for the half layout used with the interleaved rotation."
                )
            elif found == "half" and bool(((dim_speed - by_inter).abs() <= tol * 10 + 1e-3 * by_inter).all()):
                story = (
                    " The speeds are laid out as (θ_0, θ_0, θ_1, θ_1, ...), the interleaved layout's table, while "
                    "the rotation pairs (x_i, x_i+d/2): a table built for the interleaved layout used with rotate_half."
                )
        findings.append(
            Finding(
                "rotation",
                False,
                f"pair ({a}, {b}) is not one rotation: dimension {a} is driven at {_num(dim_speed[a])} rad per "
                f"token and dimension {b} at {_num(dim_speed[b])}.{story}",
            )
        )
        rotation_ok = False
    else:
        findings.append(
            Finding("rotation", True, f"each of the {h} pairs turns as one rotation (tolerance {_num(entry_tol)})")
        )
        rotation_ok = True

    # Norm and the relative property on random vectors, at small and large positions.
    big = [p for p in (1_000, 65_537, max_position // 2, max_position - 38) if p + 37 < max_position]
    starts = [0, 1, 7, *big]
    norm_problem, rel_problem = None, None
    norm_dev, inner32 = 0.0, False
    q = torch.randn(d, generator=gen, dtype=torch.float64)
    k = torch.randn(d, generator=gen, dtype=torch.float64)
    q, k = q.to(dtype).double(), k.to(dtype).double()  # exactly representable in dtype
    offsets = [0, 1, 5, 37]
    rows_q = torch.tensor([s for s in starts for _ in offsets], dtype=torch.int64)
    rows_k = torch.tensor([s + o for s in starts for o in offsets], dtype=torch.int64)
    rq = _rope_call(rope_fn, q.expand(len(rows_q), d), rows_q, dtype, device)
    rk = _rope_call(rope_fn, k.expand(len(rows_k), d), rows_k, dtype, device)
    scale = float(q.norm() * k.norm())
    for rows, rotated, vec in ((rows_q, rq, q), (rows_k, rk, k)):
        ratio = rotated.norm(dim=-1) / vec.norm()
        for p, r in zip(rows.tolist(), ratio.tolist(), strict=True):
            angle_part = FLOAT32_ANGLE * 4 * p * float(theta.max())
            tol = 8 * eps + angle_part
            norm_dev = max(norm_dev, abs(r - factor) / factor)
            if abs(r - factor) <= factor * tol:
                continue
            if dtype == torch.float64 and abs(r - factor) <= factor * (8 * _eps(torch.float32) + angle_part):
                inner32 = True  # float64 in and out, float32 inside (Meta's x.float() ... type_as(x))
            elif norm_problem is None:
                norm_problem = (p, r)
    score = (rq * rk).sum(-1).reshape(len(starts), len(offsets))  # (starts, offsets)
    for s_index, s in enumerate(starts[1:], start=1):
        tol = scale * (8 * eps + 2 * FLOAT32_ANGLE * (s + 64) * float(theta.max())) * factor**2
        diff = (score[s_index] - score[0]).abs()
        if rel_problem is None and bool((diff > tol).any()):
            o = int(diff.argmax())
            rel_problem = (s, offsets[o], float(score[s_index, o]), float(score[0, o]), tol)
    if norm_problem is None:
        note = (
            f" (|R_m x| / |x| - {_num(factor)} up to {norm_dev:.1e}: float64 in and out, computed internally in "
            "float32)"
            if inner32
            else ""
        )
        findings.append(Finding("norm", True, f"|R_m x| = {_num(factor)} |x| at every probed position{note}"))
    else:
        p, r = norm_problem
        why = " (each pair's two members turn by different angles)" if not rotation_ok else ""
        s_factor = (scaling or {}).get("factor") if isinstance(scaling, dict) else None
        if rotation_ok and abs(factor - 1.0) > 1e-6 and abs(r - 1.0) < 1e-3:
            why = (
                f": the tables are not multiplied by the attention factor {_num(factor)} that this scaling "
                "prescribes (YaRN's 0.1 ln(s) + 1, or its mscale ratio). The angles may be right; the length is not"
            )
        elif rotation_ok and abs(factor - 1.0) > 1e-6 and abs(r - factor**2) < 1e-3 * factor**2:
            why = f": the attention factor {_num(factor)} is applied twice (the length is its square)"
        elif rotation_ok and s_factor and s_factor > 1 and abs(r / factor - (0.1 * math.log(s_factor) + 1.0)) < 1e-3:
            why = (
                f" (YaRN's attention factor 0.1 ln(s) + 1 = {0.1 * math.log(s_factor) + 1.0:.3f} at s = "
                f"{s_factor:g}: the tables are YaRN's)"
            )
        findings.append(
            Finding(
                "norm",
                False,
                f"at position {p:,}, |R_m x| / |x| differs from {_num(factor)} by {abs(r - factor):.2e} "
                f"(ratio {r:.6f}){why}.",
            )
        )
    if rel_problem is None:
        last_tol = (8 * eps + 2 * FLOAT32_ANGLE * (starts[-1] + 64) * float(theta.max())) * factor**2
        findings.append(
            Finding(
                "relative",
                True,
                f"<R_m q, R_n k> depends only on n - m, for m from 0 to {starts[-1]:,} (tolerance "
                f"{_num(last_tol)} |q||k| at the largest m: it grows with m to admit a float32 angle, so far out "
                "this probe is coarse; the precision finding looks closer)",
            )
        )
    else:
        s, o, got, want, tol = rel_problem
        findings.append(
            Finding(
                "relative",
                False,
                f"<R_m q, R_n k> at (m, n) = ({s:,}, {s + o:,}) is {_num(got)}, but {_num(want)} at (0, {o}) "
                f"(tolerance {_num(tol)}): the score depends on the absolute position, not only on n - m.",
            )
        )

    if found is None:
        findings.append(
            Finding("layout", False, f"pairs {_pairs_text(pairs)}: neither the interleaved nor the half layout.")
        )
    elif layout is not None and found != layout:
        findings.append(
            Finding(
                "layout",
                False,
                f"pairs {_pairs_text(pairs)} rotate together: this is {_LAYOUT_NAMES[found]}; expected "
                f"{_LAYOUT_NAMES[layout]}. Weights trained with one layout need their q and k rows permuted "
                "to run with the other.",
            )
        )
    else:
        findings.append(Finding("layout", True, f"pairs {_pairs_text(pairs)}: {_LAYOUT_NAMES[found]}"))

    if not rotation_ok:
        return _one_fault(findings, None, names=("norm", "relative"), into="rotation")  # consequences of it
    if found is None:
        return findings
    index = _pair_index(found, d)
    # Which positions the table was built for: an offset or integer steps would otherwise read as a
    # scaling of the speeds (a fit through the origin of angles (m + 1) θ gives 1.02 θ).
    a_idx = torch.tensor([a for a, _ in index])
    mapped = _effective_positions(cos[:, a_idx], sin[:, a_idx], theta)  # (65,)
    story = _position_story(mapped, m[:, 0], 0.05)
    if story:
        return _one_fault(findings, Finding("positions", False, _capital(story)))
    findings.append(
        Finding("positions", True, f"the angles read back give positions 0 to {n_probe - 1} as passed (within 0.05)")
    )
    pair_speed = torch.stack([(dim_speed[a] + dim_speed[b]) / 2 for a, b in index])  # (d/2,)
    speed_tol = 1e-3 * theta + 4 * eps / n_probe
    wrong = (pair_speed - theta).abs() > speed_tol
    rounded = bool(wrong.any()) and bool(((pair_speed - theta).abs() <= 1e-2 * theta + 4 * eps / n_probe).all())
    if rounded:
        i = int(((pair_speed - theta).abs() / theta).argmax())
        findings.append(
            Finding(
                "speeds",
                False,
                f"pair {i} turns {_num(pair_speed[i])} rad per token, helpers says {_num(theta[i])}: every speed is "
                f"within 1% but off by up to {_num(100 * float(((pair_speed - theta).abs() / theta).max()))}%, as if "
                "rounded to a low precision (bfloat16 keeps 8 significant bits, steps of up to 0.8%): after a "
                "thousand tokens such a pair is off by radians. Keep the speeds (inv_freq) in float32 or float64 "
                "(a model cast with .to(torch.bfloat16) casts its inv_freq buffer too) and form the angle m θ in "
                "float32 or float64.",
            )
        )
    elif bool(wrong.any()):
        i = int(wrong.nonzero()[min(5, int(wrong.sum()) - 1)])  # a pair a few in, where speeds are distinct
        kind = scaling.get("type", scaling.get("rope_type")) if isinstance(scaling, dict) else None
        said = "helpers" + (f" (base {base:,.0f})" if scaling is None else f" (base {base:,.0f}, scaling {kind})")
        story = _capital(_speed_story(pair_speed, d, base, scaling, theta, full_width))
        if "is ignored" in story:
            findings = _one_fault(findings, None, names=("norm",), into="speeds")  # no attention factor either
        findings.append(
            Finding(
                "speeds",
                False,
                f"{int(wrong.sum())} of {h} pairs turn at another speed, the first pair {int(wrong.nonzero()[0])}; "
                f"for example pair {i} turns {_num(pair_speed[i])} rad per token, where {said} says "
                f"{_num(theta[i])}. {story}".strip(),
            )
        )
        return findings
    else:
        findings.append(Finding("speeds", True, f"every pair turns at helpers' speed (within 0.1%), {h} pairs"))

    # Precision: the tables at positions up to max_position against helpers' float64 ones.
    probe = torch.unique(
        torch.cat(
            (
                torch.arange(0, 8, dtype=torch.int64),
                torch.logspace(1, math.log10(max_position - 1), 60, dtype=torch.float64).round().to(torch.int64),
                torch.tensor([max_position - 1]),
            )
        )
    )
    ones = torch.zeros(len(probe), d, dtype=torch.float64)
    a_idx = torch.tensor([a for a, _ in index])
    b_idx = torch.tensor([b for _, b in index])
    ones[:, a_idx] = 1.0
    out = _rope_call(rope_fn, ones, probe, dtype, device)  # out[:, a] = cos, out[:, b] = sin
    ref_cos, ref_sin = rope_cos_sin(probe, d, base, scaling=scaling, dtype=torch.float64)  # (P, d/2)
    got_cos, got_sin = out[:, a_idx], out[:, b_idx]  # (P, d/2)
    # Angles only: a wrong length (an attention factor) is the norm finding's, reported once there.
    turn = torch.atan2(got_sin * ref_cos - got_cos * ref_sin, got_cos * ref_cos + got_sin * ref_sin)  # (P, d/2)
    error = turn.abs().amax(-1)  # (P,) the largest angle error of each probed position, radians
    tol = 2 * eps + FLOAT32_ANGLE * probe.double() * float(theta.max())
    over = error > tol
    if bool(over.any()):
        at = int(over.nonzero()[0])
        worst = int(error.argmax())
        read = _effective_positions(got_cos, got_sin, theta)  # (P,) the positions the tables were built for
        late = read[over]
        last = int(probe[at - 1]) if at > 0 else 0
        if bool(((late - late[0]).abs() < 0.05).all()) and abs(float(late[0]) - round(float(late[0]))) < 0.05:
            n = round(float(late[0]))
            if int(over.sum()) > 1 or n < int(probe[at]):
                return _one_fault(
                    findings,
                    Finding(
                        "precision",
                        False,
                        f"from the probed position {int(probe[at]):,} on (the last right one probed: {last:,}) "
                        f"every position gets the angles of position {n:,}: the tables stop there, as a table cached "
                        "for "
                        f"{n + 1:,} positions and indexed with positions clamped to its last row would. Build the "
                        "table for the longest position used, or compute it from the positions.",
                    ),
                )
        for n in sorted({int(round(float(pp - ll))) for pp, ll in zip(probe[over][:3], late[:3], strict=False)}):
            if n < 2:
                continue
            wraps = torch.remainder(probe[over].double(), n)
            if bool(((late - wraps).abs() < 0.05).all()):
                return _one_fault(
                    findings,
                    Finding(
                        "precision",
                        False,
                        f"from the probed position {int(probe[at]):,} on, position m gets the angles of m mod {n:,}: "
                        f"the tables wrap around after {n:,} positions (a table of {n:,} rows indexed modulo its "
                        "length). Build it for the longest position used, or compute it from the positions.",
                    ),
                )
        if not _low_precision_explains(got_cos, got_sin, probe, theta, over):
            k = 0
            return _one_fault(
                findings,
                Finding(
                    "precision",
                    False,
                    f"the tables differ from helpers' from the probed position {int(probe[over][k]):,} on (angle "
                    f"error {_num(error[over][k])} rad there), and neither an angle formed in bfloat16 or float16 "
                    "(positions, speeds or their product rounded) nor a table that stops or wraps gives these "
                    "tables: the check does not recognise this fault.",
                ),
            )
        low = Finding(
            "precision",
            False,
            f"the tables first exceed the tolerance at the probed position {int(probe[at]):,} (angle error "
            f"{_num(error[at])} rad, tolerance {_num(tol[at])}); at position {int(probe[worst]):,} the error is "
            f"{_num(error[worst])}. The angle m θ is formed in too low a precision (bfloat16 or float16 "
            "positions or speeds): form it in float32 or float64 and cast only the cos and sin.",
        )
        if any(f.name == "speeds" and not f.passed for f in findings):  # rounded speeds: the same fault
            low = Finding("precision", False, low.detail, folded_into="speeds")
            return _one_fault(findings, low, into="speeds")
        if rel_problem is not None and rel_problem[0] >= int(probe[at]):
            return _one_fault(findings, low)  # the relative failure, further out, is this one
        findings.append(low)
    else:
        end = int(probe[-1])
        note = ""
        if float(error[-1]) > 1e-3:
            note = (
                f"; at position {end:,} the error is {_num(error[-1])}, the rounding of a float32 angle "
                "(helpers forms it in float64)"
            )
        findings.append(
            Finding(
                "precision",
                True,
                f"tables within tolerance at {len(probe)} positions up to {end:,} "
                f"({_num(2 * eps)} plus a float32 angle's rounding){note}",
            )
        )
    return findings


# ----- ALiBi ------------------------------------------------------------------------------------


def _alibi_call(bias_fn, n_heads: int, n_queries: int, n_keys: int, rounding: list) -> torch.Tensor:
    """The bias as float64 ``(H, Tq, Tk)``; a broadcastable shape such as BLOOM's and MPT's ``(H, 1, Tk)``
    is expanded. ``rounding`` collects the largest rounding step of a low-precision result."""
    shown = f"n_heads={n_heads}, n_queries={n_queries}, n_keys={n_keys}"
    shape = (n_heads, n_queries, n_keys)
    out = _call(bias_fn, "bias_fn", shape, shown)
    if isinstance(out, torch.Tensor) and out.dim() == 3 and tuple(out.shape) != shape:
        if all(a in (1, b) for a, b in zip(out.shape, shape, strict=True)):
            out = out.expand(shape)  # broadcastable, as the attention scores it is added to
    out = _tensor_out(out, "bias_fn", shape, shown)
    if out.dtype in (torch.bfloat16, torch.float16):
        finite = out[torch.isfinite(out)].double()
        rounding.append(_eps(out.dtype) * (float(finite.abs().max()) if finite.numel() else 0.0))
    out = out.detach().to(torch.float64)
    if bool(torch.isposinf(out).any()):
        raise _Bad(Finding("output", False, f"bias_fn returned +inf for {shown}; expected finite values or -inf"))
    return out


def _rows_from_own_key(bias: torch.Tensor, n_keys: int) -> torch.Tensor:
    """Each row minus its entry at the query's own key (bottom-right: query i at key i + Tk - Tq)."""
    tq = bias.shape[-2]
    own = torch.arange(tq) + (n_keys - tq)  # (Tq,)
    return bias - bias[:, torch.arange(tq), own][..., None]


def _log2_list(values) -> str:
    return "[" + ", ".join(f"{math.log2(v):.3g}" if v > 0 else _num(v) for v in values) + "]"


def check_alibi(bias_fn, *, max_heads: int = 64, n_tokens: int = 16) -> CheckReport:
    """Check an ALiBi bias against ``helpers.alibi_bias`` and ``helpers.alibi_slopes``.

    Args:
        bias_fn: ``bias_fn(n_heads, n_queries, n_keys) -> (H, Tq, Tk)`` additive causal bias,
            queries aligned bottom-right (query ``i`` is the token at position ``i + Tk - Tq``, so
            a single query is the newest token). Only the keys at or before each query are
            compared, and each row only up to a constant (softmax ignores one): the distance form
            ``-m_h (i - j)`` and the reference code's ``+m_h j`` both pass; what the bias holds
            above the diagonal (``-inf`` or anything a separate mask covers) is not checked. A
            broadcastable ``(H, 1, Tk)`` result (BLOOM's ``+m_h j``, MPT's anchored row) is expanded, and a
            bfloat16 or float16 result is compared within its own rounding.
        max_heads: slopes are checked for every head count ``1 .. max_heads``.
        n_tokens: ``Tk`` of the probes (at least 4).

    Findings: ``sign`` (the penalty grows with distance), ``slopes`` (every head count),
    ``decoding`` (``Tq = 1`` against the last row of the full bias) and ``alignment`` (``Tq < Tk``
    against the last ``Tq`` rows). A bias that is the same for every key a query sees (it
    depends on the query's index only, as in ggml#143) fails first, as ``distance``.
    """
    bias_fn = _check_callable("bias_fn", bias_fn)
    max_heads = check_int("max_heads", max_heads, minimum=1)
    n_tokens = check_int("n_tokens", n_tokens, minimum=4)
    try:
        findings = _alibi_findings(bias_fn, max_heads, n_tokens)
    except _Bad as bad:
        findings = [bad.finding]
    return _report("check_alibi", findings, ("sign", "slopes", "decoding", "alignment"))


def _alibi_findings(bias_fn, max_heads, T):
    findings = []
    rounding: list[float] = []  # rounding steps of low-precision results (bfloat16 +m_h j grows with j)

    def slack():
        return 2.0 * max(rounding, default=0.0)

    visible = torch.ones(T, T).tril().bool()  # (T, T): j <= i
    distance = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).double()  # (T, T)

    def measured(H):
        raw = _alibi_call(bias_fn, H, T, T, rounding)  # (H, T, T)
        if bool(torch.isneginf(raw[:, visible]).any()):
            h, i, j = (int(t) for t in torch.nonzero(torch.isneginf(raw) & visible)[0])
            raise _Bad(
                Finding(
                    "output",
                    False,
                    f"bias_fn({H}, {T}, {T}) is -inf at head {h}, query {i}, key {j} <= {i}: "
                    "a key the query may see is masked",
                )
            )
        got = _rows_from_own_key(raw, T)
        slope = -(got[:, visible & (distance > 0)] / distance[visible & (distance > 0)]).mean(-1)  # (H,)
        return got, slope

    got8, slope8 = measured(8)
    if bool((got8[:, visible].abs() <= 1e-9 + slack()).all()):
        raise _Bad(
            Finding(
                "distance",
                False,
                "every key a query sees gets the same bias (it depends on the query's index only, or is 0): "
                "softmax cancels a constant added to a row, so this is no ALiBi at all. The bias must change "
                "with the key: -m_h (i - j), or +m_h j with j the key's index.",
            )
        )
    if bool((slope8 < 0).any()):
        h = int((slope8 < 0).nonzero()[0])
        findings.append(
            Finding(
                "sign",
                False,
                f"head {h} of 8 adds {_num(-slope8[h])} per token of distance: the penalty shrinks as the key gets "
                "further away, so far keys are favoured. The sign is flipped: ALiBi adds -m_h (i - j).",
            )
        )
    else:
        findings.append(Finding("sign", True, "the penalty grows with distance in every head"))

    wrong = []
    for H in range(1, max_heads + 1):
        got, slope = (got8, slope8) if H == 8 else measured(H)
        want = alibi_slopes(H)
        ref = alibi_bias(H, T, T, dtype=torch.float64)
        tol = 1e-4 * float(want.max()) * T + slack()
        if not torch.allclose(got[:, visible], ref[:, visible], rtol=1e-4, atol=tol):
            wrong.append((H, slope, want, got, ref))
    if not wrong:
        low = f" (the bias comes in a low precision: compared within its rounding, {_num(slack())})" if rounding else ""
        findings.append(Finding("slopes", True, f"the slopes of every head count from 1 to {max_heads} are right{low}"))
    else:
        powers = [w for w in wrong if w[0] & (w[0] - 1) == 0]
        first = wrong[0]
        H, slope, want, got, ref = first
        rounded_to = next(
            (
                name
                for name, dt in (("bfloat16", torch.bfloat16), ("float16", torch.float16))
                if all(torch.allclose(w[1], w[2].to(dt).double(), rtol=1e-4) for w in wrong)
            ),
            None,
        )
        flipped = bool((slope < 0).all()) and torch.allclose(-slope, want, rtol=1e-3)
        if flipped:
            text = "the slopes are right in size but negative: the same fault as the sign finding."
        elif rounded_to is not None:
            worst = max(float(((w[1] - w[2]) / w[2]).abs().max()) for w in wrong)
            text = (
                f"wrong for {len(wrong)} of {max_heads} head counts, each slope off by up to {_num(100 * worst)}%: "
                f"they are the reference slopes rounded to {rounded_to} (keep the slopes in float32 and cast the "
                "bias, not the slopes)."
            )
        elif not torch.allclose(slope, want, rtol=1e-3):
            text = (
                f"wrong for {len(wrong)} of {max_heads} head counts"
                + ("" if powers else ", right for every power of two")
                + f"; first at H = {H}: log2 of the slopes is {_log2_list(slope.tolist())}, expected "
                f"{_log2_list(want.tolist())}."
            )
            direct = torch.tensor([2.0 ** (-8.0 * (k + 1) / H) for k in range(H)], dtype=torch.float64)
            if torch.allclose(slope.sort().values, want.sort().values, rtol=1e-3):
                text += (
                    " These are the right slopes given to the wrong heads"
                    + (" (in ascending order)" if bool((slope.diff() > 0).all()) else "")
                    + ": head h must get the h-th slope of the reference order (largest first, alibi_slopes(H)); "
                    "weights trained with one assignment are wrong with another."
                )
            elif H & (H - 1) and torch.allclose(slope, direct, rtol=1e-3):
                n = 2 ** math.floor(math.log2(H))
                text += (
                    f" These are 2^(-8k/H) with H = {H}, the rule for a power of two; the reference keeps the {n} "
                    f"slopes of {n} heads and appends every other slope of {2 * n} heads (the odd powers of "
                    f"2^(-{_num(4 / n)}))."
                )
            elif H & (H - 1):
                n = 2 ** math.floor(math.log2(H))
                good = int((torch.isclose(slope, want, rtol=1e-3)).sum())
                text += f" {good} of {H} heads match; the last {H - n} should be every other slope of {2 * n} heads."
        else:
            diff = (got - ref).abs().masked_fill(~visible, 0.0)
            h, i, j = (int(t) for t in torch.unravel_index(diff.argmax(), diff.shape))
            text = (
                f"the slopes are right but the bias is not linear in the distance: H = {H}, head {h}, query {i}, "
                f"key {j} has {_num(got[h, i, j])}, expected {_num(ref[h, i, j])}."
            )
        if flipped and any(f.name == "sign" and not f.passed for f in findings):
            findings.append(Finding("slopes", False, text, folded_into="sign"))
        else:
            findings.append(Finding("slopes", False, text))

    # Decoding and alignment are judged against the implementation's own full pass (Tq = Tk), so
    # that wrong slopes, already reported, are not reported again as wrong decoding and alignment.
    ref_full = got8  # (8, T, T): its own rows, measured from each query's own key
    step = _alibi_call(bias_fn, 8, 1, T, rounding)  # (8, 1, T)
    own = step[:, 0, T - 1]
    if bool(torch.isneginf(own).any()):
        findings.append(
            Finding(
                "decoding",
                False,
                f"at the decoding step (Tq = 1, Tk = {T}) the query's own key {T - 1} is masked with -inf: the "
                "query is aligned top-left (at position 0); it is the newest token, at position Tk - 1.",
            )
        )
    else:
        step = _rows_from_own_key(step, T)[:, 0]  # (8, T)
        if torch.allclose(step, ref_full[:, -1], rtol=1e-4, atol=1e-4 * T + slack()):
            findings.append(Finding("decoding", True, f"Tq = 1 matches the last row of its own full bias (Tk = {T})"))
        else:
            flat = bool((step.abs() <= 1e-6).all())
            text = (
                f"at the decoding step (Tq = 1, Tk = {T}) head 0 gives the keys {_num(step[0, 0])} ... "
                f"{_num(step[0, -1])}; the last row of its own full bias (Tq = Tk) has "
                f"{_num(ref_full[0, -1, 0])} ... 0."
            )
            if flat:
                text += (
                    " The bias is the same for every key, so ALiBi does nothing while generating: the distance is "
                    "measured from position 0 (or from the step's own length) instead of from the newest position."
                )
            findings.append(Finding("decoding", False, text))

    tq = 4
    part = _alibi_call(bias_fn, 8, tq, T, rounding)  # (8, 4, T)
    ok_rows = ref_full[:, -tq:]
    finite = torch.isfinite(ok_rows)
    own_ok = bool(torch.isfinite(part[:, torch.arange(tq), torch.arange(tq) + T - tq]).all())
    shifted = _rows_from_own_key(part, T) if own_ok else part
    if own_ok and torch.allclose(shifted[finite], ok_rows[finite], rtol=1e-4, atol=1e-4 * T + slack()):
        findings.append(Finding("alignment", True, f"Tq = {tq} queries against Tk = {T} keys align bottom-right"))
    else:
        top = ref_full[:, :tq]
        top_finite = torch.isfinite(top)
        part_top = part - part[:, torch.arange(tq), torch.arange(tq)][..., None]
        top_left = bool(torch.isfinite(part_top[top_finite]).all()) and torch.allclose(
            part_top[top_finite], top[top_finite], rtol=1e-4, atol=1e-4 * T + slack()
        )
        text = f"with Tq = {tq} queries against Tk = {T} keys, query 0 should be the token at position {T - tq}"
        text += (
            " (bottom-right: the queries are the newest tokens); this bias places it at position 0 (top-left)."
            if top_left
            else "; the bias of the last rows differs from the last rows of its own full bias (Tq = Tk)."
        )
        findings.append(Finding("alignment", False, text))
    return findings


# ----- position ids -----------------------------------------------------------------------------

_MASK = torch.tensor(
    [
        [0, 0, 0, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 1],
        [0, 0, 0, 0, 0, 0, 1],
    ],
    dtype=torch.int64,
)


def check_position_ids(position_ids_fn, *, attention_mask: torch.Tensor | None = None) -> CheckReport:
    """Check the position ids of a left-padded batch: each row's first real token is at position 0.

    Args:
        position_ids_fn: ``position_ids_fn(attention_mask) -> position_ids``: ``attention_mask``
            an int64 ``(B, T)`` tensor, 1 for a real token and 0 for padding (padding on the left,
            as for batched generation); ``position_ids`` an integer ``(B, T)`` tensor. Only the
            real tokens' positions are compared (what padding gets is free).
        attention_mask: the batch to try; by default three rows padded by 3, 0 and 6 tokens.

    Findings: ``left padding``. It sees one call on a whole prompt: positions computed right for
    the prompt and wrong at a later decoding step (a batch-wide cache position used for every
    row) are outside what it can see.
    """
    position_ids_fn = _check_callable("position_ids_fn", position_ids_fn)
    if attention_mask is None:
        attention_mask = _MASK
    if (
        not isinstance(attention_mask, torch.Tensor)
        or attention_mask.dim() != 2
        or not bool(((attention_mask == 0) | (attention_mask == 1)).all())
    ):
        got = (
            f"shape {tuple(attention_mask.shape)}"
            if isinstance(attention_mask, torch.Tensor)
            else "a " + type(attention_mask).__name__
        )
        raise ValueError(f"attention_mask must be a (B, T) tensor of 0s and 1s, got {got}")
    mask = attention_mask.long()
    if bool((mask[:, 1:] < mask[:, :-1]).any()):
        row = int((mask[:, 1:] < mask[:, :-1]).any(-1).nonzero()[0])
        raise ValueError(
            f"attention_mask must be left-padded (0s before 1s in each row), got row {row}: {mask[row].tolist()}"
        )
    shown = f"attention_mask of shape {tuple(mask.shape)}, rows padded by {(mask == 0).sum(-1).tolist()} tokens"
    try:
        out = _call(position_ids_fn, "position_ids_fn", (mask.clone(),), shown)
        out = _tensor_out(out, "position_ids_fn", tuple(mask.shape), shown, integer=True).long()
    except _Bad as bad:
        return _report("check_position_ids", [bad.finding], ("left padding",))
    real = mask.bool()
    want = mask.cumsum(-1) - 1  # the count of real tokens before each one
    if torch.equal(out[real], want[real]):
        return CheckReport(
            "check_position_ids",
            (Finding("left padding", True, "every row's real tokens are numbered 0, 1, 2, ... from its first one"),),
        )
    b, t = (int(x) for x in torch.nonzero(real & (out != want))[0])
    text = f"row {b}, column {t}: position {int(out[b, t])}, expected {int(want[b, t])}."
    arange = torch.arange(mask.shape[1]).expand_as(mask)
    if torch.equal(out[real], arange[real]):
        text += (
            " Positions are counted from the first column, padding included, so a row padded by k tokens starts "
            "at position k: left padding is ignored (build them from the attention mask: cumsum - 1)."
        )
    elif torch.equal(out[real], want[real] + 1):
        text += " Every position is one too large: the cumulative sum of the mask without its - 1."
    return CheckReport("check_position_ids", (Finding("left padding", False, text),))


# ----- decoding with a cache --------------------------------------------------------------------


def check_cached_decoding(
    step_fn,
    *,
    d: int = 16,
    base: float = 10000.0,
    layout: str = "interleaved",
    chunks: tuple[int, ...] = (5, 3, 1, 1, 1),
    dtype: torch.dtype = torch.float64,
    device=None,
) -> CheckReport:
    """Check decoding with a key/value cache against the full causal pass with RoPE.

    Args:
        step_fn: ``step_fn(q, k, v, cache) -> (output, cache)``. ``q``, ``k``, ``v`` are the new
            tokens' queries, keys and values, ``(n, d)``, not yet rotated; ``cache`` is ``None`` at
            the first call and afterwards whatever ``step_fn`` returned. It must rotate the new
            queries and keys at their absolute positions (the number of cached tokens onwards),
            keep the keys and values, and return the new tokens' attention outputs ``(n, d)``:
            causal, each new token seeing every cached token and the new ones up to itself.
        d, base, layout: the RoPE settings ``step_fn`` uses.
        chunks: how many tokens each call brings (the first is the prompt).
        dtype: of ``q``, ``k``, ``v``; tolerances follow it.
        device: where ``q``, ``k``, ``v`` are created (default the CPU); outputs are compared on the CPU.

    The reference is ``helpers.apply_rope`` on all tokens at positions ``0 .. T-1`` and
    ``helpers.attention(causal=True)``. Findings: ``cache``, with the first step that differs and,
    when recognised, the cause (each step rotated from position 0; tables memoized by the step's
    length without its offset; the new tokens one position off, or only their queries; the values
    rotated too; the other layout; a causal mask aligned top-left); a fault it does not recognise is
    reported as a difference only.
    """
    step_fn = _check_callable("step_fn", step_fn)
    d = check_even_dim("d", d)
    base = check_base("base", base)
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if not isinstance(chunks, (tuple, list)) or len(chunks) < 2:
        raise ValueError(f"chunks must be a tuple of at least two token counts, got {chunks!r}")
    chunks = tuple(check_int("chunks", c, minimum=1) for c in chunks)
    dtype = check_dtype("dtype", dtype)
    device = _check_device(device)
    T = sum(chunks)
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(T, d, generator=gen, dtype=torch.float64) for _ in range(3))
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    cos, sin = rope_cos_sin(T, d, base, dtype=torch.float64)

    def full(q_rot, k_rot, mask=None, values=None):
        values = v.double() if values is None else values
        out, _ = attention(q_rot.double(), k_rot.double(), values, causal=mask is None, bias=mask)
        return out

    reference = full(apply_rope(q.double(), cos, sin, layout=layout), apply_rope(k.double(), cos, sin, layout=layout))
    bounds = [0]
    for c in chunks:
        bounds.append(bounds[-1] + c)
    # Hypothesis 1: every step rotated from position 0 (the offset forgotten).
    from_zero = torch.cat([torch.arange(e - s) for s, e in zip(bounds[:-1], bounds[1:], strict=True)])
    q0 = apply_rope(q.double(), cos, sin, layout=layout, positions=from_zero)
    k0 = apply_rope(k.double(), cos, sin, layout=layout, positions=from_zero)
    no_offset = full(q0, k0)
    # Hypothesis 2: right rotations, causal mask top-left within each step (torch's is_causal with Tq < Tk).
    q_rot = apply_rope(q.double(), cos, sin, layout=layout)
    k_rot = apply_rope(k.double(), cos, sin, layout=layout)
    top_left = []
    for s, e in zip(bounds[:-1], bounds[1:], strict=True):
        i = torch.arange(e - s)[:, None]
        j = torch.arange(e)[None, :]
        mask = torch.zeros(e - s, e, dtype=torch.float64).masked_fill(j > i, float("-inf"))
        out, _ = attention(q_rot[s:e], k_rot[:e], v[:e].double(), bias=mask)
        top_left.append(out)
    top_left = torch.cat(top_left)
    # Hypothesis 3: tables memoized by the step's length, not its offset: every step of a given length is
    # rotated as the first step of that length was.
    first_start: dict[int, int] = {}
    for s, e in zip(bounds[:-1], bounds[1:], strict=True):
        first_start.setdefault(e - s, s)
    memo = torch.cat([torch.arange(e - s) + first_start[e - s] for s, e in zip(bounds[:-1], bounds[1:], strict=True)])
    by_length = full(
        apply_rope(q.double(), cos, sin, layout=layout, positions=memo),
        apply_rope(k.double(), cos, sin, layout=layout, positions=memo),
    )

    # Hypothesis 4: the tokens after the prompt rotated one position off (cache_len - 1 or cache_len + 1).
    off_by = {}
    cos_1, sin_1 = rope_cos_sin(T + 1, d, base, dtype=torch.float64)  # one row more, for the late case
    for delta in (-1, 1):
        shifted = torch.arange(T) + delta * (torch.arange(T) >= chunks[0])  # (T,)
        off_by[delta] = full(
            apply_rope(q.double(), cos_1, sin_1, layout=layout, positions=shifted),
            apply_rope(k.double(), cos_1, sin_1, layout=layout, positions=shifted),
        )
    # Hypothesis 7: only the queries after the prompt one position off (keys right): a query position
    # taken from a counter that the key cache does not share.
    k_right = apply_rope(k.double(), cos_1, sin_1, layout=layout)
    q_off = {}
    for delta in (-1, 1):
        shifted = torch.arange(T) + delta * (torch.arange(T) >= chunks[0])  # (T,)
        q_off[delta] = full(apply_rope(q.double(), cos_1, sin_1, layout=layout, positions=shifted), k_right)
    # Hypothesis 6: the other layout (a half-layout step checked as interleaved, or the reverse).
    other = "half" if layout == "interleaved" else "interleaved"
    other_layout = full(apply_rope(q.double(), cos, sin, layout=other), apply_rope(k.double(), cos, sin, layout=other))
    # Hypothesis 5: the values rotated too (RoPE belongs to queries and keys only).
    v_rotated = full(q_rot, k_rot, values=apply_rope(v.double(), cos, sin, layout=layout))

    tol = max(1e3 * _eps(dtype), 1e-6)  # float32 tables inside a float64 step pass; a real fault is far above
    cache = None
    got_all = []
    for step, (s, e) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        shown = f"step {step}: q, k, v of shape ({e - s}, {d}) for positions {s}..{e - 1}, {s} tokens cached"
        try:
            new = (t[s:e].to(device, copy=True) for t in (q, k, v))
            result = _call(step_fn, "step_fn", (*new, cache), shown)
            if not isinstance(result, tuple) or len(result) != 2:
                raise _Bad(
                    Finding(
                        "output",
                        False,
                        f"step_fn returned {type(result).__name__} at {shown}; expected a tuple (output, cache)",
                    )
                )
            out, cache = result
            out = _tensor_out(out, "step_fn", (e - s, d), shown).detach().to("cpu", torch.float64)
        except _Bad as bad:
            return _report("check_cached_decoding", [bad.finding], ("cache",))
        got_all.append(out)
        diff = float((out - reference[s:e]).abs().max())
        if diff > tol:
            text = (
                f"step {step} (the prompt is step 0; {e - s} new token{'s' if e - s > 1 else ''} at "
                f"{f'positions {s}..{e - 1}' if e - s > 1 else f'position {s}'}, {s} cached) "
                f"differs from the full pass by up to {_num(diff)} (tolerance {_num(tol)})."
            )
            got = torch.cat(got_all)
            if step == 0:
                text += " The prompt alone already differs, with nothing cached: the fault is not in the cache."
            if torch.allclose(got, other_layout[:e], rtol=0, atol=tol):
                text += (
                    f" It matches the full pass with the {other} layout: step_fn rotates pairs "
                    f"{'(x_i, x_i+d/2)' if other == 'half' else '(x_2i, x_2i+1)'}; pass layout={other!r} if that is "
                    "what the model was trained with."
                )
            elif torch.allclose(got, no_offset[:e], rtol=0, atol=tol):
                text += (
                    " It matches rotating every step from position 0: the new tokens must be rotated at their "
                    "absolute positions, the number of cached tokens onwards "
                    "(apply_rope(..., layout=..., positions=offset))."
                )
            elif torch.allclose(got, by_length[:e], rtol=0, atol=tol):
                text += (
                    " It matches rotating each step as the first step of the same length was: the tables are "
                    "memoized by the number of new tokens, and the offset is not part of the memo's key."
                )
            elif any(torch.allclose(got, off_by[delta][:e], rtol=0, atol=tol) for delta in (-1, 1)):
                delta = next(x for x in (-1, 1) if torch.allclose(got, off_by[x][:e], rtol=0, atol=tol))
                text += (
                    f" It matches rotating every token after the prompt one position {'early' if delta < 0 else 'late'}"
                    f" (at cache length {'- 1' if delta < 0 else '+ 1'}): the first new token's position is the "
                    "number of cached tokens, counted from 0."
                )
            elif any(torch.allclose(got, q_off[delta][:e], rtol=0, atol=tol) for delta in (-1, 1)):
                delta = next(x for x in (-1, 1) if torch.allclose(got, q_off[x][:e], rtol=0, atol=tol))
                text += (
                    f" It matches rotating the queries after the prompt one position {'early' if delta < 0 else 'late'}"
                    " while the keys are right: the query's position and the key cache's length are counted "
                    "separately; rotate the new queries and keys at the same positions, from the cache length."
                )
            elif torch.allclose(got, v_rotated[:e], rtol=0, atol=tol):
                text += (
                    " It matches rotating the values as well as the queries and keys: RoPE turns q and k only, "
                    "so that their dot product sees the offset; a rotated value carries its position into the output."
                )
            elif torch.allclose(got, top_left[:e], rtol=0, atol=tol):
                text += (
                    " It matches a causal mask aligned top-left (query i of the step sees keys 0..i): with a cache "
                    "the new queries are the newest tokens, query i sees keys up to i + Tk - Tq (torch's "
                    "scaled_dot_product_attention(is_causal=True) aligns top-left when Tq < Tk)."
                )
            return CheckReport("check_cached_decoding", (Finding("cache", False, text),))
    return CheckReport(
        "check_cached_decoding",
        (Finding("cache", True, f"{len(chunks)} steps ({', '.join(map(str, chunks))} tokens) match the full pass"),),
    )


# ----- sinusoidal -------------------------------------------------------------------------------


def check_sinusoidal(pe_fn, *, d: int = 64, n_positions: int = 128, base: float = 10000.0) -> CheckReport:
    """Check a sinusoidal table against ``helpers.sinusoidal_pe``.

    Args:
        pe_fn: ``pe_fn(T, d) -> (T, d)`` table, rows the positions ``0 .. T-1``, in the
            interleaved layout ``[sin θ_0 m, cos θ_0 m, sin θ_1 m, ...]`` with ``θ_i = b^(-2i/d)``.
        d, n_positions, base: the table probed and the base it should have.

    Findings: ``layout`` (which columns hold sines and which cosines; names sin/cos swapped and
    concatenated halves) and ``speeds`` (each pair's speed; names a wrong ``div_term`` exponent:
    its sign, a missing 2, a wrong base, tensor2tensor's spacing; reports the largest difference).
    A float32 angle is accepted: the tolerance grows with ``m θ_i``.
    """
    pe_fn = _check_callable("pe_fn", pe_fn)
    d = check_even_dim("d", d)
    if d < 4:
        raise ValueError(f"d must be an even int >= 4, got {d}")
    n_positions = check_int("n_positions", n_positions, minimum=16)
    base = check_base("base", base)
    shown = f"T={n_positions}, d={d}"
    try:
        out = _call(pe_fn, "pe_fn", (n_positions, d), shown)
        pe = _tensor_out(out, "pe_fn", (n_positions, d), shown).detach().double()
    except _Bad as bad:
        return _report("check_sinusoidal", [bad.finding], ("layout", "speeds"))
    ref = sinusoidal_pe(n_positions, d, base, dtype=torch.float64)
    tol = 1e-5 + 4 * _eps(out.dtype)
    h = d // 2
    # A float32 angle m θ_i (θ_i itself from a float32 exp or power) is off by about
    # (1 + |ln θ_i|) 6e-8 m θ_i: the tolerance grows with it, pair by pair (the PyTorch tutorial's table).
    speeds = _helpers_speeds(d, base)  # (d/2,)
    angle_tol = (
        FLOAT32_ANGLE * (1.0 + speeds.log().abs()) * torch.arange(n_positions, dtype=torch.float64)[:, None] * speeds
    )  # (T, d/2)
    pair_tol = tol + angle_tol  # (T, d/2)
    full_tol = pair_tol.repeat_interleave(2, dim=-1)  # (T, d), columns in helpers' interleaved order
    if bool(((pe - ref).abs() <= full_tol).all()):
        return CheckReport(
            "check_sinusoidal",
            (
                Finding("layout", True, "interleaved [sin, cos] pairs, as helpers.sinusoidal_pe"),
                Finding(
                    "speeds",
                    True,
                    f"every pair turns at b^(-2i/d), b = {base:g}, within {_num(tol)} plus a float32 angle's "
                    f"rounding ({_num(float(pair_tol.max()))} at position {n_positions - 1})",
                ),
            ),
        )
    # Layout from row 0 (position 0): sines are 0 there, cosines 1.
    row0 = pe[0]
    layouts = {
        "interleaved [sin, cos]": (torch.arange(0, d, 2), torch.arange(1, d, 2)),
        "interleaved [cos, sin] (sin and cos swapped)": (torch.arange(1, d, 2), torch.arange(0, d, 2)),
        "concatenated [sin ... | cos ...] (tensor2tensor's halves)": (torch.arange(h), torch.arange(h, d)),
        "concatenated [cos ... | sin ...]": (torch.arange(h, d), torch.arange(h)),
    }
    found = None
    for label, (s_cols, c_cols) in layouts.items():
        if bool((row0[s_cols].abs() <= tol).all()) and bool(((row0[c_cols] - 1).abs() <= tol).all()):
            found = label
            break
    findings = []
    if found is None:
        shifted = sinusoidal_pe(n_positions + 1, d, base, dtype=torch.float64)[1:]  # rows of positions 1 .. T
        if bool(((pe - shifted).abs() <= full_tol + FLOAT32_ANGLE * speeds.repeat_interleave(2)).all()):
            findings.append(
                Finding(
                    "layout",
                    False,
                    f"position 0 should be [0, 1, 0, 1, ...] (sin 0 = 0, cos 0 = 1); it is "
                    f"[{', '.join(_num(x) for x in row0[:4])}, ...], and row t holds position t + 1: the positions "
                    "are counted from 1 (arange(1, T + 1)); the first token must get position 0.",
                )
            )
            return _report("check_sinusoidal", findings, ("layout", "speeds"))
        findings.append(
            Finding(
                "layout",
                False,
                f"position 0 should be [0, 1, 0, 1, ...] (sin 0 = 0, cos 0 = 1); it is "
                f"[{', '.join(_num(x) for x in row0[:4])}, ...]: the positions do not start at 0, or the table is "
                "not sines and cosines.",
            )
        )
        return _report("check_sinusoidal", findings, ("layout", "speeds"))
    s_cols, c_cols = layouts[found]
    if found.startswith("interleaved [sin, cos]"):
        findings.append(Finding("layout", True, "interleaved [sin, cos] pairs, as helpers.sinusoidal_pe"))
    else:
        findings.append(
            Finding(
                "layout",
                False,
                f"the columns are {found}; helpers (and Vaswani et al.'s table) interleave [sin θ_0 m, cos θ_0 m, "
                "sin θ_1 m, ...]. A permutation of the columns: harmless for a model trained with it, a bug "
                "wherever it meets weights or code that expect the other order.",
            )
        )
    sines, cosines = pe[:, s_cols], pe[:, c_cols]  # (T, d/2) each
    unit = (sines**2 + cosines**2 - 1.0).abs()  # (T, d/2): 0 when a pair's sine and cosine share an angle
    if bool((unit > 1e-3).any()):
        t, i = (int(x) for x in torch.nonzero(unit > 1e-3)[0])
        findings.append(
            Finding(
                "speeds",
                False,
                f"pair {i} at position {t}: sin² + cos² = {_num(sines[t, i] ** 2 + cosines[t, i] ** 2)}, not 1: the "
                "sine and the cosine of a pair turn at different speeds (an exponent of k for column k, instead of "
                "2i for both columns of pair i), so the pair is no longer a hand on a circle and a shift is no "
                "longer a rotation.",
            )
        )
        return CheckReport("check_sinusoidal", tuple(findings))
    ref_s, ref_c = ref[:, 0::2], ref[:, 1::2]
    if bool(((sines - ref_s).abs() <= pair_tol).all()) and bool(((cosines - ref_c).abs() <= pair_tol).all()):
        findings.append(Finding("speeds", True, f"every pair turns at b^(-2i/d), b = {base:g}"))
        return CheckReport("check_sinusoidal", tuple(findings))
    m = torch.arange(n_positions, dtype=torch.float64)
    candidates = {
        "the exponent's sign is flipped: the speeds grow as b^(+2i/d)": 1.0 / _helpers_speeds(d, base),
        "the exponent is -i/d, not -2i/d (its 2 is missing)": _helpers_speeds(d, math.sqrt(base)),
        "the exponent is -4i/d, not -2i/d (2i divided by d/2, or i counted in steps of 2 twice)": _helpers_speeds(
            d, base**2
        ),
        "the speeds are tensor2tensor's timescales, θ_i = b^(-i/(d/2 - 1)) (the slowest exactly 1/b), not "
        "b^(-2i/d): the spacing of tensor2tensor's and AllenNLP's tables": torch.exp(
            -math.log(base) * torch.arange(d // 2, dtype=torch.float64) / (d // 2 - 1)
        ),
        "the exponent is -2i: -log(b) / d // 2 parses as (-log(b) / d) // 2, which is -1 whenever "
        "0 < ln(b) / d <= 2": torch.exp(-2.0 * torch.arange(d // 2, dtype=torch.float64)),
        "the speeds use the natural logarithm of a base-10 exponent (10^(-2i/d) read as e^(-2i/d))": _helpers_speeds(
            d, math.e
        ),
    }
    story = ""
    for text, speeds in candidates.items():
        angle = m[:16, None] * speeds[None, :]  # the first 16 positions: a float32 table's angles are still close
        loose = 1e-3 + 1e-6 * angle  # float32 angles and a float32 exp in div_term
        if bool(((sines[:16] - angle.sin()).abs() <= loose).all()) and bool(
            ((cosines[:16] - angle.cos()).abs() <= loose).all()
        ):
            story = " " + _capital(text) + "."
            break
    if not story:
        measured = _unwrap(torch.atan2(sines, cosines))[1]  # (d/2,) angle at position 1
        fit = _speed_story(measured, d, base, None, _helpers_speeds(d, base)) if bool((measured > 0).all()) else ""
        story = (" " + _capital(fit)) if fit else ""
    diff = (torch.cat((sines - ref_s, cosines - ref_c), 0)).abs()
    t, i = (int(x) for x in torch.unravel_index(diff.argmax(), diff.shape))
    t = t % n_positions
    findings.append(
        Finding(
            "speeds",
            False,
            f"largest difference at pair {i}, position {t}: sin {_num(sines[t, i])}, cos {_num(cosines[t, i])}; "
            "helpers has "
            f"sin {_num(ref_s[t, i])}, cos {_num(ref_c[t, i])}.{story}",
        )
    )
    return CheckReport("check_sinusoidal", tuple(findings))


def _helpers_speeds(d: int, base: float) -> torch.Tensor:
    """``θ_i = base^(-2i/d)`` from helpers, float64 ``(d/2,)``."""
    return rope_frequencies(d, base)[0]


# ----- T5 buckets -------------------------------------------------------------------------------


def check_t5_bias(
    bucket_fn, *, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128
) -> CheckReport:
    """Check T5's relative-position buckets against ``helpers.relative_position_bucket``.

    Args:
        bucket_fn: ``bucket_fn(relative_position) -> buckets``: ``relative_position`` an int64
            tensor of ``j - i`` (key minus query, negative for keys in the past, T5's
            ``memory_position - context_position``), the result an integer tensor of the same shape.
        bidirectional, num_buckets, max_distance: the settings ``bucket_fn`` should have.

    Findings: ``distance 0`` (bucket 0) and ``buckets`` (every relative position from
    ``-4 max_distance`` to ``4 max_distance``; names a flipped sign convention or the other
    ``bidirectional`` setting).
    """
    bucket_fn = _check_callable("bucket_fn", bucket_fn)
    if not isinstance(bidirectional, bool):
        raise TypeError(f"bidirectional must be a bool, got {bidirectional!r}")
    num_buckets = check_int("num_buckets", num_buckets, minimum=4)
    max_distance = check_int("max_distance", max_distance, minimum=2)
    rel = torch.arange(-4 * max_distance, 4 * max_distance + 1)
    shown = f"relative positions {-4 * max_distance}..{4 * max_distance}"
    try:
        out = _call(bucket_fn, "bucket_fn", (rel.clone(),), shown)
        got = _tensor_out(out, "bucket_fn", tuple(rel.shape), shown, integer=True).long()
    except _Bad as bad:
        return _report("check_t5_bias", [bad.finding], ("distance 0", "buckets"))
    want = relative_position_bucket(rel, bidirectional, num_buckets, max_distance)
    zero = int(got[4 * max_distance])
    findings = [
        Finding("distance 0", zero == 0, "bucket 0" if zero == 0 else f"bucket {zero}; expected 0 (its own bucket)")
    ]
    if torch.equal(got, want):
        findings.append(Finding("buckets", True, f"all {len(rel)} relative positions in helpers' bucket"))
        return CheckReport("check_t5_bias", tuple(findings))
    differ = (got != want).nonzero()[:, 0]
    past = differ[rel[differ] <= 0]  # keys at or before the query matter in encoders and decoders alike
    if not bidirectional and not len(past):
        findings.append(
            Finding(
                "buckets",
                True,
                f"every relative position at or before the query (j - i <= 0) in helpers' bucket; {len(differ)} future "
                f"ones differ (from j - i = {int(rel[differ].min())}), which a decoder's causal mask hides "
                "(bidirectional=False puts them all in bucket 0)",
            )
        )
        return CheckReport("check_t5_bias", tuple(findings))
    differ = past if len(past) else differ
    at = int(differ[rel[differ].abs().argmin()])  # the nearest such relative position that differs
    text = f"relative position {int(rel[at])} is in bucket {int(got[at])}, expected {int(want[at])}."
    if torch.equal(got, relative_position_bucket(-rel, bidirectional, num_buckets, max_distance)):
        text += (
            " Past and future are swapped: the relative position is read as i - j (query minus key); T5's is "
            "j - i (memory minus context), negative for keys in the past."
        )
    elif torch.equal(got, relative_position_bucket(rel, not bidirectional, num_buckets, max_distance)):
        text += f" These are the buckets of bidirectional={not bidirectional}; expected bidirectional={bidirectional}."
    elif bool((got[differ] > want[differ]).all()) and bool((rel[differ].abs() >= max_distance).all()):
        half = num_buckets // 2 if bidirectional else num_buckets
        text += (
            f" Every difference is at a distance of max_distance ({max_distance}) or more, one bucket or more "
            f"too high: the clamp to bucket {half - 1} (min(..., num_buckets - 1) after the logarithm) is missing"
            + (f", so far past keys spill into bucket {half}, the first future bucket." if bidirectional else ".")
        )
    elif bool(((got - want).abs() <= 1).all()):
        text += " Every difference is one bucket: T5 truncates the logarithmic position toward zero; it is not rounded."
    findings.append(Finding("buckets", False, text))
    return CheckReport("check_t5_bias", tuple(findings))
