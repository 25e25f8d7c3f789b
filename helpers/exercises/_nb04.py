"""The exercises of notebook 04 (kernel decorrelation).

Every expected value is computed here, from the exercise's own parameters, with ``helpers``
(``position_kernel``, ``continuous_kernel``); the notebook shows none of them.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.special import sici

from ..kernels import continuous_kernel, position_kernel
from ._core import Exercise, Mistake, register

# ----- 04.1 · predict: a larger base ------------------------------------------------------------


def _first_below(d: int, base: float, level: float = 0.5, limit: int = 10_000) -> int:
    """The smallest offset Δ ≥ 1 with κ_d(Δ) < level."""
    kappa = position_kernel(torch.arange(1, limit + 1, dtype=torch.float64), d, base)  # (limit,): κ(j + 1)
    below = torch.nonzero(kappa < level)
    if not len(below):
        raise ValueError(f"κ_{d} never falls below {level} for Δ ≤ {limit} at base {base}")
    return int(below[0]) + 1


def _slower_or_faster(p: dict) -> str:
    small, large = _first_below(p["d"], p["base"]), _first_below(p["d"], p["larger_base"])
    if large > small:
        return "more slowly"
    return "more quickly" if large < small else "the same"


register(
    Exercise(
        name="04.1",
        title="predict: a larger base",
        kind="choice",
        level=1,
        predict=True,
        params={"d": 64, "base": 10000, "larger_base": 1_000_000},
        expected=_slower_or_faster,
        options=("more slowly", "more quickly", "the same"),
        mistakes=(
            Mistake(
                "a larger base changes the speed of every hand but the fastest. Work out which way each "
                "θ_i = b^(-2i/d) moves when b grows, and what that does to how long a hand's vote stays near +1.",
                option="more quickly",
            ),
            Mistake(
                "the fastest hand, θ_0 = 1, is indeed the same for every base, but the kernel averages all "
                "d/2 hands, and the others do change.",
                option="the same",
            ),
        ),
        hint="compare θ_i = b^(-2i/d) for the two bases, hand by hand.",
        explain="Every hand but the fastest turns more slowly, so the votes stay near +1 for longer.",
    )
)


# ----- 04.2 · the offset with the largest inner product ------------------------------------------


def _largest(p: dict) -> int:
    offsets = torch.arange(p["lowest"], p["highest"] + 1, dtype=torch.float64)  # (N,)
    return int(offsets[int(position_kernel(offsets, p["d"], p["base"]).argmax())])


def _first_return_of_fast_hand(p: dict) -> int:
    """The fast hand's first return to twelve o'clock, round(2π), and nothing else considered."""
    return round(2 * math.pi)


register(
    Exercise(
        name="04.2",
        title="the offset with the largest inner product",
        kind="integer",
        level=1,
        params={"d": 8, "base": 10000, "lowest": 1, "highest": 100},
        expected=_largest,
        mistakes=(
            Mistake(
                "you get from the fast hand's first return alone; over the whole range asked another offset "
                "brings back more than one hand.",
                value=_first_return_of_fast_hand,
            ),
            Mistake(
                "you get when the index of the largest entry is taken for the offset; index 0 stands for the "
                "first offset of your range, not for Δ = 0.",
                value=lambda p: _largest(p) - p["lowest"],
            ),
            Mistake(
                "you get by comparing a position with itself; the question asks for Δ from 1 on.", value=lambda p: 0
            ),
        ),
        hint="a hand votes +1 when it is back at twelve o'clock; which hands can come back together?",
    )
)


# ----- 04.3 · the kernel as a function ----------------------------------------------------------


def _kernel_reference(delta, d, base):
    return position_kernel(delta, d, base)


def _hands(d, base, first=0, exponent=2.0):
    i = torch.arange(first, first + d // 2, dtype=torch.float64)  # (d/2,)
    return float(base) ** (-exponent * i / d)


def _raw_sum(delta, d, base):
    """p_m · p_n itself: the sum of the cosines, not divided by the number of hands."""
    return torch.cos(delta[..., None] * _hands(d, base)).sum(dim=-1)


def _divided_by_d(delta, d, base):
    return torch.cos(delta[..., None] * _hands(d, base)).sum(dim=-1) / d


def _exponent_without_two(delta, d, base):
    return torch.cos(delta[..., None] * _hands(d, base, exponent=1.0)).mean(dim=-1)


def _hands_from_one(delta, d, base):
    return torch.cos(delta[..., None] * _hands(d, base, first=1)).mean(dim=-1)


def _kernel_inputs(rng: np.random.Generator) -> list[dict]:
    def offsets(*shape, scale=300.0):
        return torch.from_numpy(rng.uniform(-scale, scale, size=shape))

    cases = [
        {"delta": torch.tensor(0.0, dtype=torch.float64), "d": 8, "base": 10000.0},
        {"delta": torch.tensor([1.0, 3.0, 5.0], dtype=torch.float64), "d": 8, "base": 10000.0},
        {"delta": torch.tensor([-5.0, 5.0, 0.5, 100.0], dtype=torch.float64), "d": 64, "base": 10000.0},
        {"delta": torch.tensor([[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]], dtype=torch.float64), "d": 16, "base": 100.0},
        {"delta": torch.tensor([7.0], dtype=torch.float64), "d": 2, "base": 500.0},
    ]
    for _ in range(12):
        d = 2 * int(rng.integers(1, 257))
        base = float(10 ** rng.uniform(1, 6))
        shape = (int(rng.integers(1, 6)),) if rng.random() < 0.5 else (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        cases.append({"delta": offsets(*shape), "d": d, "base": base})
    return cases


register(
    Exercise(
        name="04.3",
        title="the kernel as a function",
        kind="function",
        level=2,
        expected=lambda p: _kernel_reference,
        inputs=_kernel_inputs,
        forbid=("helpers.position_kernel", "helpers.kernels.position_kernel"),
        # float32 arithmetic is right too: its error here stays near 1e-6 (offsets up to 300), so allow 1e-5.
        rtol=1e-5,
        atol=1e-5,
        seed=4,
        mistakes=(
            Mistake(
                "the raw inner product p_m · p_n gives, not the normalised kernel; κ_d(0) should be 1.",
                function=_raw_sum,
            ),
            Mistake("dividing by d gives, not by the number of hands; κ_d(0) should be 1.", function=_divided_by_d),
            Mistake(
                "θ_i = b^(-i/d) gives: the exponent has lost its factor 2, so the slowest hand is far too fast.",
                function=_exponent_without_two,
            ),
            Mistake(
                "hands numbered from 1 give; the first hand, i = 0, turns one radian per token.",
                function=_hands_from_one,
            ),
        ),
        hint="one vote cos(Δ θ_i) per hand; give delta a last axis of length d/2 so that one line computes all votes.",
    )
)


# ----- 04.4 · the first rise ----------------------------------------------------------------------


def _first_rise(p: dict, limit: int = 10_000) -> int:
    """The smallest Δ ≥ 1 with κ_d(Δ) > κ_d(Δ - 1)."""
    kappa = position_kernel(torch.arange(0, limit + 1, dtype=torch.float64), p["d"], p["base"])  # κ(j) at j
    return int(torch.nonzero(kappa[1:] > kappa[:-1])[0]) + 1


register(
    Exercise(
        name="04.4",
        title="the first rise",
        kind="integer",
        level=2,
        params={"d": 256, "base": 10000},
        expected=_first_rise,
        mistakes=(
            Mistake(
                "you get for the lowest point before the rise, one offset too early: the question asks for "
                "the Δ at which κ_d(Δ) is already above κ_d(Δ - 1).",
                value=lambda p: _first_rise(p) - 1,
            ),
            Mistake(
                "you get from the fast hand's first return to twelve o'clock; with this many hands one hand's "
                "vote is worth only 2/d, and the slower hands are still falling.",
                value=lambda p: round(2 * math.pi),
            ),
            Mistake(
                "you get from the 6-token table at d = 8; with more hands the first rise moves.",
                value=lambda p: _first_rise({"d": 8, "base": p["base"]}),
            ),
        ),
        hint="compute κ_d on every offset from 0 to a few hundred and compare each value with the one before.",
    )
)


# ----- 04.5 · the lowest point of the continuous curve at a small base -------------------------------


def _lowest_continuous(p: dict) -> float:
    offsets = torch.arange(1, p["highest"] + 1, dtype=torch.float64)  # (N,)
    return float(continuous_kernel(offsets, p["base"]).min())


def _lowest_between_whole_offsets(p: dict) -> float:
    """The curve's lowest value over real offsets, within one token of the lowest whole offset."""
    from scipy.optimize import minimize_scalar

    offsets = torch.arange(1, p["highest"] + 1, dtype=torch.float64)  # (N,)
    at = float(offsets[int(continuous_kernel(offsets, p["base"]).argmin())])
    found = minimize_scalar(
        lambda x: float(continuous_kernel(x, p["base"])),
        bounds=(at - 1, at + 1),
        method="bounded",
        options={"xatol": 1e-9},
    )
    return float(found.fun)


def _slow_trend_minimum(p: dict) -> float:
    """-Ci(π/2) / ln b: the lowest point of the slow trend alone, Ci(Δ) taken as 0."""
    return -float(sici(math.pi / 2)[1]) / math.log(p["base"])


def _lowest_finite_sum(p: dict, d: int) -> float:
    """The lowest value over the same whole-number offsets of the finite sum κ_d, in place of the integral."""
    offsets = torch.arange(1, p["highest"] + 1, dtype=torch.float64)  # (N,)
    return float(position_kernel(offsets, d, p["base"]).min())


def _finite_sum_mistake(d: int) -> Mistake:
    return Mistake(
        f"the finite sum κ_d with d = {d} hands gives, not the continuous curve; the sum only approaches "
        "the integral as d grows, and the question asks for the integral itself.",
        value=lambda p: _lowest_finite_sum(p, d),
    )


register(
    Exercise(
        name="04.5",
        title="the lowest point of the continuous curve at a small base",
        kind="number",
        level=3,
        sig=4,
        params={"base": 100, "highest": 2000},
        expected=_lowest_continuous,
        mistakes=(
            Mistake(
                "the slow trend alone gives, -Ci(π/2) / ln b, which leaves out Ci(Δ); at this base the "
                "lowest point lies under two hundred tokens, where Ci(Δ) is not negligible.",
                value=_slow_trend_minimum,
            ),
            Mistake(
                "you get at the whole offset nearest πb/2 only; the term Ci(Δ) ripples once every 2π tokens "
                "and moves the lowest point.",
                value=lambda p: float(continuous_kernel(round(math.pi * p["base"] / 2), p["base"])),
            ),
            # The minimum over real offsets and the finite sum at d = 2048 agree to 4 figures: one message for both.
            Mistake(
                "you get from the curve's lowest point over all real offsets, and also from the finite sum κ_d with "
                "d = 2048 hands; the question asks for the integral itself, at whole-number offsets "
                "Δ = 1, 2, 3, ... only.",
                value=_lowest_between_whole_offsets,
            ),
            _finite_sum_mistake(512),
            # (not d = 1024: its value is also the answer rounded to 3 figures, which gets its own message)
            _finite_sum_mistake(4096),
            Mistake(
                "you get with log10 in place of ln; the closed form divides by the natural logarithm of b.",
                value=lambda p: _lowest_continuous(p) * math.log(p["base"]) / math.log10(p["base"]),
            ),
        ),
        hint="section 5's estimate was made for b = 10000; at b = 100 look again at what it left out, and at "
        "where that puts the lowest point.",
    )
)
