"""Kernel-side latency of every slider explorer: one update = redraw the figure + render its PNG.

Finds every ``helpers.widgets.*_explorer``, builds it with its defaults, then moves each of its
controls through values spread over the control's range (alternating between controls, as a
learner would), and times each update as ``Explorer.refresh`` measures it. Prints the median and
95th percentile per explorer against the goals (median < 50 ms, p95 < 100 ms).

    python benchmarks/interactive_latency.py [--updates 40] [--only one_clock]

The time in the browser adds the PNG's trip to the page; tests/browser measures that end to end.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys

import ipywidgets
import numpy as np
import torch

import helpers

GOAL_MEDIAN_MS = 50.0
GOAL_P95_MS = 100.0


def control_values(control, count: int) -> list:
    """``count`` values spread over a control's range, starting away from its current value."""
    if isinstance(control, ipywidgets.FloatLogSlider):
        exps = np.linspace(control.min, control.max, count)
        return [float(control.base**e) for e in exps]
    if hasattr(control, "options") and control.options:
        options = list(control.options)
        values = [o[1] if isinstance(o, tuple) else o for o in options]
        return [values[k % len(values)] for k in range(1, count + 1)]
    if isinstance(
        control, (ipywidgets.IntSlider, ipywidgets.FloatSlider, ipywidgets.BoundedIntText, ipywidgets.BoundedFloatText)
    ):
        # Only values the control can take: min + k * step.
        step = getattr(control, "step", None) or 1
        steps = np.floor((np.linspace(control.min, control.max, count) - control.min) / step + 1e-9)
        values = [control.min + k * step for k in steps]
        return [int(v) for v in values] if isinstance(control.value, int) else [float(v) for v in values]
    if isinstance(control, (ipywidgets.Checkbox, ipywidgets.ToggleButton)):
        return [bool(k % 2) for k in range(1, count + 1)]
    raise TypeError(f"no rule to move a {type(control).__name__}")


def measure(factory, updates: int) -> list[float]:
    explorer = factory()
    names = list(explorer.controls)
    plans = {name: control_values(explorer.controls[name], updates) for name in names}
    times = []
    for step in range(updates):
        name = names[step % len(names)]
        control = explorer.controls[name]
        value = plans[name][step // len(names) % updates]
        if control.value == value:
            continue
        control.value = value  # the observer calls explorer.refresh()
        times.append(explorer.last_update_s * 1000.0)
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=40, help="slider moves per explorer")
    parser.add_argument("--only", default="", help="time only explorers whose name contains this")
    args = parser.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    names = sorted(n for n in helpers.widgets.__all__ if n.endswith("_explorer") and args.only in n)
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}, torch threads {torch.get_num_threads()}")
    print(
        f"{'explorer':34s} {'updates':>7s} {'median ms':>10s} {'p95 ms':>8s}  "
        f"goal (median < {GOAL_MEDIAN_MS:.0f}, p95 < {GOAL_P95_MS:.0f})"
    )
    failed = 0
    for name in names:
        times = measure(getattr(helpers.widgets, name), args.updates)
        median = statistics.median(times)
        p95 = float(np.percentile(times, 95))
        ok = median < GOAL_MEDIAN_MS and p95 < GOAL_P95_MS
        failed += not ok
        print(f"{name:34s} {len(times):7d} {median:10.1f} {p95:8.1f}  {'ok' if ok else 'OVER GOAL'}")
    print(f"{len(names) - failed} of {len(names)} explorers meet the goal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
