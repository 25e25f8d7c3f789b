"""Explorers for notebook 05: the four terms of the attention score (article 000 §7)."""

from __future__ import annotations

import ipywidgets

from .. import plots
from ._explorer import Explorer, records_call

__all__ = ["score_terms_explorer"]


@records_call()
def score_terms_explorer(
    T: int = 24, d_model: int = 64, seed: int = 0, content_weight: float = 1.0, a: str = "general"
) -> Explorer:
    """A log slider for the weight of content against position and a choice of ``A`` over
    ``plots.score_term_maps`` (inputs from ``plots.score_example(T, d_model, seed)``)."""
    example = plots.score_example(T, d_model, seed)
    drawing = plots.score_term_maps(example["x"], example["p"], example["weights"], a=a, content_weight=content_weight)
    controls = {
        "content_weight": ipywidgets.FloatLogSlider(
            value=content_weight, base=10, min=-2, max=2, step=0.05, description="content weight", readout_format=".3g"
        ),
        "a": ipywidgets.ToggleButtons(options=list(example["weights"]), value=a, description="A ="),
    }
    return Explorer(drawing, controls)
