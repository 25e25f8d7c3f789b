"""Notebook 07's exercises: right answers, computed here independently, pass; the recorded wrong ones
fail with the message meant for them."""

from __future__ import annotations

import math

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


# ----- 07.1: the slopes for any number of heads (function) ---------------------------------------


def slopes_by_exponents(n_heads):
    """Right, written differently from the notebook: exponents 8k/n, then the odd multiples of 4/n."""
    n = 1 << (n_heads.bit_length() - 1)  # largest power of two <= n_heads
    exponents = [8 * k / n for k in range(1, n + 1)] + [4 * (2 * j + 1) / n for j in range(n_heads - n)]
    return torch.tensor([2.0**-e for e in exponents], dtype=torch.float64)


def test_07_1_a_right_function_passes_on_every_input():
    found = verdict("07.1", slopes_by_exponents)
    assert found.correct and "all 77 inputs" in found.message


def test_07_1_checks_1_to_64_heads_six_first_and_random_ones_far_beyond():
    exercise = get("07.1")
    counts = [kw["n_heads"] for kw in exercise.inputs(np.random.default_rng(exercise.seed))]
    assert counts[:4] == [1, 2, 4, 6]  # 6 is the first count where sorted and borrowed-first differ
    assert sorted(counts[:64]) == list(range(1, 65))
    assert len(counts) == 77 and all(64 < n <= 1024 for n in counts[64:74])
    assert all(1024 < n <= 65536 for n in counts[74:])
    assert any(n & (n - 1) for n in counts[64:])  # not only powers of two among the random ones


def test_07_1_the_reference_is_helpers_alibi_slopes():
    reference = get("07.1").answer()
    for n in list(range(1, 65)) + [100, 768, 1000, 40000]:
        assert torch.equal(torch.as_tensor(reference(n)), helpers.alibi_slopes(n)), n
        assert torch.allclose(slopes_by_exponents(n), helpers.alibi_slopes(n), rtol=1e-9, atol=0), n


def test_07_1_the_checkers_own_reference_and_a_table_built_beforehand_are_refused():
    says("07.1", lambda n_heads: get("07.1").expected({})(n_heads), "calls helpers.alibi_slopes")
    table = {n: helpers.alibi_slopes(n) for n in range(1, 1025)}
    says("07.1", lambda n_heads: table[n_heads], "raised KeyError", "input 75 of 77")
    says("07.1", lambda n_heads: helpers.alibi._power_of_two_slopes(n_heads), "calls helpers.alibi._power_of_two")


def test_07_1_the_direct_rule_is_named():
    def direct(n_heads):
        return [2.0 ** (-8 * k / n_heads) for k in range(1, n_heads + 1)]

    says("07.1", direct, "n_heads=6", "2^(-8k/H)")


def test_07_1_the_first_slopes_of_2n_are_named():
    def first_of_double(n_heads):
        n = 1 << (n_heads.bit_length() - 1)
        return [2.0 ** (-8 * k / n) for k in range(1, n + 1)] + [2.0 ** (-4 * k / n) for k in range(1, n_heads - n + 1)]

    says("07.1", first_of_double, "n_heads=6", "first slopes of the sequence for 2n")


def test_07_1_every_other_from_the_second_is_named():
    def repeats(n_heads):
        n = 1 << (n_heads.bit_length() - 1)
        old = [2.0 ** (-8 * k / n) for k in range(1, n + 1)]
        return old + old[: n_heads - n]

    says("07.1", repeats, "n_heads=6", "starting from its second")


def test_07_1_the_truncated_next_power_and_the_sorted_order_are_named():
    def truncated(n_heads):
        big = 1 << (n_heads - 1).bit_length()  # next power of two >= n_heads
        return [2.0 ** (-8 * k / big) for k in range(1, n_heads + 1)]

    says("07.1", truncated, "n_heads=6", "next power of two")
    says("07.1", lambda n_heads: slopes_by_exponents(n_heads).sort(descending=True).values, "n_heads=6", "sorted")


def test_07_1_the_shallowest_head_first_is_named_not_hinted_at_powers_of_two():
    """The right slopes in the opposite order fail first at 2 heads, a power of two: the message names the order,
    not the hint about head counts that are not powers of two."""

    def reversed_order_of(n_heads):
        return slopes_by_exponents(n_heads).flip(0)

    reversed_order = says("07.1", reversed_order_of, "n_heads=2", "shallowest (2^-8) first")
    ascending = says("07.1", lambda n_heads: slopes_by_exponents(n_heads).sort().values, "n_heads=2", "shallowest")
    assert "not a power of two" not in reversed_order.message + ascending.message


def test_07_1_a_float32_recipe_fails_from_186_heads_with_the_float64_advice():
    """The exercise text says BLOOM's float32 recipe (transformers' build_alibi_tensor) drifts past the check's 1e-6
    from 186 heads on: that recipe, run on the check's inputs, fails with the float32 message, not a wrong idea."""
    pytest.importorskip("transformers", minversion="5.0")
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    def bloom(n_heads):  # (H,) slopes: the bias of position 1 in a 2-token sequence
        return build_alibi_tensor(torch.ones(1, 2), n_heads, torch.float32)[:, 0, 1]

    drift = [
        (((bloom(n).double() - helpers.alibi_slopes(n)).abs() / helpers.alibi_slopes(n)).max() > 1e-6).item()
        for n in range(1, 187)
    ]
    assert drift.index(True) + 1 == 186
    says("07.1", bloom, "float32 precision", "compute in float64")


def test_07_1_mpts_float32_recipe_passes():
    """The exercise text says MPT's float32 recipe (notebook 07's gen_slopes, transformers' MPT) passes: 2^(-8k/N) in
    float32 for the next power of two N, the even k first when the head count is not a power of two."""

    def gen_slopes(n_heads):
        n = 2 ** math.ceil(math.log2(n_heads))
        slopes = 1.0 / torch.pow(2, torch.arange(1, n + 1, dtype=torch.float32) * (8 / n))
        return torch.cat([slopes[1::2], slopes[::2]])[:n_heads] if n != n_heads else slopes

    assert gen_slopes(12).dtype == torch.float32
    assert verdict("07.1", gen_slopes).correct


def test_07_1_borrowed_slopes_put_first_or_started_one_late_are_named():
    def borrowed_first(n_heads):
        n = 1 << (n_heads.bit_length() - 1)
        new = [2.0 ** -(4 * (2 * j + 1) / n) for j in range(n_heads - n)]
        return new + [2.0 ** (-8 * k / n) for k in range(1, n + 1)]

    def one_late(n_heads):
        n = 1 << (n_heads.bit_length() - 1)
        new = [2.0 ** -(4 * (2 * j + 3) / n) for j in range(n_heads - n)]
        return [2.0 ** (-8 * k / n) for k in range(1, n + 1)] + new

    says("07.1", borrowed_first, "n_heads=6", "borrowed from the sequence for 2n before the slopes of n")
    says("07.1", one_late, "n_heads=6", "from the second of them on")


def test_07_1_calling_the_helper_is_refused_and_restored():
    says("07.1", lambda n_heads: helpers.alibi_slopes(n_heads), "calls helpers")
    says("07.1", lambda n_heads: math.log(100) / helpers.alibi_decay_distance(n_heads), "calls helpers")
    assert helpers.alibi_slopes(3).tolist() == [2.0**-4, 2.0**-8, 2.0**-2]


def test_07_1_a_function_right_only_for_powers_of_two_fails_at_six_heads():
    def powers_only(n_heads):
        return slopes_by_exponents(n_heads) if n_heads & (n_heads - 1) == 0 else torch.ones(n_heads)

    says("07.1", powers_only, "input 4 of 77")


# ----- 07.2: predict where T5's last bucket begins (choice) ----------------------------------------


def test_07_2_the_last_bucket_begins_below_max_distance():
    # by hand: the smallest Δ with 8 + 8 ln(Δ/8) / ln 16 >= 7, i.e. Δ >= 8 · 16^(7/8) ≈ 90.5
    start = math.ceil(8 * 16 ** (7 / 8))
    assert start == 91 < 128
    assert verdict("07.2", "below 128").correct and verdict("07.2", " Below 128 ").correct


def test_07_2_the_wrong_predictions_are_named():
    says("07.2", "at 128", "max_distance enters the logarithmic formula as a scale")
    says("07.2", "above 128", "no offset beyond max_distance")
    says("07.2", "91", "not an option")


# ----- 07.3: the slopes of 7 heads (array, within a relative error of 0.01) -------------------------


def test_07_3_exact_and_rounded_slopes_pass():
    assert get("07.3").precision == "within a relative error of 0.01"
    assert verdict("07.3", [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125, 0.03125]).correct
    assert verdict("07.3", [0.25, 0.0625, 0.0156, 0.0039, 0.5, 0.125, 0.0313]).correct  # three figures
    assert verdict("07.3", np.array([2.0**-e for e in (2, 4, 6, 8, 1, 3, 5)])).correct


def test_07_3_more_than_one_percent_off_fails():
    says("07.3", [0.25, 0.0625, 0.0158, 0.0039, 0.5, 0.125, 0.03125], "1 of 7 entries", "index (2,)")
    says("07.3", [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125], "shape (7,)")


def test_07_3_the_recorded_wrong_lists_are_named():
    says("07.3", [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.00390625], "sorted")
    says("07.3", [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.25, 0.125], "first slopes of the 8-head sequence")
    says("07.3", [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125], "first seven slopes")
    says("07.3", [0.453, 0.205, 0.0929, 0.0421, 0.0190, 0.00863, 0.00391], "2^(-8k/H)")
    says("07.3", [0.5, 0.125, 0.03125, 0.25, 0.0625, 0.015625, 0.00390625], "borrowed slopes", "put first")
    says("07.3", [0.25, 0.0625, 0.015625, 0.00390625, 0.125, 0.03125, 0.0078125], "skipping the first new slope")


# ----- 07.4: the 0.1% distance of head 8 of 12 (number, 3 significant figures) -----------------------


def test_07_4_the_distance_passes_to_three_figures():
    assert verdict("07.4", math.sqrt(2) * math.log(1000)).correct
    assert verdict("07.4", 9.77).correct and verdict("07.4", 9.769).correct
    says("07.4", 9.76, "not right (to 3 significant figures)")
    says("07.4", 9.8, "agrees with the answer to 2 significant figures")


def test_07_4_the_recorded_wrong_distances_are_named():
    says("07.4", 6.51, "1% (ln 100)")
    says("07.4", 4.24, "base-10")
    says("07.4", 4.88, "multiplying by the slope")
    says("07.4", 442, "direct rule")
    says("07.4", 156, "16-head sequence")
    says("07.4", 1770, "counted from 0")
    says("07.4", 19.54, "slope of head 9")
    says("07.4", 14.09, "log2 in place of ln")
    says("07.4", 13.8, "the slope 1/2")


# ----- 07.5: the bucket of a key 150 tokens back, 64 buckets, max_distance 256 (integer) -------------


def test_07_5_the_bucket_passes():
    # by hand: 32 buckets for keys before the query, 16 exact; 16 + floor(16 ln(150/16) / ln(256/16))
    assert 16 + int(16 * math.log(150 / 16) / math.log(256 / 16)) == 28
    assert verdict("07.5", 28).correct and verdict("07.5", torch.tensor(28)).correct
    says("07.5", 27, "not right (a whole number)")


def test_07_5_the_recorded_wrong_buckets_are_named():
    says("07.5", 29, "rounding")
    says("07.5", 24, "equal width")
    says("07.5", 22, "ln(max_distance) in the denominator")
    says("07.5", 60, "upper half")
    says("07.5", 55, "decoder")
    says("07.5", 15, "T5's defaults")


@pytest.mark.parametrize("name", ["07.1", "07.2", "07.3", "07.4", "07.5"])
def test_07_every_exercise_is_registered_with_its_level(name):
    levels = {"07.1": 3, "07.2": 1, "07.3": 1, "07.4": 2, "07.5": 2}
    assert get(name).level == levels[name]
    assert get("07.2").predict and get("07.1").kind == "function"
