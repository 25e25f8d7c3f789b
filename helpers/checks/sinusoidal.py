"""``check_sinusoidal``: a sinusoidal table against ``helpers.sinusoidal_pe``."""

from __future__ import annotations

import math

import torch

from .._validate import check_base, check_even_dim, check_int
from ..rope import rope_frequencies
from ..sinusoidal import sinusoidal_pe
from ._report import (
    FLOAT32_ANGLE,
    CheckReport,
    Finding,
    _Bad,
    _call,
    _capital,
    _check_callable,
    _eps,
    _num,
    _report,
    _tensor_out,
    _unwrap,
)
from .rope import _speed_story


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
    layout, cols = _layout_finding(pe, ref, n_positions, d, base, tol, full_tol, speeds)
    if cols is None:
        return _report("check_sinusoidal", [layout], ("layout", "speeds"))
    return CheckReport("check_sinusoidal", (layout, _speeds_finding(pe, ref, cols, d, base, tol, pair_tol)))


# Which columns hold the sines and which the cosines, in each layout a table is known to have.
def _layouts(d: int) -> dict:
    h = d // 2
    return {
        "interleaved [sin, cos]": (torch.arange(0, d, 2), torch.arange(1, d, 2)),
        "interleaved [cos, sin] (sin and cos swapped)": (torch.arange(1, d, 2), torch.arange(0, d, 2)),
        "concatenated [sin ... | cos ...] (tensor2tensor's halves)": (torch.arange(h), torch.arange(h, d)),
        "concatenated [cos ... | sin ...]": (torch.arange(h, d), torch.arange(h)),
    }


def _layout_finding(pe, ref, n_positions, d, base, tol, full_tol, speeds):
    """The layout from row 0 (position 0: sines 0, cosines 1): ``(finding, (sine columns, cosine
    columns))``, or ``(finding, None)`` when row 0 is no position 0 (positions counted from 1, or no
    sines and cosines at all), which leaves the speeds meaningless."""
    row0 = pe[0]
    layouts = _layouts(d)
    found = next(
        (
            label
            for label, (s_cols, c_cols) in layouts.items()
            if bool((row0[s_cols].abs() <= tol).all()) and bool(((row0[c_cols] - 1).abs() <= tol).all())
        ),
        None,
    )
    start = (
        f"position 0 should be [0, 1, 0, 1, ...] (sin 0 = 0, cos 0 = 1); it is "
        f"[{', '.join(_num(x) for x in row0[:4])}, ...]"
    )
    if found is None:
        shifted = sinusoidal_pe(n_positions + 1, d, base, dtype=torch.float64)[1:]  # rows of positions 1 .. T
        if bool(((pe - shifted).abs() <= full_tol + FLOAT32_ANGLE * speeds.repeat_interleave(2)).all()):
            return Finding(
                "layout",
                False,
                f"{start}, and row t holds position t + 1: the positions are counted from 1 (arange(1, T + 1)); "
                "the first token must get position 0.",
            ), None
        return Finding(
            "layout",
            False,
            f"{start}: the positions do not start at 0, or the table is not sines and cosines.",
        ), None
    if found.startswith("interleaved [sin, cos]"):
        return Finding("layout", True, "interleaved [sin, cos] pairs, as helpers.sinusoidal_pe"), layouts[found]
    return Finding(
        "layout",
        False,
        f"the columns are {found}; helpers (and Vaswani et al.'s table) interleave [sin θ_0 m, cos θ_0 m, "
        "sin θ_1 m, ...]. A permutation of the columns: harmless for a model trained with it, a bug "
        "wherever it meets weights or code that expect the other order.",
    ), layouts[found]


def _speeds_finding(pe, ref, cols, d, base, tol, pair_tol) -> Finding:
    """Each pair's speed, read in the columns the layout finding found; a mismatch names the wrong
    ``div_term`` exponent it matches, if any, and the largest difference."""
    n_positions = pe.shape[0]
    s_cols, c_cols = cols
    sines, cosines = pe[:, s_cols], pe[:, c_cols]  # (T, d/2) each
    unit = (sines**2 + cosines**2 - 1.0).abs()  # (T, d/2): 0 when a pair's sine and cosine share an angle
    if bool((unit > 1e-3).any()):
        t, i = (int(x) for x in torch.nonzero(unit > 1e-3)[0])
        return Finding(
            "speeds",
            False,
            f"pair {i} at position {t}: sin² + cos² = {_num(sines[t, i] ** 2 + cosines[t, i] ** 2)}, not 1: the "
            "sine and the cosine of a pair turn at different speeds (an exponent of k for column k, instead of "
            "2i for both columns of pair i), so the pair is no longer a hand on a circle and a shift is no "
            "longer a rotation.",
        )
    ref_s, ref_c = ref[:, 0::2], ref[:, 1::2]
    if bool(((sines - ref_s).abs() <= pair_tol).all()) and bool(((cosines - ref_c).abs() <= pair_tol).all()):
        return Finding("speeds", True, f"every pair turns at b^(-2i/d), b = {base:g}")
    story = _exponent_story(sines, cosines, d, base)
    diff = (torch.cat((sines - ref_s, cosines - ref_c), 0)).abs()
    t, i = (int(x) for x in torch.unravel_index(diff.argmax(), diff.shape))
    t = t % n_positions
    return Finding(
        "speeds",
        False,
        f"largest difference at pair {i}, position {t}: sin {_num(sines[t, i])}, cos {_num(cosines[t, i])}; "
        "helpers has "
        f"sin {_num(ref_s[t, i])}, cos {_num(ref_c[t, i])}.{story}",
    )


def _exponent_story(sines, cosines, d, base) -> str:
    """Which known wrong ``div_term`` the speeds match (over the first 16 positions, where a float32
    table's angles are still close), else what a fit of the speeds says; "" when neither tells."""
    m = torch.arange(sines.shape[0], dtype=torch.float64)
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
    for text, speeds in candidates.items():
        angle = m[:16, None] * speeds[None, :]
        loose = 1e-3 + 1e-6 * angle  # float32 angles and a float32 exp in div_term
        if bool(((sines[:16] - angle.sin()).abs() <= loose).all()) and bool(
            ((cosines[:16] - angle.cos()).abs() <= loose).all()
        ):
            return " " + _capital(text) + "."
    measured = _unwrap(torch.atan2(sines, cosines))[1]  # (d/2,) angle at position 1
    fit = _speed_story(measured, d, base, None, _helpers_speeds(d, base)) if bool((measured > 0).all()) else ""
    return (" " + _capital(fit)) if fit else ""


def _helpers_speeds(d: int, base: float) -> torch.Tensor:
    """``θ_i = base^(-2i/d)`` from helpers, float64 ``(d/2,)``."""
    return rope_frequencies(d, base)[0]
