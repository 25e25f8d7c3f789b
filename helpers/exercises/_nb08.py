"""The exercises of notebook 08 (train short, test long).

08.1 predict: does the learned table hold on "pattern" at 8x? (read from the cached results)
08.2 the cliff model for another training length, lag and vocabulary: the first test length below 0.4
08.3 how many RoPE pairs of a Llama-3-like head complete a turn within the training length
08.4 the share of an ALiBi head's prior weight on the nearest keys (8 heads, with helpers)
08.5 a function: that share for any slope, query position and number of keys, without alibi_bias
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import torch

from ..alibi import alibi_bias as _alibi_bias
from ..alibi import alibi_slopes as _alibi_slopes
from ._core import Exercise, Mistake, register

# ----- 08.1 predict: the learned table on "pattern" at 8x ------------------------------------------

_PREDICT_OPTIONS = ("collapses", "halves", "holds")


def _learned_pattern_accuracy(p: dict) -> float:
    from .. import experiment  # imported on use: it pulls in the training code

    results = experiment.load_results()
    return float(results["summary"][p["task"]][p["scheme"]][str(p["T"])]["accuracy_mean"])


def _predict_expected(p: dict) -> str:
    accuracy = _learned_pattern_accuracy(p)
    if accuracy < 0.4:
        return "collapses"
    return "halves" if accuracy < 0.9 else "holds"


register(
    Exercise(
        name="08.1",
        title="predict: the learned table on 'pattern' at 8x",
        kind="choice",
        level=1,
        predict=True,
        params={"task": "pattern", "scheme": "learned", "T": 256, "L": 32},
        options=_PREDICT_OPTIONS,
        expected=_predict_expected,
        mistakes=(
            Mistake(
                "that is what the table did on 'lag', where the position of the answer is all the model has to "
                "go on. Ask what a lookup by content needs from the rows past 31, then run the figure below.",
                option="collapses",
            ),
            Mistake(
                "the rows past 31 are untrained noise on this task too, but ask how much of the answer depends "
                "on them once the block has been seen; the figure below shows how far the line falls.",
                option="halves",
            ),
        ),
        hint="the untrained rows are the same as on 'lag'; what differs is what the task asks of them.",
        explain="A table that knows nothing past 31 only hurts a task that needs to know where it is.",
    )
)


# ----- 08.2 the cliff model: the first test length below a given accuracy ------------------------


def _cliff(
    L: float,
    T: float,
    n_tokens: float,
    lag: float,
    *,
    certain: float | None = None,
    lucky: bool = True,
    scored: float | None = None,
) -> Fraction:
    """Right below L, a uniform guess among n_tokens from L on, over the T - lag scored positions.

    Exact (fractions), so that the crossing of the threshold is decided without round-off.
    ``certain``, ``lucky`` and ``scored`` let the mistakes swap one count for a wrong one.
    """
    right = Fraction(L - lag) if certain is None else Fraction(certain)
    if lucky:
        right += Fraction(T - L, n_tokens)
    return right / Fraction(T - lag if scored is None else scored)


def _first_below(p: dict, *, notebook: bool = False, **wrong) -> int:
    """The shortest test length T >= L at which the cliff model's accuracy is below p["below"]."""
    L, lag, n_tokens = (32, 3, 32) if notebook else (p["L"], p["lag"], p["n_tokens"])
    below = Fraction(str(p["below"]))
    for T in range(L, 100 * L):
        kwargs = {k: (v(T) if callable(v) else v) for k, v in wrong.items()}
        if _cliff(L, T, n_tokens, lag, **kwargs) < below:
            return T
    raise ValueError(f"the cliff model never falls below {p['below']!r}")  # not with 1/n_tokens < below


register(
    Exercise(
        name="08.2",
        title="the cliff model: the first test length below 0.4",
        kind="integer",
        level=1,
        params={"L": 48, "lag": 5, "n_tokens": 16, "below": 0.4},
        expected=_first_below,
        mistakes=(
            Mistake(
                "you get with the last length at which the accuracy is still at least the threshold; the "
                "question asks for the first one below it.",
                value=lambda p: _first_below(p) - 1,
            ),
            Mistake(
                "you get by dividing by T: the first lag positions have no target and are not scored.",
                value=lambda p: _first_below(p, scored=lambda T: T),
            ),
            Mistake(
                "you get without the lucky guesses: a uniform guess among the tokens is sometimes right.",
                value=lambda p: _first_below(p, lucky=False),
            ),
            Mistake(
                "you get with one position too many right for certain: count the scored positions below L.",
                value=lambda p: _first_below(p, certain=p["L"] - p["lag"] + 1),
            ),
            Mistake(
                "you get by counting L positions right before the cliff: only those from lag on are scored.",
                value=lambda p: _first_below(p, certain=p["L"]),
            ),
            Mistake(
                "you get with the notebook's L = 32, lag 3 and vocabulary 32 instead of this exercise's numbers.",
                value=lambda p: _first_below(p, notebook=True),
            ),
        ),
        hint="write the cliff model's accuracy as a function of T with this run's numbers, then find where it "
        "first drops below the threshold (it only falls as T grows).",
    )
)


# ----- 08.3 RoPE pairs that complete a turn within the training length -------------------------------


def _full_turns(d: int, base: float, L: int, *, turn: float = 2 * math.pi, two: bool = True) -> int:
    exponent = torch.arange(0, d // 2, dtype=torch.float64) * (2 if two else 1) / d
    theta = torch.tensor(float(base), dtype=torch.float64) ** (-exponent)
    return int((theta * (L - 1) >= turn).sum())


def _full_turns_expected(p: dict) -> int:
    from ..sinusoidal import frequencies

    return int((frequencies(p["d"], p["base"]) * (p["L"] - 1) >= 2 * math.pi).sum())


register(
    Exercise(
        name="08.3",
        title="RoPE pairs that complete a turn in training",
        kind="integer",
        level=2,
        params={"d": 128, "base": 500000, "L": 8192},
        expected=_full_turns_expected,
        mistakes=(
            Mistake(
                "you get by counting the pairs that do not complete a turn; the question asks for those that do.",
                value=lambda p: p["d"] // 2 - _full_turns(p["d"], p["base"], p["L"]),
            ),
            Mistake(
                "you get with base 10000; this head uses the larger base, which slows every pair down.",
                value=lambda p: _full_turns(p["d"], 10000, p["L"]),
            ),
            Mistake(
                "you get with θ_i = base^(-i/d): the exponent is 2i/d, one speed per pair of coordinates.",
                value=lambda p: _full_turns(p["d"], p["base"], p["L"], two=False),
            ),
            Mistake(
                "you get by asking for half a turn (π); a full turn is 2π radians.",
                value=lambda p: _full_turns(p["d"], p["base"], p["L"], turn=math.pi),
            ),
        ),
        hint="a pair has shown every angle once the angle it reaches at the longest trained offset is a full turn.",
    )
)


# ----- 08.4 the ALiBi prior near the query, with helpers ---------------------------------------------


def _prior_row(n_heads: int, head: int, T: int, *, slopes=None) -> torch.Tensor:
    """softmax of the last query's ALiBi row, float64, keys 0 .. T-1 (the nearest key last)."""
    from ..alibi import alibi_slopes

    slope = float((alibi_slopes(n_heads) if slopes is None else slopes)[head])
    distance = torch.arange(T - 1, -1, -1, dtype=torch.float64)  # (T,): Δ of keys 0 .. T-1
    return torch.softmax(-slope * distance, dim=-1)


def _near_expected(p: dict) -> float:
    from ..alibi import alibi_bias

    row = alibi_bias(p["n_heads"], p["T"], dtype=torch.float64)[p["head"], -1]  # (T,) the last query's row
    return torch.softmax(row, dim=-1)[-p["k"] :].sum().item()


register(
    Exercise(
        name="08.4",
        title="the ALiBi prior on the nearest keys",
        kind="number",
        level=2,
        sig=3,
        params={"n_heads": 8, "head": 2, "T": 64, "k": 5},
        expected=_near_expected,
        mistakes=(
            Mistake(
                "you get by summing the first k entries of the row, or by flipping the sign of the bias (the "
                "same number): the first entries are the farthest keys, the nearest are at the end of the last "
                "query's row, and ALiBi subtracts m·Δ.",
                value=lambda p: _prior_row(p["n_heads"], p["head"], p["T"])[: p["k"]].sum().item(),
            ),
            Mistake(
                "you get with head index 3: index 2 is the third head.",
                value=lambda p: _prior_row(p["n_heads"], p["head"] + 1, p["T"])[-p["k"] :].sum().item(),
            ),
            Mistake(
                "you get with the second head (index 1): indices count from 0, so index 2 is the third head.",
                value=lambda p: _prior_row(p["n_heads"], p["head"] - 1, p["T"])[-p["k"] :].sum().item(),
            ),
            Mistake(
                "you get with the 4-head slopes of the notebook's model; this model has 8 heads, and the slopes "
                "depend on the head count.",
                value=lambda p: _prior_row(4, p["head"], p["T"])[-p["k"] :].sum().item(),
            ),
            Mistake(
                "you get by skipping the key at offset 0 (the query's own position), which is the nearest key.",
                value=lambda p: _prior_row(p["n_heads"], p["head"], p["T"])[-p["k"] - 1 : -1].sum().item(),
            ),
            Mistake(
                "you get from the bias without the softmax: the prior weights are normalised over the whole row.",
                value=lambda p: sum(
                    math.exp(-float(2.0 ** (-8 * (p["head"] + 1) / p["n_heads"])) * t) for t in range(p["k"])
                ),
            ),
        ),
        hint="take the last query's row of the head, turn it into weights, and find where the nearest keys sit.",
    )
)


# ----- 08.5 a function: the prior on the k nearest keys, for any slope ------------------------------


def _reference_near_weight(slope, position, k):
    """Built from helpers.alibi_bias: the one-head row (slope 1/256) rescaled to ``slope``.

    It holds its own reference to ``alibi_bias``, taken at import, so it still works while the
    check stands in for the forbidden name (when the reference itself is handed in, as the tests do).
    """
    row = _alibi_bias(1, 1, int(position) + 1, dtype=torch.float64)[0, 0]  # (position+1,): -Δ/256, Δ = position..0
    row = row / float(_alibi_slopes(1)[0]) * float(slope)  # -slope · Δ
    return torch.softmax(row, dim=-1)[-int(k) :].sum().item()


def _weights(slope, position):
    w = np.exp(-float(slope) * np.arange(int(position) + 1, dtype=float))  # Δ = 0 .. position, nearest first
    return w / w.sum()


def _farthest(slope, position, k):
    return float(_weights(slope, position)[-int(k) :].sum())


def _skip_own(slope, position, k):
    return float(_weights(slope, position)[1 : int(k) + 1].sum())


def _long_row(slope, position, k):
    return 1.0 - math.exp(-float(slope) * int(k))


def _not_normalised(slope, position, k):
    return float(np.exp(-float(slope) * np.arange(int(k))).sum())


def _near_inputs(rng: np.random.Generator) -> list[dict]:
    cases = [
        {"slope": 0.25, "position": 127, "k": 3},  # the notebook's steepest head, a long row
        {"slope": 0.5, "position": 0, "k": 1},  # the first token sees only itself
        {"slope": 0.0, "position": 9, "k": 4},  # no slope: the prior is uniform
        {"slope": 1 / 256, "position": 20, "k": 21},  # every key of the row
        {"slope": 0.125, "position": 6, "k": 2},  # a short row: the tail is not negligible
        {"slope": 2.0, "position": 300, "k": 1},
    ]
    for _ in range(14):
        position = int(rng.integers(0, 400))
        cases.append(
            {
                "slope": float(rng.choice([rng.uniform(0.0, 1.0), 2.0 ** -rng.integers(1, 9)])),
                "position": position,
                "k": int(rng.integers(1, position + 2)),
            }
        )
    return cases


register(
    Exercise(
        name="08.5",
        title="the prior on the k nearest keys, for any slope",
        kind="function",
        level=3,
        params={},
        expected=lambda p: _reference_near_weight,
        inputs=_near_inputs,
        forbid=(
            "helpers.alibi_bias",
            "helpers.alibi.alibi_bias",
            "helpers.alibi_key_bias",
            "helpers.alibi.alibi_key_bias",
        ),
        rtol=1e-4,
        atol=1e-7,
        mistakes=(
            Mistake(
                "you get by summing the k farthest keys (or, the same numbers, by using the bias +slope·Δ); "
                "the nearest keys are those with the smallest offset Δ, and ALiBi subtracts slope·Δ.",
                function=_farthest,
            ),
            Mistake(
                "you get by skipping the key at Δ = 0, the query's own position, which is the nearest key.",
                function=_skip_own,
            ),
            Mistake(
                "the long-row formula gives: it assumes infinitely many keys, but the row has only position + 1.",
                function=_long_row,
            ),
            Mistake(
                "you get without normalising: the weights must be divided by their sum over the whole row.",
                function=_not_normalised,
            ),
        ),
        hint="the query at `position` sees keys at Δ = 0 .. position; compute in float64 and watch slope = 0.",
    )
)
