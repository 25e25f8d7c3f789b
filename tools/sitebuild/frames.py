"""Explorers without a kernel: pictures rendered ahead for the slider values a reader can choose.

A static page (``make html``) or a slide deck (``make slides``) has no Python behind it. For each
explorer saved in a notebook, ``sitebuild`` makes the same explorer again from the call
recorded beside it (``helpers.widgets.EXPLORER_SPEC``), and this module

- chooses the values each control offers (``control_choices``): every value of a slider at its
  step, or, where a slider has more than ``MAX_VALUES`` values, that many spread evenly over its
  range, always with its ends and its starting value; every option of a drop-down or button group;
- chooses the frames (``plan_frames``): every combination of the controls' values when there are
  at most ``MAX_FRAMES``, else one control at a time with the others at their starting values;
- renders each frame as a JPEG with the explorer's own ``Drawing`` (``render_frames``), and
- writes the HTML (``static_explorer_html``): native range inputs and drop-downs (arrow keys move
  them), a picture, and a small script that swaps the picture for the frame of the chosen values.
  The frames are files beside the page; the script loads them the first time the reader points
  at or focuses the explorer, and shows a frame only once it is decoded, so a key press repaints
  in one frame.

The page says which values have frames. Nothing is fetched from the network.
"""

from __future__ import annotations

import html
import importlib
import io
import itertools
import json
import math
from dataclasses import dataclass, field

import ipywidgets
from PIL import Image

__all__: list[str] = []  # used by the preprocessor of this package

#: At most this many values per slider (its ends and starting value always among them).
MAX_VALUES = 17
#: A full grid of every control's values when it has at most this many frames.
MAX_FRAMES = 160
#: JPEG quality of a frame (the live explorer sends 90): keeps the site under its 30 MB budget.
QUALITY = 75


@dataclass
class Choice:
    """The values a static page offers for one control."""

    name: str
    description: str
    kind: str  # "range" (a slider) or "select" (a drop-down or button group)
    values: list
    labels: list[str]
    start: int  # index of the control's starting value
    full: bool  # True when every value of the control is offered


@dataclass
class Plan:
    choices: list[Choice]
    mode: str  # "grid" or "axes" (one control at a time around the starting values)
    frames: list[tuple[int, ...]] = field(default_factory=list)  # index tuples, one per frame


def _readout(control, value) -> str:
    fmt = getattr(control, "readout_format", None)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(control, ipywidgets.IntSlider):
        return f"{int(value):d}"
    if isinstance(control, ipywidgets.FloatLogSlider):  # as the figures write a base: 19,953, not 2e+04
        return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
    if fmt:
        try:
            return format(value, fmt)
        except ValueError:
            pass
    return f"{value:.4g}"


def _spread(n: int, keep: int) -> list[int]:
    """``MAX_VALUES`` indices out of ``n``, evenly spread, with 0, n-1 and ``keep``."""
    if n <= MAX_VALUES:
        return list(range(n))
    picked = {round(k * (n - 1) / (MAX_VALUES - 2)) for k in range(MAX_VALUES - 1)} | {keep}
    return sorted(picked)


def _steps(low: float, high: float, step: float, value: float) -> list[float]:
    """``low, low + step, ...`` up to ``high`` (never past it), with ``high`` and ``value`` themselves
    among them: the values a slider can take, its maximum and its starting value included even
    where they fall between steps (θ from 2π·0.01 to π by 0.01 starting at π/4, for example)."""
    count = math.floor((high - low) / step + 1e-9) + 1
    grid = [low] + [round(low + k * step, 12) for k in range(1, count)]  # 0.3, not 0.30000000000000004
    grid = [v for v in grid if abs(v - high) > 1e-9 * max(1.0, abs(high)) and abs(v - value) > 1e-12]
    return sorted({*grid, high, value})


def control_choices(name: str, control) -> Choice:
    """The values of one control a static page offers (see the module's docstring)."""
    description = control.description or name
    if isinstance(control, (ipywidgets.Dropdown, ipywidgets.ToggleButtons, ipywidgets.SelectionSlider)):
        values, labels = list(control._options_values), [str(label) for label in control._options_labels]
        kind = "range" if isinstance(control, ipywidgets.SelectionSlider) else "select"
        start = control.index
    elif isinstance(control, ipywidgets.Checkbox):
        values, labels, kind, start = [False, True], ["off", "on"], "select", int(bool(control.value))
    elif isinstance(control, ipywidgets.FloatLogSlider):
        exponents = _steps(control.min, control.max, control.step, math.log(control.value, control.base))
        values = [control.base**e for e in exponents]
        start = exponents.index(math.log(control.value, control.base))
        values[start] = control.value  # exactly the starting value, not base**log(value)
        labels, kind = [_readout(control, v) for v in values], "range"
    elif isinstance(control, ipywidgets.IntSlider):
        values = sorted({*range(control.min, control.max + 1, control.step), control.max, control.value})
        start = values.index(control.value)
        labels, kind = [_readout(control, v) for v in values], "range"
    elif isinstance(control, ipywidgets.FloatSlider):
        values = _steps(control.min, control.max, control.step, control.value)
        start = values.index(control.value)
        labels, kind = [_readout(control, v) for v in values], "range"
    else:
        raise TypeError(f"control {name!r} is a {type(control).__name__}; a static page cannot offer its values")
    keep = _spread(len(values), start)
    return Choice(
        name=name,
        description=description,
        kind=kind,
        values=[values[k] for k in keep],
        labels=[labels[k] for k in keep],
        start=keep.index(start),
        full=len(keep) == len(values),
    )


def plan_frames(controls: dict) -> Plan:
    """Every combination of the controls' values, or one control at a time if that is too many."""
    choices = [control_choices(name, control) for name, control in controls.items()]
    sizes = [len(choice.values) for choice in choices]
    if math.prod(sizes) <= MAX_FRAMES:
        return Plan(choices, "grid", list(itertools.product(*(range(n) for n in sizes))))
    start = tuple(choice.start for choice in choices)
    frames = [start]
    for k, n in enumerate(sizes):
        frames += [start[:k] + (v,) + start[k + 1 :] for v in range(n) if v != start[k]]
    return Plan(choices, "axes", frames)


def make_explorer(spec: dict):
    """The explorer a notebook made, from the call recorded beside it."""
    module, _, name = spec["function"].rpartition(".")
    if module != "helpers.widgets" or not name.endswith("_explorer"):
        raise ValueError(f"spec function must be helpers.widgets.*_explorer, got {spec['function']!r}")
    return getattr(importlib.import_module(module), name)(**spec["arguments"])


def render_frames(explorer, plan: Plan) -> dict[tuple[int, ...], bytes]:
    """A JPEG for each frame of the plan that the drawing accepts (a combination it refuses, such
    as a head beyond the number of heads, has no frame)."""
    names = [choice.name for choice in plan.choices]
    frames = {}
    for index in plan.frames:
        values = {name: choice.values[k] for name, choice, k in zip(names, plan.choices, index, strict=True)}
        try:
            explorer.drawing.update(**values)
        except (ValueError, IndexError):
            continue
        frames[index] = _jpeg(explorer.drawing.render())
    explorer.drawing.update(**{c.name: c.values[c.start] for c in plan.choices})  # back to the start
    return frames


def _jpeg(pixels) -> bytes:
    """A frame's JPEG, with optimised Huffman tables (the same pixels, about 5% fewer bytes)."""
    buffer = io.BytesIO()
    Image.fromarray(pixels).convert("RGB").save(buffer, format="JPEG", quality=QUALITY, optimize=True)
    return buffer.getvalue()


def _key(index: tuple[int, ...]) -> str:
    return ",".join(map(str, index))


def _alt(plan: Plan, index: tuple[int, ...]) -> str:
    shown = ", ".join(f"{c.description} {c.labels[k]}" for c, k in zip(plan.choices, index, strict=True))
    return f"the explorer's figure at {shown}"


def static_explorer_html(plan: Plan, urls: dict[tuple[int, ...], str], number: int) -> str:
    """The controls, the picture and the frame table of one explorer, as HTML."""
    start = tuple(choice.start for choice in plan.choices)
    rows = []
    for k, choice in enumerate(plan.choices):
        ident = f"explorer{number}-{choice.name}"
        label = f'<label for="{ident}">{html.escape(choice.description)}</label>'
        if choice.kind == "range":
            widget = (
                f'<input type="range" id="{ident}" data-control="{k}" min="0" max="{len(choice.values) - 1}" '
                f'step="1" value="{choice.start}" aria-valuetext="{html.escape(choice.labels[choice.start])}">'
            )
        else:
            options = "".join(
                f'<option value="{v}"{" selected" if v == choice.start else ""}>{html.escape(label_)}</option>'
                for v, label_ in enumerate(choice.labels)
            )
            widget = f'<select id="{ident}" data-control="{k}">{options}</select>'
        readout = f'<output for="{ident}" aria-live="off">{html.escape(choice.labels[choice.start])}</output>'
        rows.append(f'<span class="pe-control">{label} {widget} {readout}</span>')
    offered = []
    for choice in plan.choices:
        if choice.kind == "range" and not choice.full:
            offered.append(f"{html.escape(choice.description)}: {len(choice.values)} values from its range")
    if plan.mode == "axes":
        offered.insert(0, "one control at a time, the others at their starting values")
    note = "Pictures rendered ahead for " + ("; ".join(offered) if offered else "every value of every control") + "."
    data = {
        "names": [choice.description for choice in plan.choices],
        "labels": [choice.labels for choice in plan.choices],
        "start": list(start),
        "mode": plan.mode,
        "frames": {_key(index): url for index, url in urls.items()},
    }
    table = json.dumps(data).replace("<", "\\u003c")  # nothing inside the script element can end it
    return (
        f'<div class="pe-explorer" id="explorer{number}">'
        f'<div class="pe-controls">{"".join(rows)}</div>'
        f'<img class="pe-frame" src="{html.escape(urls[start])}" alt="{html.escape(_alt(plan, start))}" '
        'style="max-width:100%">'
        f'<p class="pe-note">{note} No kernel needed: the sliders swap pictures rendered when this page was '
        "built; open the notebook in JupyterLab for every value.</p>"
        f'<script type="application/json" class="pe-data">{table}</script>'
        "</div>"
    )


# The script shared by every explorer of a page: included once, before the first explorer.
SCRIPT = """
<style>
.pe-explorer { margin: 0.5em 0; }
.pe-controls { display: flex; flex-wrap: wrap; gap: 0.3em 1.5em; align-items: center; font-size: 0.9em; }
.pe-control input[type=range] { width: 14em; vertical-align: middle; }
.pe-control output { font-family: monospace; min-width: 5em; display: inline-block; }
.pe-note { font-size: 0.8em; color: #555; }
</style>
<script>
(function () {
  if (window.__peExplorers) return;  // every explorer carries this script; the first one sets all up
  window.__peExplorers = true;
  // The keys a control uses; in a slide deck they stay with the control while it is on the slide shown.
  var OWN_KEYS = ['ArrowLeft', 'ArrowRight', 'ArrowUp', 'ArrowDown', 'Home', 'End'];
  var DECK_KEYS = ['PageUp', 'PageDown'];  // what a presenter's clicker sends: always the deck's
  function setUp(root) {
    if (root.dataset.ready) return;
    var data = JSON.parse(root.querySelector('.pe-data').textContent);
    var img = root.querySelector('.pe-frame');
    var inputs = Array.prototype.slice.call(root.querySelectorAll('[data-control]'));
    var outputs = root.querySelectorAll('output');
    var cache = {};  // url -> Image, decoded once loaded
    var loaded = false;
    function load(url) {
      if (!cache[url]) {
        var im = new Image();
        im.src = url;
        cache[url] = (im.decode ? im.decode() : Promise.resolve()).then(function () { return im; }, function () {
          delete cache[url];  // not decoded (a missing file): try again on the next request
          return im;
        });
      }
      return cache[url];
    }
    function loadAll() {
      if (loaded) return;
      loaded = true;
      Object.keys(data.frames).forEach(function (key) { load(data.frames[key]); });
    }
    function index() { return inputs.map(function (el) { return parseInt(el.value, 10); }); }
    function show(changed, started) {
      var idx = index();
      if (data.mode === 'axes') {  // one control at a time: the others go back to their start
        inputs.forEach(function (el, k) {
          if (k !== changed && idx[k] !== data.start[k]) { el.value = data.start[k]; idx[k] = data.start[k]; }
        });
      }
      idx.forEach(function (v, k) {
        outputs[k].textContent = data.labels[k][v];
        inputs[k].setAttribute('aria-valuetext', data.labels[k][v]);
      });
      img.alt = "the explorer's figure at " + idx.map(function (v, k) {
        return data.names[k] + ' ' + data.labels[k][v];
      }).join(', ');
      var url = data.frames[idx.join(',')];
      root.dataset.requested = url || '';
      if (!url) { img.style.opacity = 0.3; return; }
      load(url).then(function () {
        if (root.dataset.requested !== url) return;  // a later key press won
        img.src = url;
        img.style.opacity = 1;
        requestAnimationFrame(function () {
          root.dataset.shown = url;
          root.dataset.repaintMs = (performance.now() - started).toFixed(2);
        });
      });
    }
    root.addEventListener('pointerenter', loadAll);
    root.addEventListener('focusin', loadAll);
    inputs.forEach(function (el, k) {
      el.addEventListener('input', function () { loadAll(); show(k, performance.now()); });
      el.addEventListener('keydown', function (event) {
        var section = el.closest('section');
        var shown = !section || section.classList.contains('present');
        if (DECK_KEYS.indexOf(event.key) >= 0) {
          event.preventDefault();  // the slider stays put
          if (section && window.Reveal) {  // reveal.js ignores keys while an <input> has focus: turn the page here
            el.blur();
            if (event.key === 'PageDown') Reveal.next(); else Reveal.prev();
          }
        } else if (shown && OWN_KEYS.indexOf(event.key) >= 0) {
          event.stopPropagation();  // reveal.js would otherwise take the arrows from a <select>
        }
      });
    });
    root.dataset.ready = '1';
  }
  function start() {
    Array.prototype.forEach.call(document.querySelectorAll('.pe-explorer'), setUp);
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
</script>
"""
