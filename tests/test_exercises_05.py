"""Notebook 05's exercises: the right answers, computed here on their own, pass; the common wrong ones
fail with the message that names them."""

from __future__ import annotations

import math

import pytest
import torch

import helpers

verdict = helpers.exercises.verdict


def _says(name, answer, words):
    found = verdict(name, answer)
    assert not found.correct, f"{name}: {answer!r} is accepted"
    assert words in found.message, f"{name}: {answer!r} gives {found.message!r}"


# ----- 05.1 predict -------------------------------------------------------------------------------


def test_05_1_position_position_dominates_between_different_words():
    assert verdict("05.1", "position-position").correct
    assert verdict("05.1", " Position-Position ").correct
    _says("05.1", "content-content", "nearly orthogonal")
    _says("05.1", "content-position", "cross terms")
    _says("05.1", "all about equal", "inner products of different pairs")
    _says("05.1", "position-content", "not an option")


def test_05_1_the_expected_option_is_what_the_sizes_say():
    """Measured here with other random words: p-p's rms is several times the others' over m ≠ n."""
    gen = torch.Generator().manual_seed(7)
    words = torch.randn(32, 512, generator=gen, dtype=torch.float64)
    pos = helpers.sinusoidal_pe(32, 512, dtype=torch.float64)
    other = ~torch.eye(32, dtype=torch.bool)
    rms = lambda s: float(s[other].pow(2).mean().sqrt())  # noqa: E731
    pp, cc, cp = rms(pos @ pos.T), rms(words @ words.T), rms(words @ pos.T)
    assert pp > 5 * cc and pp > 5 * cp
    assert helpers.exercises.get("05.1").answer() == "position-position"


# ----- 05.2 the four terms --------------------------------------------------------------------------


def _right(x, y, p, p_prime, w_q, w_k):
    q, qp = w_q @ x, w_q @ p  # the query's word and its position, each through W_Q (columns)
    k, kp = w_k @ y, w_k @ p_prime  # the key's
    return [float(q @ k), float(q @ kp), float(qp @ k), float(qp @ kp)]


def test_05_2_a_correct_function_passes():
    found = verdict("05.2", _right)
    assert found.correct and "correct on all 8 inputs" in found.message


def test_05_2_the_reference_is_helpers_score_terms():
    gen = torch.Generator().manual_seed(3)
    x, y, p, p2 = (torch.randn(6, generator=gen, dtype=torch.float64) for _ in range(4))
    w_q, w_k = (torch.randn(3, 6, generator=gen, dtype=torch.float64) for _ in range(2))
    reference = helpers.exercises.get("05.2").answer()
    got = reference(x, y, p, p2, w_q, w_k)
    full = (w_q @ (x + p)) @ (w_k @ (y + p2))
    assert torch.allclose(got, torch.tensor(_right(x, y, p, p2, w_q, w_k), dtype=torch.float64))
    assert abs(float(got.sum()) - float(full)) < 1e-12


def test_05_2_wrong_variants_are_named():
    def swapped(x, y, p, p_prime, w_q, w_k):
        cc, cp, pc, pp = _right(x, y, p, p_prime, w_q, w_k)
        return [cc, pc, cp, pp]

    def no_transpose(x, y, p, p_prime, w_q, w_k):
        a = w_q @ w_k.T
        return torch.stack([x @ a @ y, x @ a @ p_prime, p @ a @ y, p @ a @ p_prime])

    def scaled(x, y, p, p_prime, w_q, w_k):
        return [t / math.sqrt(w_q.shape[0]) for t in _right(x, y, p, p_prime, w_q, w_k)]

    def keys_first(x, y, p, p_prime, w_q, w_k):
        a = w_k.T @ w_q
        return torch.stack([x @ a @ y, x @ a @ p_prime, p @ a @ y, p @ a @ p_prime])

    _says("05.2", swapped, "cross terms in each other's places")
    _says("05.2", no_transpose, "A = W_Q W_Kᵀ")
    _says("05.2", scaled, "1/sqrt(d_k)")
    _says("05.2", keys_first, "A = W_Kᵀ W_Q")
    _says("05.2", lambda x, y, p, p_prime, w_q, w_k: helpers.score_terms(x[None], p[None], w_q, w_k), "calls helpers")


def test_05_2_an_unnamed_bug_is_located():
    def one_off(x, y, p, p_prime, w_q, w_k):
        terms = _right(x, y, p, p_prime, w_q, w_k)
        return terms[:3] + [terms[3] + 1]

    _says("05.2", one_off, "first difference on input 1")


# ----- 05.3 p_3ᵀ A p_0 ------------------------------------------------------------------------------


def test_05_3_p3_a_p0():
    assert verdict("05.3", 0.7173).correct
    assert verdict("05.3", -2 * math.sin(3) + math.cos(0.03)).correct
    assert not verdict("05.3", 0.7172).correct and not verdict("05.3", 0.717).correct
    _says("05.3", 1.282, "Δ = n − m")
    _says("05.3", 0.8584, "without the gains")
    _says("05.3", 0.6731, "b^(−i/d)")
    _says("05.3", -1.050, "wrong pairs")


# ----- 05.4 the factor for N(0, 1) rows -------------------------------------------------------------


def test_05_4_scale_factor():
    assert verdict("05.4", 0.7071).correct and verdict("05.4", 2**-0.5).correct
    assert not verdict("05.4", 0.707).correct  # 3 figures where 4 are asked
    _says("05.4", 0.5, "λ²")
    _says("05.4", 13.86, "mixing a squared norm with a norm")
    _says("05.4", 1.414, "other way round")
    _says("05.4", 27.71, "sqrt(d_model) of the original Transformer")
    _says("05.4", 0.7073, "expected norm")


# ----- 05.5 concatenating in a decoder-only model ---------------------------------------------------


def test_05_5_decoder_only_concatenation():
    per_layer = 3 * 384 * 48 + 384 * 48 + 1536 * 48 + 48 * 1536
    assert verdict("05.5", 6 * per_layer + 8000 * 48).correct and verdict("05.5", 1_711_104).correct
    _says("05.5", 1_327_104, "output projection")
    _says("05.5", 2_153_472, "cross-attention")
    _says("05.5", 1_600_512, "leaving out W_O")
    _says("05.5", 2_095_104, "embedding table")
    _says("05.5", 1_711_105, "is not right")


@pytest.mark.parametrize("name", ["05.1", "05.2", "05.3", "05.4", "05.5"])
def test_unanswered(name):
    assert "not answered yet" in verdict(name, None).message
