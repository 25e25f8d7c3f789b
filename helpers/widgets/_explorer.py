"""Slider explorers: controls that update a ``helpers.plots`` drawing and show it as a picture.

Mechanism. The figure is rendered in the kernel to a picture shown in an ``ipywidgets.Image``;
a slider change updates the drawing's artists in place and sends a new picture (a JPEG: it
encodes ten times faster than a PNG, and the frame is replaced at the next step anyway). We chose this over
re-running the whole drawing through ``interactive_output`` (which rebuilds the figure at each
step and flickers) and over ipympl (one more JupyterLab extension to install, and its canvas is
not saved in the notebook). The picture of the default state is saved by the drawing's own
cell, so GitHub shows it; the explorer adds the live version.

Every explorer records the kernel-side time of its last update in ``last_update_s``;
``benchmarks/interactive_latency.py`` reads it.

Without a kernel. An explorer made by one of the ``*_explorer`` functions remembers the call that
made it (``spec``: the function and its arguments) and writes it beside the widget in the
notebook's output (MIME type ``EXPLORER_SPEC``). ``make html`` and ``make slides`` make the same
explorer again from it, render a picture for each slider value a reader can choose with the same
drawing code, and embed them with a small script (``tools/sitebuild/frames.py``): the sliders then move in
a static page with no kernel.
"""

from __future__ import annotations

import functools
import inspect
import json
import time

import ipywidgets

__all__ = ["Explorer", "EXPLORER_SPEC"]

#: MIME type of the call that made an explorer, saved beside the widget in a notebook's output.
EXPLORER_SPEC = "application/vnd.positional-encoding.explorer+json"


def records_call(*, omit: tuple[str, ...] = ()):
    """Decorate an ``*_explorer`` function so that its explorer remembers the call (``spec``).

    ``omit``: arguments left out of the record (data that the function loads itself when the
    argument is None, such as cached results). An argument that cannot be written as JSON leaves
    the explorer without a spec (a static page then shows its saved picture only).
    """

    def decorate(factory):
        signature = inspect.signature(factory)

        @functools.wraps(factory)
        def make(*args, **kwargs):
            explorer = factory(*args, **kwargs)
            bound = signature.bind(*args, **kwargs)
            arguments = {name: value for name, value in bound.arguments.items() if name not in omit}
            try:
                json.dumps(arguments, allow_nan=False)
            except (TypeError, ValueError):
                explorer.spec = None  # not even the spec of an explorer this one was made from
                return explorer
            explorer.spec = {"function": f"helpers.widgets.{factory.__name__}", "arguments": arguments}
            return explorer

        return make

    return decorate


class Explorer(ipywidgets.VBox):
    """Controls above a live picture of a ``Drawing``.

    Args:
        drawing: a ``helpers.plots.Drawing``; each control's name is one of its parameters.
        controls: ``{parameter name: ipywidgets control}``, in display order.
        continuous_update: if False, sliders update on release instead of while dragging.
    """

    def __init__(self, drawing, controls: dict, *, continuous_update: bool = True):
        unknown = sorted(set(controls) - set(drawing.params))
        if unknown:
            raise TypeError(f"controls {unknown} are not parameters of {drawing.name} ({sorted(drawing.params)})")
        self.drawing = drawing
        self.controls = dict(controls)
        self.last_update_s: float | None = None
        self.spec: dict | None = None  # set by the *_explorer function that made it (records_call)
        for control in self.controls.values():
            if hasattr(control, "continuous_update"):
                control.continuous_update = continuous_update
            control.style.description_width = "initial"
            control.observe(self._on_change, names="value")
        drawing.update(**self.values())
        self.image = ipywidgets.Image(value=drawing.jpeg(), format="jpeg", layout=ipywidgets.Layout(max_width="100%"))
        bar = ipywidgets.HBox(list(self.controls.values()), layout=ipywidgets.Layout(flex_flow="row wrap"))
        super().__init__([bar, self.image])

    def values(self) -> dict:
        """Current value of every control, by parameter name."""
        return {name: control.value for name, control in self.controls.items()}

    def _on_change(self, change) -> None:
        self.refresh()

    def refresh(self) -> None:
        """Update the drawing for the controls' values and send the new picture."""
        start = time.perf_counter()
        self.drawing.update(**self.values())
        self.image.value = self.drawing.jpeg()
        self.last_update_s = time.perf_counter() - start

    def _repr_mimebundle_(self, **kwargs):
        data = super()._repr_mimebundle_(**kwargs)
        if self.spec is not None and data is not None:
            data[EXPLORER_SPEC] = self.spec
        return data

    def __repr__(self) -> str:
        return f"Explorer({self.drawing!r})"
