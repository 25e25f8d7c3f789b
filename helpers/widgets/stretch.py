"""Explorer for notebook 11: a trained model's context stretched by each RoPE setting."""

from __future__ import annotations

import ipywidgets

from .. import plots
from ._explorer import Explorer, records_call

__all__ = ["stretch_explorer"]


@records_call(omit=("results",))
def stretch_explorer(results: dict | None = None, budget: int = 0, highlight: str = "all") -> Explorer:
    """Buttons for the fine-tuning budget and the method brought forward in ``plots.stretch_scores``
    (``results`` defaults to the cached ``data/stretch.json``). The run reads one factor, so the
    factor is not a control."""
    if results is None:
        from ..experiment import stretch

        results = stretch.load_stretch()
    methods = list(results["config"]["methods"])
    budgets = [int(b) for b in results["config"]["budgets"]]
    controls = {
        "budget": ipywidgets.ToggleButtons(options=budgets, value=int(budget), description="fine-tuning steps"),
        "highlight": ipywidgets.ToggleButtons(options=["all", *methods], value=highlight, description="method"),
    }
    return Explorer(plots.stretch_scores(results, budget=budget, highlight=highlight), controls)
