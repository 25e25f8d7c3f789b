"""Explorers for notebook 08: the train-short / test-long panorama."""

from __future__ import annotations

import itertools

import ipywidgets

from .. import plots
from ._explorer import Explorer, records_call

__all__ = ["extrapolation_explorer", "per_position_explorer", "attention_maps_explorer"]


def _states(controls: dict) -> list[dict]:
    """Every combination of the values the controls offer (buttons, or a slider's steps)."""
    choices = []
    for name, control in controls.items():
        if hasattr(control, "options"):
            values = [o[1] if isinstance(o, tuple) else o for o in control.options]
        else:
            values = list(range(control.min, control.max + 1, control.step))
        choices.append([(name, value) for value in values])
    return [dict(combination) for combination in itertools.product(*choices)]


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
    # Twelve states: each frame is drawn once now (about 1-2 s), and a click then only copies it.
    drawing.warm(_states(controls))
    return Explorer(drawing, controls)


@records_call(omit=("results",))
def per_position_explorer(results: dict | None = None, task: str = "lag", metric: str = "accuracy") -> Explorer:
    """Buttons for the task and the metric of ``plots.per_position_curves`` (cached results by default)."""
    results = _cached(results)
    controls = {
        "task": ipywidgets.ToggleButtons(options=list(results["tasks"]), value=task, description="task"),
        "metric": ipywidgets.ToggleButtons(options=["accuracy", "loss"], value=metric, description="metric"),
    }
    drawing = plots.per_position_curves(results, task=task, metric=metric)
    drawing.warm(_states(controls))  # six frames, drawn once now
    return Explorer(drawing, controls)


@records_call(omit=("models",))
def attention_maps_explorer(
    heads: dict | None = None, length: int = 64, period: int = 7, seed: int = 3, models: dict | None = None
) -> Explorer:
    """A slider for the evaluation length ``T`` (16 to 128 by 16) over ``plots.attention_maps`` of the
    cached "pattern" models with ALiBi and RoPE, on ``experiment.pattern_probe(period, seed)``.

    ``heads``: ``{scheme: (layer, head)}`` to show; None picks each model's induction head at the
    training length (``experiment.induction_heads``). ``models``: ``{(task, scheme): model}`` as
    ``experiment.load_models`` returns (default: the cached ones; a retrained set when given). A
    models run once over the whole sequence (each length reads a prefix: the models are causal)
    and every length's frame is drawn when the explorer is made, so a step only shows a kept frame;
    the figure follows the slider when it is released.
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
    # One model run per scheme over the whole sequence (every length is a prefix of it), and one
    # frame per length drawn now: a step of the slider then only copies a kept frame.
    drawing.warm(_states(controls))
    return Explorer(drawing, controls, continuous_update=False)
