"""Explorers without a kernel (``sitebuild.frames`` and the site's preprocessor): which values get a
frame, that each frame is the drawing at those values, and what the static page carries."""

from __future__ import annotations

import copy
import io
import json
import math
import re

import ipywidgets
import nbformat
import numpy as np
import pytest
from PIL import Image
from sitebuild import SitePreprocessor
from sitebuild import frames as _frames

import helpers.widgets as widgets
from helpers.widgets._explorer import EXPLORER_SPEC

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def test_a_short_int_slider_offers_every_value():
    choice = _frames.control_choices("m", ipywidgets.IntSlider(value=3, min=0, max=15, description="position m"))
    assert choice.values == list(range(16)) and choice.full and choice.start == 3
    assert choice.labels[3] == "3" and choice.kind == "range" and choice.description == "position m"


@pytest.mark.parametrize("start", [0, 5, 137, 200])
def test_a_long_slider_offers_its_ends_its_start_and_at_most_max_values(start):
    control = ipywidgets.IntSlider(value=start, min=0, max=200)
    choice = _frames.control_choices("delta", control)
    assert len(choice.values) <= _frames.MAX_VALUES and not choice.full
    assert choice.values[0] == 0 and choice.values[-1] == 200 and choice.values[choice.start] == start
    assert choice.values == sorted(set(choice.values))
    gaps = np.diff(choice.values)
    assert gaps.max() <= 2 * math.ceil(200 / (_frames.MAX_VALUES - 2))  # spread evenly, not bunched


def test_a_log_slider_offers_powers_of_its_base_and_a_float_slider_its_steps():
    log = _frames.control_choices(
        "base", ipywidgets.FloatLogSlider(value=1e4, base=10, min=1, max=6, step=0.5, readout_format=".3g")
    )
    assert np.allclose(log.values, [10**e for e in np.arange(1, 6.25, 0.5)])
    assert log.values[log.start] == 1e4 and log.labels[log.start] == "10,000"  # as the figures write it
    assert log.labels[:3] == ["10", "31.6", "100"]
    flat = _frames.control_choices("c", ipywidgets.FloatSlider(value=0.3, min=0.0, max=1.0, step=0.1))
    assert flat.values == pytest.approx([k / 10 for k in range(11)]) and flat.start == 3


def test_a_float_slider_never_passes_its_maximum_and_keeps_its_exact_start():
    explorer = widgets.one_clock_explorer()  # θ from 2π·0.01 to π by 0.01, starting at π/4: off the steps
    theta = explorer.controls["theta"]
    choice = _frames.control_choices("theta", theta)
    assert choice.values[-1] == theta.max and max(choice.values) <= theta.max
    assert choice.values[choice.start] == theta.value == math.pi / 4
    assert choice.values[0] == theta.min and len(choice.values) <= _frames.MAX_VALUES
    steps = _frames.control_choices("s", ipywidgets.IntSlider(value=20, min=16, max=130, step=8))
    assert steps.values[-1] == 130 and 20 in steps.values and 16 in steps.values


def test_options_keep_their_labels_and_values():
    dropdown = ipywidgets.Dropdown(options=[("Llama 3.1 8B", "llama3_1_8b"), ("Mistral", "mistral")], value="mistral")
    choice = _frames.control_choices("model", dropdown)
    assert choice.kind == "select" and choice.values == ["llama3_1_8b", "mistral"]
    assert choice.labels == ["Llama 3.1 8B", "Mistral"] and choice.start == 1
    selection = _frames.control_choices("d", ipywidgets.SelectionSlider(options=[4, 6, 8], value=6))
    assert selection.kind == "range" and selection.values == [4, 6, 8] and selection.start == 1
    toggle = _frames.control_choices("m", ipywidgets.ToggleButtons(options=["yarn", "pi"], value="pi"))
    assert toggle.kind == "select" and toggle.start == 1
    with pytest.raises(TypeError, match="control 'x' is a Text"):
        _frames.control_choices("x", ipywidgets.Text())


def test_small_sets_of_controls_get_the_full_grid_large_ones_one_control_at_a_time():
    small = _frames.plan_frames(
        {"a": ipywidgets.IntSlider(value=1, min=0, max=4), "b": ipywidgets.ToggleButtons(options=["x", "y", "z"])}
    )
    assert small.mode == "grid" and len(small.frames) == 15 == len(set(small.frames))
    large = _frames.plan_frames(
        {"a": ipywidgets.IntSlider(value=2, min=0, max=14), "b": ipywidgets.IntSlider(value=7, min=0, max=14)}
    )
    assert 15 * 15 > _frames.MAX_FRAMES
    assert large.mode == "axes" and len(large.frames) == 15 + 15 - 1 == len(set(large.frames))
    assert all(index[0] == 2 or index[1] == 7 for index in large.frames)  # one control moved at a time


def _pixels(jpeg: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB"), dtype=float)


def test_each_frame_is_the_drawing_at_its_values_and_refused_combinations_have_none():
    explorer = widgets.alibi_explorer(n_heads=4, head=0)
    plan = _frames.plan_frames(explorer.controls)
    assert plan.mode == "axes"
    frames = _frames.render_frames(explorer, plan)
    names = [choice.name for choice in plan.choices]
    for index in [plan.frames[0], plan.frames[5], plan.frames[-1]]:
        values = {name: choice.values[k] for name, choice, k in zip(names, plan.choices, index, strict=True)}
        expected = _pixels(widgets.alibi_explorer(**values).drawing.jpeg(quality=_frames.QUALITY))
        assert np.abs(_pixels(frames[index]) - expected).mean() < 1.0, values
    assert len({frames[index] for index in frames}) == len(frames)  # no two frames alike
    # with the other controls at their start, the head slider offers heads 0..3 of 4
    head = names.index("head")
    at_start = [i for i in frames if all(i[k] == plan.choices[k].start for k in range(len(names)) if k != head)]
    assert sorted(plan.choices[head].values[i[head]] for i in at_start) == [0, 1, 2, 3]
    start = {choice.name: choice.values[choice.start] for choice in plan.choices}
    assert {name: explorer.drawing.params[name] for name in start} == start  # left at its start


def test_a_combination_the_drawing_refuses_gets_no_frame(monkeypatch):
    explorer = widgets.alibi_explorer(n_heads=4, head=0, max_heads=8)
    explorer.controls["head"].max = 7  # a grid would ask for head 7 with 1 head
    update = explorer.drawing.update

    def strict(**values):  # a drawing that refuses a head beyond the heads (alibi_heads clamps instead)
        if values.get("head", 0) >= values.get("n_heads", 8):
            raise ValueError("head beyond the heads")
        return update(**values)

    monkeypatch.setattr(explorer.drawing, "update", strict)
    plan = _frames.Plan(
        [_frames.control_choices(n, c) for n, c in explorer.controls.items()], "grid", [(0, 7, 0), (3, 3, 0)]
    )
    frames = _frames.render_frames(explorer, plan)
    assert list(frames) == [(3, 3, 0)]


def test_explorers_record_the_call_that_made_them():
    explorer = widgets.one_clock_explorer(theta=0.5, m=2)
    assert explorer.spec == {"function": "helpers.widgets.one_clock_explorer", "arguments": {"theta": 0.5, "m": 2}}
    assert explorer._repr_mimebundle_()[EXPLORER_SPEC] == explorer.spec
    again = _frames.make_explorer(explorer.spec)
    assert again.values() == explorer.values()
    # data the function loads itself is left out; an argument JSON cannot hold leaves no spec
    assert widgets.extrapolation_explorer(task="lag").spec["arguments"] == {"task": "lag"}
    assert widgets.extrapolation_explorer(results=None).spec["arguments"] == {}
    with pytest.raises(ValueError, match="helpers.widgets"):
        _frames.make_explorer({"function": "os.system", "arguments": {}})


def test_an_argument_json_cannot_hold_leaves_no_spec():
    from helpers.widgets._explorer import records_call

    @records_call()
    def odd_explorer(heads=frozenset({1})):
        return widgets.alibi_explorer()

    assert odd_explorer(heads=frozenset({2})).spec is None  # a static page then shows the saved picture
    assert odd_explorer(heads=3).spec == {"function": "helpers.widgets.odd_explorer", "arguments": {"heads": 3}}


def test_every_explorer_function_records_its_call():
    names = [name for name in widgets.__all__ if name.endswith("_explorer")]
    assert len(names) >= 8
    for name in names:
        explorer = getattr(widgets, name)()
        assert explorer.spec is not None and explorer.spec["function"] == f"helpers.widgets.{name}", name


def _notebook_with_explorer(spec):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("helpers.widgets.alibi_explorer()")
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={WIDGET_VIEW: {"model_id": "x", "version_major": 2, "version_minor": 0}, "text/plain": "E", **spec},
        )
    ]
    nb.cells = [cell, nbformat.v4.new_code_cell("helpers.widgets.alibi_explorer()")]
    nb.cells[1].outputs = [copy.deepcopy(cell.outputs[0])]
    return nb


def test_the_site_turns_a_recorded_explorer_into_frames_and_a_script():
    spec = widgets.alibi_explorer(n_heads=4).spec
    resources = {"metadata": {"name": "07_x"}, "output_files_dir": "07_x_files"}
    nb, resources = SitePreprocessor().preprocess(_notebook_with_explorer({EXPLORER_SPEC: spec}), resources)
    pages = [cell.outputs[0]["data"]["text/html"] for cell in nb.cells]
    assert all("window.__peExplorers" in page for page in pages)  # each carries it; the first to run sets all up
    data = json.loads(re.search(r'class="pe-data">(.*?)</script>', pages[0]).group(1))
    assert data["names"] == ["heads H", "head h", "content strength"]
    assert set(data["frames"].values()) <= set(resources["outputs"])
    assert all(url.startswith("07_x_files/explorer0/") for url in data["frames"].values())
    start = ",".join(map(str, data["start"]))
    assert re.search(rf'<img class="pe-frame" src="{re.escape(data["frames"][start])}"', pages[0])
    assert all(picture[:2] == b"\xff\xd8" for picture in resources["outputs"].values())  # JPEG
    assert 'type="range"' in pages[0] and "one control at a time" in pages[0]
    assert len(resources["outputs"]) == 2 * len(data["frames"])  # the second explorer has its own


def test_a_label_cannot_end_the_script_element():
    plan = _frames.Plan([_frames.Choice("x", "x", "select", ["a"], ["<!--<script </script>"], 0, True)], "grid", [(0,)])
    page = _frames.static_explorer_html(plan, {(0,): "f.jpg"}, 0)
    table = re.search(r'class="pe-data">(.*?)</script>', page, flags=re.S).group(1)
    assert "<" not in table and json.loads(table)["labels"] == [["<!--<script </script>"]]


def test_the_site_drops_test_markers_keeps_a_picture_when_an_explorer_is_gone_and_decks_give_it_a_slide():
    spec = widgets.rope_models_explorer().spec
    nb = _notebook_with_explorer({EXPLORER_SPEC: spec})
    marker = "# NBVAL_IGNORE_OUTPUT\n# Not compared by the tests: a live widget.\n"
    nb.cells[0].source = marker + "helpers.widgets.rope_models_explorer()"
    nb.cells[1].outputs[0]["data"][EXPLORER_SPEC] = {"function": "helpers.widgets.gone_explorer", "arguments": {}}
    nb, resources = SitePreprocessor(explorer_subslide=True).preprocess(nb, {"metadata": {"name": "09_x"}})
    assert nb.cells[0].source == "helpers.widgets.rope_models_explorer()"
    assert nb.cells[0].metadata["slideshow"]["slide_type"] == "subslide"
    # the gone explorer: no static explorer, no slide of its own (its saved picture, from the widget state)
    assert "slideshow" not in nb.cells[1].metadata
    assert not any("text/html" in output.get("data", {}) for output in nb.cells[1].outputs)
    assert all(url.startswith("09_x_files/explorer0/") for url in resources["outputs"])
