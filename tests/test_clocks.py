"""Clock drawings and explorers (notebooks 02 and 03): update them, then read the artists' data back."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import helpers
from helpers.plots import binary_counter, clock_hands, many_clocks, one_clock, pe_dimensions, period_schedules


def test_one_clock_hand_curves_and_collision_follow_theta_and_m():
    drawing = one_clock(theta=math.pi / 4, m=3)
    hand = drawing.artists["hand"]
    np.testing.assert_allclose(
        np.asarray(hand.get_data())[:, 1], [math.cos(3 * math.pi / 4), math.sin(3 * math.pi / 4)]
    )
    assert drawing.artists["collision"]["k"] == 8  # period 8 tokens
    drawing.update(theta=2 * math.pi / 10, m=7)
    x, y = (np.asarray(v)[1] for v in hand.get_data())
    assert (x, y) == pytest.approx((math.cos(7 * 2 * math.pi / 10), math.sin(7 * 2 * math.pi / 10)))
    positions = np.arange(16)
    np.testing.assert_allclose(drawing.artists["cos_line"].get_ydata(), np.cos(positions * 2 * math.pi / 10))
    np.testing.assert_allclose(drawing.artists["sin_line"].get_ydata(), np.sin(positions * 2 * math.pi / 10))
    assert list(drawing.artists["marker"].get_xdata()) == [7, 7]
    assert drawing.artists["collision"]["k"] == 10
    assert "k = 10" in drawing.artists["note"].get_text()
    # The ring marks p_(m+k), on top of p_m for an exact return.
    ring = np.asarray(drawing.artists["ring"].get_data())[:, 0]
    assert ring == pytest.approx((x, y))


def test_one_clock_draws_continuous_curves_through_the_integer_dots():
    drawing = one_clock(theta=2.5, m=3, n_positions=12)
    for name, fn in (("cos_curve", np.cos), ("sin_curve", np.sin)):
        x, y = (np.asarray(v) for v in drawing.artists[name].get_data())
        assert len(x) >= 10 * 12 and x[0] == 0 and x[-1] == pytest.approx(11)  # many points between integers
        np.testing.assert_allclose(y, fn(2.5 * x))
        assert np.any(np.abs(x - np.round(x)) > 0.2)  # not only the integer positions
    # The dots sit on the curves at the integer positions only, and carry no connecting line.
    np.testing.assert_allclose(drawing.artists["cos_line"].get_xdata(), np.arange(12))
    assert drawing.artists["cos_line"].get_linestyle() == "None"
    drawing.update(m=30)  # the curves follow the wider x range
    assert drawing.artists["sin_curve"].get_xdata()[-1] == pytest.approx(30)


def test_one_clock_exact_returns_report_the_first_one_and_call_it_a_gap():
    drawing = one_clock(theta=math.pi, m=1)
    assert drawing.artists["collision"]["k"] == 2  # every even k returns: the first one is reported
    assert "k = 2" in drawing.artists["note"].get_text() and "gap" in drawing.artists["note"].get_text()
    drawing.update(theta=0.6 * math.pi)  # period 3.33 tokens, back exactly after 10
    assert drawing.artists["collision"]["k"] == 10


def test_one_clock_note_says_exact_return_only_below_the_tolerance_and_caption_names_the_range():
    drawing = one_clock(theta=2 * math.pi / 10, m=3, n_positions=13)
    note = drawing.artists["note"].get_text()
    assert "k = 10, gap 0 (exact return, below 1e-9)" in note and "0.0000" not in note
    assert "positions 0 .. 12" in drawing.artists["caption"].get_text()
    drawing.update(theta=2 * math.pi * 0.333, n_positions=16)  # near a third of a turn, not exact
    note = drawing.artists["note"].get_text()
    assert "k = 3, gap 0.0063" in note and "exact" not in note
    assert "positions 0 .. 15" in drawing.artists["caption"].get_text()


def test_one_clock_explorer_radian_slider_starts_where_the_turns_slider_does():
    explorer = helpers.widgets.one_clock_explorer()
    assert explorer.controls["theta"].min == pytest.approx(2 * math.pi * explorer.turns.min)
    assert explorer.controls["theta"].max == pytest.approx(2 * math.pi * explorer.turns.max)


def test_one_clock_collision_matches_brute_force_when_period_is_not_whole():
    drawing = one_clock(theta=1.0, m=0, max_shift=100)
    brute = min(range(1, 101), key=lambda k: math.hypot(math.cos(k) - 1, math.sin(k)))
    assert drawing.artists["collision"]["k"] == brute
    assert drawing.artists["collision"]["distance"] == pytest.approx(math.hypot(math.cos(brute) - 1, math.sin(brute)))


def test_one_clock_renders_after_updates_that_change_the_x_range():
    drawing = one_clock()
    first = drawing.render().copy()
    drawing.update(m=40)  # beyond n_positions: the curve axis widens
    assert drawing.fig.axes[1].get_xlim()[1] >= 40
    assert not np.array_equal(first, drawing.render())
    assert drawing.png().startswith(b"\x89PNG")


def test_one_clock_rejects_bad_parameters():
    with pytest.raises(ValueError):
        one_clock(theta=0.0)
    with pytest.raises(TypeError):
        one_clock(m=1.5)
    with pytest.raises(TypeError):
        one_clock().update(speed=1.0)


def test_clock_hands_point_where_the_article_says():
    drawing = clock_hands(math.pi / 4, (0, 1, 2, 3))
    tips = [np.asarray(line.get_data())[:, 1] for line in drawing.artists["hands"]]
    s = math.sqrt(2) / 2
    np.testing.assert_allclose(tips, [[1, 0], [s, s], [0, 1], [-s, s]], atol=1e-12)


def test_many_clocks_heat_map_periods_and_distance_follow_base_and_d():
    drawing = many_clocks(base=10000.0, d=8, n_positions=64, max_shift=200)
    np.testing.assert_allclose(drawing.artists["image"].get_array(), helpers.sinusoidal_pe(64, 8).numpy(), atol=1e-6)
    periods = drawing.artists["periods"].get_offsets()[:, 1]
    np.testing.assert_allclose(periods, [2 * math.pi * 10**k for k in range(4)], rtol=1e-12)
    # d = 8: both fast hands return together at 63 tokens, closer than neighbours.
    assert drawing.artists["found"]["shift"] == 63
    drawing.update(base=100.0, d=16)
    assert drawing.artists["image"].get_array().shape == (64, 16)
    theta = helpers.frequencies(16, 100.0)
    np.testing.assert_allclose(drawing.artists["periods"].get_offsets()[:, 1], 2 * math.pi / theta.numpy())
    expected = helpers.shift_distance(torch.arange(1, 200), theta).numpy() / math.sqrt(8)
    np.testing.assert_allclose(drawing.artists["curve"].get_ydata(), expected, rtol=1e-5, atol=1e-6)  # float32 sines
    best = int(np.argmin(expected))
    assert drawing.artists["found"]["shift"] == best + 1
    assert np.asarray(drawing.artists["closest"].get_data())[:, 0] == pytest.approx((best + 1, expected[best]))


def test_many_clocks_distance_never_exceeds_twice_the_norm():
    drawing = many_clocks(base=10.0, d=4, n_positions=32, max_shift=500)
    distance = drawing.artists["curve"].get_ydata()
    assert np.all(distance >= 0) and np.all(distance <= 2 + 1e-12)


def test_static_clock_figures_hold_their_data():
    lines = pe_dimensions(128, 16, pairs=(0, 3)).artists["lines"]
    np.testing.assert_allclose(lines[1].get_ydata(), helpers.sinusoidal_pe(128, 16).numpy()[:, 6])
    counts = period_schedules(64, 10000.0).artists
    assert counts["geometric_count"].sum() == counts["arithmetic_count"].sum() == 32
    # Geometric periods spread over every decade; the arithmetic ones crowd the short end.
    assert counts["geometric_count"].min() >= 2 and counts["arithmetic_count"][:2].sum() >= 28
    assert binary_counter(3, 8).png().startswith(b"\x89PNG")
    with pytest.raises(ValueError):
        pe_dimensions(64, 8, pairs=(4,))


def test_explorers_move_their_drawings():
    explorer = helpers.widgets.one_clock_explorer()
    explorer.controls["theta"].value = 1.0
    assert explorer.drawing.params["theta"] == 1.0 and explorer.last_update_s is not None
    assert explorer.turns.value == pytest.approx(1.0 / (2 * math.pi))  # the turns slider follows θ


@pytest.mark.parametrize("turns, k", [(0.1, 10), (0.3, 10), (0.25, 4), (0.5, 2), (0.125, 8)])
def test_one_clock_explorer_reaches_exact_returns_in_turns(turns, k):
    # θ set as a fraction of a turn lands exactly on 2π p/q, which a slider in radians cannot.
    explorer = helpers.widgets.one_clock_explorer()
    assert explorer.turns in explorer.children[0].children  # shown beside the θ slider
    step = explorer.turns.step
    assert abs(turns / step - round(turns / step)) < 1e-9  # a value the slider can take
    explorer.turns.value = turns
    assert explorer.drawing.params["theta"] == 2 * math.pi * turns
    assert explorer.controls["theta"].value == 2 * math.pi * turns
    assert explorer.drawing.artists["collision"]["k"] == k
    assert explorer.drawing.artists["collision"]["distance"] < 1e-9
    assert "k = %d, gap 0 (exact return, below 1e-9)" % k in explorer.drawing.artists["note"].get_text()


def test_many_clocks_explorer_moves_its_drawing():
    explorer = helpers.widgets.many_clocks_explorer()
    controls = explorer.controls
    assert (controls["base"].min, controls["base"].max) == (1, 6)  # 10 .. 1,000,000 as powers of ten
    assert list(controls["d"].options) == list(range(4, 257, 2))
    controls["d"].value = 16
    assert explorer.drawing.artists["image"].get_array().shape[1] == 16
    controls["base"].value = 100.0
    assert explorer.drawing.params["base"] == pytest.approx(100.0)


def test_binary_counter_clocks_peak_in_the_middle_of_each_on_run():
    clocks = binary_counter(4, 16).artists["clocks"]
    for j, line in enumerate(clocks):
        x, y = line.get_xdata(), line.get_ydata()
        first_period = x <= 2 ** (j + 1) - 0.5  # one "off" run, then one "on" run: 2^j .. 2^(j+1) - 1
        peak = x[first_period][np.argmax(y[first_period])]
        assert peak == pytest.approx(1.5 * 2**j - 0.5, abs=0.06)  # the middle of the run, on the fine grid
    x, y = clocks[0].get_xdata(), clocks[0].get_ydata()
    on_integers = np.isclose(x, np.round(x), atol=1e-9)
    np.testing.assert_allclose(y[on_integers], np.round(x[on_integers]) % 2, atol=1e-12)  # bit 0 exactly


def test_many_clocks_title_gives_the_gap_on_the_axis_scale():
    drawing = many_clocks(base=10000.0, d=64, n_positions=32, max_shift=300)
    found = drawing.artists["found"]
    _, dot = np.asarray(drawing.artists["closest"].get_data())[:, 0]
    assert dot == pytest.approx(found["distance"] / math.sqrt(32))
    assert f"gap / norm {dot:.3f}" in drawing.fig.axes[-1].get_title() or any(
        f"gap / norm {dot:.3f}" in ax.get_title() for ax in drawing.fig.axes
    )
    assert f"gap {found['distance']:.3f}" not in " ".join(ax.get_title() for ax in drawing.fig.axes)
