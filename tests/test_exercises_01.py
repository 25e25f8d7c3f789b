"""The exercises of notebook 01: the right answers, computed here independently, pass; the common
wrong answers fail with the message that names them."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

import helpers
from helpers.exercises import _nb01, verdict


def _plain_attention(x, w_q, w_k, w_v, causal=False):
    """softmax(Q Kᵀ / sqrt(d)) V written out here, without helpers, for independent answers."""
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    scores = q @ k.T / math.sqrt(q.shape[-1])
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones_like(scores, dtype=torch.bool), 1), float("-inf"))
    return torch.softmax(scores, -1) @ v


def _random_layer(seed, d=8):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(d, d, generator=g, dtype=torch.float64) / math.sqrt(d) for _ in range(3)]


def _embed(words, seed, d=8):
    g = torch.Generator().manual_seed(seed)
    table = {w: torch.randn(d, generator=g, dtype=torch.float64) for w in sorted(set(words))}
    return torch.stack([table[w] for w in words])


# ----- 01.1 predict --------------------------------------------------------------------------------


def test_01_1_only_the_last_word_keeps_its_causal_output():
    first, second = "cat chases dog".split(), "chases cat dog".split()
    w = _random_layer(3)
    x1, x2 = _embed(first, 4), _embed(second, 4)
    out1, out2 = _plain_attention(x1, *w, causal=True), _plain_attention(x2, *w, causal=True)
    kept = [word for word in first if torch.allclose(out1[first.index(word)], out2[second.index(word)], atol=1e-12)]
    assert kept == ["dog"]
    assert verdict("01.1", "dog").correct and verdict("01.1", " Dog").correct


@pytest.mark.parametrize(
    "wrong, said",
    [
        ("none", "does not care in which order"),
        ("all", "does not move with the tokens"),
        ("cat", "'cat' is first in one sentence"),
        ("chases", "'chases' is second"),
    ],
)
def test_01_1_wrong_predictions_are_named(wrong, said):
    found = verdict("01.1", wrong)
    assert not found.correct and said in found.message
    assert "'dog'" not in found.message


def test_01_1_the_explanation_counts_repeats():
    message = verdict("01.1", "dog").message
    assert "multiset of the tokens before it" in message and "the token itself" in message
    # "the multiset of tokens at or before it" is false: "cat dog" and "dog cat" hold the same multiset,
    # and their last outputs differ, because the last token is the query.
    assert "at or before" not in message


def test_01_1_the_same_multiset_at_or_before_is_not_enough():
    # The explanation's claim, on a plain layer written here: the token itself counts apart from the
    # multiset of the tokens before it.
    layer = _random_layer(3)

    def last(*words):
        return _plain_attention(_embed(words, 4), *layer, causal=True)[-1]

    assert float((last("cat", "dog") - last("dog", "cat")).abs().max()) > 0.1  # same multiset, other query
    assert float((last("cat", "dog", "dog") - last("dog", "cat", "dog")).abs().max()) < 1e-12  # same query


def test_01_1_is_a_prediction():
    assert helpers.exercises.get("01.1").predict and "not an option" in verdict("01.1", "the cat").message


# ----- 01.2 function -------------------------------------------------------------------------------


def _gather_with_a_matrix(out, order):
    p = torch.zeros(len(order), len(order), dtype=out.dtype)
    for i, j in enumerate(order):
        p[i, j] = 1.0  # (P x)[i] = x[order[i]]
    return p @ out


def test_01_2_the_premise_reordering_the_input_reorders_the_output():
    x, w = torch.randn(6, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(5)), _random_layer(6)
    order = [2, 5, 0, 1, 4, 3]
    recomputed = helpers.attention(x[order] @ w[0], x[order] @ w[1], x[order] @ w[2])[0]
    assert torch.allclose(_gather_with_a_matrix(_plain_attention(x, *w), order), recomputed, atol=1e-12)


def test_01_2_a_correct_function_passes():
    found = verdict("01.2", _gather_with_a_matrix)
    assert found.correct and "correct on all" in found.message
    assert verdict("01.2", lambda out, order: np.asarray(out)[np.asarray(order)]).correct


def test_01_2_the_permutation_matrix_the_question_suggests_passes():
    assert verdict("01.2", lambda out, order: torch.eye(len(order), dtype=out.dtype)[order] @ out).correct


@pytest.mark.parametrize(
    "in_float32",
    [lambda out, order: out[list(order)].float(), lambda out, order: torch.eye(len(order))[order] @ out.float()],
)
def test_01_2_the_right_idea_in_float32_is_told_to_use_float64(in_float32):
    found = verdict("01.2", in_float32)
    assert not found.correct and "the idea is right" in found.message and "dtype=out.dtype" in found.message
    assert "Hint:" not in found.message


def test_01_2_the_question_builds_p_in_float64():
    import nbformat

    notebook = nbformat.read("notebooks/01_permutation_equivariance.ipynb", as_version=4)
    question = next(c.source for c in notebook.cells if c.source.startswith("### Exercise 2 "))
    assert "dtype=out.dtype" in question and "torch.eye(T)[order]" not in question
    assert "row `order[i]`" not in question  # the learner derives the gather, the question does not say it


def test_01_2_the_inverse_permutation_is_named():
    def scatter(out, order):
        new = torch.empty_like(out)
        for i, j in enumerate(order):
            new[j] = out[i]
        return new

    found = verdict("01.2", scatter)
    assert not found.correct and "the inverse reordering" in found.message and "order=[1, 2, 0]" in found.message


def test_01_2_leaving_the_outputs_in_place_is_named():
    found = verdict("01.2", lambda out, order: out)
    assert not found.correct and "an invariant layer would give" in found.message


def test_01_2_calling_attention_is_refused_and_restored():
    def recompute(out, order):
        return helpers.attention(out[order], out[order], out[order])[0]

    assert "calls helpers.attention" in verdict("01.2", recompute).message
    assert helpers.attention(*(torch.eye(2),) * 3)[0].shape == (2, 2)  # restored after the check


def test_01_2_other_wrong_functions_say_where():
    found = verdict("01.2", lambda out, order: out[list(order)] * 1.001)
    assert not found.correct and "first difference on input 1" in found.message
    assert "not answered yet" in verdict("01.2", lambda out, order: None).message


# ----- 01.3 number ---------------------------------------------------------------------------------


def _kernel(delta, d=128, base=10000.0):
    theta = base ** (-np.arange(0, d, 2) / d)
    return float(np.mean(np.cos(delta * theta)))  # unit rows: (2/d) Σ cos(Δ θ_i)


def test_01_3_the_value_at_offset_three():
    right = _kernel(3.0)
    assert 0.815 < right < 0.816
    for answer in (round(right, 4), right, torch.tensor(right), 0.81541):
        assert verdict("01.3", answer).correct, answer
    for wrong in (round(right, 4) + 1e-4, round(right, 4) - 1e-4, 0.82, -right):
        assert not verdict("01.3", wrong).correct, wrong


@pytest.mark.parametrize(
    "wrong, said",
    [
        (64 * _kernel(3.0), "without scaling the vectors to length 1"),
        (_kernel(3.0, d=8), "with d = 8, the width"),
        (4 * _kernel(3.0, d=8), "with d = 8 and without scaling"),
        (_kernel(2.0), "offset one smaller"),
        (_kernel(4.0), "offset one larger"),
        (None, "from positions 0 and 503"),
    ],
)
def test_01_3_common_wrong_values_are_named(wrong, said):
    if wrong is None:  # cos(θ_i (503 - 0)) averaged: the position taken for the offset
        wrong = _kernel(503.0)
    found = verdict("01.3", round(wrong, 4))
    assert not found.correct and said in found.message


def test_01_3_the_values_read_in_section_5_are_named():
    assert "offset one smaller" in verdict("01.3", 0.8966).message  # G(10, 12), d = 128, unit rows
    # the unscaled d = 8 table of section 5's last cell, at offset 3
    assert "d = 8 and without scaling" in verdict("01.3", 1.965).message


# ----- 01.4 integer --------------------------------------------------------------------------------


def _brute_force(words, seed=9):
    out = _plain_attention(_embed(words, seed), *_random_layer(seed + 1))
    perms = torch.tensor(list(itertools.permutations(range(len(words)))))
    return int(((out[perms] - out).abs().amax(dim=(1, 2)) < 1e-12).sum())


def test_01_4_twelve_reorderings_change_nothing():
    assert _brute_force("the cat saw the dog near the cat".split()) == 12
    assert verdict("01.4", 12).correct and verdict("01.4", 12.0).correct


@pytest.mark.parametrize("sentence", ["a b a c", "a b a b a", "a b c d"])
def test_01_4_the_reference_counts_like_brute_force(sentence):
    assert _nb01._unchanged_orderings({"sentence": sentence}) == _brute_force(sentence.split())


@pytest.mark.parametrize(
    "wrong, said",
    [
        (40320, "counting every reordering"),
        (3360, "distinct orderings"),
        (1, "keeping only the order"),
        (8, "adding the counts"),
        (6, "only the most repeated word"),
    ],
)
def test_01_4_common_wrong_counts_are_named(wrong, said):
    found = verdict("01.4", wrong)
    assert not found.correct and said in found.message
    assert "12" not in found.message.replace(str(wrong), "")
