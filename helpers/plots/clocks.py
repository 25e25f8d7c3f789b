"""Clock pictures: a sin/cos pair as a hand turning on the unit circle (article 000 §3-4).

Notation: ``m`` position, ``θ`` angle turned per token (radians), period ``λ = 2π/θ`` tokens.
"""

from __future__ import annotations

import math

import numpy as np

from ._drawing import FULL, Drawing, new_figure
from ._style import pair_color

__all__ = ["one_clock"]


def one_clock(theta: float = math.pi / 4, m: int = 3, n_positions: int = 16) -> Drawing:
    """One hand: the point ``p_m = [cos mθ, sin mθ]`` on the circle beside its two curves.

    Left, the unit circle with the hands of positions ``0 .. n_positions-1`` (faint) and position
    ``m`` (bold). Right, ``cos(mθ)`` and ``sin(mθ)`` against position, the current ``m`` marked on
    both: the circle and the curves are one picture seen two ways (article 003 §7.5).

    Parameters: ``theta`` (radians per token), ``m`` (position shown), ``n_positions``.
    """
    fig, (circle_ax, curve_ax) = new_figure(9.0, 3.8, ncols=2)
    color = pair_color(0)
    ring = np.linspace(0.0, 2.0 * math.pi, 241)
    circle_ax.plot(np.cos(ring), np.sin(ring), color="0.75", linewidth=1.0)
    circle_ax.axhline(0.0, color="0.9", linewidth=0.8, zorder=0)
    circle_ax.axvline(0.0, color="0.9", linewidth=0.8, zorder=0)
    dots = circle_ax.scatter([], [], s=18, color=color, alpha=0.35, label="positions 0 .. N-1")
    (hand,) = circle_ax.plot([], [], color=color, linewidth=2.5, label="hand at position m")
    (tip,) = circle_ax.plot([], [], "o", color=color, markersize=7)
    circle_ax.set_aspect("equal")
    circle_ax.set_xlim(-1.25, 1.25)
    circle_ax.set_ylim(-1.25, 1.25)
    circle_ax.set_xlabel("cos(mθ)")
    circle_ax.set_ylabel("sin(mθ)")
    circle_ax.legend(loc="lower left", fontsize=7, frameon=False)

    (cos_line,) = curve_ax.plot([], [], "-o", markersize=3, color=color, label="cos(mθ)")
    (sin_line,) = curve_ax.plot([], [], "--s", markersize=3, color=color, alpha=0.7, label="sin(mθ)")
    marker = curve_ax.axvline(0.0, color="0.3", linewidth=1.0, linestyle=":")
    (cos_dot,) = curve_ax.plot([], [], "o", color="black", markersize=7)
    (sin_dot,) = curve_ax.plot([], [], "s", color="black", markersize=7)
    curve_ax.set_ylim(-1.15, 1.15)
    curve_ax.set_xlabel("position m (tokens)")
    curve_ax.set_ylabel("value")
    curve_ax.legend(loc="lower left", fontsize=7, ncols=2, frameon=False)
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.14, top=0.86, wspace=0.3)

    shown = {"n_positions": None}

    def update(theta: float, m: int, n_positions: int):
        positions = np.arange(n_positions)
        angles = positions * theta
        dots.set_offsets(np.column_stack((np.cos(angles), np.sin(angles))))
        x, y = math.cos(m * theta), math.sin(m * theta)
        hand.set_data([0.0, x], [0.0, y])
        tip.set_data([x], [y])
        cos_line.set_data(positions, np.cos(angles))
        sin_line.set_data(positions, np.sin(angles))
        marker.set_xdata([m, m])
        cos_dot.set_data([m], [x])
        sin_dot.set_data([m], [y])
        period = 2.0 * math.pi / theta if theta > 0 else math.inf
        circle_ax.title.set_text(f"m = {m}: angle mθ = {math.degrees(m * theta) % 360:.1f}°")
        curve_ax.title.set_text(f"θ = {theta:.3f} rad/token, period 2π/θ = {period:.2f} tokens")
        width = max(n_positions, m + 1)
        if shown["n_positions"] != width:  # new x range: lay the figure out again
            shown["n_positions"] = width
            curve_ax.set_xlim(-0.5, width - 0.5)
            return FULL
        return None

    params = {"theta": float(theta), "m": int(m), "n_positions": int(n_positions)}
    update(**params)
    artists = {"hand": hand, "cos_line": cos_line, "sin_line": sin_line, "dots": dots, "marker": marker}
    animated = [dots, hand, tip, cos_line, sin_line, marker, cos_dot, sin_dot, circle_ax.title, curve_ax.title]
    return Drawing("one_clock", fig, update, params, artists, animated)
