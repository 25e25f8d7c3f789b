"""Explorers for notebook 06: RoPE's base and long-context scaling (article 003 §8.4 and §10)."""

from __future__ import annotations

import math

import ipywidgets

from .. import plots
from ._explorer import Explorer, records_call

__all__ = ["rope_scaling_explorer"]


@records_call()
def rope_scaling_explorer(base: float = 10000.0, factor: float = 4.0, method: str = "yarn") -> Explorer:
    """Sliders for the base ``b`` and the scaling factor ``s``, and a choice of method (none, PI,
    NTK-aware, YaRN), over ``plots.rope_scaling``: per-pair frequency scale and the score of one
    query out to the target length ``sL`` (the offset axis follows ``s``)."""
    controls = {
        "method": ipywidgets.ToggleButtons(options=list(plots.SCALING_METHODS), value=method, description="method"),
        "base": ipywidgets.FloatLogSlider(
            value=base, base=10, min=3.0, max=6.5, step=0.05, description="base b", readout_format=",.0f"
        ),
        "factor": ipywidgets.FloatSlider(
            value=factor, min=1.0, max=16.0, step=0.5, description="factor s", readout_format=".1f"
        ),
    }
    if not math.isfinite(base) or base <= 1:
        raise ValueError(f"base must be a finite number > 1, got {base}")
    return Explorer(plots.rope_scaling(base=base, factor=factor, method=method), controls)
