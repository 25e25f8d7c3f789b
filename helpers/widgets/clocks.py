"""Explorers for the clock notebooks (02 one clock, 03 many clocks)."""

from __future__ import annotations

import math

import ipywidgets

from .. import plots
from ._explorer import Explorer

__all__ = ["one_clock_explorer"]


def one_clock_explorer(theta: float = math.pi / 4, m: int = 3) -> Explorer:
    """Sliders for ``θ`` (radians per token) and the position ``m`` over ``plots.one_clock``."""
    controls = {
        "theta": ipywidgets.FloatSlider(value=theta, min=0.05, max=math.pi, step=0.01, description="θ (rad/token)",
                                        readout_format=".2f"),
        "m": ipywidgets.IntSlider(value=m, min=0, max=15, description="position m"),
    }
    return Explorer(plots.one_clock(theta=theta, m=m), controls)
