"""The exercises of notebook 07."""

from __future__ import annotations

import math

import numpy as np
import torch

from .. import alibi as _alibi
from .. import relative as _relative
from ._core import Exercise, Mistake, register


def _slopes(n_heads: int) -> torch.Tensor:
    """``helpers.alibi_slopes``, looked up when called."""
    return _alibi.alibi_slopes(int(n_heads))


def _geometric(n: int) -> list[float]:
    """``2^(-8/n), 2^(-16/n), ..., 2^(-8)``: the slopes of ``n`` heads when ``n`` is a power of two."""
    return [2.0 ** (-8.0 * (k + 1) / n) for k in range(n)]


def _closest_power(n_heads: int) -> int:
    return 2 ** math.floor(math.log2(n_heads))


# ----- the wrong ideas about the slopes, as functions of the head count ---------------------------


def _direct_rule(n_heads):
    """``2^(-8k/H)`` for every ``H``, power of two or not."""
    return _geometric(int(n_heads))


def _first_of_double(n_heads):
    """The slopes of ``n``, then the *first* slopes of ``2n`` (some repeat)."""
    n_heads = int(n_heads)
    n = _closest_power(n_heads)
    return _geometric(n) + _geometric(2 * n)[: n_heads - n]


def _odd_of_double(n_heads):
    """Every other slope of ``2n`` starting from the second: the slopes of ``n`` once more."""
    n_heads = int(n_heads)
    n = _closest_power(n_heads)
    return _geometric(n) + _geometric(2 * n)[1::2][: n_heads - n]


def _truncated_next_power(n_heads):
    """The first ``H`` slopes of the sequence of the next power of two."""
    n_heads = int(n_heads)
    return _geometric(2 ** math.ceil(math.log2(n_heads)))[:n_heads]


def _borrowed_first(n_heads):
    """The right slopes with the borrowed ones (from the sequence of ``2n``) put before those of ``n``."""
    n_heads = int(n_heads)
    n = _closest_power(n_heads)
    return _geometric(2 * n)[0::2][: n_heads - n] + _geometric(n)


def _borrowed_off_by_one(n_heads):
    """The new slopes of ``2n`` appended from the second of them on: the steepest one is skipped."""
    n_heads = int(n_heads)
    n = _closest_power(n_heads)
    return _geometric(n) + _geometric(2 * n)[0::2][1:][: n_heads - n]


def _sorted_steepest_first(n_heads):
    """The right slopes, sorted from steepest to shallowest (built without ``helpers.alibi_slopes``,
    so that the variant can itself be checked while that function is forbidden)."""
    n_heads = int(n_heads)
    n = _closest_power(n_heads)
    return sorted(_geometric(n) + _geometric(2 * n)[0::2][: n_heads - n], reverse=True)


def _shallowest_first(n_heads):
    """The right slopes in the opposite order: the shallowest head first (for a power of two, the right slopes
    sorted from shallowest to steepest)."""
    n_heads = int(n_heads)
    n = _closest_power(n_heads)
    return (_geometric(n) + _geometric(2 * n)[0::2][: n_heads - n])[::-1]


_SLOPE_SEED = 7

# The first head count that is not a power of two is 6, not 3: at 3 heads the right slopes sorted
# and the borrowed slope put first give the same list, and the check names the first input where
# a function is wrong.
_FIRST_COUNTS = (1, 2, 4, 6)


def _slope_inputs(rng: np.random.Generator) -> list[dict]:
    """Every head count from 1 to 64 (1, 2, 4, 6 first), ten random ones from 65 to 1,024 and three
    from 1,025 to 65,536 (a table of ``helpers.alibi_slopes`` built beforehand cannot hold them all)."""
    counts = list(_FIRST_COUNTS) + [n for n in range(1, 65) if n not in _FIRST_COUNTS]
    counts += [int(n) for n in rng.integers(65, 1025, size=10)]
    counts += [int(n) for n in rng.integers(1025, 65537, size=3)]
    return [{"n_heads": n} for n in counts]


def _slope_reference(params: dict):
    """The reference function: ``helpers.alibi_slopes`` itself (called only outside the learner's run,
    so a learner's function that calls this reference is refused like one that calls the helper)."""
    return _slopes


register(
    Exercise(
        name="07.1",
        title="ALiBi slopes for any number of heads",
        kind="function",
        level=3,
        expected=_slope_reference,
        inputs=_slope_inputs,
        forbid=("helpers.alibi_slopes", "helpers.alibi.alibi_slopes", "helpers.alibi._power_of_two_slopes"),
        seed=_SLOPE_SEED,
        hint=(
            "head 0 takes the steepest slope; for a head count that is not a power of two, compare the sequence "
            "of 2n heads with the one of n heads: which of its slopes are new?"
        ),
        mistakes=(
            Mistake(
                "the rule 2^(-8k/H) gives when applied to the head count H directly; the reference uses it only "
                "for powers of two.",
                function=_direct_rule,
            ),
            Mistake(
                "appending the first slopes of the sequence for 2n gives; some of those are already in the list, "
                "so two heads share a slope.",
                function=_first_of_double,
            ),
            Mistake(
                "taking every other slope of the sequence for 2n starting from its second gives; those are the "
                "slopes of n heads over again.",
                function=_odd_of_double,
            ),
            Mistake(
                "the first H slopes of the sequence for the next power of two give; the reference keeps every "
                "slope of the smaller power of two and appends the others after them.",
                function=_truncated_next_power,
            ),
            Mistake(
                "putting the slopes borrowed from the sequence for 2n before the slopes of n gives; the "
                "reference keeps the slopes of n first and appends the borrowed ones after them.",
                function=_borrowed_first,
            ),
            Mistake(
                "appending the new slopes of the sequence for 2n from the second of them on gives; the first "
                "new one is the steepest slope of all and is not skipped.",
                function=_borrowed_off_by_one,
            ),
            Mistake(
                "the slopes in the opposite order give, the shallowest (2^-8) first; head 0 takes the steepest "
                "slope, 2^(-8/n) for n heads, and the slopes fall from there.",
                function=_shallowest_first,
            ),
            Mistake(
                "the right slopes sorted from steepest to shallowest give; the reference does not sort them, "
                "and the head order is part of the answer.",
                function=_sorted_steepest_first,
            ),
        ),
    )
)


def _last_bucket_start(p: dict) -> int:
    """The smallest offset Δ ≥ 0 (a key Δ tokens back) in the last bucket of the past half."""
    distance = torch.arange(0, 8 * p["max_distance"])
    buckets = _relative.relative_position_bucket(-distance, True, p["num_buckets"], p["max_distance"])
    return int(distance[buckets == p["num_buckets"] // 2 - 1].min())


def _where_it_starts(p: dict) -> str:
    """The option that says where the last bucket begins, against ``max_distance`` (128 in the options)."""
    start, limit = _last_bucket_start(p), p["max_distance"]
    return "below 128" if start < limit else "at 128" if start == limit else "above 128"


register(
    Exercise(
        name="07.2",
        title="predict: where T5's last bucket begins",
        kind="choice",
        level=1,
        predict=True,
        params={"num_buckets": 32, "max_distance": 128},
        options=("below 128", "at 128", "above 128"),
        expected=_where_it_starts,
        hint="write down the bucket of an offset just below max_distance with the logarithmic formula.",
        mistakes=(
            Mistake(
                "max_distance enters the logarithmic formula as a scale; it is not where the shared bucket "
                "begins in the code, though T5's paper (section 2.1) describes the buckets as growing up to an "
                "offset of 128. Work out the formula's value for an offset a little below it.",
                option="at 128",
            ),
            Mistake(
                "no offset beyond max_distance gets a bucket of its own, so the last bucket cannot begin "
                "after it; ask where the formula's value first reaches the last bucket's number.",
                option="above 128",
            ),
        ),
    )
)


register(
    Exercise(
        name="07.3",
        title="the slopes of a 7-head model",
        kind="array",
        level=1,
        params={"n_heads": 7},
        rtol=0.01,
        expected=lambda p: _slopes(p["n_heads"]),
        hint="start from the largest power of two below the head count.",
        mistakes=(
            Mistake(
                "the rule 2^(-8k/H) gives with H = 7; it holds only when the head count is a power of two.",
                value=lambda p: _direct_rule(p["n_heads"]),
            ),
            Mistake(
                "appending the first slopes of the 8-head sequence gives; one of them is already in the list.",
                value=lambda p: _first_of_double(p["n_heads"]),
            ),
            Mistake(
                "every other slope of the 8-head sequence starting from its second gives; those repeat the "
                "4-head slopes.",
                value=lambda p: _odd_of_double(p["n_heads"]),
            ),
            Mistake(
                "the first seven slopes of the 8-head sequence give; the reference keeps the four slopes of 4 heads "
                "first.",
                value=lambda p: _truncated_next_power(p["n_heads"]),
            ),
            Mistake(
                "you get with the borrowed slopes of the 8-head sequence put first; they come after the four "
                "slopes of 4 heads.",
                value=lambda p: _borrowed_first(p["n_heads"]),
            ),
            Mistake(
                "you get by skipping the first new slope of the 8-head sequence; the steepest of them is borrowed too.",
                value=lambda p: _borrowed_off_by_one(p["n_heads"]),
            ),
            Mistake(
                "the right slopes sorted from steepest to shallowest give; the head order matters: the borrowed "
                "slopes come after the others.",
                value=lambda p: _sorted_steepest_first(p["n_heads"]),
            ),
        ),
    )
)


def _distance(p: dict, slope: float, fraction: float | None = None, log=math.log) -> float:
    return log(1.0 / (p["fraction"] if fraction is None else fraction)) / slope


def _slope(p: dict) -> float:
    return float(_slopes(p["n_heads"])[p["head"]])


register(
    Exercise(
        name="07.4",
        title="the 0.1% distance of head 8 of 12",
        kind="number",
        level=2,
        sig=3,
        params={"n_heads": 12, "head": 8, "fraction": 0.001},
        expected=lambda p: float(_alibi.alibi_decay_distance(p["n_heads"], fraction=p["fraction"])[p["head"]]),
        hint="find the slope of that head first (section 1), then solve exp(-m Δ) = fraction for Δ.",
        mistakes=(
            Mistake(
                "you get for 1% (ln 100); the question asks for 0.1%.",
                value=lambda p: _distance(p, _slope(p), fraction=0.01),
            ),
            Mistake(
                "you get with the base-10 logarithm; exp(-m Δ) is undone by the natural logarithm.",
                value=lambda p: _distance(p, _slope(p), log=math.log10),
            ),
            Mistake(
                "you get by multiplying by the slope instead of dividing by it: a shallower head should look "
                "further, not nearer.",
                value=lambda p: math.log(1 / p["fraction"]) * _slope(p),
            ),
            Mistake(
                "you get with the slope 2^(-8(h+1)/12) of the direct rule; 12 is not a power of two, so head 8 "
                "is one of the borrowed slopes.",
                value=lambda p: _distance(p, _direct_rule(p["n_heads"])[p["head"]]),
            ),
            Mistake(
                "you get with the slope of head 8 in the 16-head sequence; 12 heads take their first eight slopes "
                "from the 8-head sequence.",
                value=lambda p: _distance(p, _geometric(16)[p["head"]]),
            ),
            Mistake(
                "you get with the eighth slope of the list; heads are counted from 0 here, so head 8 is the ninth.",
                value=lambda p: _distance(p, float(_slopes(p["n_heads"])[p["head"] - 1])),
            ),
            Mistake(
                "you get with the slope of head 9, the next one in the list; heads are counted from 0, so "
                "head 8 is the ninth.",
                value=lambda p: _distance(p, float(_slopes(p["n_heads"])[p["head"] + 1])),
            ),
            Mistake(
                "you get with log2 in place of ln; exp(-m Δ) is undone by the natural logarithm.",
                value=lambda p: _distance(p, _slope(p), log=math.log2),
            ),
            Mistake(
                "you get with the slope 1/2; head 8 of 12 has one of the slopes borrowed from the 16-head "
                "sequence, which the 8-head sequence does not have.",
                value=lambda p: _distance(p, 0.5),
            ),
        ),
    )
)


def _bucket(p: dict, bidirectional: bool = True, sign: int = -1) -> int:
    return int(
        _relative.relative_position_bucket(
            torch.tensor(sign * p["delta"]), bidirectional, p["num_buckets"], p["max_distance"]
        )
    )


def _bucket_by_formula(p: dict, position) -> int:
    """The past half's bucket of offset ``delta`` with ``position(delta, exact, half)`` for the wide buckets."""
    half = p["num_buckets"] // 2
    exact = half // 2
    if p["delta"] < exact:
        return p["delta"]
    return min(exact + position(p["delta"], exact, half), half - 1)


_T5_DEFAULTS = {"num_buckets": 32, "max_distance": 128}


register(
    Exercise(
        name="07.5",
        title="the bucket of a key 150 tokens back, with 64 buckets",
        kind="integer",
        level=2,
        params={"delta": 150, "num_buckets": 64, "max_distance": 256},
        expected=lambda p: _bucket(p),
        hint="a key before the query uses the lower half of the buckets, and the first half of those are exact.",
        mistakes=(
            Mistake(
                "you get by rounding the logarithmic position to the nearest whole number; T5 truncates it.",
                value=lambda p: _bucket_by_formula(
                    p, lambda n, e, h: round(math.log(n / e) / math.log(p["max_distance"] / e) * (h - e))
                ),
            ),
            Mistake(
                "you get with wide buckets of equal width; they widen logarithmically with the offset.",
                value=lambda p: _bucket_by_formula(
                    p, lambda n, e, h: math.floor((n - e) / (p["max_distance"] - e) * (h - e))
                ),
            ),
            Mistake(
                "you get with ln(max_distance) in the denominator; the logarithmic scale runs from the first "
                "wide offset to max_distance, so it is ln(max_distance / exact).",
                value=lambda p: _bucket_by_formula(
                    p, lambda n, e, h: math.floor(math.log(n / e) / math.log(p["max_distance"]) * (h - e))
                ),
            ),
            Mistake(
                "you get with the upper half of the buckets, the one for keys after the query; this key is "
                "before it (T5's relative position is negative).",
                value=lambda p: _bucket(p, sign=1),
            ),
            Mistake(
                "you get with the decoder's (unidirectional) bucketing, all the buckets on one side; the "
                "question asks for the bidirectional one.",
                value=lambda p: _bucket(p, bidirectional=False),
            ),
            Mistake(
                "you get with T5's defaults (32 buckets, max_distance 128); this model is configured with "
                "other values.",
                value=lambda p: _bucket({**p, **_T5_DEFAULTS}),
            ),
        ),
    )
)
