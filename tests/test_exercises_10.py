"""Notebook 10's exercises: right answers, written here independently, pass; the recorded wrong ones fail
with the message meant for them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import helpers
from helpers.exercises import get, verdict


def says(name, answer, *fragments):
    """The verdict on ``answer`` is a failure whose message contains every fragment."""
    found = verdict(name, answer)
    assert not found.correct, f"{name}: {answer!r} was accepted"
    for fragment in fragments:
        assert fragment in found.message, f"{name}: {fragment!r} not in {found.message!r}"
    return found


# ----- 10.1: predict whether a common shift changes the swapped layout's score (choice) -----------------


def test_10_1_the_score_stays_the_same():
    # by hand: a rotation of pairs at RoPE's speeds, in any pairing, gives qᵀ R_(n-m) k; n - m = 7 both times
    assert verdict("10.1", "the same").correct and verdict("10.1", " The Same ").correct
    assert get("10.1").predict


def test_10_1_the_wrong_predictions_are_named():
    says("10.1", "different, by an amount that grows with the shift", "still depends on n - m only")
    says("10.1", "different, by a fixed amount", "only their difference reaches the score")
    says("10.1", "yes", "not an option")


# ----- 10.2: name the fault (choice) ---------------------------------------------------------------------


def test_10_2_the_fault_is_the_mismatched_table():
    assert verdict("10.2", "table and rotation mismatched").correct
    report = helpers.checks.check_rope(_faulty, layout="half", dtype=torch.float64)
    assert "a table built for the interleaved layout used with rotate_half" in report.diagnosis


def test_10_2_the_wrong_faults_are_named():
    says("10.2", "layout swapped", "look at the table it is fed")
    says("10.2", "angles in low precision", "section 3's fix, not its bug")
    # the notebook's answer to 10.3 (float64 angles, tables cast) passes the bfloat16 check section 3 teaches
    report = helpers.checks.check_rope(rope_fixed_float64_angles, layout="half", dtype=torch.bfloat16)
    assert report.passed, str(report)
    says("10.2", "base ignored", "how they are repeated")


# ----- 10.3: fix the RoPE (function) -----------------------------------------------------------------------


def _faulty(x, positions):
    """The notebook's rope_faulty, copied: rotate_half with the table (θ_0, θ_0, θ_1, θ_1, ...), float64 angles."""
    d = x.shape[-1]
    inv_freq = 1.0 / 10000.0 ** (torch.arange(d // 2, dtype=torch.float64) * 2 / d)  # (d/2,)
    freqs = torch.outer(positions.double(), inv_freq)  # (T, d/2)
    emb = torch.stack((freqs, freqs), dim=-1).flatten(-2)  # (T, d)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    half = d // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def rope_fixed_float64_angles(x, positions):
    """The model answer of 10.3: angles in float64, cos and sin cast to x's dtype."""
    d = x.shape[-1]
    inv_freq = 1.0 / 10000.0 ** (torch.arange(d // 2, dtype=torch.float64) * 2 / d)
    freqs = torch.outer(positions.double(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    half = d // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def rope_by_pairs(x, positions):
    """Right, written pair by pair: coordinates j and j + d/2 turned by m θ_j."""
    d = x.shape[-1]
    out = x.clone()
    for j in range(d // 2):
        a = positions.double() * 10000.0 ** (-2 * j / d)  # (T,)
        c, s = torch.cos(a).to(x.dtype), torch.sin(a).to(x.dtype)
        out[:, j] = x[:, j] * c - x[:, j + d // 2] * s
        out[:, j + d // 2] = x[:, j] * s + x[:, j + d // 2] * c
    return out


def test_10_3_a_right_function_passes_and_the_reference_is_helpers():
    assert verdict("10.3", rope_by_pairs).correct and verdict("10.3", rope_fixed_float64_angles).correct
    assert "all 7 inputs" in verdict("10.3", rope_by_pairs).message
    x, p = torch.randn(4, 8, dtype=torch.float64), torch.tensor([0, 5, 9, 4000])
    cos, sin = helpers.rope_cos_sin(p, 8, dtype=torch.float64)
    assert torch.allclose(get("10.3").answer()(x, p), helpers.apply_rope(x, cos, sin, layout="half"))
    assert helpers.checks.check_rope(rope_by_pairs, layout="half", dtype=torch.float64).passed


def test_10_3_the_faulty_function_the_other_layout_and_the_sign_are_named():
    says("10.3", _faulty, "on input 3 (", "(θ_0, θ_0, θ_1, θ_1, ...) is the interleaved layout's")

    def interleaved(x, positions):
        out = rope_by_pairs(x[:, _to_half(x.shape[-1])], positions)
        return out[:, torch.argsort(_to_half(x.shape[-1]))]

    says("10.3", interleaved, "adjacent pairs")
    says("10.3", lambda x, positions: rope_by_pairs(x, -positions), "the other way")


def _to_half(d):
    """Coordinates (0, 2, 4, ..., 1, 3, 5, ...): adjacent pairs moved to the half layout's places."""
    return torch.cat((torch.arange(0, d, 2), torch.arange(1, d, 2)))


def test_10_3_calling_helpers_is_refused_and_a_float32_answer_is_told_so():
    def cheat(x, positions):
        return helpers.apply_rope(x, *helpers.rope_cos_sin(positions, x.shape[-1], dtype=x.dtype), layout="half")

    says("10.3", cheat, "calls helpers.")
    assert helpers.rope_cos_sin(2, 4)[0].shape == (2, 2)  # restored afterwards
    says("10.3", lambda x, positions: rope_by_pairs(x.float(), positions), "float32 precision")


# ----- 10.4: fix the ALiBi bias (function) -------------------------------------------------------------------


def alibi_by_rows(n_heads, n_queries, n_keys):
    """Right, row by row: the query of row i is the token at position i + Tk - Tq."""
    slopes = helpers.alibi_slopes(n_heads)
    out = torch.zeros(n_heads, n_queries, n_keys, dtype=torch.float64)
    for i in range(n_queries):
        pos = i + n_keys - n_queries
        distance = torch.clamp(pos - torch.arange(n_keys, dtype=torch.float64), min=0)  # 0 after the query
        out[:, i] = -slopes[:, None] * distance
    return out


def test_10_4_a_right_function_passes():
    found = verdict("10.4", alibi_by_rows)
    assert found.correct and "all 8 inputs" in found.message
    shapes = [(kw["n_heads"], kw["n_queries"], kw["n_keys"]) for kw in get("10.4").inputs(np.random.default_rng(0))]
    assert shapes[2] == (8, 1, 16) and all(q <= k for _, q, k in shapes)


def test_10_4_the_faulty_function_and_the_other_wrong_ideas_are_named():
    def top_left(n_heads, n_queries, n_keys):
        slopes = helpers.alibi_slopes(n_heads)[:, None, None]
        return -slopes * (torch.arange(n_queries)[:, None] - torch.arange(n_keys)[None, :]).clamp(min=0)

    says("10.4", top_left, "on input 3 (", "n_heads=8, n_queries=1, n_keys=16", "top-left")
    says("10.4", lambda h, q, k: -alibi_by_rows(h, q, k), "sign flipped")

    def symmetric(n_heads, n_queries, n_keys):
        i = torch.arange(n_queries)[:, None] + n_keys - n_queries
        return -helpers.alibi_slopes(n_heads)[:, None, None] * (i - torch.arange(n_keys)[None, :]).abs()

    says("10.4", symmetric, "the symmetric")

    def key_form(n_heads, n_queries, n_keys):  # notebook 07's +m_h j, 0 after the query
        i = torch.arange(n_queries)[:, None] + n_keys - n_queries
        j = torch.arange(n_keys)[None, :]
        bias = helpers.alibi_slopes(n_heads)[:, None, None] * j.double()
        return torch.where(j > i, torch.zeros(()), bias.expand(n_heads, n_queries, n_keys))

    says("10.4", key_form, "key form +m_h j gives", "same weights")
    says(
        "10.4",
        lambda h, q, k: (helpers.alibi_slopes(h)[:, None, None] * torch.arange(k).double()).expand(h, q, k),
        "without the 0",
    )


def test_10_4_minus_infinity_after_the_query_is_told_to_put_0():
    def with_inf(n_heads, n_queries, n_keys):
        i = torch.arange(n_queries)[:, None] + n_keys - n_queries
        j = torch.arange(n_keys)[None, :]
        bias = alibi_by_rows(n_heads, n_queries, n_keys)
        return bias.masked_fill(j > i, float("-inf"))

    says("10.4", with_inf, "NaN or infinity", "put 0 there")


def test_10_4_the_example_in_the_question_holds():
    # the notebook states alibi_fixed(8, 1, 4)[0] = [[-1.5, -1, -0.5, 0]] (head 0's slope is 1/2)
    assert get("10.4").answer()(8, 1, 4)[0].tolist() == [[-1.5, -1.0, -0.5, 0.0]]


def test_10_4_alibi_bias_is_refused_but_the_slopes_are_allowed():
    says("10.4", lambda h, q, k: helpers.alibi_bias(h, q, k, dtype=torch.float64).clamp(min=-1e9), "calls helpers")
    assert verdict("10.4", alibi_by_rows).correct  # alibi_by_rows calls helpers.alibi_slopes


@pytest.mark.parametrize(
    "name, level, kind",
    [("10.1", 1, "choice"), ("10.2", 1, "choice"), ("10.3", 2, "function"), ("10.4", 2, "function")],
)
def test_10_every_exercise_is_registered_with_its_level_and_kind(name, level, kind):
    assert get(name).level == level and get(name).kind == kind
