"""Notebook 06's exercises: the right answers, computed here independently, pass; the recorded
wrong ideas fail with their own messages; the function exercise accepts a correct implementation
written here and names the wrong ones."""

from __future__ import annotations

import math

import pytest
import torch

import helpers

verdict = helpers.exercises.verdict


# ----- 06.1 · predict: which pairs YaRN leaves untouched --------------------------------------------


def test_06_1_the_fastest_pairs_are_left_alone():
    assert verdict("06.1", "the fastest").correct
    assert verdict("06.1", " The Fastest ").correct
    assert "never complete a turn" in verdict("06.1", "the slowest").message
    assert "Position Interpolation" in verdict("06.1", "none").message
    assert "nothing would be stretched" in verdict("06.1", "all").message
    assert not verdict("06.1", "the slowest").correct and not verdict("06.1", "none").correct


# ----- 06.2 · the stretch behind an NTK-aware base ------------------------------------------------


def test_06_2_the_stretch_to_four_figures():
    right = 5 ** (62 / 64)  # b' = b s^(d/(d-2)) undone: 4.7547
    assert verdict("06.2", right).correct
    assert verdict("06.2", 4.755).correct and verdict("06.2", 4.7547).correct
    assert not verdict("06.2", 4.756).correct and not verdict("06.2", 4.754).correct
    # the right answer, put back into helpers, gives the speeds of the base 50,000
    ntk = helpers.rope_frequencies(64, 10000.0, scaling={"type": "ntk", "factor": right})[0]
    assert torch.allclose(ntk, helpers.rope_frequencies(64, 50000.0)[0], rtol=1e-12, atol=0)


@pytest.mark.parametrize(
    "wrong, says",
    [
        (5.2664, "applied to b'/b"),  # 5^(64/62)
        (5, "the exponent left out"),  # b'/b
        (1, "(d−2)//d is 0"),  # 5 ** (62 // 64)
        (5 ** (62 // 64), "use / for the exponent"),
        (4.5215, "d/2 = 32"),  # 5^(30/32)
        (4.8758, "head width of section 8"),  # 5^(126/128)
        (4.7643, "rounded to 0.97"),  # 5^0.97
    ],
)
def test_06_2_recorded_mistakes(wrong, says):
    found = verdict("06.2", wrong)
    assert not found.correct and says in found.message


def test_06_2_fewer_digits_are_told_so():
    found = verdict("06.2", 4.75)
    assert not found.correct and "agrees with the answer to 3 significant figures" in found.message


# ----- 06.3 · pairs that never complete a turn in 32k tokens ------------------------------------------


def test_06_3_twenty_two_pairs():
    count = sum(1 for i in range(64) if 2 * math.pi * 500000 ** (2 * i / 128) > 32768)
    assert count == 22
    assert verdict("06.3", count).correct and verdict("06.3", 22.0).correct


@pytest.mark.parametrize(
    "wrong, says",
    [
        (42, "do complete a turn"),
        (13, "1/θ_i as the wavelength"),
        (21, "both ends count"),
        (23, "numbered 1 to d/2"),  # i = 1 .. 64 in 500000^(2i/128)
    ],
)
def test_06_3_recorded_mistakes(wrong, says):
    found = verdict("06.3", wrong)
    assert not found.correct and says in found.message


# ----- 06.4 · the stretch at which YaRN's factor doubles a score --------------------------------------


def test_06_4_the_stretch_to_three_figures():
    right = math.exp(10 * (math.sqrt(2) - 1))  # (0.1 ln s + 1)^2 = 2: 62.94
    assert verdict("06.4", right).correct
    assert verdict("06.4", 62.9).correct and verdict("06.4", 62.94).correct
    assert not verdict("06.4", 63.0).correct and not verdict("06.4", 62.8).correct


@pytest.mark.parametrize(
    "wrong, says",
    [
        (22026.47, "so it is multiplied by a too"),  # a = 2: e^10
        (17.66, "log2"),  # 2^(10 (sqrt 2 - 1))
        (13872, "log10"),  # 10^(10 (sqrt 2 - 1))
        (148.4, "without its last term"),  # 1 + 0.2 ln s = 2: e^5
        (64, "you get by rounding up to the power of two"),
        (60.34, "rounded to 1.41"),  # e^(10 · 0.41)
    ],
)
def test_06_4_recorded_mistakes(wrong, says):
    found = verdict("06.4", wrong)
    assert not found.correct and says in found.message


# ----- 06.5 · RoPE in the half layout, written here from scratch ----------------------------------------


def _turn(x, positions, base, *, layout="half", sign=1.0, two=2):
    """RoPE from scratch: the pairs of the layout turned by sign · m θ_i, θ_i = base^(−two·i/d)."""
    d = x.shape[-1]
    out = x.clone()
    for row, m in enumerate(positions.tolist()):
        for i in range(d // 2):
            angle = sign * m * base ** (-two * i / d)
            a, b = (i, i + d // 2) if layout == "half" else (2 * i, 2 * i + 1)
            u, v = x[row, a].item(), x[row, b].item()
            out[row, a] = u * math.cos(angle) - v * math.sin(angle)
            out[row, b] = u * math.sin(angle) + v * math.cos(angle)
    return out


def _half_with_the_interleaved_table(x, positions, base):
    """The common bug: the angles repeated in place (the interleaved table), then rotate_half."""
    d = x.shape[-1]
    table = torch.tensor([[m * base ** (-2 * (j // 2) / d) for j in range(d)] for m in positions.tolist()])  # (T, d)
    return x * torch.cos(table) + torch.cat((-x[:, d // 2 :], x[:, : d // 2]), -1) * torch.sin(table)


def _half_in(dtype):
    """A correct half-layout RoPE computed in dtype (the angles and the rotation), returned in that dtype."""

    def turn(x, positions, base):
        d = x.shape[-1]
        theta = (base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)).to(dtype)  # (d/2,)
        angle = positions.to(dtype)[:, None] * theta  # (T, d/2)
        front, back = x[:, : d // 2].to(dtype), x[:, d // 2 :].to(dtype)
        return torch.cat((front * angle.cos() - back * angle.sin(), front * angle.sin() + back * angle.cos()), -1)

    return turn


def test_06_5_a_correct_implementation_passes():
    found = verdict("06.5", lambda x, positions, base: _turn(x, positions, base))
    assert found.correct and "correct on all" in found.message


@pytest.mark.parametrize(
    "wrong, says",
    [
        (lambda x, p, b: _turn(x, p, b, layout="interleaved"), "the interleaved layout gives"),
        (lambda x, p, b: _turn(x, p, b, sign=-1.0), "a turn by −mθ_i gives"),
        (_half_with_the_interleaved_table, "repeat_interleave"),
        (lambda x, p, b: _turn(x, p, b, two=1), "base^(−i/d)"),
    ],
)
def test_06_5_recorded_mistakes(wrong, says):
    found = verdict("06.5", wrong)
    assert not found.correct and says in found.message


def test_06_5_asks_for_float64_and_says_so_for_a_float32_result():
    # float32 angles, as torch.arange(d // 2) / d gives by default, with a float64 x: a float64 result
    def float32_angles(x, positions, base):
        d = x.shape[-1]
        angle = positions[:, None] * base ** (-2 * torch.arange(d // 2) / d)  # (T, d/2), float32
        front, back = x[:, : d // 2], x[:, d // 2 :]
        return torch.cat((front * angle.cos() - back * angle.sin(), front * angle.sin() + back * angle.cos()), -1)

    for implementation, dtype_named in ((float32_angles, False), (_half_in(torch.float32), True)):
        found = verdict("06.5", implementation)
        assert not found.correct and "close, but only to about float32 precision" in found.message
        assert "compute in float64" in found.message and "Hint" not in found.message
        assert ("your function returns float32" in found.message) == dtype_named
    assert verdict("06.5", _half_in(torch.float64)).correct


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_06_5_a_short_dtype_is_pointed_to_the_precision(dtype):
    found = verdict("06.5", _half_in(dtype))
    assert not found.correct and "float16 or bfloat16: compute in float64" in found.message


def test_06_5_refuses_helpers_and_reports_other_errors():
    def with_helpers(x, positions, base):
        cos, sin = helpers.rope_cos_sin(positions, x.shape[-1], base, dtype=torch.float64)
        return helpers.apply_rope(x, cos, sin, layout="half")

    assert "calls helpers.rope_cos_sin" in verdict("06.5", with_helpers).message
    assert helpers.rope_cos_sin(2, 4)[0].shape == (2, 2)  # restored after the check
    found = verdict("06.5", lambda x, positions, base: _turn(x, positions, base) * 1.01)
    assert not found.correct and "first difference on input" in found.message
    assert "not answered yet" in verdict("06.5", lambda x, positions, base: None).message


def test_06_5_refuses_the_private_paths_that_rotate_under_any_name():
    from helpers.exercises._nb06 import _half_reference
    from helpers.rope import _apply_rope_autograd

    def with_the_reference(x, positions, base):
        return _half_reference(x, positions, base)

    def with_the_autograd_path(x, positions, base):
        d = x.shape[-1]
        angle = positions.double()[:, None] * base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
        return _apply_rope_autograd(x, torch.cos(angle), torch.sin(angle), "half", d)

    def with_block_rotation(x, positions, base):
        d = x.shape[-1]
        order = torch.cat((torch.arange(d // 2)[:, None], torch.arange(d // 2, d)[:, None]), 1).flatten()
        theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
        out = torch.empty_like(x)
        for t, m in enumerate(positions.tolist()):
            out[t, order] = helpers.block_rotation(m * theta) @ x[t, order]
        return out

    for cheat, name in (
        (with_the_reference, "_half_reference"),
        (with_the_autograd_path, "_apply_rope_autograd"),
        (with_block_rotation, "block_rotation"),
    ):
        found = verdict("06.5", cheat)
        assert not found.correct and "your function calls" in found.message and name in found.message
    # each works again once the check is over
    x, positions = torch.eye(4, dtype=torch.float64), torch.tensor([1, 1, 1, 1])
    assert torch.allclose(with_the_reference(x, positions, 10000.0), _turn(x, positions, 10000.0), rtol=0, atol=1e-12)
    assert torch.allclose(with_block_rotation(x, positions, 10000.0), _turn(x, positions, 10000.0), rtol=0, atol=1e-12)


def test_06_5_names_the_fixed_inputs_in_the_hint():
    found = verdict("06.5", lambda x, positions, base: _turn(x, positions, base) + (x.shape[-1] == 4))
    assert not found.correct and "input 2" in found.message and "4 × 4 identity" in found.message
