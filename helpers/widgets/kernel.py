"""Explorers for notebook 04: the position kernel, its continuous limit and the paired clock faces (article 000 §6)."""

from __future__ import annotations

import ipywidgets

from .. import plots
from ._explorer import Explorer, records_call

__all__ = ["kernel_explorer"]


@records_call()
def kernel_explorer(d: int = 64, base: float = 10000.0, delta: int = 5, max_delta: int = 200) -> Explorer:
    """Sliders for the base ``b`` (log scale), the width ``d`` and the offset ``Δ`` over
    ``plots.kernel_and_clocks``: the kernel, its continuous curve and the clock faces follow.
    The offset slider sets ``|Δ| = |m - n|`` (the kernel is even in ``Δ``)."""
    controls = {
        "base": ipywidgets.FloatLogSlider(
            value=base, base=10, min=1, max=6, step=0.05, description="base b", readout_format=".3g"
        ),
        # even widths only (hands come in pairs): a selection slider cannot land on an odd d
        "d": ipywidgets.SelectionSlider(options=list(range(2, 514, 2)), value=d, description="width d"),
        "delta": ipywidgets.IntSlider(value=delta, min=0, max=max_delta, description="offset |Δ| (tokens)"),
    }
    return Explorer(plots.kernel_and_clocks(d=d, base=base, delta=delta, max_delta=max_delta), controls)
