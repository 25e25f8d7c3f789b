"""Notebook 11's figures and explorer (``helpers.plots.stretch``, ``helpers.widgets.stretch``): each shows
the cached scores it names, and an update moves the markers to another budget without a new layout."""

from __future__ import annotations

import numpy as np
import pytest
from _support import raises_naming

import helpers
from helpers import stretch


@pytest.fixture(scope="module")
def results():
    return stretch.load_stretch()


def _marker(drawing, task, method, band):
    return float(drawing.artists["markers"][(task, method, band)].get_ydata()[0])


def _bar(drawing, task, method, band):
    return [float(v) for v in drawing.artists["bars"][(task, method, band)].get_ydata()]


def test_scores_show_the_mean_and_the_seed_range_of_each_budget(results):
    drawing = helpers.plots.stretch_scores(results)
    length, factor = results["config"]["base"]["train_length"], results["config"]["factor"]
    for budget in results["config"]["budgets"]:
        drawing.update(budget=budget)
        for task in results["config"]["tasks"]:
            for method in ("none", "linear", "yarn"):
                mean, low, high = stretch.score(results, task, method, budget, factor * length, "past")
                assert _marker(drawing, task, method, "past") == pytest.approx(mean)
                assert _bar(drawing, task, method, "past") == pytest.approx([low, high])
                mean, _, _ = stretch.score(results, task, method, budget, length, "within")
                assert _marker(drawing, task, method, "within") == pytest.approx(mean)
        assert str(budget) in drawing.artists["caption"].get_text() or budget == 0
    drawing.update(budget=25)
    assert np.isnan(_marker(drawing, "text", "dynamic", "past"))  # scored without fine-tuning only
    drawing.update(budget=0)
    assert not np.isnan(_marker(drawing, "text", "dynamic", "past"))
    assert drawing.artists["caption"].get_text() == "no fine-tuning"


def test_highlight_fades_the_other_methods(results):
    drawing = helpers.plots.stretch_scores(results, highlight="yarn")
    markers = drawing.artists["markers"]
    assert markers[("lag", "yarn", "past")].get_alpha() == 1.0
    assert markers[("lag", "none", "past")].get_alpha() < 0.5
    drawing.update(highlight="all")
    assert markers[("lag", "none", "past")].get_alpha() == 1.0


def test_an_update_keeps_the_axes_and_draws_what_a_fresh_figure_draws(results):
    moved = helpers.plots.stretch_scores(results)
    limits = [ax.get_ylim() for ax in moved.fig.axes]
    moved.render()
    moved.update(budget=400, highlight="ntk")
    assert [ax.get_ylim() for ax in moved.fig.axes] == limits
    fresh = helpers.plots.stretch_scores(results, budget=400, highlight="ntk")
    assert np.array_equal(moved.render(), fresh.render())


def test_bad_budget_and_highlight_are_named(results):
    raises_naming(ValueError, lambda: helpers.plots.stretch_scores(results, budget=7), "budget", "7")
    raises_naming(ValueError, lambda: helpers.plots.stretch_scores(results, highlight="rope"), "highlight", "'rope'")


def test_budgets_draw_each_method_against_the_steps(results):
    drawing = helpers.plots.stretch_budgets(results)
    length, factor = results["config"]["base"]["train_length"], results["config"]["factor"]
    line = drawing.artists["lines"][("text", "linear")]
    want = [
        stretch.score(results, "text", "linear", b, factor * length, "past")[0] for b in results["config"]["budgets"]
    ]
    assert list(line.get_ydata()) == pytest.approx(want)
    assert list(drawing.artists["lines"][("text", "dynamic")].get_xdata()) == [0]


def test_pairs_draw_each_methods_speed_ratio(results):
    config = stretch.StretchConfig.from_dict(results["config"])
    d = config.base_config.d_model // config.base_config.n_heads
    drawing = helpers.plots.stretch_pairs(d, config.base_config.rope_base, 4, 32, config.methods)
    assert list(drawing.artists["lines"]["linear"].get_ydata()) == pytest.approx([0.25] * (d // 2))
    assert drawing.artists["lines"]["yarn"].get_ydata()[0] == pytest.approx(1.0)


def test_entropy_bars_are_the_values_given():
    entropies = {"none": {"past": [1.5, 0.9]}, "yarn": {"past": [1.2, 0.6]}, "yarn, factor 1": {"past": [1.6, 0.8]}}
    reference = {"within": [0.8, 0.4]}
    drawing = helpers.plots.stretch_entropy(entropies, reference, length=128, train_length=32)
    heights = [[bar.get_height() for bar in drawing.artists["bars"][layer]] for layer in (0, 1)]
    assert heights == [[1.5, 1.2, 1.6], [0.9, 0.6, 0.8]]
    assert drawing.artists["bars"][0][2].get_hatch() == "//"  # a variant, not a method


def test_the_explorer_moves_the_drawing_and_records_its_call(results):
    explorer = helpers.widgets.stretch_explorer(results, budget=100)
    assert explorer.spec == {"function": "helpers.widgets.stretch_explorer", "arguments": {"budget": 100}}
    explorer.controls["budget"].value = 400
    assert explorer.drawing.params["budget"] == 400
