"""The exercises of notebook 02 (one clock): right answers pass, the recorded wrong ideas fail with their message.

Every right answer here is computed on its own (a literal or plain math), not taken from the registry.
"""

from __future__ import annotations

import math
import pathlib

import nbformat
import numpy as np
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
    # 44 is where |sin kθ| is smallest (kθ = 22 rad, 3.5 turns: opposite the start), not the gap 2|sin(kθ/2)|.
    assert min(range(1, 101), key=lambda k: abs(math.sin(k * 0.5))) == 44
    assert abs(44 * 0.5 / (2 * math.pi) - 3.5) < 0.01
    _rejected("02.3", 44, "|sin kθ| smallest instead of the gap")
    assert "is not right (a whole number)" in verdict("02.3", 87).message


def test_02_3_names_no_helper_and_gives_no_method():
    exercise = get("02.3")
    assert exercise.level == 1
    assert "helpers" not in exercise.hint and "period" not in exercise.hint
    assert "not right" in verdict("02.3", 63).message and "helpers" not in verdict("02.3", 63).message


# ----- 02.4 · the shift map M_k of two clocks stored sines first ----------------------------------------
# q_m = [sin mθ_0, sin mθ_1, cos mθ_0, cos mθ_1] (tensor2tensor's layout): clock i keeps its sine at i and
# its cosine at i + 2. Section 7 prints the one-clock map, so the exercise asks for this one.

NOTEBOOK = pathlib.Path(__file__).resolve().parents[1] / "notebooks" / "02_one_clock.ipynb"


def shift_map(theta_0, theta_1, k):
    """Written out entry by entry from the addition formulas, in Python floats."""
    c0, s0, c1, s1 = math.cos(k * theta_0), math.sin(k * theta_0), math.cos(k * theta_1), math.sin(k * theta_1)
    return torch.tensor(
        [[c0, 0.0, s0, 0.0], [0.0, c1, 0.0, s1], [-s0, 0.0, c0, 0.0], [0.0, -s1, 0.0, c1]], dtype=torch.float64
    )


def _table(theta_0, theta_1, n=40):
    """Rows q_0 .. q_(n-1) of the two-clock table, sines first: (n, 4)."""
    return torch.tensor(
        [
            [math.sin(m * theta_0), math.sin(m * theta_1), math.cos(m * theta_0), math.cos(m * theta_1)]
            for m in range(n)
        ],
        dtype=torch.float64,
    )


def _with_float32_trigonometry(theta_0, theta_1, k):
    """The right layout and signs, with the angles and their sines and cosines in float32 (torch's default)."""
    out = torch.zeros(4, 4)
    for i, theta in enumerate((theta_0, theta_1)):
        angle = torch.tensor(k * theta)  # float32
        c, s = torch.cos(angle), torch.sin(angle)
        out[i, i], out[i, i + 2], out[i + 2, i], out[i + 2, i + 2] = c, s, -s, c
    return out


def test_02_4_a_correct_shift_map_passes():
    found = verdict("02.4", shift_map)
    assert found.correct, found.message
    # and it really is the map: q_(m+k) = M_k q_m for the two-clock table, sines first.
    q = _table(0.37, 1.3)
    assert torch.allclose(q[:-3] @ shift_map(0.37, 1.3, 3).T, q[3:], atol=1e-12)  # rows: q_(m+3) = q_m M_3ᵀ
    assert torch.allclose(q[5:] @ shift_map(0.37, 1.3, -5).T, q[:-5], atol=1e-12)  # k = -5 turns backwards


def test_02_4_any_array_of_the_right_numbers_passes():
    # The question says so: a tensor, a NumPy array or nested lists, of any floating dtype, and float32
    # holding values computed in float64 is within the tolerance (its rounding is relative, about 6e-8).
    assert verdict("02.4", lambda *a: shift_map(*a).numpy()).correct
    assert verdict("02.4", lambda *a: shift_map(*a).tolist()).correct
    assert verdict("02.4", lambda *a: shift_map(*a).float()).correct
    assert verdict("02.4", lambda *a: shift_map(*a).numpy().astype(np.float32)).correct


def test_02_4_float32_trigonometry_is_named_at_the_entry_that_should_be_zero():
    found = _rejected("02.4", _with_float32_trigonometry, "float32 trigonometry")
    assert "kθ_0 = π" in found.message and "1e-9" in found.message and "float64" in found.message
    assert "theta_0=1.5708" in found.message and "k=2" in found.message  # the fixed case θ_0 = π/2, k = 2

    # The same idea written with NumPy's float32 is named too.
    def numpy_float32(theta_0, theta_1, k):
        out = np.zeros((4, 4), dtype=np.float32)
        for i, theta in enumerate((theta_0, theta_1)):
            angle = np.float32(theta) * np.float32(k)
            out[i, i], out[i, i + 2], out[i + 2, i], out[i + 2, i + 2] = (
                np.cos(angle),
                np.sin(angle),
                -np.sin(angle),
                np.cos(angle),
            )
        return out

    _rejected("02.4", numpy_float32, "float32 trigonometry")
    # Why it fails there: sin of float32's π is about 9e-8, not 0, while float64's is below 1e-15.
    assert 1e-8 < abs(float(torch.sin(torch.tensor(math.pi)))) < 1e-6 and abs(math.sin(math.pi)) < 1e-15


def _fitted_from_the_tables(theta_0, theta_1, k):
    """M_k found from the stated property alone: least squares of q_(m+k) on q_m over many positions m."""
    m = np.arange(0, 4000, 37, dtype=np.float64)  # 109 positions, spread so that a slow clock turns too

    def q(pos):  # (len(pos), 4): rows q_m, sines first
        return np.stack([np.sin(pos * theta_0), np.sin(pos * theta_1), np.cos(pos * theta_0), np.cos(pos * theta_1)], 1)

    m_k_transposed, *_ = np.linalg.lstsq(q(m), q(m + k), rcond=None)  # rows: q_(m+k) = q_m M_kᵀ
    return m_k_transposed.T


def test_02_4_a_map_fitted_to_the_stated_property_passes():
    # The property q_(m+k) = M_k q_m fixes M_k only where the q_m span all four dimensions. Every fixed case
    # does (a fixed case θ_0 = π would not: sin mπ = 0 at every whole m, rank 3, column 0 free), so an answer
    # fitted to the tables by least squares is accepted.
    exercise = get("02.4")
    for case in exercise.inputs(np.random.default_rng(exercise.seed))[:6]:
        t0, t1 = case["theta_0"], case["theta_1"]
        table = _table(t0, t1, n=200).numpy()
        assert np.linalg.matrix_rank(table, tol=1e-6) == 4, case
    assert np.linalg.matrix_rank(_table(math.pi, 0.3, n=200).numpy(), tol=1e-6) == 3  # why not θ_0 = π
    found = verdict("02.4", _fitted_from_the_tables)
    assert found.correct, found.message


def test_02_4_the_question_states_the_tolerance_the_check_uses():
    exercise = get("02.4")
    assert (exercise.atol, exercise.rtol) == (1e-9, 1e-6)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    question = next(c.source for c in notebook.cells if c.source.startswith("### Exercise 4 "))
    assert "`1e-9 + 1e-6 × |expected entry|`" in question
    assert "beyond float32's reach" not in question and "as a float64 tensor" not in question


def test_02_4_section_7_does_not_print_the_answer():
    # Section 7 prints the one-clock M_3 for θ = 0.37; the exercise's answer is a (4, 4) matrix that no
    # cell before it prints, and its first fixed case is not section 7's.
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    index = next(i for i, c in enumerate(notebook.cells) if c.source.startswith("### Exercise 4 "))
    first = get("02.4").inputs(np.random.default_rng(0))[0]
    printed = "".join(
        o.get("text", "") for c in notebook.cells[:index] if c.cell_type == "code" for o in c.get("outputs", [])
    )
    answer = shift_map(*first.values())
    assert str(answer.numpy().round(4)) not in printed
    assert (first["theta_0"], first["k"]) != (0.37, 3) and (first["theta_1"], first["k"]) != (0.37, 3)


def test_02_4_the_wrong_variants_are_named():
    def cos_sin_order(theta_0, theta_1, k):  # R(kθ) per clock: right for [cos, sin], wrong here
        return shift_map(theta_0, theta_1, -k)

    def blocks_on_the_diagonal(theta_0, theta_1, k):  # the interleaved layout's map
        order = [0, 2, 1, 3]
        return shift_map(theta_0, theta_1, k)[order][:, order]

    def one_speed(theta_0, theta_1, k):
        return shift_map(theta_0, theta_0, k)

    def speeds_swapped(theta_0, theta_1, k):
        return shift_map(theta_1, theta_0, k)

    def one_token(theta_0, theta_1, k):
        return shift_map(theta_0, theta_1, 1)

    def degrees(theta_0, theta_1, k):
        return shift_map(math.radians(theta_0), math.radians(theta_1), k)

    _rejected("02.4", cos_sin_order, "[cos, sin] order")
    _rejected("02.4", blocks_on_the_diagonal, "interleaved layout")
    _rejected("02.4", one_speed, "both clocks at the speed θ_0")
    _rejected("02.4", speeds_swapped, "speeds swapped")
    _rejected("02.4", one_token, "shift by one token")
    _rejected("02.4", degrees, "degrees")


def test_02_4_cos_and_sin_swapped_inside_is_named():
    def swapped(theta_0, theta_1, k):
        out = torch.zeros(4, 4, dtype=torch.float64)
        for i, theta in enumerate((theta_0, theta_1)):
            c, s = math.sin(k * theta), math.cos(k * theta)  # swapped
            out[i, i], out[i, i + 2], out[i + 2, i], out[i + 2, i + 2] = c, s, -s, c
        return out

    _rejected("02.4", swapped, "cos and sin swapped")


def _clock_slots(i):
    """Row and column indices of clock i's 2 × 2 block, sines first: (2, 1) and (2,)."""
    slots = torch.tensor([i, i + 2])
    return slots[:, None], slots


def _right_but_for_the_ban(helped):
    """The ban is what rejects ``helped``: with the helpers allowed, it is a right answer."""
    exercise = get("02.4")
    forbid, exercise.forbid = exercise.forbid, ()
    try:
        assert verdict("02.4", helped).correct, helped.__name__
    finally:
        exercise.forbid = forbid


def test_02_4_the_helpers_are_turned_off_while_it_runs():
    def via_shift_matrix(theta_0, theta_1, k):  # each clock's block from helpers, put in its slots
        out = torch.zeros(4, 4, dtype=torch.float64)
        for i, theta in enumerate((theta_0, theta_1)):
            out[_clock_slots(i)] = helpers.shift_matrix(k * theta, 2)
        return out

    found = _rejected("02.4", via_shift_matrix, "helpers.shift_matrix")
    assert "without it" in found.message
    order = [0, 2, 1, 3]  # interleaved -> sines first

    def via_block_rotation(theta_0, theta_1, k):
        return helpers.block_rotation(torch.tensor([-k * theta_0, -k * theta_1], dtype=torch.float64))[order][:, order]

    _rejected("02.4", via_block_rotation, "helpers.block_rotation")
    assert torch.allclose(helpers.shift_matrix(0.0, 2), torch.eye(2, dtype=torch.float64))  # restored
    for helped in (via_shift_matrix, via_block_rotation):
        _right_but_for_the_ban(helped)


def test_02_4_edge_cases_are_checked():
    # A map that ignores the sign of k is right for k >= 0 only: the fixed case k = -3 catches it, and it
    # is named as such, not as the [cos, sin] order (which gives the same matrix for k < 0).
    found = _rejected("02.4", lambda theta_0, theta_1, k: shift_map(theta_0, theta_1, abs(k)), "ignores the sign of k")
    assert "on input 3 " in found.message and "k=-3" in found.message
    assert "[cos, sin] order" not in found.message


def test_02_4_the_rope_helpers_are_turned_off_too():
    order = [0, 2, 1, 3]  # interleaved -> sines first

    def via_apply_rope(theta_0, theta_1, k):
        # The "half" layout pairs x_j with x_(j+2): rotating the four basis vectors gives M_k's rows.
        angle = torch.tensor([[k * theta_0, k * theta_1]], dtype=torch.float64)  # (1, 2): one table row
        basis = torch.eye(4, dtype=torch.float64)  # (4, 4): four tokens, all at table row 0
        return helpers.apply_rope(
            basis, torch.cos(angle), torch.sin(angle), layout="half", positions=torch.zeros(4, dtype=torch.long)
        )

    _rejected("02.4", via_apply_rope, "helpers.apply_rope")

    def via_rope_tables(theta_0, theta_1, k):
        # d = 2 has speed 1, so positions kθ_0 and kθ_1 give the two clocks' cosines and sines.
        angles = torch.tensor([k * theta_0, k * theta_1], dtype=torch.float64)
        cos, sin = helpers.rope_cos_sin(angles, 2, base=10.0, dtype=torch.float64)  # (2, 1) each
        out = torch.zeros(4, 4, dtype=torch.float64)
        for i in range(2):
            c, s = float(cos[i, 0]), float(sin[i, 0])
            out[_clock_slots(i)] = torch.tensor([[c, s], [-s, c]], dtype=torch.float64)
        return out

    _rejected("02.4", via_rope_tables, "helpers.rope_cos_sin")

    def via_commuting(theta_0, theta_1, k):
        one = torch.tensor([1.0, 1.0], dtype=torch.float64)
        speeds = torch.tensor([-k * theta_0, -k * theta_1], dtype=torch.float64)
        return helpers.rotation_commuting_matrix(one, speeds)[order][:, order]

    _rejected("02.4", via_commuting, "helpers.rotation_commuting_matrix")
    assert callable(helpers.apply_rope) and helpers.rope_cos_sin(torch.arange(2), 2)[0].shape[-1] >= 1  # restored
    for helped in (via_apply_rope, via_rope_tables, via_commuting):
        _right_but_for_the_ban(helped)


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
