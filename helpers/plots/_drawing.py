"""The pattern behind every figure and every slider explorer.

A drawing function builds a matplotlib ``Figure`` once and returns a ``Drawing``: the figure plus
an ``update(**params)`` that changes the artists' data in place. The same object

- shows the static picture in a notebook (``_repr_png_``, so GitHub shows the default state),
- drives the sliders of ``helpers.widgets.Explorer`` (update, then render a PNG), and
- is tested without a browser: update it, then read the artists' data.

Figures are made with ``matplotlib.figure.Figure`` rather than ``pyplot``, so nothing is shown
twice and no global figure list grows while a slider moves.

Speed. Laying out text (ticks, labels, legends) is most of matplotlib's drawing time, about 100 ms
for a two-panel figure on a laptop core. A drawing therefore names its ``animated`` artists, the
ones a slider changes: the rest is drawn once and kept as a background bitmap, and an update
redraws only the animated artists over it ("blitting", as in matplotlib's animation guide). An
update that changes the layout (axis limits, ticks) returns ``FULL`` and the next frame is drawn
from scratch. An update whose layout takes one of a few states (a task, a metric, a legend with or
without a line) returns ``Layout(key)`` instead: the background of each key is drawn once, kept,
and reused whenever the drawing comes back to that key (a full draw costs 100-200 ms on a busy
two-core machine with matplotlib 3.11, a blitted frame a tenth of that). Artists that change
with one slider only and cost much to draw (an axis whose range follows a head count) can be named
``occasional``: they are drawn over the kept background once per ``Layout(key, layer)`` and the
result is kept too, so a frame that keeps their ``layer`` does not draw them at all.

Text is the dearest artist to draw: matplotlib 3.11 places and renders every glyph at each draw,
about 0.1 ms a character on a busy core, so an animated artist should hold only the text that
changes (a constant caption belongs in the background).
"""

from __future__ import annotations

import io
import numbers
from collections import OrderedDict
from typing import Any, Callable

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

__all__ = ["Drawing", "new_figure", "FULL", "Layout"]

#: Returned by an update function whose change needs the whole figure laid out again.
FULL = "full"

#: Resolution of saved pictures and of explorer frames.
DPI = 100

#: How many backgrounds a drawing keeps, one per ``Layout`` key (a 10 x 4.4 inch frame is 1.8 MB).
MAX_BACKGROUNDS = 16


class Layout:
    """Returned by an update function whose layout is one of a few states, named by ``key``
    (hashable): the background drawn for a key is kept and reused when the drawing returns to it.
    Everything that is neither animated nor occasional must be a function of ``key``; the
    drawing's occasional artists must be a function of ``layer`` (hashable)."""

    __slots__ = ("key", "layer")

    def __init__(self, key, layer=None):
        hash((key, layer))  # a TypeError now rather than at render time
        self.key = key
        self.layer = layer

    def __repr__(self) -> str:
        return f"Layout({self.key!r}, layer={self.layer!r})"


def new_figure(width: float = 7.0, height: float = 3.5, *, ncols: int = 1, nrows: int = 1, **subplot_kw):
    """A ``Figure`` with an Agg canvas and its axes: ``(fig, axes)``.

    ``axes`` is one ``Axes`` for a single panel, else an array, as ``pyplot.subplots`` returns.
    """
    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=True, subplot_kw=subplot_kw or None)
    return fig, axes


def _short(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return repr(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    return f"{float(value):.4g}"


class Drawing:
    """A figure and the function that updates it.

    Args:
        name: the drawing function's name, for ``repr``.
        fig: the matplotlib ``Figure``.
        update: ``update(**params)`` changes the artists for new parameter values; it receives
            every parameter, the new ones merged over the current ones.
        params: the parameters the figure shows now.
        artists: named artists that tests (and curious readers) can inspect.
        animated: the artists an update changes; drawn over a cached background. Without them
            every frame is drawn in full.
        occasional: artists that change only with a ``Layout``'s ``layer``: drawn once over the
            background of each layer and kept with it.
    """

    def __init__(
        self,
        name: str,
        fig: Figure,
        update: Callable[..., Any],
        params: dict,
        artists: dict | None = None,
        animated=(),
        occasional=(),
    ):
        self.name = name
        self.fig = fig
        self._update = update
        self.params = dict(params)
        self.artists = dict(artists or {})
        self.animated = list(animated)
        self.occasional = list(occasional)
        for artist in self.animated + self.occasional:
            artist.set_animated(True)  # left out of canvas.draw()
        self._background = None  # the background of the current state; None: the next frame is drawn in full
        self._bases: OrderedDict = OrderedDict()  # Layout key -> the figure without animated and occasional artists
        self._backgrounds: OrderedDict = OrderedDict()  # (key, layer) -> the base with the occasional artists
        self._key = None  # the current (Layout key, layer), or None

    @staticmethod
    def _keep(cache: OrderedDict, key, value) -> None:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > MAX_BACKGROUNDS:
            cache.popitem(last=False)

    def update(self, **params) -> "Drawing":
        """Redraw for new parameter values (unknown names raise ``TypeError``)."""
        unknown = sorted(set(params) - set(self.params))
        if unknown:
            raise TypeError(f"{self.name} has no parameter {unknown[0]!r}; its parameters are {sorted(self.params)}")
        merged = {**self.params, **params}
        result = self._update(**merged)
        if isinstance(result, Layout):
            key = (result.key, result.layer)
            if key != self._key or self._background is None:
                self._key = key
                self._background = self._backgrounds.get(key)
                if self._background is not None:
                    self._backgrounds.move_to_end(key)
        elif isinstance(result, str) and result == FULL:
            self._background = None
            self._key = None
            self._bases.clear()
            self._backgrounds.clear()
        self.params = merged
        return self

    def warm(self, states) -> "Drawing":
        """Draw the background of each state ahead (``states``: dicts of parameter values), so that
        a slider reaching it later finds it kept; then come back to the current state. Worth it only
        for a drawing whose updates return ``Layout`` and for at most ``MAX_BACKGROUNDS`` states."""
        start = dict(self.params)
        for state in states:
            self.update(**state)
            self.render()
        self.update(**start)
        return self

    def render(self) -> np.ndarray:
        """Draw the current state and return the pixels, ``(height, width, 4)`` RGBA uint8."""
        canvas = self.fig.canvas
        if self._background is None or not self.animated:
            base = self._bases.get(self._key[0]) if self._key is not None else None
            if base is None:
                canvas.draw()  # everything except the animated and occasional artists
                if self.occasional:
                    base = canvas.copy_from_bbox(self.fig.bbox)
            else:
                canvas.restore_region(base)
            for artist in self.occasional:
                if artist.get_visible():
                    self.fig.draw_artist(artist)
            self._background = canvas.copy_from_bbox(self.fig.bbox)
            if self._key is not None:
                self._keep(self._bases, self._key[0], base if self.occasional else self._background)
                self._keep(self._backgrounds, self._key, self._background)
        else:
            canvas.restore_region(self._background)
        for artist in self.animated:
            if artist.get_visible():
                self.fig.draw_artist(artist)
        return np.asarray(canvas.buffer_rgba())

    def png(self, *, compress_level: int = 1) -> bytes:
        """The figure as PNG bytes. Fast compression by default: a frame goes out at every slider
        step; the picture saved in a notebook uses ``compress_level=9`` to keep the file small."""
        buffer = io.BytesIO()
        Image.fromarray(self.render()).save(buffer, format="PNG", compress_level=compress_level)
        return buffer.getvalue()

    def jpeg(self, *, quality: int = 90) -> bytes:
        """The figure as JPEG bytes: what an explorer sends at each slider step. Encoding a JPEG
        takes about a tenth of the time of even the fastest PNG (3 ms against 20 ms for a
        900 x 400 frame), and that is most of what a slider step costs after the drawing."""
        buffer = io.BytesIO()
        Image.fromarray(self.render()).convert("RGB").save(buffer, format="JPEG", quality=quality)
        return buffer.getvalue()

    def _repr_png_(self) -> bytes:
        return self.png(compress_level=9)

    def __repr__(self) -> str:
        shown = ", ".join(f"{key}={_short(value)}" for key, value in self.params.items())
        return f"{self.name}({shown})"
