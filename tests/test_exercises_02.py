"""The exercises of notebook 02 (one clock): right answers pass, the recorded wrong ideas fail with their message.

Every right answer here is computed on its own (a literal or plain math), not taken from the registry.
"""

from __future__ import annotations

import math

import pytest
import torch

import helpers
from helpers.exercises import get, verdict


def _rejected(name, answer, words):
    found = verdict(name, answer)
    assert not found.correct, f"{name}: {answer!r} is accepted"
    assert words in found.message, f"{name}: {answer!r} gives {found.message!r}"
    return found


# ----- 02.1 · predict: θ/2π = 0.35 comes back exactly after 20 tokens ------------------------------------


def test_02_1_the_hand_comes_back_after_twenty_tokens():
    assert get("02.1").predict and get("02.1").params == {"turns": 0.35, "max_shift": 100}
    assert verdict("02.1", "after 20 tokens").correct
    assert verdict("02.1", "After 20 tokens ").correct
    _rejected("02.1", "never", "does not rule out an exact return")
    _rejected("02.1", "after 3 tokens", "1.05 turns")
    _rejected("02.1", "after 7 tokens", "2.45 turns")
    assert "not an option" in verdict("02.1", "after 10 tokens").message


def test_02_1_the_first_exact_return_is_counted_independently():
    # 0.35 k = 7k/20 turns is whole first at k = 20; below 1e-9 nowhere before it.
    gaps = [2 * abs(math.sin(math.pi * 0.35 * k)) for k in range(1, 101)]
    first = next(k for k, g in zip(range(1, 101), gaps, strict=True) if g < 1e-9)
    assert first == 20 and verdict("02.1", f"after {first} tokens").correct


def test_02_1_is_not_the_example_the_helpers_docstring_gives():
    # helpers.nearest_collision's docstring works out θ = 0.6π (first return after 10 tokens).
    assert "0.6π" in helpers.nearest_collision.__doc__
    assert get("02.1").params["turns"] != 0.3 and "after 10 tokens" not in get("02.1").options


# ----- 02.2 · p_5ᵀ p_12 at θ = 0.3 ------------------------------------------------------------------------


def test_02_2_the_inner_product_to_three_figures():
    theta, m, n = 0.3, 5, 12
    p_m = (math.cos(m * theta), math.sin(m * theta))
    p_n = (math.cos(n * theta), math.sin(n * theta))
    right = p_m[0] * p_n[0] + p_m[1] * p_n[1]
    assert abs(right - (-0.50485)) < 1e-5
    for answer in (right, -0.505, -0.5048, torch.tensor(-0.505)):
        assert verdict("02.2", answer).correct, answer
    for answer in (-0.5, -0.51, -0.506):
        assert not verdict("02.2", answer).correct, answer


def test_02_2_the_recorded_mistakes_are_named():
    _rejected("02.2", 0.378, "sum of the two positions")  # cos((5 + 12) · 0.3)
    _rejected("02.2", 0.505, "treated as odd")  # -cos(-7 · 0.3)
    _rejected("02.2", -0.863, "direction reading")  # sin(-7 · 0.3)
    _rejected("02.2", 0.999, "degrees")  # cos(2.1°)
    _rejected("02.2", 0.754, "offset in tokens alone")  # cos(7)
    _rejected("02.2", -0.227, "one token too short")  # cos(6 · 0.3)
    _rejected("02.2", -0.0634, "product of the two cosines")
    _rejected("02.2", -0.441, "product of the two sines")  # sin(5 · 0.3) sin(12 · 0.3)


def test_02_2_too_few_digits_are_told_so():
    assert "agrees with the answer to 2 significant figures" in verdict("02.2", -0.5).message


def test_02_2_the_old_ambiguity_is_gone():
    # The old question (θ = 2π/12, p_5·p_9 = -0.5) also accepted cos(8θ) and cos(16θ). Here the offsets
    # 7, 17 (= m + n) and 14 (twice the offset) give different values.
    theta = 0.3
    values = {round(math.cos(k * theta), 3) for k in (7, 17, 14, 6, 8)}
    assert len(values) == 5


# ----- 02.3 · closest return of θ = 0.5 within 100 tokens ------------------------------------------------


def test_02_3_the_closest_return():
    best = min(range(1, 101), key=lambda k: abs(math.sin(k * 0.5 / 2)))
    assert best == 88
    assert verdict("02.3", 88).correct and verdict("02.3", 88.0).correct
    _rejected("02.3", 13, "rounding a single period")
    _rejected("02.3", 12, "cutting a single period down")
    _rejected("02.3", 25, "two periods rounded")
    _rejected("02.3", 7, "counting the turns")
    _rejected("02.3", 44, "θ = 1 clock")
    assert "is not right (a whole number)" in verdict("02.3", 87).message


def test_02_3_names_no_helper_and_gives_no_method():
    exercise = get("02.3")
    assert exercise.level == 1
    assert "helpers" not in exercise.hint and "period" not in exercise.hint
    assert "not right" in verdict("02.3", 63).message and "helpers" not in verdict("02.3", 63).message


# ----- 02.4 · the shift map M_k, [sin, cos] order --------------------------------------------------------


def shift_map(theta, k):
    c, s = math.cos(k * theta), math.sin(k * theta)
    return torch.tensor([[c, s], [-s, c]], dtype=torch.float64)


def test_02_4_a_correct_shift_map_passes():
    found = verdict("02.4", shift_map)
    assert found.correct, found.message
    # and it really is the map: q_(m+k) = M_k q_m for the pair [sin mθ, cos mθ].
    theta = 0.37
    q = torch.tensor([[math.sin(m * theta), math.cos(m * theta)] for m in range(40)], dtype=torch.float64)
    assert torch.allclose(q[:-3] @ shift_map(theta, 3).T, q[3:], atol=1e-12)  # rows: q_(m+3) = q_m M_3ᵀ
    assert torch.allclose(q[5:] @ shift_map(theta, -5).T, q[:-5], atol=1e-12)  # k = -5 turns backwards


def test_02_4_a_numpy_or_list_answer_passes():
    assert verdict("02.4", lambda theta, k: shift_map(theta, k).numpy()).correct
    assert verdict("02.4", lambda theta, k: shift_map(theta, k).tolist()).correct


def test_02_4_the_wrong_variants_are_named():
    def cos_sin_order(theta, k):  # R(kθ): right for [cos, sin], wrong here
        c, s = math.cos(k * theta), math.sin(k * theta)
        return torch.tensor([[c, -s], [s, c]], dtype=torch.float64)

    def one_token(theta, k):
        return shift_map(theta, 1)

    def degrees(theta, k):
        return shift_map(math.radians(theta), k)

    def swapped(theta, k):
        c, s = math.cos(k * theta), math.sin(k * theta)
        return torch.tensor([[s, c], [-c, s]], dtype=torch.float64)

    _rejected("02.4", cos_sin_order, "[cos, sin] order")
    _rejected("02.4", one_token, "shift by one token")
    _rejected("02.4", degrees, "degrees")
    _rejected("02.4", swapped, "cos and sin swapped")


def test_02_4_the_helpers_are_turned_off_while_it_runs():
    found = _rejected("02.4", lambda theta, k: helpers.shift_matrix(k * theta, 2), "helpers.shift_matrix")
    assert "without it" in found.message
    _rejected(
        "02.4",
        lambda theta, k: helpers.block_rotation(torch.tensor([-k * theta], dtype=torch.float64)),
        "helpers.block_rotation",
    )
    assert torch.allclose(helpers.shift_matrix(0.0, 2), torch.eye(2, dtype=torch.float64))  # restored


def test_02_4_edge_cases_are_checked():
    # A map that ignores the sign of k is right for k >= 0 only: the fixed case k = -3 catches it, and it
    # is named as such, not as the [cos, sin] order (which gives the same matrix for k < 0).
    found = _rejected("02.4", lambda theta, k: shift_map(theta, abs(k)), "ignores the sign of k")
    assert "on input 3 " in found.message and "k=-3" in found.message
    assert "[cos, sin] order" not in found.message


def test_02_4_a_float32_intermediate_is_told_to_compute_in_float64():
    def through_float32(theta, k):
        angle = float(torch.tensor(k * theta))  # float32 angle, then float64 matrix
        return shift_map(angle, 1)

    found = _rejected("02.4", through_float32, "float32 precision")
    assert "compute in float64" in found.message


def test_02_4_the_rope_helpers_are_turned_off_too():
    def via_apply_rope(theta, k):
        angle = torch.tensor([[k * theta]], dtype=torch.float64)
        return helpers.apply_rope(torch.eye(2, dtype=torch.float64), torch.cos(angle), torch.sin(angle))

    _rejected("02.4", via_apply_rope, "helpers.apply_rope")

    def via_rope_tables(theta, k):
        cos, sin = helpers.rope_cos_sin(
            torch.tensor([k * theta], dtype=torch.float64), 2, base=10.0, dtype=torch.float64
        )
        c, s = float(cos.flatten()[0]), float(sin.flatten()[0])
        return torch.tensor([[c, s], [-s, c]], dtype=torch.float64)

    _rejected("02.4", via_rope_tables, "helpers.rope_cos_sin")

    def via_commuting(theta, k):
        one = torch.tensor([1.0], dtype=torch.float64)
        return helpers.rotation_commuting_matrix(one, torch.tensor([-k * theta], dtype=torch.float64))

    _rejected("02.4", via_commuting, "helpers.rotation_commuting_matrix")
    assert callable(helpers.apply_rope) and helpers.rope_cos_sin(torch.arange(2), 2)[0].shape[-1] >= 1  # restored


# ----- 02.5 · the first offset beating k = 710 for θ = 1 -------------------------------------------------


def test_02_5_the_next_convergent():
    # 2π ≈ 103993/16551 is the next convergent after 710/113; its miss is smaller than 710's.
    miss = lambda k, j: abs(k - 2 * math.pi * j)  # noqa: E731
    assert miss(103993, 16551) < miss(710, 113) / 3
    assert verdict("02.5", 103993).correct
    _rejected("02.5", 1420, "doubling 710")
    _rejected("02.5", 355, "opposite its start")
    _rejected("02.5", 16551, "counting the turns")
    _rejected("02.5", 207986, "not the first one")
    # 52163/8302 is closer to 2π as a fraction than 710/113, but its miss |k - 2πj| is about 73 times larger.
    assert abs(52163 / 8302 - 2 * math.pi) < abs(710 / 113 - 2 * math.pi) and miss(52163, 8302) > 50 * miss(710, 113)
    _rejected("02.5", 52163, "closer to 2π than 710/113")
    assert "is not right (a whole number)" in verdict("02.5", 104703).message


@pytest.mark.parametrize("name", ["02.1", "02.2", "02.3", "02.4", "02.5"])
def test_02_placeholders_say_not_answered(name):
    assert "not answered yet" in verdict(name, None).message
