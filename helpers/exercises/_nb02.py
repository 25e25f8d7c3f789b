"""The exercises of notebook 02 (one clock).

The notebook's pair is ``p_m = [cos mθ, sin mθ]``; ``helpers.sinusoidal_pe`` stores the paper's
``[sin mθ, cos mθ]``. With ``d = 2`` there is one clock of speed 1, so feeding it the angles ``mθ``
gives the clock of speed ``θ`` (the same trick as the notebook's section 7).

Exercises: 02.1 predict an exact return; 02.2 the inner product of two positions; 02.3 the closest
return of θ = 0.5; 02.4 the shift map of two clocks stored sines first (tensor2tensor's layout), as a
function; 02.5 the first offset whose gap beats k = 710.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..sinusoidal import shift_matrix as _shift_matrix  # bound here: the check of 02.4 turns the public name off
from ._core import Exercise, Mistake, register


def _pair(angles) -> torch.Tensor:
    """The paper's pairs ``[sin a, cos a]`` for each angle, from ``helpers.sinusoidal_pe``: ``(T, 2)``."""
    from ..sinusoidal import sinusoidal_pe

    return sinusoidal_pe(torch.as_tensor(angles, dtype=torch.float64), 2, dtype=torch.float64)


def _gaps(theta: float, max_shift: int) -> torch.Tensor:
    """``‖p_(m+k) - p_m‖`` for ``k = 1 .. max_shift``, from ``helpers.shift_distance``: ``(max_shift,)``."""
    from ..sinusoidal import shift_distance

    return shift_distance(torch.arange(1, max_shift + 1, dtype=torch.float64), theta)


def _closest_return(theta: float, max_shift: int) -> tuple[int, float]:
    from ..sinusoidal import nearest_collision

    return nearest_collision(theta, max_shift)


# ----- 02.1 · predict: does a hand with a period of 2.86 tokens ever come back exactly? ---------------
# θ/2π = 0.35 = 7/20, not the section's own example 0.3 (which helpers.nearest_collision's docstring
# spells out): the prediction stays a prediction, and the cell after it shows 7/20 in its table.


def _exact_return(p: dict) -> str:
    k, gap = _closest_return(2 * math.pi * p["turns"], p["max_shift"])
    return f"after {k} tokens" if gap < 1e-9 else "never"


register(
    Exercise(
        name="02.1",
        title="predict: an exact return without a whole period",
        kind="choice",
        level=1,
        predict=True,
        params={"turns": 0.35, "max_shift": 100},
        expected=_exact_return,
        options=("never", "after 3 tokens", "after 7 tokens", "after 20 tokens"),
        mistakes=(
            Mistake(
                "a period that is not a whole number of tokens does not rule out an exact return by itself; "
                "a return needs a whole number of turns after a whole number of tokens, not one turn.",
                option="never",
            ),
            Mistake(
                "after 3 tokens the hand has turned by 3 × 0.35 = 1.05 turns; rounding the period to whole "
                "tokens overshoots the start.",
                option="after 3 tokens",
            ),
            Mistake(
                "after 7 tokens the hand has turned by 7 × 0.35 = 2.45 turns: two whole turns and almost half "
                "of one, nearly opposite its start.",
                option="after 7 tokens",
            ),
        ),
        hint="write down how many turns the hand has made after 1, 2, 3, ... tokens.",
        explain="A whole number of tokens can make a whole number of turns even when one period is not a whole "
        "number of tokens.",
    )
)


# ----- 02.2 · the inner product of two positions --------------------------------------------------------


def _inner(p: dict) -> float:
    pair = _pair([p["m"] * p["theta"], p["n"] * p["theta"]])  # (2, 2)
    return float(pair[0] @ pair[1])


def _cos_of_offset(p: dict, offset: float, *, degrees: bool = False) -> float:
    angle = offset * p["theta"]
    return math.cos(math.radians(angle) if degrees else angle)


register(
    Exercise(
        name="02.2",
        title="the inner product of two positions",
        kind="number",
        level=1,
        sig=3,
        params={"theta": 0.3, "m": 5, "n": 12},
        expected=_inner,
        mistakes=(
            Mistake(
                "you get from the sum of the two positions; the inner product sees how far apart the hands are, "
                "not where they are.",
                value=lambda p: _cos_of_offset(p, p["m"] + p["n"]),
            ),
            Mistake(
                "you get when the cosine is treated as odd, like the sine; section 2 says which of the two tells "
                "before from after.",
                value=lambda p: -_cos_of_offset(p, p["m"] - p["n"]),
            ),
            Mistake(
                "the sine of the angle between the hands gives: that is the direction reading p_mᵀ J p_n of "
                "section 2, not the inner product.",
                value=lambda p: math.sin((p["m"] - p["n"]) * p["theta"]),
            ),
            Mistake(
                "the sine of the angle between the hands gives (here with the other sign): that is a direction "
                "reading, not the inner product.",
                value=lambda p: math.sin((p["n"] - p["m"]) * p["theta"]),
            ),
            Mistake(
                "you get reading θ in degrees; θ is in radians per token.",
                value=lambda p: _cos_of_offset(p, p["m"] - p["n"], degrees=True),
            ),
            Mistake(
                "you get from the offset in tokens alone; the hands are apart by an angle, so the speed θ matters.",
                value=lambda p: math.cos(p["m"] - p["n"]),
            ),
            Mistake(
                "you get with an offset one token too short; count again how many tokens separate the two positions.",
                value=lambda p: _cos_of_offset(p, abs(p["m"] - p["n"]) - 1),
            ),
            Mistake(
                "you get with an offset one token too long; count again how many tokens separate the two positions.",
                value=lambda p: _cos_of_offset(p, abs(p["m"] - p["n"]) + 1),
            ),
            Mistake(
                "the product of the two cosines alone gives; the sines of both positions contribute too.",
                value=lambda p: math.cos(p["m"] * p["theta"]) * math.cos(p["n"] * p["theta"]),
            ),
            Mistake(
                "the product of the two sines alone gives; the cosines of both positions contribute too.",
                value=lambda p: math.sin(p["m"] * p["theta"]) * math.sin(p["n"] * p["theta"]),
            ),
        ),
        hint="first find how many tokens apart the two positions are, then how far apart their hands are.",
        explain="Any two positions the same number of tokens apart give the same value.",
    )
)


# ----- 02.3 · the closest return of a hand that never comes back exactly -------------------------------
# A search with the helpers of section 5 finds it in one line, so it is a ★; the question names no helper
# and the hint gives no method.


def _period_multiple(p: dict, periods: int) -> int:
    """``periods`` periods ``2π/θ``, rounded to whole tokens."""
    return round(periods * 2 * math.pi / p["theta"])


register(
    Exercise(
        name="02.3",
        title="the offset that comes closest to a full turn",
        kind="integer",
        level=1,
        params={"theta": 0.5, "max_shift": 100},
        expected=lambda p: _closest_return(p["theta"], p["max_shift"])[0],
        mistakes=(
            Mistake(
                "you get by rounding a single period to whole tokens; one period lands too far from a whole "
                "number of tokens.",
                value=lambda p: _period_multiple(p, 1),
            ),
            Mistake(
                "you get by cutting a single period down to whole tokens; the hand is then still short of a full turn.",
                value=lambda p: math.floor(2 * math.pi / p["theta"]),
            ),
            Mistake(
                "you get from two periods rounded to whole tokens; it comes close, but it is not the closest "
                "within the offsets asked for.",
                value=lambda p: _period_multiple(p, 2),
            ),
            Mistake(
                "you get by counting the turns the hand makes, not the tokens; the question asks for the offset "
                "in tokens.",
                value=lambda p: round(_closest_return(p["theta"], p["max_shift"])[0] * p["theta"] / (2 * math.pi)),
            ),
            Mistake(
                "you get by making |sin kθ| smallest instead of the gap 2|sin(kθ/2)|: sin kθ is near 0 after every "
                "half turn, and this offset leaves the hand about half a turn from its start, as far as it can be.",
                value=lambda p: min(range(1, p["max_shift"] + 1), key=lambda k: abs(math.sin(k * p["theta"]))),
            ),
        ),
        hint="the hand need not come closest after a single turn.",
        explain="The gap there is 2|sin(kθ/2)|, small because kθ is just past a whole number of turns.",
    )
)


# ----- 02.4 · the shift map M_k of two clocks stored sines first, as a function -----------------------
# Section 7 writes out M_k for one clock in the [sin, cos] order and prints it for θ = 0.37, k = 3, so
# the exercise asks for what section 7 does not show: two clocks in tensor2tensor's layout, all sines
# first, where a clock's sine and cosine sit d/2 = 2 apart. The check compares entry by entry within
# _ATOL + _RTOL · |expected| (the question states both numbers): float64 arithmetic is far inside it,
# and a float32 tensor holding float64-computed values passes too (its rounding is relative, about
# 6e-8), but float32 trigonometry does not: the sine of float32's π is that number's rounding error of
# π, about 9e-8, where the entry should be 0 (the fixed case θ_0 = π/2, k = 2, before any random one).
# Not θ_0 = π, k = 1: there sin mθ_0 = 0 at every whole m, the table of q_m has rank 3, and column 0 of
# M_k is not fixed by q_(m+k) = M_k q_m, so a right answer found from the tables alone (least squares)
# would be rejected. At π/2 every fixed case has a table of rank 4, and kθ_0 = π still holds.

_ATOL, _RTOL = 1e-9, 1e-6


def _written(x: float) -> str:
    """A tolerance as the question writes it: ``1e-9``, not ``1e-09``."""
    return f"{x:.0e}".replace("e-0", "e-")


def _place(one_clock, theta_0, theta_1, *, interleaved: bool = False) -> torch.Tensor:
    """``(4, 4)`` map with ``one_clock(θ_i)`` (a ``(2, 2)`` map of ``[sin, cos]``) on clock ``i``'s two slots.

    Sines first: clock ``i`` keeps its sine at ``i`` and its cosine at ``i + 2``. Interleaved (the
    wrong layout here): at ``2i`` and ``2i + 1``, blocks on the diagonal.
    """
    matrix = torch.zeros((4, 4), dtype=torch.float64)
    for i, theta in enumerate((theta_0, theta_1)):
        slots = torch.tensor([2 * i, 2 * i + 1] if interleaved else [i, i + 2])
        matrix[slots[:, None], slots[None, :]] = torch.as_tensor(one_clock(theta), dtype=torch.float64)
    return matrix


def _shift_map_reference(theta_0, theta_1, k):
    """``M_k`` for ``[sin mθ_0, sin mθ_1, cos mθ_0, cos mθ_1]``: each clock's block from ``helpers.shift_matrix``."""
    return _place(lambda theta: _shift_matrix(float(k) * float(theta), 2), theta_0, theta_1)


def _turn(angle: float, *, swap: bool = False) -> torch.Tensor:
    """``[[cos a, sin a], [-sin a, cos a]]`` (or with cos and sin swapped inside): ``(2, 2)``."""
    c, s = math.cos(angle), math.sin(angle)
    if swap:
        c, s = s, c
    return torch.tensor([[c, s], [-s, c]], dtype=torch.float64)


def _turn_float32(angle: float) -> torch.Tensor:
    """``_turn`` with the angle, its cosine and its sine in float32 (torch's default dtype): ``(2, 2)``."""
    a = torch.tensor(angle, dtype=torch.float32)
    c, s = torch.cos(a), torch.sin(a)
    return torch.stack((torch.stack((c, s)), torch.stack((-s, c))))


def _shift_map_inputs(rng: np.random.Generator) -> list[dict]:
    # (θ_0, θ_1, k): a plain case, k = 0, a negative k, an entry that should be exactly 0 (sin 2 · π/2),
    # a full turn of the second clock (2π/12 · 12), and the near-return k = 710 of section 5.
    fixed = [
        (1.0, 0.1, 3),
        (1.0, 0.1, 0),
        (1.0, 0.1, -3),
        (math.pi / 2, 0.3, 2),
        (0.25, 2 * math.pi / 12, 12),
        (1.0, 0.001, 710),
    ]
    cases = [{"theta_0": t0, "theta_1": t1, "k": k} for t0, t1, k in fixed]
    for _ in range(20):
        cases.append(
            {
                "theta_0": float(rng.uniform(0.01, 2 * math.pi)),
                "theta_1": float(rng.uniform(0.01, 2 * math.pi)),
                "k": int(rng.integers(-100, 101)),
            }
        )
    return cases


register(
    Exercise(
        name="02.4",
        title="the shift map M_k of two clocks, sines first",
        kind="function",
        level=2,
        atol=_ATOL,
        rtol=_RTOL,
        expected=lambda p: _shift_map_reference,
        inputs=_shift_map_inputs,
        forbid=(
            "helpers.shift_matrix",
            "helpers.sinusoidal.shift_matrix",
            "helpers.block_rotation",
            "helpers.kernels.block_rotation",
            "helpers.rotation_commuting_matrix",
            "helpers.kernels.rotation_commuting_matrix",
            "helpers.apply_rope",
            "helpers.rope.apply_rope",
            "helpers.rope._apply_rope_autograd",
            "helpers.rope_cos_sin",
            "helpers.rope.rope_cos_sin",
        ),
        mistakes=(
            # Tried first: for k < 0 a map that drops the sign of k equals the [cos, sin] one below.
            Mistake(
                "the map for |k| gives: it ignores the sign of k, so a negative offset turns the clocks forwards "
                "instead of backwards.",
                function=lambda theta_0, theta_1, k: _place(lambda t: _turn(abs(k) * t), theta_0, theta_1),
            ),
            Mistake(
                "section 7's one-clock matrices placed as 2 × 2 blocks along the diagonal give: that is the map of "
                "the interleaved layout [sin mθ_0, cos mθ_0, sin mθ_1, cos mθ_1] (the paper's and "
                "helpers.sinusoidal_pe's). Sines first, a clock's sine and cosine sit two places apart.",
                function=lambda theta_0, theta_1, k: _place(lambda t: _turn(k * t), theta_0, theta_1, interleaved=True),
            ),
            Mistake(
                "the rotation R(kθ) of the [cos, sin] order of sections 1-4 gives for each clock (or the transpose "
                "of the matrix asked for); in the [sin, cos] order a clock's map turns the other way (section 7).",
                function=lambda theta_0, theta_1, k: _place(lambda t: _turn(-k * t), theta_0, theta_1),
            ),
            Mistake(
                "you get turning both clocks at the speed θ_0; each clock turns at its own speed.",
                function=lambda theta_0, theta_1, k: _place(lambda t: _turn(k * theta_0), theta_0, theta_1),
            ),
            Mistake(
                "you get with the two speeds swapped between the clocks: entries 0 and 2 belong to θ_0, "
                "entries 1 and 3 to θ_1.",
                function=lambda theta_0, theta_1, k: _place(lambda t: _turn(k * t), theta_1, theta_0),
            ),
            Mistake(
                "a shift by one token gives, whatever k is; k tokens turn each clock k times as far.",
                function=lambda theta_0, theta_1, k: _place(_turn, theta_0, theta_1),
            ),
            Mistake(
                "you get reading kθ in degrees; θ is in radians per token.",
                function=lambda theta_0, theta_1, k: _place(lambda t: _turn(math.radians(k * t)), theta_0, theta_1),
            ),
            Mistake(
                "you get with cos and sin swapped inside the matrix; swapping the coordinates moves the entries, "
                "it does not turn cosines into sines.",
                function=lambda theta_0, theta_1, k: _place(lambda t: _turn(k * t, swap=True), theta_0, theta_1),
            ),
            Mistake(
                "float32 trigonometry gives: an entry that should be exactly 0 comes out as float32's rounding "
                f"error (here sin kθ_0 with kθ_0 = π), beyond the absolute {_written(_ATOL)} the check allows. "
                "Form the angles and their sines and cosines in float64 (Python's math, or float64 tensors).",
                function=lambda theta_0, theta_1, k: _place(lambda t: _turn_float32(k * t), theta_0, theta_1),
            ),
        ),
        hint="each clock turns on its own, at its own speed; check your matrix on k = 1: it must turn "
        "q_0 = [0, 0, 1, 1] into q_1 = [sin θ_0, sin θ_1, cos θ_0, cos θ_1].",
        explain="Each clock is section 7's matrix, spread over the two slots that hold its sine and its cosine; "
        "the clocks never mix, and nothing depends on the position m.",
    )
)


# ----- 02.5 · beyond 10,000 tokens: the next offset that beats k = 710 ---------------------------------


def _first_better(p: dict, limit: int = 200_000) -> int:
    gaps = _gaps(p["theta"], limit)  # (limit,)
    better = torch.nonzero(gaps < gaps[p["k_ref"] - 1])
    if better.numel() == 0:
        raise ValueError(f"no offset up to {limit} has a gap below the one at k = {p['k_ref']}")
    return int(better[0, 0]) + 1


def _first_closer_fraction(p: dict) -> int:
    """The numerator ``k`` of the first fraction ``k/j`` (by ``j``) closer to ``2π/θ`` than ``k_ref/j_ref``.

    The wrong criterion: ``|k/j - 2π/θ|`` small, where the gap depends on the miss ``|kθ - 2πj|``.
    """
    ratio = 2 * math.pi / p["theta"]  # tokens per turn
    j_ref = round(p["k_ref"] / ratio)
    error_ref = abs(p["k_ref"] / j_ref - ratio)
    for j in range(j_ref + 1, 10 * j_ref * j_ref):
        k = round(ratio * j)
        if abs(k / j - ratio) < error_ref:
            return k
    raise ValueError(f"no fraction closer to 2π/θ than {p['k_ref']}/{j_ref} found")


register(
    Exercise(
        name="02.5",
        title="the next offset that beats k = 710",
        kind="integer",
        level=3,
        params={"theta": 1.0, "k_ref": 710},
        expected=_first_better,
        mistakes=(
            Mistake(
                "the first fraction k/j closer to 2π than 710/113 gives; but the gap depends on the miss "
                "|k - 2πj| = j·|k/j - 2π|, and its much larger j makes that miss larger than at 710.",
                value=_first_closer_fraction,
            ),
            Mistake(
                "you get by doubling 710: twice the offset makes twice the miss from a whole number of turns, so "
                "the gap grows.",
                value=lambda p: 2 * p["k_ref"],
            ),
            Mistake(
                "you get from the 355 of π ≈ 355/113: 355 tokens make an odd number of half turns, which leaves "
                "the hand opposite its start.",
                value=lambda p: p["k_ref"] // 2,
            ),
            Mistake(
                "you get by counting the turns the hand makes, not the tokens; the question asks for the offset "
                "in tokens.",
                value=lambda p: round(_first_better(p) * p["theta"] / (2 * math.pi)),
            ),
            Mistake(
                "you get by doubling a numerator of a fraction close to π, as 710 = 2 · 355; that offset has a "
                "smaller gap, but it is not the first one. Check whether the fraction for 2π reduces.",
                value=lambda p: 2 * _first_better(p),
            ),
        ),
        hint="search further than 10,000 tokens: helpers.shift_distance takes as many offsets as you give it.",
        explain="The closest returns of an irrational hand come at ever rarer offsets, as the continued fraction "
        "of 2π predicts.",
    )
)
