"""Explorers for notebook 08: the train-short / test-long panorama."""

from __future__ import annotations

import ipywidgets

from .. import plots
from ._explorer import Explorer, records_call

__all__ = ["extrapolation_explorer"]


@records_call(omit=("results",))
def extrapolation_explorer(results: dict | None = None, task: str = "pattern") -> Explorer:
    """Buttons for the task and for the spread shown (min-max over seeds, or ± one standard deviation).

    ``results`` defaults to the cached ``data/extrapolation.json``.
    """
    if results is None:
        from .. import experiment

        results = experiment.load_results()
    controls = {
        "task": ipywidgets.ToggleButtons(options=list(results["tasks"]), value=task, description="task"),
        "band": ipywidgets.ToggleButtons(options=["minmax", "std"], value="minmax", description="spread"),
    }
    return Explorer(plots.extrapolation_panorama(results, task=task), controls)
