"""The exercises of notebook 11 (stretching a trained model's context).

11.1 how many pairs of the notebook's heads YaRN leaves at full speed; 11.2 the offset the "lag"
answer seems to be at under position interpolation; 11.3 NTK-aware scaling's speeds, written from
scratch.

The head's settings are the experiment's (``helpers.stretch.StretchConfig``: head width 16, base
10,000, ``L = 32``, factor 4).
"""

from __future__ import annotations

import torch

from .. import rope as _rope
from ..stretch import StretchConfig, method_scaling
from ._core import Exercise, Mistake, register

# Exercise 11.3 switches these off (under any name) only while the learner's function runs.
_rope_frequencies = _rope.rope_frequencies


def _head() -> dict:
    config = StretchConfig()
    base = config.base_config
    return {
        "d": base.d_model // base.n_heads,
        "base": base.rope_base,
        "factor": config.factor,
        "L": config.train_length,
        "lag": base.lag,
    }


def _ratios(p: dict, method: str) -> torch.Tensor:
    """``θ'_i / θ_i`` of ``method`` for the head of ``p``, float64 ``(d/2,)``."""
    plain = _rope_frequencies(p["d"], p["base"])[0]
    scaled = _rope_frequencies(p["d"], p["base"], scaling=method_scaling(method, p["factor"], p["L"]))[0]
    return scaled / plain


def _kept(p: dict, method: str) -> int:
    return int((_ratios(p, method) == 1.0).sum())


def _wrapping(p: dict) -> int:
    """Pairs that complete a turn within ``L`` tokens (wavelength ``<= L``)."""
    return int((2 * torch.pi / _rope_frequencies(p["d"], p["base"])[0] <= p["L"]).sum())


# ----- 11.1 · YaRN's kept pairs ---------------------------------------------------------------------------

register(
    Exercise(
        name="11.1",
        title="YaRN's full-speed pairs in a head of width 16",
        kind="integer",
        level=1,
        params=_head(),
        expected=lambda p: _kept(p, "yarn"),
        mistakes=(
            Mistake(
                "you get by counting the pairs that complete a turn within L tokens; YaRN keeps a pair only if "
                "it turns at least β_fast = 32 times in L tokens, and slows the rest, some partly (the ramp).",
                value=_wrapping,
            ),
            Mistake(
                "you get if every pair kept its speed; YaRN slows the slow pairs by the factor s.",
                value=lambda p: p["d"] // 2,
            ),
            Mistake(
                "you get if no pair kept its speed, as under position interpolation; YaRN leaves the pairs that "
                "turn often enough in L tokens as they were trained.",
                value=lambda p: 0,
            ),
        ),
        hint="a pair keeps its speed when it turns at least 32 times in L tokens: L θ_i / 2π ≥ 32; the "
        "correction range is rounded to whole pairs (notebook 06, section 9).",
    )
)

# ----- 11.2 · the offset "lag" seems to be at under position interpolation --------------------------------

register(
    Exercise(
        name="11.2",
        title="the lag answer's offset as position interpolation shows it",
        kind="number",
        level=2,
        predict=True,
        sig=3,
        params=_head(),
        # every pair turns by θ_i / s per token: an offset Δ looks like the trained offset Δ / s
        expected=lambda p: p["lag"] / p["factor"],
        mistakes=(
            Mistake(
                "you get by multiplying the offset by the factor; interpolation divides every speed by s, so the "
                "same offset turns each pair by less, as a shorter trained offset would.",
                value=lambda p: p["lag"] * p["factor"],
            ),
            Mistake(
                "you get if the offset looked unchanged; PI changes the angle an offset turns each pair by, and "
                "the model reads offsets only through those angles.",
                value=lambda p: float(p["lag"]),
            ),
        ),
        hint="under PI every pair turns by θ_i / s per token, so Δ tokens turn it by (Δ/s) θ_i.",
    )
)

# ----- 11.3 · NTK-aware speeds, from scratch --------------------------------------------------------------


def _ntk_reference(d, base, factor):
    return _rope_frequencies(d, base, scaling={"type": "ntk", "factor": factor})[0]


def _ntk_base_times_factor(d, base, factor):
    return (base * factor) ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d)


def _ntk_as_interpolation(d, base, factor):
    return base ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d) / factor


def _ntk_exponent_d_over_2(d, base, factor):
    return (base * factor ** (d / (d - 2))) ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / (d - 2))


def _ntk_inputs(rng) -> list[dict]:
    """The notebook's head first, then random widths, bases and factors."""
    head = _head()
    cases = [{"d": head["d"], "base": float(head["base"]), "factor": float(head["factor"])}]
    for _ in range(6):
        cases.append(
            {
                "d": int(rng.choice([4, 8, 16, 64, 128])),
                "base": float(10 ** rng.uniform(3.0, 6.5)),
                "factor": float(rng.uniform(1.5, 32.0)),
            }
        )
    return cases


register(
    Exercise(
        name="11.3",
        title="NTK-aware scaling's speeds, from scratch",
        kind="function",
        level=2,
        expected=lambda p: _ntk_reference,
        inputs=_ntk_inputs,
        forbid=(
            "helpers.rope_frequencies",
            "helpers.rope.rope_frequencies",
            "helpers.rope_cos_sin",
            "helpers.rope.rope_cos_sin",
            "helpers.exercises._nb11._ntk_reference",
        ),
        rtol=1e-9,
        atol=0.0,
        seed=11,
        mistakes=(
            Mistake(
                "multiplying the base by s gives: the slowest pair then slows by less than s. NTK-aware scaling "
                "raises s to the power d/(d−2), so that the slowest pair is slowed by exactly s.",
                function=_ntk_base_times_factor,
            ),
            Mistake(
                "dividing every speed by s gives (position interpolation); NTK-aware scaling leaves pair 0 at its "
                "speed and slows the others more and more.",
                function=_ntk_as_interpolation,
            ),
            Mistake(
                "the exponent's denominator is the head width d, not d − 2: θ'_i = b'^(−2i/d).",
                function=_ntk_exponent_d_over_2,
            ),
        ),
        hint="θ'_i = b'^(−2i/d) with the new base b' = b · s^(d/(d−2)); pair 0 keeps θ_0 = 1.",
    )
)
