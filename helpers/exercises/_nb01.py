"""The exercises of notebook 01 (permutation equivariance)."""

from __future__ import annotations

import math

import numpy as np
import torch

from ._core import Exercise, Mistake, register

__all__: list[str] = []

_D = 8  # width of the made-up token vectors the references attend over


def _layer(words: list[str], seed: int, *, causal: bool) -> torch.Tensor:
    """Position-free self-attention on made-up vectors for ``words``: (T, _D) outputs, float64.

    One random vector per distinct word and random projections, drawn from ``seed``; no position
    information at all, exactly the layer of the notebook.
    """
    from .. import attention

    generator = torch.Generator().manual_seed(seed)
    vocab = sorted(set(words))
    table = torch.randn(len(vocab), _D, generator=generator, dtype=torch.float64)
    w_q, w_k, w_v = (torch.randn(_D, _D, generator=generator, dtype=torch.float64) / math.sqrt(_D) for _ in range(3))
    x = table[[vocab.index(w) for w in words]]
    return attention(x @ w_q, x @ w_k, x @ w_v, causal=causal)[0]


# ----- 01.1 predict: which word keeps its output in one causal layer ----------------------------------


def _same_causal_output(params: dict) -> str:
    first, second = params["first"].split(), params["second"].split()
    out_1, out_2 = _layer(first, 11, causal=True), _layer(second, 11, causal=True)
    kept = [w for w in params["words"] if float((out_1[first.index(w)] - out_2[second.index(w)]).abs().max()) < 1e-12]
    if not kept:
        return "none"
    if len(kept) == len(params["words"]):
        return "all"
    if len(kept) > 1:
        raise ValueError(f"params={params!r}: more than one word keeps its output; the options cannot say so")
    return kept[0]


register(
    Exercise(
        name="01.1",
        title="predict: which word keeps its output under a causal mask",
        kind="choice",
        level=2,
        predict=True,
        params={"first": "cat chases dog", "second": "chases cat dog", "words": ("cat", "chases", "dog")},
        options=("cat", "chases", "dog", "none", "all"),
        expected=_same_causal_output,
        mistakes=(
            Mistake(
                "The mask does break the reordering symmetry, but a softmax-weighted sum does not care in which order "
                "its terms come. For each word, list the tokens it may look at in each sentence.",
                option="none",
            ),
            Mistake(
                "With a causal mask each token sees only itself and the tokens before it, and a reordering changes "
                "who is before whom: the proof of section 2 fails at the mask, which does not move with the tokens.",
                option="all",
            ),
            Mistake(
                "'cat' is first in one sentence and second in the other: it sees a different set of tokens in each.",
                option="cat",
            ),
            Mistake(
                "'chases' is second in one sentence and first in the other: it sees a different set of tokens in each.",
                option="chases",
            ),
        ),
        hint="a causal token attends to itself and the tokens before it; "
        "a weighted sum ignores the order of its terms.",
        explain="A causal token's output depends on the token itself, which is also the query, and on the "
        "multiset of the tokens before it (repeats count), not on their order: 'dog' is the query in both "
        "sentences, with 'cat' and 'chases' before it.",
    )
)


# ----- 01.2 function: the output of the reordered input, without attention -----------------------------


def _reorder_outputs(out, order):
    """Reference: the output for the input ``x[order]`` is ``out[order]`` (f(PX) = P f(X))."""
    return torch.as_tensor(out)[torch.as_tensor(list(order), dtype=torch.long)]


def _inverse_order(out, order):
    inverse = np.argsort(np.asarray(list(order)))
    return torch.as_tensor(out)[torch.as_tensor(inverse, dtype=torch.long)]


def _outputs_unchanged(out, order):
    return torch.as_tensor(out).clone()


def _right_rows_in_float32(out, order):
    return _reorder_outputs(out, order).float()


def _reorder_inputs(rng: np.random.Generator) -> list[dict]:
    """Outputs of the position-free layer on random tokens, with fixed orders first, then random ones."""
    fixed = [[0, 1, 2, 3], [3, 1, 2, 0], [1, 2, 0], [4, 3, 2, 1, 0], [2, 0, 3, 1]]
    orders = fixed + [[int(i) for i in rng.permutation(int(n))] for n in rng.integers(2, 8, size=6)]
    cases = []
    for number, order in enumerate(orders):
        words = [f"w{int(i)}" for i in rng.integers(0, 50, size=len(order))]
        cases.append({"out": _layer(words, 100 + number, causal=False), "order": order})
    return cases


register(
    Exercise(
        name="01.2",
        title="reorder the outputs instead of recomputing attention",
        kind="function",
        level=1,
        expected=lambda params: _reorder_outputs,
        inputs=_reorder_inputs,
        forbid=("helpers.attention", "helpers.self_attention.attention"),
        mistakes=(
            Mistake(
                "the inverse reordering gives: it puts old row i at place order[i], while row i of the new input "
                "is old row order[i].",
                function=_inverse_order,
            ),
            Mistake(
                "an invariant layer would give: the outputs are not left where they were, they move with the tokens.",
                function=_outputs_unchanged,
            ),
            Mistake(
                "the right outputs rounded to float32 give: the idea is right, but out is float64 and the check "
                "compares in float64 (torch.eye(T) is float32 unless you pass dtype=out.dtype).",
                function=_right_rows_in_float32,
            ),
        ),
        hint="row i of the new input is token order[i] of the old one; what does f(PX) = P f(X) say about its output?",
        rtol=1e-12,
        atol=1e-12,
    )
)


# ----- 01.3 the Gram matrix at positions far beyond the table -----------------------------------------


def _unit_sinusoidal(positions: list[int], d: int, base: float) -> torch.Tensor:
    from .. import sinusoidal_pe

    p = sinusoidal_pe(torch.tensor(positions), d, base, dtype=torch.float64)
    return p / p.norm(dim=1, keepdim=True)


def _gram(params: dict) -> float:
    p = _unit_sinusoidal([params["m"], params["n"]], params["d"], params["base"])
    return float(p[0] @ p[1])


def _gram_unscaled(params: dict) -> float:
    from .. import sinusoidal_pe

    p = sinusoidal_pe(torch.tensor([params["m"], params["n"]]), params["d"], params["base"], dtype=torch.float64)
    return float(p[0] @ p[1])


def _gram_width_8(params: dict) -> float:
    return _gram({**params, "d": 8})


def _gram_position_as_offset(params: dict) -> float:
    return _gram({**params, "m": 0, "n": params["n"]})


def _gram_offset_moved(params: dict, by: int) -> float:
    """The value at the pair's offset made one smaller (``by = -1``) or one larger (``by = +1``) in size."""
    m, n = params["m"], params["n"]
    step = 1 if n > m else -1
    return _gram({**params, "m": 0, "n": n - m + by * step})


def _gram_width_8_unscaled(params: dict) -> float:
    return _gram_unscaled({**params, "d": 8})


register(
    Exercise(
        name="01.3",
        title="G(500, 503) read from the table of positions 0..127",
        kind="number",
        level=2,
        sig=4,
        params={"m": 500, "n": 503, "d": 128, "base": 10000},
        expected=_gram,
        mistakes=(
            Mistake(
                "you get without scaling the vectors to length 1; the table's rows have squared length d/2.",
                value=_gram_unscaled,
            ),
            Mistake(
                "you get with d = 8, the width of the attention layer; the Gram matrix of section 5 has d = 128.",
                value=_gram_width_8,
            ),
            Mistake(
                "you get from positions 0 and 503; only the offset between the two positions counts, not a position.",
                value=_gram_position_as_offset,
            ),
            Mistake(
                "you get at an offset one smaller than the pair's (the offset of the pair (10, 12) printed in "
                "section 5); count again how far apart the two positions are.",
                value=lambda p: _gram_offset_moved(p, -1),
            ),
            Mistake(
                "you get at an offset one larger than the pair's: the offset counts the steps from one position "
                "to the other, not the positions from one to the other inclusive.",
                value=lambda p: _gram_offset_moved(p, +1),
            ),
            Mistake(
                "you get with d = 8 and without scaling the vectors to length 1, as in the last cell of section 5; "
                "the Gram matrix asked for has d = 128 and rows of length 1.",
                value=_gram_width_8_unscaled,
            ),
        ),
        hint="what is the offset of 500 and 503, and which pairs among positions 0..127 share it?",
    )
)


# ----- 01.4 how many reorderings leave the outputs unchanged ------------------------------------------


def _unchanged_orderings(params: dict) -> int:
    """Count the orderings P with f(PX) = f(X): by equivariance, those that only swap equal output rows."""
    words = params["sentence"].split()
    out = _layer(words, 7, causal=False)
    count, seen = 1, []
    for row in out:
        for group in seen:
            if float((group[0] - row).abs().max()) < 1e-12:
                group[1] += 1
                count *= group[1]
                break
        else:
            seen.append([row, 1])
    return count


def _repeats(counts) -> int:
    return math.prod(math.factorial(k) for k in counts)


def _count_of(params: dict, how) -> int:
    from collections import Counter

    counts = Counter(params["sentence"].split()).values()
    return how(counts, len(params["sentence"].split()))


register(
    Exercise(
        name="01.4",
        title="how many reorderings leave every output where it was",
        kind="integer",
        level=3,
        params={"sentence": "the cat saw the dog near the cat"},
        expected=_unchanged_orderings,
        mistakes=(
            Mistake(
                "you get by keeping only the order that changes nothing at all; swapping two equal tokens changes "
                "nothing either.",
                value=lambda p: 1,
            ),
            Mistake(
                "you get by counting every reordering, as if the outputs were invariant; equivariance moves "
                "the outputs with the tokens.",
                value=lambda p: _count_of(p, lambda c, n: math.factorial(n)),
            ),
            Mistake(
                "you get by counting the distinct orderings of the words; the question asks for the reorderings that "
                "leave the sentence, and so every output, as it was.",
                value=lambda p: _count_of(p, lambda c, n: math.factorial(n) // _repeats(c)),
            ),
            Mistake(
                "you get by adding the counts of the repeated words' rearrangements; the rearrangements of different "
                "words can be made together, independently of each other.",
                value=lambda p: _count_of(p, lambda c, n: sum(math.factorial(k) for k in c if k > 1)),
            ),
            Mistake(
                "you get by rearranging only the most repeated word; every repeated word can be rearranged.",
                value=lambda p: _count_of(p, lambda c, n: math.factorial(max(c))),
            ),
        ),
        hint="by f(PX) = P f(X), the outputs stay put exactly when P only exchanges rows of f(X) that are equal; "
        "which rows of f(X) are equal?",
    )
)
