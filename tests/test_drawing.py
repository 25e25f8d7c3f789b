"""The interactive pattern: a drawing updates in place, and an explorer's slider drives it (no browser)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import helpers
from helpers.plots import FULL, Drawing, new_figure


def test_one_clock_update_moves_the_artists():
    drawing = helpers.plots.one_clock(theta=math.pi / 4, m=2)
    hand = drawing.artists["hand"]
    np.testing.assert_allclose(hand.get_xydata()[1], [0.0, 1.0], atol=1e-12)  # 2 * 45 degrees
    drawing.update(theta=math.pi / 6)
    np.testing.assert_allclose(hand.get_xydata()[1], [0.5, math.sqrt(3) / 2], atol=1e-12)  # article 003 section 7.5
    cos_line = drawing.artists["cos_line"]
    np.testing.assert_allclose(cos_line.get_ydata(), np.cos(np.arange(16) * math.pi / 6))
    assert repr(drawing).startswith("one_clock(theta=0.5236, m=2, n_positions=16")


def test_png_is_a_picture_that_changes_with_the_parameters():
    drawing = helpers.plots.one_clock()
    first = drawing.png()
    assert first.startswith(b"\x89PNG")
    assert drawing.png() == first  # same state, same pixels (the blitted frame equals the full one)
    drawing.update(m=5)
    assert drawing.png() != first
    drawing.update(m=drawing.params["m"])  # no-op keeps the picture
    full = drawing.render().copy()
    drawing._background = None  # force a full redraw: blitting must not change a pixel
    np.testing.assert_array_equal(drawing.render(), full)


def test_explorer_slider_drives_the_drawing():
    explorer = helpers.widgets.one_clock_explorer()
    before = explorer.image.value
    hand = explorer.drawing.artists["hand"]
    explorer.controls["m"].value = 6
    assert explorer.drawing.params["m"] == 6
    theta = explorer.controls["theta"].value
    np.testing.assert_allclose(hand.get_xydata()[1], [math.cos(6 * theta), math.sin(6 * theta)], atol=1e-12)
    assert explorer.image.value != before and explorer.last_update_s > 0


def test_full_redraw_is_requested_by_returning_full():
    fig, ax = new_figure(3, 2)
    (line,) = ax.plot([0, 1], [0, 1])
    calls = []

    def update(scale):
        line.set_ydata([0, scale])
        calls.append(scale)
        if scale > 1:
            ax.set_ylim(0, scale)
            return FULL
        return None

    drawing = Drawing("line", fig, update, {"scale": 1.0}, {"line": line}, animated=[line])
    drawing.png()
    drawing.update(scale=0.5)
    assert drawing._background is not None
    drawing.update(scale=3.0)
    assert drawing._background is None and ax.get_ylim() == (0.0, 3.0)
    with pytest.raises(TypeError, match="speed"):
        drawing.update(speed=2)


def test_explorer_rejects_controls_the_drawing_does_not_have():
    import ipywidgets

    with pytest.raises(TypeError, match="not parameters"):
        helpers.widgets.Explorer(helpers.plots.one_clock(), {"speed": ipywidgets.FloatSlider()})


def test_every_explorer_builds_with_its_defaults():
    names = [n for n in helpers.widgets.__all__ if n.endswith("_explorer")]
    assert "one_clock_explorer" in names
    for name in names:
        explorer = getattr(helpers.widgets, name)()
        assert bytes(explorer.image.value).startswith(b"\xff\xd8") and explorer.image.format == "jpeg"
        assert set(explorer.controls) <= set(explorer.drawing.params)
