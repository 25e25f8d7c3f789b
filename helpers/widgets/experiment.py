"""Explorers for notebook 08: the train-short / test-long panorama."""

from __future__ import annotations

import ipywidgets

from .. import plots
from ._explorer import Explorer, records_call

__all__ = ["extrapolation_explorer", "per_position_explorer", "attention_maps_explorer"]


def _cached(results):
    if results is None:
        from .. import experiment

        results = experiment.load_results()
    return results


@records_call(omit=("results",))
def extrapolation_explorer(
    results: dict | None = None, task: str = "pattern", positions: str = "beyond", band: str = "minmax"
) -> Explorer:
    """Buttons for the task, the positions scored (past ``L`` only, or all) and the spread shown
    (min-max over seeds, or ± one standard deviation) of ``plots.extrapolation_panorama``.

    ``results`` defaults to the cached ``data/extrapolation.json``.
    """
    results = _cached(results)
    controls = {
        "task": ipywidgets.ToggleButtons(options=list(results["tasks"]), value=task, description="task"),
        "positions": ipywidgets.ToggleButtons(options=["beyond", "all"], value=positions, description="positions"),
        "band": ipywidgets.ToggleButtons(options=["minmax", "std"], value=band, description="spread"),
    }
    drawing = plots.extrapolation_panorama(results, task=task, positions=positions, band=band)
    return Explorer(drawing, controls)


@records_call(omit=("results",))
def per_position_explorer(results: dict | None = None, task: str = "lag", metric: str = "accuracy") -> Explorer:
    """Buttons for the task and the metric of ``plots.per_position_curves`` (cached results by default)."""
    results = _cached(results)
    controls = {
        "task": ipywidgets.ToggleButtons(options=list(results["tasks"]), value=task, description="task"),
        "metric": ipywidgets.ToggleButtons(options=["accuracy", "loss"], value=metric, description="metric"),
    }
    return Explorer(plots.per_position_curves(results, task=task, metric=metric), controls)


@records_call(omit=("models",))
def attention_maps_explorer(
    heads: dict | None = None, length: int = 64, period: int = 7, seed: int = 3, models: dict | None = None
) -> Explorer:
    """A slider for the evaluation length ``T`` (16 to 128 by 16) over ``plots.attention_maps`` of the
    cached "pattern" models with ALiBi and RoPE, on ``experiment.pattern_probe(period, seed)``.

    ``heads``: ``{scheme: (layer, head)}`` to show; None picks each model's induction head at the
    training length (``experiment.induction_heads``). ``models``: ``{(task, scheme): model}`` as
    ``experiment.load_models`` returns (default: the cached ones; a retrained set when given). A
    step runs both models (about 200 ms on a CPU), so the figure follows the slider when it is
    released.
    """
    from .. import experiment

    saved, config = experiment.load_models()
    if models is None:
        models = saved
    maps = {scheme: models[("pattern", scheme)] for scheme in ("alibi", "rope")}
    tokens = experiment.pattern_probe(config, period=period, seed=seed)
    if heads is None:
        heads = experiment.induction_heads(maps, tokens, config.train_length, period)
    heads = {scheme: tuple(layer_head) for scheme, layer_head in heads.items()}
    if set(heads) != set(maps):
        raise ValueError(f"heads must name the schemes {sorted(maps)}, got {sorted(heads)}")
    controls = {
        "length": ipywidgets.IntSlider(value=length, min=16, max=len(tokens) - 1, step=16, description="length T"),
    }
    drawing = plots.attention_maps(maps, tokens, heads, length=length, train_length=config.train_length)
    return Explorer(drawing, controls, continuous_update=False)
