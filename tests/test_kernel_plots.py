"""Notebook 04's pictures: paired clock faces, kernel curves and the kernel explorer.

Each drawing is updated, then its artists' data are compared with slow, obviously-correct
references (a loop over the hands, numerical quadrature) and with article 001 §6.5's numbers.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import quad

import helpers
from helpers.plots import default_hands, pair_color


def slow_kernel(delta: float, d: int, base: float = 10000.0) -> float:
    """(2/d) Σ_i cos(Δ θ_i), one hand at a time."""
    return sum(math.cos(delta * base ** (-2 * i / d)) for i in range(d // 2)) / (d // 2)


def quadrature(delta: float, base: float = 10000.0) -> float:
    """∫_0^1 cos(Δ b^(-t)) dt by adaptive quadrature."""
    return quad(lambda t: math.cos(delta * base ** (-t)), 0.0, 1.0, limit=400)[0]


def hand_angle(line) -> float:
    """Clockwise angle from twelve o'clock of a hand drawn from the centre, in [0, 2π)."""
    (x0, y0), (x1, y1) = line.get_xydata()
    assert (x0, y0) == (0.0, 0.0)
    return math.atan2(x1, y1) % (2 * math.pi)


@pytest.mark.parametrize("d", [2, 4, 6, 8, 16, 64, 128, 512, 1024])
def test_default_hands_are_in_range_and_have_distinct_colours(d):
    hands = default_hands(d)
    assert hands[0] == 0 and len(hands) == min(3, d // 2)
    assert all(0 <= i < d // 2 for i in hands)
    assert list(hands) == sorted(hands)
    assert len({pair_color(i) for i in hands}) == len(hands)


def test_default_hands_of_d8_are_the_articles_fast_middle_slow():
    assert default_hands(8) == (0, 1, 2)  # θ = 1, 0.1, 0.01 (article 000 Figure 1)


def test_paired_clocks_turn_each_hand_by_distance_times_speed():
    drawing = helpers.plots.paired_clocks(distances=(1, 3, 5), d=8)
    theta = [1.0, 0.1, 0.01]
    for row, delta in enumerate((1, 3, 5)):
        for k, i in enumerate((0, 1, 2)):
            ref = drawing.artists["ref_hands"][row][k]
            cmp = drawing.artists["cmp_hands"][row][k]
            assert hand_angle(ref) == pytest.approx(0.0, abs=1e-12)  # reference: twelve o'clock
            assert hand_angle(cmp) == pytest.approx((delta * theta[i]) % (2 * math.pi), abs=1e-9)
            assert cmp.get_color() == pair_color(i)
            text = drawing.artists["texts"][row][k].get_text()
            assert f"cos = {math.cos(delta * theta[i]):+.3f}" in text


def test_paired_clocks_totals_reproduce_the_six_token_table(article):
    table = article["six_token_scores"]
    distances = table["distances"][1:]  # 1 .. 5
    drawing = helpers.plots.paired_clocks(distances=distances, d=table["d"])
    for delta, printed, total in zip(distances, table["scores"][1:], drawing.artists["totals"], strict=True):
        exact = sum(math.cos(delta * 10000 ** (-2 * i / 8)) for i in range(4))
        assert f"p_m·p_n = {exact:+.3f}" in total.get_text()
        # rounded, within one unit of the printed last digit (3.15998 is printed 3.161: the article
        # added the four cosines after rounding each, 0.284 + 0.878 + 0.999 + 1.000)
        assert abs(round(exact, 3) - printed) <= 1e-3 + 1e-9


def test_paired_clocks_negative_distance_uses_its_size():
    a = helpers.plots.paired_clocks(distances=(4,), d=8)
    b = helpers.plots.paired_clocks(distances=(-4,), d=8)
    for la, lb in zip(a.artists["cmp_hands"][0], b.artists["cmp_hands"][0], strict=True):
        np.testing.assert_allclose(la.get_xydata(), lb.get_xydata())


def test_paired_clocks_update_keeps_the_rows_and_checks_input():
    drawing = helpers.plots.paired_clocks(distances=(1, 2), d=8)
    drawing.update(d=64, hands=(0, 5))
    assert not drawing.artists["cmp_hands"][0][2].get_visible()  # two hands asked, the third hidden
    theta5 = 10000 ** (-10 / 64)
    assert hand_angle(drawing.artists["cmp_hands"][1][1]) == pytest.approx(2 * theta5, abs=1e-12)
    with pytest.raises(ValueError, match="rows"):
        drawing.update(distances=(1, 2, 3))
    with pytest.raises(ValueError, match="hands"):
        drawing.update(hands=(0, 32))
    with pytest.raises(ValueError, match="even"):
        helpers.plots.paired_clocks(d=7)
    with pytest.raises(ValueError, match="base"):
        helpers.plots.paired_clocks(base=1.0)


def test_kernel_curves_match_a_loop_and_quadrature():
    drawing = helpers.plots.kernel_curves(ds=(8, 64), max_delta=300)
    lines, curves = drawing.artists["lines"], drawing.artists["continuous"]
    for delta in (1, 7, 50, 299):
        assert lines[0].get_ydata()[delta - 1] == pytest.approx(slow_kernel(delta, 8), abs=1e-12)
        assert lines[1].get_ydata()[delta - 1] == pytest.approx(slow_kernel(delta, 64), abs=1e-12)
        assert curves[0].get_ydata()[delta - 1] == pytest.approx(quadrature(delta), abs=1e-9)
    drawing.update(base=100.0)
    assert lines[1].get_ydata()[49] == pytest.approx(slow_kernel(50, 64, 100.0), abs=1e-12)
    assert curves[1].get_ydata()[49] == pytest.approx(quadrature(50, 100.0), abs=1e-9)


def test_kernel_and_clocks_follow_d_base_and_delta():
    drawing = helpers.plots.kernel_and_clocks(d=64, delta=5, max_delta=120)
    drawing.update(d=16, base=500.0, delta=37)
    kernel = drawing.artists["kernel"].get_ydata()
    assert kernel[0] == pytest.approx(1.0)
    for delta in (3, 37, 120):
        assert kernel[delta] == pytest.approx(slow_kernel(delta, 16, 500.0), abs=1e-12)
        assert drawing.artists["continuous"].get_ydata()[delta] == pytest.approx(quadrature(delta, 500.0), abs=1e-9)
    x, y = drawing.artists["marker"].get_xydata()[0]
    assert (x, y) == (37, pytest.approx(slow_kernel(37, 16, 500.0), abs=1e-12))
    hands = default_hands(16)
    for k, i in enumerate(hands):
        angle = 37 * 500.0 ** (-2 * i / 16)
        assert hand_angle(drawing.artists["cmp_hands"][k]) == pytest.approx(angle % (2 * math.pi), abs=1e-9)
        assert drawing.artists["bars"][k].get_height() == pytest.approx(math.cos(angle), abs=1e-12)
        assert drawing.artists["bars"][k].get_facecolor() == pytest.approx(pair_color(i))
    assert f"κ_d(37) = {slow_kernel(37, 16, 500.0):+.3f}" in drawing.artists["title"].get_text()
    drawing.update(d=4)  # two hands: the third bar and hand are hidden
    assert not drawing.artists["bars"][2].get_visible() and not drawing.artists["cmp_hands"][2].get_visible()
    with pytest.raises(ValueError, match="even"):
        drawing.update(d=15)


def test_kernel_explorer_slider_moves_the_marker_and_d_stays_even():
    explorer = helpers.widgets.kernel_explorer()
    assert all(d % 2 == 0 for d in explorer.controls["d"].options)
    before = explorer.image.value
    explorer.controls["delta"].value = 12
    assert explorer.drawing.params["delta"] == 12
    assert explorer.drawing.artists["marker"].get_xydata()[0][0] == 12
    assert explorer.image.value != before
    explorer.controls["base"].value = 100.0
    assert explorer.drawing.params["base"] == pytest.approx(100.0)
    y = explorer.drawing.artists["marker"].get_xydata()[0][1]
    assert y == pytest.approx(slow_kernel(12, explorer.drawing.params["d"], 100.0), abs=1e-12)


def test_kernel_figures_label_the_offset_delta_as_m_minus_n():
    drawings = [
        helpers.plots.kernel_curves(ds=(8,), max_delta=50),
        helpers.plots.kernel_and_clocks(d=8, max_delta=50),
        helpers.plots.continuous_kernel_curve(max_delta=50_000),
    ]
    labels = [ax.get_xlabel() for drawing in drawings for ax in drawing.fig.axes if ax.get_xlabel()]
    assert len(labels) >= 4
    for label in labels:
        assert "offset" in label and "m − n" in label, label
        assert "n − m" not in label and "n - m" not in label and "distance" not in label, label
    assert "offset" in helpers.widgets.kernel_explorer().controls["delta"].description


def test_continuous_kernel_curve_is_figure_2_with_its_far_dip_marked():
    from scipy.optimize import brentq
    from scipy.special import sici

    for base in (10000.0, 1000.0):
        drawing = helpers.plots.continuous_kernel_curve(base=base, max_delta=100_000)
        x, y = drawing.artists["curve"].get_xydata().T
        assert x[0] == 1 and x[-1] == 100_000
        np.testing.assert_allclose(y, helpers.continuous_kernel(x, base).numpy(), atol=1e-12)
        found = drawing.artists["found"]
        # The slow trend -Ci(Δ/b) / ln b: zero where Ci is (Δ/b = 0.6165, 3.3842), lowest at Δ/b = π/2.
        first, second = (brentq(lambda t: sici(t)[1], lo, hi) * base for lo, hi in ((0.3, 1.0), (3.0, 4.0)))
        assert abs(found["first_negative"] - first) < 3 and abs(found["positive_again"] - second) < 3
        assert abs(found["minimum_at"] - math.pi * base / 2) < 0.002 * base
        assert found["minimum"] == pytest.approx(-sici(math.pi / 2)[1] / math.log(base), abs=1e-4)
        # integer offsets: the curve is >= 0 just before the first sign change and < 0 at it
        before, at = helpers.continuous_kernel([found["first_negative"] - 1, found["first_negative"]], base).tolist()
        assert before >= 0 > at
        mx, my = drawing.artists["minimum"].get_xydata()[0]
        assert (mx, my) == (found["minimum_at"], pytest.approx(found["minimum"]))
    with pytest.raises(ValueError, match="max_delta"):
        helpers.plots.continuous_kernel_curve(max_delta=1)


def test_kernel_and_clocks_name_each_bar_by_its_hand_since_colours_repeat():
    # At d = 64 the hands are i = 0, 11, 22: blue, orange, green like pairs 0, 1, 2, so the names say which.
    drawing = helpers.plots.kernel_and_clocks(d=64, delta=5, max_delta=50)
    bars = drawing.artists["bars"]
    names = [t for t in bars[0].axes.texts if t.get_text().startswith("i = ")]
    theta = helpers.frequencies(64).numpy()
    assert len(names) == 3
    for name, bar, i in zip(sorted(names, key=lambda t: t.get_position()[0]), bars, default_hands(64), strict=True):
        assert name.get_text() == f"i = {i}, θ = {theta[i]:.3g}"
        assert name.get_color() == pytest.approx(pair_color(i))
        assert name.get_position()[0] == pytest.approx(bar.get_x() + bar.get_width() / 2)
        assert name.get_animated(), "the names must be redrawn with the bars (blitted)"
    drawing.render()
    drawing.update(base=100.0)  # θ_i change: the names follow, and the update is still blitted
    assert drawing._background is not None
    assert names[1].get_text() == f"i = 11, θ = {100.0 ** (-22 / 64):.3g}"
    drawing.update(d=4)
    assert names[2].get_text() == ""
