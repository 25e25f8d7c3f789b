"""The latency gate: every explorer's update stays within its budget against a reference workload.

A slider step's time depends on the machine and on what else runs on it, so the gate compares it
with a reference frame (a fixed plain-matplotlib figure of the explorers' size, drawn in full and
encoded) timed just before each update, in the same process: the ratio of the medians is what is
held to ``BUDGETS`` in ``benchmarks/interactive_latency.py``. A regression that puts a full redraw,
a model run or a long text back into a step shows up as a ratio several times its budget.

Also here: the frames that the fast paths keep (backgrounds per layout, model runs cut to a
prefix) are the frames a fresh drawing would draw.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import helpers
from helpers.plots import FULL

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("interactive_latency", ROOT / "benchmarks" / "interactive_latency.py")
latency = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("interactive_latency", latency)  # dataclasses look their module up there
_spec.loader.exec_module(latency)

UPDATES = 10  # slider moves per explorer: about 1-3 s each with the reference frames on two busy cores


@pytest.fixture(scope="module")
def reference():
    ref = latency.Reference()
    ref.frame()  # fonts loaded
    return ref


def _within_budget(name: str, factory, reference) -> tuple[bool, str]:
    """Measure, and once more if over the budget (a burst of other work on a busy machine can
    land on the updates and not on the reference frames; a real regression fails twice)."""
    budget = latency.BUDGETS[name]
    for _ in range(2):
        ok, message = latency.gate(latency.measure(factory, UPDATES, reference, name), budget)
        if ok:
            break
    return ok, message


def test_every_explorer_has_a_budget_within_the_goal():
    assert set(latency.BUDGETS) == set(latency.explorer_names()), "a new explorer needs a budget in BUDGETS"
    assert all(0 < budget <= latency.MAX_BUDGET for budget in latency.BUDGETS.values())


@pytest.mark.parametrize("name", sorted(latency.BUDGETS))
def test_explorer_update_is_within_its_budget(name, reference):
    ok, message = _within_budget(name, getattr(helpers.widgets, name), reference)
    assert ok, message


def _slowed_by_sleep(reference_s: float):
    def factory():
        explorer = helpers.widgets.one_clock_explorer()
        update = explorer.drawing._update

        def slow(**params):
            time.sleep(reference_s)  # as long as a whole reference frame
            return update(**params)

        explorer.drawing._update = slow
        return explorer

    return factory


def _rebuilt_every_step():
    """The extrapolation explorer with every step laid out and drawn in full: 0.9 to 1.2 x the
    reference against a budget of 0.18. (Not one_clock: its whole figure is light enough that a full
    redraw under matplotlib 3.10 measures 0.60 to 0.64 x the reference, at its budget of 0.60, the
    50 ms goal: the gate rightly lets that pass, and this test failed in CI when it used it.)"""

    def factory():
        explorer = helpers.widgets.extrapolation_explorer()
        update = explorer.drawing._update

        def full(**params):
            update(**params)
            return FULL  # every step lays the whole figure out again

        explorer.drawing._update = full
        return explorer

    return factory


def test_the_gate_fails_an_explorer_slowed_on_purpose(reference):
    reference_s = float(np.median([reference.frame() for _ in range(3)]))
    ok, message = _within_budget("one_clock_explorer", _slowed_by_sleep(reference_s), reference)
    assert not ok and "OVER" in message, message
    ok, message = _within_budget("extrapolation_explorer", _rebuilt_every_step(), reference)
    assert not ok and "OVER" in message, message


def test_gate_reads_the_ratio_of_the_medians():
    timing = latency.Timing("x_explorer", [10.0, 30.0, 20.0], [100.0, 100.0, 40.0])
    assert timing.ratio == pytest.approx(0.2)
    assert latency.gate(timing, 0.2)[0] and not latency.gate(timing, 0.19)[0]


# The fast paths draw what a fresh drawing draws.


def _same_pixels(kept, fresh) -> bool:
    return np.array_equal(kept.render(), fresh.render())


def test_kept_backgrounds_give_the_frames_of_a_fresh_drawing():
    drawing = helpers.plots.alibi_heads(n_heads=8, head=0)
    for step in ({"content": 1.5}, {"n_heads": 20, "head": 13}, {"content": 0.0}, {"n_heads": 8}, {"content": 2.0}):
        drawing.update(**step)
        drawing.render()
        assert _same_pixels(drawing, helpers.plots.alibi_heads(**drawing.params)), step
    scaling = helpers.plots.rope_scaling(factor=4.0)  # span 4L
    for step in ({"factor": 9.0}, {"factor": 3.0}, {"method": "ntk"}, {"factor": 12.0}, {"factor": 1.5}):
        scaling.update(**step)  # spans 16L, 4L (kept), 4L, 16L (kept), 2L
        scaling.render()
        assert _same_pixels(scaling, helpers.plots.rope_scaling(**scaling.params)), step
    clock = helpers.plots.one_clock(theta=math.pi / 4, m=3)
    for step in ({"theta": 2.0}, {"m": 9}, {"theta": 2 * math.pi / 10}):
        clock.update(**step)
        clock.render()
        assert _same_pixels(clock, helpers.plots.one_clock(**clock.params)), step


def test_kept_frames_of_the_experiment_explorers_are_those_of_a_fresh_drawing():
    results = helpers.experiment.load_results()
    explorer = helpers.widgets.extrapolation_explorer()
    for task, positions, band in (("text", "all", "std"), ("lag", "beyond", "minmax"), ("text", "all", "minmax")):
        explorer.controls["task"].value = task
        explorer.controls["positions"].value = positions
        explorer.controls["band"].value = band
        fresh = helpers.plots.extrapolation_panorama(results, task=task, positions=positions, band=band)
        assert _same_pixels(explorer.drawing, fresh), (task, positions, band)
    curves = helpers.widgets.per_position_explorer()
    curves.controls["metric"].value = "loss"
    assert _same_pixels(curves.drawing, helpers.plots.per_position_curves(results, task="lag", metric="loss"))


def test_attention_maps_cut_from_one_run_equal_a_run_per_length():
    from helpers import experiment
    from helpers.plots.experiment import _head_weights, _prefix_weights

    models, config = experiment.load_models()
    tokens = experiment.pattern_probe(config, period=7, seed=3)
    for scheme in ("alibi", "rope"):
        model = models[("pattern", scheme)]
        with torch.no_grad():
            _, weights = model(tokens[None, :], need_weights=True)
        for layer in range(len(weights)):
            full = weights[layer][0].double().numpy()  # (H, T, T)
            for length in (16, 48, 128):
                for head in range(full.shape[0]):
                    alone = _head_weights(model, tokens[:length], layer, head)
                    np.testing.assert_allclose(_prefix_weights(full[head], length), alone, rtol=1e-6, atol=1e-7)
