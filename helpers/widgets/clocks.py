"""Explorers for the clock notebooks (02 one clock, 03 many clocks)."""

from __future__ import annotations

import math

import ipywidgets

from .. import plots
from ._explorer import Explorer

__all__ = ["one_clock_explorer", "many_clocks_explorer"]


def one_clock_explorer(theta: float = math.pi / 4, m: int = 3, n_positions: int = 16,
                       max_shift: int = 100) -> Explorer:
    """Sliders for ``θ`` (radians per token) and the position ``m`` over ``plots.one_clock``.

    The figure shows the hand, the two curves, the period ``2π/θ`` and the nearest collision: the
    shift ``k <= max_shift`` that brings the hand closest to where it started.
    """
    controls = {
        "theta": ipywidgets.FloatSlider(value=theta, min=0.05, max=math.pi, step=0.01, description="θ (rad/token)",
                                        readout_format=".2f"),
        "m": ipywidgets.IntSlider(value=m, min=0, max=n_positions - 1, description="position m"),
    }
    return Explorer(plots.one_clock(theta=theta, m=m, n_positions=n_positions, max_shift=max_shift), controls)


def many_clocks_explorer(base: float = 10000.0, d: int = 64) -> Explorer:
    """Sliders for the base ``b`` (log scale, 10 to 1,000,000) and the width ``d`` (even, 4 to 256).

    Over ``plots.many_clocks``: the heat map of the table, the period of every hand and the
    smallest distance between two distinct positions update together, when a slider is released.
    """
    controls = {
        "base": ipywidgets.FloatLogSlider(value=base, base=10, min=1, max=6, step=0.1, description="base b",
                                          readout_format=".3g"),
        # Only even widths exist (dimensions come in pairs): a selection slider cannot land on an odd one.
        "d": ipywidgets.SelectionSlider(value=d, options=list(range(4, 257, 2)), description="width d"),
    }
    # One update redraws a 512-row heat map and 4095 distances: about 60-70 ms of CPU on a busy two-core
    # machine, over the 50 ms goal, so the figure follows a slider when it is released, not while dragging.
    return Explorer(plots.many_clocks(base=base, d=d), controls, continuous_update=False)
