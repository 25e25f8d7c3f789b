"""The exercises of notebook 08 (train short, test long), in the order the notebook asks them.

08.1 the cliff model for another training length, lag and vocabulary: the first test length below 0.4
08.2 predict: the learned table on the "pattern" task past L at 8x (read from the cached results)
08.3 how many RoPE pairs of a Llama-3-like head complete a turn within the training length
08.4 a function: the share of an ALiBi head's prior on the k nearest keys, for any slope, without alibi_bias
08.5 rerun a control at --quick size: do RoPE and RoPE with one turn in L keep "lag" past L?
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
import torch

from ..alibi import alibi_bias as _alibi_bias
from ..alibi import alibi_slopes as _alibi_slopes
from ._core import Exercise, Mistake, register

# ----- 08.1 the cliff model: the first test length below a given accuracy ------------------------


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
        name="08.1",
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


# ----- 08.2 predict: the learned table on "pattern" past L at 8x ---------------------------------

_PREDICT_OPTIONS = ("collapses", "halves", "holds")


def _learned_pattern_accuracy(p: dict) -> float:
    """The mean over seeds of the accuracy past L (positions t >= L only) at length p["T"], cached run."""
    from .. import experiment  # imported on use: it pulls in the training code

    results = experiment.load_results()
    return float(results["summary"][p["task"]][p["scheme"]][str(p["T"])]["accuracy_beyond_mean"])


def _predict_expected(p: dict) -> str:
    accuracy = _learned_pattern_accuracy(p)
    if accuracy < 0.4:
        return "collapses"
    return "halves" if accuracy < 0.9 else "holds"


register(
    Exercise(
        name="08.2",
        title="predict: the learned table on 'pattern' past L at 8x",
        kind="choice",
        level=1,
        predict=True,
        params={"task": "pattern", "scheme": "learned", "T": 256, "L": 32},
        options=_PREDICT_OPTIONS,
        expected=_predict_expected,
        mistakes=(
            Mistake(
                "a lookup by content would hold if finding 'the token after the earlier copy' needed no position. "
                "It does: a head has to know which key comes right after which, and past position 31 the rows "
                "that would tell it are untrained (section 8). Run the figure below.",
                option="holds",
            ),
            Mistake(
                "the rows past 31 carry almost no position at all (section 8), so ask what is left of the lookup "
                "when nothing marks which key follows which; the figure below shows how far the line falls.",
                option="halves",
            ),
        ),
        hint="the untrained rows are the same as on 'lag'; ask what the lookup needs from them once the block "
        "has moved past position 31.",
        explain="Past L the table marks no position, and a lookup by content still needs one.",
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


# ----- 08.4 a function: the prior on the k nearest keys, for any slope ------------------------------


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
        name="08.4",
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


# ----- 08.5 rerun a control at --quick size ----------------------------------------------------------

_QUICK_OPTIONS = ("both", "only rope_L", "only rope", "neither")
_QUICK_SCHEMES = ("rope", "rope_L")


@functools.lru_cache(maxsize=4)
def _quick_keeps(task: str, length: int, above: float) -> tuple[bool, bool]:
    """Train rope and rope_L on ``task`` at QUICK size (one torch thread, on the CPU: about 10 s) and
    say, for each, whether every seed's accuracy past L at ``length`` is above ``above``.

    Cached: the registry's own tests ask for the answer several times in one process."""
    from .. import experiment  # imported on use: it pulls in the training code

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the fastest for models this small (make experiment's workers use one each)
    try:
        config = experiment.ExperimentConfig(**experiment.QUICK, tasks=(task,), schemes=_QUICK_SCHEMES)
        results = experiment.run_experiment(config, device="cpu", progress=False, workers=1)
    finally:
        torch.set_num_threads(threads)
    return tuple(
        all(r["eval"][str(length)]["accuracy_beyond"] > above for r in results["runs"] if r["scheme"] == scheme)
        for scheme in _QUICK_SCHEMES
    )


def _quick_expected(p: dict) -> str:
    rope, rope_l = _quick_keeps(p["task"], int(p["length"]), float(p["above"]))
    return {(True, True): "both", (False, True): "only rope_L", (True, False): "only rope", (False, False): "neither"}[
        (rope, rope_l)
    ]


register(
    Exercise(
        name="08.5",
        title="rerun a control at quick size: RoPE and RoPE with one turn in L",
        kind="choice",
        level=2,
        params={"task": "lag", "length": 128, "above": 0.9},
        options=_QUICK_OPTIONS,
        expected=_quick_expected,
        mistakes=(
            Mistake(
                "RoPE's score depends on the offset alone, so 'look 3 back' does carry over to any position; but a "
                "query past L also sees keys more than 31 tokens back, at angles that base 10000 never showed in "
                "training (section 8), and they take weight from the key 3 back. Read each seed's accuracy past L.",
                option="both",
            ),
            Mistake(
                "look at your run's accuracy at T = 32 first: both learned the task at the training length within "
                "140 steps; the question is what each keeps past it.",
                option="neither",
            ),
            Mistake(
                "the smaller base makes the pairs turn faster, and that is exactly why a far key brings each pair "
                "only angles it already showed within the training offsets (section 9).",
                option="only rope",
            ),
        ),
        hint="for each scheme, read every seed's accuracy past L at T = 128 in your results['runs'].",
        explain="What a short run already shows: past L, RoPE fails where its angles are new, not where its "
        "offsets are.",
    )
)
