"""Explorers for the clock notebooks (02 one clock, 03 many clocks)."""

from __future__ import annotations

import math

import ipywidgets

from .. import plots
from ._explorer import Explorer, records_call

__all__ = ["one_clock_explorer", "many_clocks_explorer"]


@records_call()
def one_clock_explorer(theta: float = math.pi / 4, m: int = 3, n_positions: int = 16, max_shift: int = 100) -> Explorer:
    """Sliders for ``θ`` and the position ``m`` over ``plots.one_clock``.

    ``θ`` has two linked sliders: ``θ/2π`` in turns per token (steps of 0.001, from 0.01 to 0.5)
    and ``θ`` in radians per token (steps of 0.01, from ``2π · 0.01 ≈ 0.063`` to ``π``: the same
    range). Moving either moves the other. The
    turns slider reaches the speeds whose hand comes back exactly, ``θ = 2π p/q`` (0.1 turn is
    ``2π/10``, 0.3 turn is ``0.6π``; both return after 10 tokens), which steps of 0.01 radian never
    hit. The slider is ``explorer.turns``; ``explorer.controls`` holds ``theta`` and ``m``.

    The figure shows the hand, the two curves, the period ``2π/θ`` and the closest return: the
    offset ``k <= max_shift`` that brings the hand closest to where it started, and its gap.
    """
    controls = {
        "theta": ipywidgets.FloatSlider(
            value=theta,
            min=2 * math.pi * 0.01,
            max=math.pi,
            step=0.01,
            description="θ (rad/token)",
            readout_format=".3f",
        ),
        "m": ipywidgets.IntSlider(value=m, min=0, max=n_positions - 1, description="position m"),
    }
    explorer = Explorer(plots.one_clock(theta=theta, m=m, n_positions=n_positions, max_shift=max_shift), controls)
    turns = ipywidgets.FloatSlider(
        value=theta / (2 * math.pi),
        min=0.01,
        max=0.5,
        step=0.001,
        description="θ/2π (turns/token)",
        readout_format=".3f",
    )
    turns.style.description_width = "initial"
    radians = controls["theta"]
    busy = []  # set while one slider moves the other, so that the change does not bounce back

    def from_turns(change):
        if not busy:
            busy.append(True)
            try:
                radians.value = 2 * math.pi * change["new"]  # the explorer redraws on this change
            finally:
                busy.pop()

    def from_radians(change):
        if not busy:
            busy.append(True)
            try:
                turns.value = change["new"] / (2 * math.pi)
            finally:
                busy.pop()

    turns.observe(from_turns, names="value")
    radians.observe(from_radians, names="value")
    bar = explorer.children[0]
    bar.children = (turns, *bar.children)
    explorer.turns = turns
    return explorer


@records_call()
def many_clocks_explorer(base: float = 10000.0, d: int = 64) -> Explorer:
    """Sliders for the base ``b`` (log scale, 10 to 1,000,000) and the width ``d`` (even, 4 to 256).

    Over ``plots.many_clocks``: the heat map of the table, the period of every hand and the
    smallest gap ``‖p_(m+Δ) - p_m‖`` between two distinct positions update together, when a slider is released.
    """
    controls = {
        "base": ipywidgets.FloatLogSlider(
            value=base, base=10, min=1, max=6, step=0.1, description="base b", readout_format=".3g"
        ),
        # Only even widths exist (dimensions come in pairs): a selection slider cannot land on an odd one.
        "d": ipywidgets.SelectionSlider(value=d, options=list(range(4, 257, 2)), description="width d"),
    }
    # One update redraws a 512-row heat map and 4095 gaps: about 60-70 ms of CPU on a busy two-core
    # machine, over the 50 ms goal, so the figure follows a slider when it is released, not while dragging.
    return Explorer(plots.many_clocks(base=base, d=d), controls, continuous_update=False)
