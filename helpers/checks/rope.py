"""``check_rope``: a RoPE implementation against ``helpers.rope_cos_sin`` and ``helpers.apply_rope``.

Rotating the unit vectors ``e_j`` (RoPE is linear in ``x``) shows which dimensions pair up and how
far each pair turns per token; each property is one function below, run in order, and a fault is
reported once, by the first property it breaks (``_one_fault``)."""

from __future__ import annotations

import functools
import inspect
import math
from dataclasses import dataclass

import torch

from .._validate import check_base, check_dtype, check_even_dim, check_int
from ..rope import LAYOUTS, rope_cos_sin, rope_frequencies
from ._report import (
    FLOAT32_ANGLE,
    CheckReport,
    Finding,
    _Bad,
    _call,
    _capital,
    _check_callable,
    _check_device,
    _eps,
    _num,
    _report,
    _tensor_out,
    _unwrap,
)


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
    """The findings of ``check_rope`` on ``d`` rotated dimensions, in order; a fault is reported
    once, by the first property it breaks."""
    eps = _eps(dtype)
    gen = torch.Generator().manual_seed(0)  # one stream for every random probe, in this order
    _check_reads_positions(rope_fn, d, dtype, device, eps, gen)
    probe = _probe_map(rope_fn, d, dtype, device)
    rotation = _rotation_finding(probe, theta, eps, factor)
    norm, relative, rel_problem = _norm_and_relative(
        rope_fn, d, scaling, max_position, dtype, device, theta, factor, eps, gen, rotation.passed
    )
    findings = [rotation, norm, relative, _layout_finding(probe, layout)]
    if not rotation.passed:
        return _one_fault(findings, None, names=("norm", "relative"), into="rotation")  # consequences of it
    if probe.found is None:
        return findings
    index = _pair_index(probe.found, d)
    positions = _positions_finding(probe, index, theta)
    if not positions.passed:
        return _one_fault(findings, positions)
    findings.append(positions)
    findings, done = _speeds_findings(findings, probe, index, theta, d, base, scaling, eps, full_width)
    if done:
        return findings
    return _precision_findings(
        findings, rope_fn, index, d, base, scaling, max_position, dtype, device, theta, eps, rel_problem
    )


def _check_reads_positions(rope_fn, d, dtype, device, eps, gen) -> None:
    """The same vector at the same position, three times: the rows must agree (positions are read)."""
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


@dataclass
class _Probe:
    """What rotating the unit vectors at positions ``0 .. n - 1`` shows of ``rope_fn``."""

    pairs: list  # [(a, b)]: the dimensions that turn together, a < b
    found: str | None  # the layout those pairs make, None for neither
    cos: torch.Tensor  # (n, d): each dimension's own cos, read off the map
    sin: torch.Tensor  # (n, d)
    dim_speed: torch.Tensor  # (d,): each dimension's speed, radians per token (a fit through the origin)
    m: torch.Tensor  # (n, 1): the positions, float64


_N_PROBE = 65  # positions 0 .. 64


def _probe_map(rope_fn, d, dtype, device) -> _Probe:
    """The map at positions 0..64 (row ``j`` of ``J[m]`` is the image of ``e_j``), its pairs and speeds."""
    h = d // 2
    eye = torch.eye(d, dtype=torch.float64).repeat(_N_PROBE, 1)  # (65 d, d)
    pos = torch.arange(_N_PROBE, dtype=torch.int64).repeat_interleave(d)  # (65 d,)
    J = _rope_call(rope_fn, eye, pos, dtype, device).reshape(_N_PROBE, d, d)  # (65, d, d)
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
    cos = torch.empty(_N_PROBE, d, dtype=torch.float64)
    sin = torch.empty(_N_PROBE, d, dtype=torch.float64)
    cos[:, first], cos[:, second] = J[:, first, first], J[:, second, second]
    sin[:, first], sin[:, second] = -J[:, second, first], J[:, first, second]
    speed = _unwrap(torch.atan2(sin, cos))  # (65, d) angles, unwrapped along the positions
    m = torch.arange(_N_PROBE, dtype=torch.float64)[:, None]
    dim_speed = (m * speed).sum(0) / (m**2).sum()  # (d,) least-squares slope through the origin
    return _Probe(pairs, found, cos, sin, dim_speed, m)


def _rotation_finding(probe: _Probe, theta, eps, factor) -> Finding:
    """Both members of each pair turn by the same angle; if not, whether the speeds are laid out
    for the other layout's rotation (a table built for one layout used with the other)."""
    pairs, found, cos, sin, dim_speed = probe.pairs, probe.found, probe.cos, probe.sin, probe.dim_speed
    first = torch.tensor([a for a, _ in pairs])
    second = torch.tensor([b for _, b in pairs])
    entry_tol = 4 * eps * max(factor, 1.0)
    gap = ((cos[:, first] - cos[:, second]).abs() + (sin[:, first] - sin[:, second]).abs()).amax(0)  # (d/2,)
    if not bool((gap > entry_tol).any()):
        return Finding(
            "rotation", True, f"each of the {len(pairs)} pairs turns as one rotation (tolerance {_num(entry_tol)})"
        )
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
    return Finding(
        "rotation",
        False,
        f"pair ({a}, {b}) is not one rotation: dimension {a} is driven at {_num(dim_speed[a])} rad per "
        f"token and dimension {b} at {_num(dim_speed[b])}.{story}",
    )


def _norm_and_relative(rope_fn, d, scaling, max_position, dtype, device, theta, factor, eps, gen, rotation_ok):
    """The norm (``|R_m x| = a |x|``) and the relative property on random vectors, at small and
    large positions: ``(norm finding, relative finding, the relative failure or None)``."""
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
    norm = _norm_finding(norm_problem, norm_dev, inner32, factor, scaling, rotation_ok)
    if rel_problem is None:
        last_tol = (8 * eps + 2 * FLOAT32_ANGLE * (starts[-1] + 64) * float(theta.max())) * factor**2
        relative = Finding(
            "relative",
            True,
            f"<R_m q, R_n k> depends only on n - m, for m from 0 to {starts[-1]:,} (tolerance "
            f"{_num(last_tol)} |q||k| at the largest m: it grows with m to admit a float32 angle, so far out "
            "this probe is coarse; the precision finding looks closer)",
        )
    else:
        s, o, got, want, tol = rel_problem
        relative = Finding(
            "relative",
            False,
            f"<R_m q, R_n k> at (m, n) = ({s:,}, {s + o:,}) is {_num(got)}, but {_num(want)} at (0, {o}) "
            f"(tolerance {_num(tol)}): the score depends on the absolute position, not only on n - m.",
        )
    return norm, relative, rel_problem


def _norm_finding(norm_problem, norm_dev, inner32, factor, scaling, rotation_ok) -> Finding:
    """The norm's finding; a wrong length names the attention factor it misses or repeats."""
    if norm_problem is None:
        note = (
            f" (|R_m x| / |x| - {_num(factor)} up to {norm_dev:.1e}: float64 in and out, computed internally in "
            "float32)"
            if inner32
            else ""
        )
        return Finding("norm", True, f"|R_m x| = {_num(factor)} |x| at every probed position{note}")
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
    return Finding(
        "norm",
        False,
        f"at position {p:,}, |R_m x| / |x| differs from {_num(factor)} by {abs(r - factor):.2e} (ratio {r:.6f}){why}.",
    )


def _layout_finding(probe: _Probe, layout) -> Finding:
    pairs, found = probe.pairs, probe.found
    if found is None:
        return Finding("layout", False, f"pairs {_pairs_text(pairs)}: neither the interleaved nor the half layout.")
    if layout is not None and found != layout:
        return Finding(
            "layout",
            False,
            f"pairs {_pairs_text(pairs)} rotate together: this is {_LAYOUT_NAMES[found]}; expected "
            f"{_LAYOUT_NAMES[layout]}. Weights trained with one layout need their q and k rows permuted "
            "to run with the other.",
        )
    return Finding("layout", True, f"pairs {_pairs_text(pairs)}: {_LAYOUT_NAMES[found]}")


def _positions_finding(probe: _Probe, index, theta) -> Finding:
    """Which positions the table was built for: an offset or integer steps would otherwise read as a
    scaling of the speeds (a fit through the origin of angles ``(m + 1) θ`` gives ``1.02 θ``)."""
    a_idx = torch.tensor([a for a, _ in index])
    mapped = _effective_positions(probe.cos[:, a_idx], probe.sin[:, a_idx], theta)  # (65,)
    story = _position_story(mapped, probe.m[:, 0], 0.05)
    if story:
        return Finding("positions", False, _capital(story))
    return Finding(
        "positions", True, f"the angles read back give positions 0 to {_N_PROBE - 1} as passed (within 0.05)"
    )


def _speeds_findings(findings, probe: _Probe, index, theta, d, base, scaling, eps, full_width):
    """Each pair's speed against helpers': ``(findings, done)``, ``done`` when a wrong speed makes the
    precision probe meaningless (speeds merely rounded go on to it: the same fault, seen twice)."""
    h = d // 2
    dim_speed = probe.dim_speed
    pair_speed = torch.stack([(dim_speed[a] + dim_speed[b]) / 2 for a, b in index])  # (d/2,)
    speed_tol = 1e-3 * theta + 4 * eps / _N_PROBE
    wrong = (pair_speed - theta).abs() > speed_tol
    rounded = bool(wrong.any()) and bool(((pair_speed - theta).abs() <= 1e-2 * theta + 4 * eps / _N_PROBE).all())
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
        return findings, False
    if bool(wrong.any()):
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
        return findings, True
    findings.append(Finding("speeds", True, f"every pair turns at helpers' speed (within 0.1%), {h} pairs"))
    return findings, False


def _precision_findings(
    findings, rope_fn, index, d, base, scaling, max_position, dtype, device, theta, eps, rel_problem
):
    """The tables at positions up to ``max_position`` against helpers' float64 ones: a table that
    stops or wraps, angles formed in too low a precision, or a fault the check does not recognise."""
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
    if not bool(over.any()):
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
    at = int(over.nonzero()[0])
    worst = int(error.argmax())
    table = _short_table_finding(probe, over, at, _effective_positions(got_cos, got_sin, theta))
    if table is not None:
        return _one_fault(findings, table)
    if not _low_precision_explains(got_cos, got_sin, probe, theta, over):
        return _one_fault(
            findings,
            Finding(
                "precision",
                False,
                f"the tables differ from helpers' from the probed position {int(probe[over][0]):,} on (angle "
                f"error {_num(error[over][0])} rad there), and neither an angle formed in bfloat16 or float16 "
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
    return findings


def _short_table_finding(probe, over, at, read) -> Finding | None:
    """A table that stops (clamped to its last row) or wraps (indexed modulo its length), read from
    the positions the tables were built for (``read``, at every probed position); None otherwise."""
    late = read[over]
    last = int(probe[at - 1]) if at > 0 else 0
    if bool(((late - late[0]).abs() < 0.05).all()) and abs(float(late[0]) - round(float(late[0]))) < 0.05:
        n = round(float(late[0]))
        if int(over.sum()) > 1 or n < int(probe[at]):
            return Finding(
                "precision",
                False,
                f"from the probed position {int(probe[at]):,} on (the last right one probed: {last:,}) "
                f"every position gets the angles of position {n:,}: the tables stop there, as a table cached "
                "for "
                f"{n + 1:,} positions and indexed with positions clamped to its last row would. Build the "
                "table for the longest position used, or compute it from the positions.",
            )
    for n in sorted({int(round(float(pp - ll))) for pp, ll in zip(probe[over][:3], late[:3], strict=False)}):
        if n < 2:
            continue
        wraps = torch.remainder(probe[over].double(), n)
        if bool(((late - wraps).abs() < 0.05).all()):
            return Finding(
                "precision",
                False,
                f"from the probed position {int(probe[at]):,} on, position m gets the angles of m mod {n:,}: "
                f"the tables wrap around after {n:,} positions (a table of {n:,} rows indexed modulo its "
                "length). Build it for the longest position used, or compute it from the positions.",
            )
    return None
