"""The exercises of notebook 06 (RoPE).

06.1 (predict) which pairs YaRN leaves at their own speed; 06.2 the stretch behind an NTK-aware
base; 06.3 the pairs that never complete a turn in 32k tokens; 06.4 the stretch at which YaRN's
factor doubles a score; 06.5 RoPE in the "half" layout, written from scratch.
"""

from __future__ import annotations

import math

import torch

from .. import rope as _rope
from ._core import Exercise, Mistake, register

# Exercise 06.5 switches these off (under any name) only while the learner's function runs; the
# reference and the recorded mistakes run outside that window and may call them.
_apply_rope, _rope_cos_sin = _rope.apply_rope, _rope.rope_cos_sin

# ----- 06.1 · predict: which pairs does YaRN leave untouched? -----------------------------------


def _yarn_untouched(p: dict) -> str:
    """Which pairs keep their speed under YaRN, read off helpers.rope_frequencies."""
    scaling = {"type": "yarn", "factor": float(p["s"]), "original_max_len": p["L"]}
    plain = _rope.rope_frequencies(p["d"], float(p["b"]))[0]
    scaled = _rope.rope_frequencies(p["d"], float(p["b"]), scaling=scaling)[0]
    kept = scaled == plain  # (d/2,)
    if bool(kept.all()):
        return "all"
    if not bool(kept.any()):
        return "none"
    first_kept = int(kept.nonzero()[0])
    return "the fastest" if first_kept == 0 else "the slowest"


register(
    Exercise(
        name="06.1",
        title="predict: which pairs YaRN leaves untouched",
        kind="choice",
        level=1,
        predict=True,
        params={"d": 128, "b": 10000, "L": 2048, "s": 8},
        options=("the fastest", "the slowest", "none", "all"),
        expected=_yarn_untouched,
        mistakes=(
            Mistake(
                "the slowest pairs are the ones that never complete a turn in L tokens; past L they reach "
                "angles the model never met, so they are the ones a stretch has to change.",
                option="the slowest",
            ),
            Mistake(
                "dividing every speed by s is Position Interpolation; it blurs the fast pairs, which tell "
                "neighbouring tokens apart, and YaRN was made to avoid that.",
                option="none",
            ),
            Mistake(
                "if every pair kept its speed, the slow pairs would still reach unseen angles past L and "
                "nothing would be stretched.",
                option="all",
            ),
        ),
        hint="which pairs have already met every angle of their circle within the L training tokens?",
        explain="Pairs that turn many times in L tokens have seen every angle; YaRN keeps them, slows the "
        "slow ones by s and ramps in between.",
    )
)

# ----- 06.2 · the stretch behind an NTK-aware base ----------------------------------------------


def _ntk_stretch(p: dict, d=None) -> float:
    """The stretch s of NTK-aware scaling that gives the base b': the factor by which the slowest
    pair is slowed, read off helpers.rope_frequencies for the two bases."""
    d = p["d"] if d is None else d
    old = _rope.rope_frequencies(d, float(p["b"]))[0]
    new = _rope.rope_frequencies(d, float(p["b_new"]))[0]
    return (old[-1] / new[-1]).item()


register(
    Exercise(
        name="06.2",
        title="the stretch behind an NTK-aware base",
        kind="number",
        level=2,
        sig=4,
        params={"d": 64, "b": 10000, "b_new": 50000},
        expected=_ntk_stretch,
        mistakes=(
            Mistake(
                "you get with the exponent of the base's formula, d/(d−2), applied to b'/b; going back from "
                "the base to s undoes that power.",
                value=lambda p: (p["b_new"] / p["b"]) ** (p["d"] / (p["d"] - 2)),
            ),
            Mistake(
                "you get with s = b'/b, the exponent left out; the base grows by more than the stretch, so going "
                "back from b'/b to s needs the exponent of section 8's formula.",
                value=lambda p: p["b_new"] / p["b"],
            ),
            Mistake(
                "you get with the exponent written (d−2)//d: in Python, // rounds down, so (d−2)//d is 0 and any "
                "number to the power 0 is 1; use / for the exponent.",
                value=lambda p: (p["b_new"] / p["b"]) ** ((p["d"] - 2) // p["d"]),
            ),
            Mistake(
                "you get with d/2 = 32, the number of pairs, in place of the head width d = 64.",
                value=lambda p: _ntk_stretch(p, d=p["d"] // 2),
            ),
            Mistake(
                "you get with d = 128, the head width of section 8; this head has d = 64.",
                value=lambda p: _ntk_stretch(p, d=128),
            ),
            Mistake(
                "you get with the exponent rounded to 0.97; a power magnifies the rounding, so keep the "
                "exponent exact.",
                value=lambda p: (p["b_new"] / p["b"]) ** 0.97,
            ),
        ),
        hint="section 8 gives the new base from s; undo that formula to get s from b'/b, or ask which pair "
        "it slows by exactly s.",
    )
)

# ----- 06.3 · pairs that never complete a turn in the context -----------------------------------


def _wavelengths(p: dict) -> torch.Tensor:
    return 2 * math.pi / _rope.rope_frequencies(p["d"], float(p["b"]))[0]  # (d/2,) tokens


register(
    Exercise(
        name="06.3",
        title="pairs that never complete a turn in 32k tokens",
        kind="integer",
        level=2,
        params={"d": 128, "b": 500000, "context": 32768},
        expected=lambda p: int((_wavelengths(p) > p["context"]).sum()),
        mistakes=(
            Mistake(
                "you get when you count the pairs that do complete a turn; the question asks for the others.",
                value=lambda p: int((_wavelengths(p) <= p["context"]).sum()),
            ),
            Mistake(
                "you get with 1/θ_i as the wavelength; one turn is 2π radians, so it takes 2π/θ_i tokens.",
                value=lambda p: int((_wavelengths(p) / (2 * math.pi) > p["context"]).sum()),
            ),
            Mistake(
                "you get when the pairs from the first slow one, i, to the last, d/2 − 1, are counted as "
                "d/2 − 1 − i; both ends count.",
                value=lambda p: int((_wavelengths(p) > p["context"]).sum()) - 1,
            ),
            Mistake(
                "you get with the pairs numbered 1 to d/2 in θ_i = b^(−2i/d); they are numbered from 0, so "
                "the fastest pair turns at b^0 = 1 radian per token.",
                value=lambda p: sum(
                    2 * math.pi * p["b"] ** (2 * i / p["d"]) > p["context"] for i in range(1, p["d"] // 2 + 1)
                ),
            ),
        ),
        hint="pair i completes a turn every 2π/θ_i tokens; count the pairs for which that is longer than the context.",
    )
)

# ----- 06.4 · the stretch at which YaRN's factor doubles a score ----------------------------------


def _yarn_a(s: float) -> float:
    """YaRN's attention factor a for the stretch s, from helpers.rope_frequencies."""
    return _rope.rope_frequencies(2, scaling={"type": "yarn", "factor": float(s), "original_max_len": 2048})[1]


def _stretch_for(score_factor: float, a_of_s) -> float:
    """The stretch s at which a_of_s(s)² = score_factor, by bisection on ln s (a grows with s)."""
    low, high = 0.0, 50.0  # ln s
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if a_of_s(math.exp(mid)) ** 2 < score_factor else (low, mid)
    return math.exp((low + high) / 2)


register(
    Exercise(
        name="06.4",
        title="the stretch at which YaRN's factor doubles a score",
        kind="number",
        level=2,
        sig=3,
        params={"score_factor": 2},
        expected=lambda p: _stretch_for(p["score_factor"], _yarn_a),
        mistakes=(
            Mistake(
                "you get by setting a itself to the factor on the score; a multiplies each table, so it "
                "multiplies the query; the key is turned with the same tables, so it is multiplied by a too.",
                value=lambda p: _stretch_for(p["score_factor"] ** 2, _yarn_a),
            ),
            Mistake(
                "you get with log2 in place of ln; the formula uses the natural logarithm.",
                value=lambda p: _stretch_for(p["score_factor"], lambda s: 0.1 * math.log2(s) + 1.0),
            ),
            Mistake(
                "you get with log10 in place of ln; the formula uses the natural logarithm.",
                value=lambda p: _stretch_for(p["score_factor"], lambda s: 0.1 * math.log10(s) + 1.0),
            ),
            Mistake(
                "you get with the square of 1 + 0.1 ln s expanded without its last term, (0.1 ln s)²; "
                "keep the square whole.",
                value=lambda p: _stretch_for(p["score_factor"], lambda s: math.sqrt(1.0 + 0.2 * math.log(s))),
            ),
            Mistake(
                "you get by rounding up to the power of two at which the factor on the score first passes the "
                "target; the question asks for the stretch at which it equals the target exactly.",
                value=lambda p: 2.0 ** math.ceil(math.log2(_stretch_for(p["score_factor"], _yarn_a))),
            ),
            Mistake(
                "you get with √2 rounded to 1.41; the exponential magnifies that rounding, so keep it exact.",
                value=lambda p: math.exp(10 * (1.41 - 1)),
            ),
        ),
        hint="a score is the product of a turned query and a turned key: count how many times the tables enter "
        "it, then solve for s.",
    )
)

# ----- 06.5 · RoPE in the "half" layout, from scratch ---------------------------------------------


def _half_reference(x, positions, base):
    """helpers' RoPE in the half layout: pairs (x_i, x_(i + d/2)) turned by position · θ_i."""
    cos, sin = _rope_cos_sin(positions, x.shape[-1], base, dtype=torch.float64)  # (T, d/2)
    return _apply_rope(x, cos, sin, layout="half")


def _interleaved(x, positions, base):
    cos, sin = _rope_cos_sin(positions, x.shape[-1], base, dtype=torch.float64)
    return _apply_rope(x, cos, sin, layout="interleaved")


def _backwards(x, positions, base):
    cos, sin = _rope_cos_sin(positions, x.shape[-1], base, dtype=torch.float64)
    return _apply_rope(x, cos, -sin, layout="half")  # turned by −m θ_i


def _half_with_interleaved_table(x, positions, base):
    """The half layout's pairs with the interleaved layout's table: each angle repeated in place
    (repeat_interleave: θ_0, θ_0, θ_1, θ_1, ...) where the half layout repeats the table as a whole."""
    d = x.shape[-1]
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)  # (d/2,)
    angle = (positions.double()[:, None] * theta).repeat_interleave(2, dim=-1)  # (T, d): m θ_(j//2)
    rotated_half = torch.cat((-x[:, d // 2 :], x[:, : d // 2]), dim=-1)  # rotate_half(x)
    return x * torch.cos(angle) + rotated_half * torch.sin(angle)


def _speeds_without_the_2(x, positions, base):
    d = x.shape[-1]
    theta = base ** (-torch.arange(d // 2, dtype=torch.float64) / d)  # base^(−i/d)
    angle = positions.double()[:, None] * theta  # (T, d/2)
    cos, sin = torch.cos(angle), torch.sin(angle)
    return _apply_rope(x, cos, sin, layout="half")


def _half_inputs(rng) -> list[dict]:
    """Fixed edge cases (one pair; unit vectors that show the pairing), then random x and positions."""
    f64 = torch.float64
    cases = [
        {
            "x": torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], dtype=f64),
            "positions": torch.tensor([0, 1, 2]),
            "base": 10000.0,
        },
        {"x": torch.eye(4, dtype=f64), "positions": torch.tensor([1, 1, 1, 1]), "base": 10000.0},
    ]
    for t, d, base in ((5, 8, 10000.0), (6, 16, 500000.0), (3, 64, 10000.0), (4, 6, 100.0)):
        cases.append(
            {
                "x": torch.from_numpy(rng.standard_normal((t, d))),
                "positions": torch.from_numpy(rng.integers(0, 100, t)),
                "base": base,
            }
        )
    return cases


# Everything in helpers that turns a vector or builds the angle tables: the public functions, the
# private paths behind them and this module's own reference and wrong variants.
_FORBID_05 = (
    "helpers.apply_rope",
    "helpers.rope.apply_rope",
    "helpers.rope._apply_rope_autograd",
    "helpers.rope_cos_sin",
    "helpers.rope.rope_cos_sin",
    "helpers._angles.sin_cos_table",
    "helpers._angles.sin_cos_interleaved",
    "helpers.kernels.block_rotation",
    "helpers.exercises._nb06._half_reference",
    "helpers.exercises._nb06._interleaved",
    "helpers.exercises._nb06._backwards",
    "helpers.exercises._nb06._half_with_interleaved_table",
    "helpers.exercises._nb06._speeds_without_the_2",
)

register(
    Exercise(
        name="06.5",
        title="RoPE in the half layout, from scratch",
        kind="function",
        level=3,
        expected=lambda p: _half_reference,
        inputs=_half_inputs,
        forbid=_FORBID_05,
        # float64, as the question asks: a float32 computation (float32 angles, as torch.arange and a
        # division give by default) is off by up to a few parts in a million here and is reported as
        # "close, but only to about float32 precision".
        rtol=1e-6,
        atol=1e-9,
        seed=6,
        mistakes=(
            Mistake(
                "the interleaved layout gives: it pairs neighbours (x_2i, x_2i+1), where this exercise pairs "
                "x_i with x_(i + d/2).",
                function=_interleaved,
            ),
            Mistake(
                "the half layout's pairs with the interleaved layout's table give: each angle repeated in place "
                "(repeat_interleave: θ_0, θ_0, θ_1, θ_1, ...), so the two members of a pair, x_i and x_(i + d/2), "
                "are turned by different angles; the half layout repeats the table as a whole "
                "(torch.cat((angle, angle), dim=-1)), or uses one (T, d/2) table for both halves.",
                function=_half_with_interleaved_table,
            ),
            Mistake(
                "a turn by −mθ_i gives, the other way round: look at the sign in front of sin in each of the "
                "two lines of the rotation.",
                function=_backwards,
            ),
            Mistake(
                "the speeds base^(−i/d) give; pair i turns at base^(−2i/d) radians per token.",
                function=_speeds_without_the_2,
            ),
        ),
        hint="if your numbers agree with the expected ones to two or three digits, your function computes in "
        "float16 or bfloat16: compute in float64. Otherwise: input 2 is the 4 × 4 identity, every row at position 1: "
        "work out by hand where the 1 of each row must land, and compare with what your function returns.",
    )
)
