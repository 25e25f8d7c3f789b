"""The exercises of notebook 11 (stretching a trained model's context).

11.1 how many pairs of Llama 2's head YaRN leaves at full speed; 11.2 how far back the trained "lag"
model looks under position interpolation; 11.3 NTK-aware scaling's speeds, written from scratch.

The head's settings are the experiment's (``helpers.experiment.stretch.StretchConfig``: head width 16, base
10,000, ``L = 32``, factor 4).
"""

from __future__ import annotations

import torch

from .. import rope as _rope
from ..experiment.stretch import StretchConfig, method_scaling
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


# ----- 11.1 · YaRN's kept pairs in Llama 2's head ------------------------------------------------------------


def _llama2_head() -> dict:
    """Llama 2 7B's head (width 128, base 10,000, 4,096 tokens), stretched 16 times with YaRN (Peng et al.)."""
    return {"d": 128, "base": 10000.0, "factor": 16.0, "L": 4096}


def _turning(p: dict, turns: float) -> int:
    """Pairs that turn at least ``turns`` times in ``L`` tokens."""
    plain = _rope_frequencies(p["d"], p["base"])[0]
    return int((p["L"] * plain / (2 * torch.pi) >= turns).sum())


register(
    Exercise(
        name="11.1",
        title="YaRN's full-speed pairs in Llama 2's head",
        kind="integer",
        level=2,
        params=_llama2_head(),
        expected=lambda p: _kept(p, "yarn"),
        mistakes=(
            Mistake(
                "you get by counting the pairs that turn at least once in L tokens (β_slow = 1): those are the "
                "pairs YaRN does not slow by the full factor; the ones it leaves at full speed turn at least "
                "β_fast = 32 times.",
                value=lambda p: _turning(p, 1.0),
            ),
            Mistake(
                "you get by counting the pairs YaRN slows at all (on the ramp or by the full factor); the question "
                "asks for the ones it leaves alone.",
                value=lambda p: p["d"] // 2 - _kept(p, "yarn"),
            ),
            Mistake(
                "you get by leaving one pair out: pair 0 counts too, and so does the last pair that turns at least 32 "
                "times (the correction range's lower end is rounded down, and the ramp is 0 there).",
                value=lambda p: _kept(p, "yarn") - 1,
            ),
            Mistake(
                "you get under position interpolation, which slows every pair; YaRN keeps the fast pairs.",
                value=lambda p: 0,
            ),
        ),
        hint="count the pairs i with L θ_i / 2π ≥ 32, with θ_i = base^(−2i/d) (notebook 06, section 8); the "
        "factor does not enter.",
    )
)

# ----- 11.2 · where the lag model looks under position interpolation -----------------------------------------

register(
    Exercise(
        name="11.2",
        title="where the lag model finds its answer under position interpolation",
        kind="number",
        level=2,
        predict=True,
        sig=3,
        params={k: v for k, v in _head().items() if k in ("factor", "L", "lag")},
        # every pair turns by θ_i / s per token: the angles of the trained offset Δ now lie s Δ tokens back
        expected=lambda p: p["lag"] * p["factor"],
        mistakes=(
            Mistake(
                "you get by dividing: it is the offset whose trained angles the offset 3 now has (3 / s). The model "
                "goes on looking for the angles it learned, those of 3 tokens, and under interpolation a token has "
                "them s times farther back.",
                value=lambda p: p["lag"] / p["factor"],
            ),
            Mistake(
                "you get if the angles were unchanged; interpolation divides every speed by s, and the model reads "
                "offsets only through those angles.",
                value=lambda p: float(p["lag"]),
            ),
        ),
        hint="under interpolation, Δ tokens turn pair i by (Δ/s) θ_i; which Δ gives the trained angle 3 θ_i?",
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
                "putting d − 2 in the exponent's denominator gives: the denominator is the head width d, "
                "θ'_i = b'^(−2i/d).",
                function=_ntk_exponent_d_over_2,
            ),
        ),
        hint="θ'_i = b'^(−2i/d) with the new base b' = b · s^(d/(d−2)); pair 0 keeps θ_0 = 1.",
    )
)
