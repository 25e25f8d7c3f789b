"""Clock pictures: a sin/cos pair as a hand turning on the unit circle (article 000 §3-5).

Notation: ``m`` position, ``θ`` angle turned per token (radians), period ``λ = 2π/θ`` tokens;
with many hands ``θ_i = b^(-2i/d)`` for pair ``i``, ``b`` the base, ``d`` the width.
Hand ``i`` is drawn in ``pair_color(i)``.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.ticker import MaxNLocator

from .._validate import check_base, check_even_dim, check_int, check_positive
from ..sinusoidal import frequencies, nearest_collision, sinusoidal_pe
from ._drawing import Drawing, Layout, new_figure
from ._style import pair_color

__all__ = ["one_clock", "clock_hands", "many_clocks", "pe_dimensions", "period_schedules", "binary_counter"]


def _static(name: str, fig, artists: dict | None = None) -> Drawing:
    """A drawing without parameters (a picture that never changes)."""
    return Drawing(name, fig, lambda: None, {}, artists or {})


def _tokens(count: float) -> str:
    """A token count for a label: 6.3, 63, 628, 10k, 1M."""
    if count >= 1e6:
        return f"{count / 1e6:g}M"
    if count >= 1e4:
        return f"{count / 1e3:g}k"
    return f"{count:.1f}" if count < 100 and count != int(count) else f"{count:.0f}"


def _unit_circle(ax, limit: float = 1.3) -> None:
    ring = np.linspace(0.0, 2.0 * math.pi, 241)
    ax.plot(np.cos(ring), np.sin(ring), color="0.75", linewidth=1.0)
    ax.axhline(0.0, color="0.9", linewidth=0.8, zorder=0)
    ax.axvline(0.0, color="0.9", linewidth=0.8, zorder=0)
    ax.set_aspect("equal")
    ax.set_xlim(-limit, limit)
    ax.set_ylim(-limit, limit)


def one_clock(theta: float = math.pi / 4, m: int = 3, n_positions: int = 16, max_shift: int = 100) -> Drawing:
    """One hand: the point ``p_m = [cos mθ, sin mθ]`` on the circle beside its two curves.

    Left, the unit circle with the hands of positions ``0 .. n_positions-1`` (faint dots), the hand
    of position ``m`` (bold) and, as a ring, the position ``m + k`` that comes back closest to it
    for an offset ``k`` in ``1 .. max_shift`` (``nearest_collision``: exact returns report the
    smallest ``k``). Right, ``cos(xθ)`` and ``sin(xθ)`` as continuous curves of a real ``x``, with
    the integer positions ``m`` as dots on them and the current ``m`` marked: the circle and the
    curves are one picture seen two ways (article 003 §7.5). The titles give the angle, the period
    ``2π/θ`` and the closest return: its offset ``k`` and its gap ``‖p_(m+k) - p_m‖ = 2|sin(kθ/2)|``,
    written "0 (exact return, below 1e-9)" when it lies below ``nearest_collision``'s tolerance.

    Artists for tests: ``cos_line`` / ``sin_line`` are the dots at the integer positions,
    ``cos_curve`` / ``sin_curve`` the continuous curves, ``note`` the closest-return line's
    changing end (``note_start`` its constant start) and ``caption`` the legend line that names
    the positions drawn.

    Parameters: ``theta`` (radians per token, > 0), ``m`` (position shown, >= 0), ``n_positions``,
    ``max_shift``.
    """
    check_positive("theta", theta)
    check_int("m", m, minimum=0)
    check_int("n_positions", n_positions, minimum=1)
    check_int("max_shift", max_shift, minimum=1)
    fig, (circle_ax, curve_ax) = new_figure(9.0, 4.0, ncols=2)
    color = pair_color(0)
    _unit_circle(circle_ax, 1.25)
    dots = circle_ax.scatter([], [], s=18, color=color, alpha=0.35)
    (hand,) = circle_ax.plot([], [], color=color, linewidth=2.5)
    (tip,) = circle_ax.plot([], [], "o", color=color, markersize=7)
    (ring,) = circle_ax.plot(
        [], [], "o", markersize=13, markerfacecolor="none", markeredgecolor="crimson", markeredgewidth=1.5
    )
    circle_ax.set_xlabel("cos(mθ)")
    circle_ax.set_ylabel("sin(mθ)")
    caption = fig.text(0.02, 0.075, "", fontsize=8, color="0.3")

    (cos_curve,) = curve_ax.plot([], [], "-", linewidth=1.2, color=color)
    (sin_curve,) = curve_ax.plot([], [], "--", linewidth=1.2, color=color, alpha=0.7)
    (cos_line,) = curve_ax.plot([], [], "o", linestyle="None", markersize=4, color=color)
    (sin_line,) = curve_ax.plot([], [], "s", linestyle="None", markersize=4, color=color, alpha=0.7)
    marker = curve_ax.axvline(0.0, color="0.3", linewidth=1.0, linestyle=":")
    (cos_dot,) = curve_ax.plot([], [], "o", color="black", markersize=7)
    (sin_dot,) = curve_ax.plot([], [], "s", color="black", markersize=7)
    curve_ax.set_ylim(-1.15, 1.6)
    curve_ax.set_yticks([-1, -0.5, 0, 0.5, 1])
    curve_ax.title.set_fontsize(10)
    curve_ax.set_xlabel("position m (tokens)")
    curve_ax.set_ylabel("value")
    curve_ax.legend(
        [(cos_curve, cos_line), (sin_curve, sin_line)],
        ["cos(mθ)", "sin(mθ)"],
        loc="upper left",
        fontsize=8,
        ncols=2,
        frameon=False,
    )
    curve_ax.text(
        0.99,
        0.985,
        "dots: integer positions m",
        transform=curve_ax.transAxes,
        ha="right",
        va="top",
        fontsize=8,
        color="0.3",
    )
    # The closest-return line: its constant start is part of the background, the rest (``note``)
    # is drawn right after it at each frame (the same pixels as one line, fewer glyphs to draw).
    note_start = fig.text(0.02, 0.02, "", ha="left", va="bottom", fontsize=9, color="crimson")
    note = fig.text(0.02, 0.02, "", ha="left", va="bottom", fontsize=9, color="crimson")
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.24, top=0.9, wspace=0.3)

    shown = {"width": None}
    found = {}

    def update(theta: float, m: int, n_positions: int, max_shift: int):
        theta = check_positive("theta", theta)
        m = check_int("m", m, minimum=0)
        n_positions = check_int("n_positions", n_positions, minimum=1)
        max_shift = check_int("max_shift", max_shift, minimum=1)
        positions = np.arange(n_positions)
        angles = positions * theta
        dots.set_offsets(np.column_stack((np.cos(angles), np.sin(angles))))
        x, y = math.cos(m * theta), math.sin(m * theta)
        hand.set_data([0.0, x], [0.0, y])
        tip.set_data([x], [y])
        k, distance = nearest_collision(theta, max_shift)
        found.update(k=k, distance=distance)
        ring.set_data([math.cos((m + k) * theta)], [math.sin((m + k) * theta)])
        cos_line.set_data(positions, np.cos(angles))
        sin_line.set_data(positions, np.sin(angles))
        width = max(n_positions, m + 1)
        fine = np.linspace(0.0, width - 1.0, 24 * (width - 1) + 1)  # (F,): 24 points per token, enough up to θ = π
        cos_curve.set_data(fine, np.cos(fine * theta))
        sin_curve.set_data(fine, np.sin(fine * theta))
        marker.set_xdata([m, m])
        cos_dot.set_data([m], [x])
        sin_dot.set_data([m], [y])
        period = 2.0 * math.pi / theta
        circle_ax.title.set_text(f"m = {m}: angle mθ = {math.degrees(m * theta) % 360:.1f}°")
        curve_ax.title.set_text(f"θ = {theta:.3f} rad/token, period 2π/θ = {period:.2f} tokens")
        # Below the tie tolerance of nearest_collision the gap is 0 up to round-off: say so, never "0.0000".
        shown_gap = "0 (exact return, below 1e-9)" if distance < 1e-9 else f"{distance:.4f}"
        start = f"closest return within {max_shift} tokens: offset "
        if note_start.get_text() != start:
            note_start.set_text(start)
            note.set_x(note_start.get_window_extent(fig.canvas.get_renderer()).x1 / fig.bbox.width)
        note.set_text(f"k = {k}, gap {shown_gap}")
        caption.set_text(
            f"circle: faint dots = positions 0 .. {n_positions - 1}, bold = hand of position m, "
            "red ring = position m + k (closest return); gap = ‖p(m+k) − p(m)‖ = 2|sin(kθ/2)|"
        )
        if shown["width"] != width:  # new x range
            shown["width"] = width
            curve_ax.set_xlim(-0.5, width - 0.5)
        # The x range and the caption (a long constant line, 20-30 ms of glyphs a frame on a busy
        # core) are part of the background: one background per width and number of positions.
        return Layout((width, n_positions, max_shift))

    params = {"theta": float(theta), "m": int(m), "n_positions": int(n_positions), "max_shift": int(max_shift)}
    update(**params)
    artists = {
        "hand": hand,
        "cos_line": cos_line,
        "sin_line": sin_line,
        "cos_curve": cos_curve,
        "sin_curve": sin_curve,
        "dots": dots,
        "marker": marker,
        "ring": ring,
        "note": note,
        "note_start": note_start,
        "caption": caption,
        "collision": found,
    }
    animated = [
        dots,
        hand,
        tip,
        ring,
        cos_curve,
        sin_curve,
        cos_line,
        sin_line,
        marker,
        cos_dot,
        sin_dot,
        circle_ax.title,
        curve_ax.title,
        note,
    ]
    return Drawing("one_clock", fig, update, params, artists, animated)


def clock_hands(theta: float = math.pi / 4, positions=(0, 1, 2, 3)) -> Drawing:
    """The hands ``p_m = [cos mθ, sin mθ]`` of a few positions on one clock face (static).

    Each hand is labelled with its position ``m`` and its angle ``mθ`` in degrees.
    """
    theta = check_positive("theta", theta)
    positions = [check_int("positions", m, minimum=0) for m in positions]
    fig, ax = new_figure(4.2, 4.2)
    _unit_circle(ax, 1.45)
    color = pair_color(0)
    hands = []
    for rank, m in enumerate(positions):
        x, y = math.cos(m * theta), math.sin(m * theta)
        alpha = 0.35 + 0.65 * (rank + 1) / len(positions)
        (line,) = ax.plot([0.0, x], [0.0, y], color=color, linewidth=2.2, alpha=alpha)
        ax.plot([x], [y], "o", color=color, alpha=alpha)
        ax.annotate(
            f"m={m}\n{math.degrees(m * theta):.0f}°",
            (x, y),
            xytext=(1.22 * x, 1.22 * y),
            ha="center",
            va="center",
            fontsize=8,
        )
        hands.append(line)
    ax.set_title(f"hands of positions {positions[0]}..{positions[-1]}, θ = {math.degrees(theta):.0f}° per token")
    ax.set_xlabel("cos(mθ)")
    ax.set_ylabel("sin(mθ)")
    fig.subplots_adjust(left=0.14, right=0.97, bottom=0.12, top=0.9)
    return _static("clock_hands", fig, {"hands": hands})


def pe_dimensions(n_positions: int = 512, d: int = 64, pairs=(0, 4, 8, 16), base: float = 10000.0) -> Drawing:
    """The sin dimension ``2i`` of a few pairs ``i`` of ``sinusoidal_pe(n_positions, d)`` against position.

    One small panel per pair, in ``pair_color(i)``; fast pairs stripe, slow pairs barely move.
    """
    n_positions = check_int("n_positions", n_positions, minimum=2)
    d = check_even_dim("d", d)
    pairs = [check_int("pairs", i, minimum=0) for i in pairs]
    if max(pairs) >= d // 2:
        raise ValueError(f"pairs must be < d/2 = {d // 2}, got {max(pairs)}")
    pe = sinusoidal_pe(n_positions, d, base).numpy()  # (T, d)
    theta = frequencies(d, base).numpy()  # (d/2,)
    fig, axes = new_figure(8.0, 1.2 + 1.1 * len(pairs), nrows=len(pairs))
    axes = np.atleast_1d(axes)
    lines = []
    for ax, i in zip(axes, pairs, strict=True):
        (line,) = ax.plot(
            np.arange(n_positions),
            pe[:, 2 * i],
            color=pair_color(i),
            linewidth=1.2,
            label=f"dim {2 * i}: sin(m θ_{i}), period {_tokens(2 * math.pi / theta[i])} tokens",
        )
        ax.set_ylim(-1.2, 1.9)
        ax.set_yticks([-1, 0, 1])
        ax.set_xlim(0, n_positions - 1)
        ax.set_ylabel("value")
        ax.legend(loc="upper right", fontsize=7, frameon=True)
        lines.append(line)
        if ax is not axes[-1]:
            ax.tick_params(labelbottom=False)
    axes[0].set_title(f"a few dimensions of sinusoidal_pe({n_positions}, {d})")
    axes[-1].set_xlabel("position m (tokens)")
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.1, top=0.92, hspace=0.15)
    return _static("pe_dimensions", fig, {"lines": lines})


def period_schedules(d: int = 64, base: float = 10000.0) -> Drawing:
    """Periods ``2π/θ_i`` of a geometric and an arithmetic schedule with the same fastest and slowest speed.

    Left, period against pair index on a log axis: the geometric schedule is a straight line.
    Right, how many hands fall in each decade of periods (1-10, 10-100, ... tokens), integer ticks.
    """
    d = check_even_dim("d", d)
    base = check_base("base", base)
    geometric = frequencies(d, base).numpy()  # (d/2,)
    arithmetic = np.linspace(geometric[0], geometric[-1], d // 2)  # (d/2,) same ends, equal steps
    fig, (left, right) = new_figure(10.0, 3.8, ncols=2)
    pair = np.arange(d // 2)
    for speeds, style, name in (
        (geometric, "o", "geometric θ_i = b^(-2i/d)"),
        (arithmetic, "s", "arithmetic, same range"),
    ):
        left.semilogy(pair, 2 * math.pi / speeds, style, markersize=4, label=name, alpha=0.85)
    left.set_xlabel("pair index i")
    left.set_ylabel("period 2π/θ_i (tokens, log scale)")
    left.set_title(f"periods of d/2 = {d // 2} hands, b = {base:g}")
    left.legend(fontsize=8, loc="upper left")
    edges = 10.0 ** np.arange(0, math.ceil(math.log10(2 * math.pi * base)) + 1)
    geo_count, _ = np.histogram(2 * math.pi / geometric, bins=edges)
    ari_count, _ = np.histogram(2 * math.pi / arithmetic, bins=edges)
    slots = np.arange(len(edges) - 1)
    right.bar(slots - 0.2, geo_count, width=0.4, label="geometric")
    right.bar(slots + 0.2, ari_count, width=0.4, label="arithmetic")
    right.set_xticks(slots, [f"{_tokens(edges[k])}–{_tokens(edges[k + 1])}" for k in slots], fontsize=8)
    right.set_xlabel("period range (tokens)")
    right.set_ylabel("number of hands")
    right.yaxis.set_major_locator(MaxNLocator(integer=True))
    right.set_title("hands per decade of period")
    right.legend(fontsize=8)
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.15, top=0.9, wspace=0.28)
    return _static("period_schedules", fig, {"geometric_count": geo_count, "arithmetic_count": ari_count})


def binary_counter(n_bits: int = 4, n_positions: int = 16) -> Drawing:
    """Bits of a binary counter beside smooth clocks of the same periods (article 001 §9.5.2).

    Bit ``j`` of ``m`` flips every ``2^j`` positions, period ``2^(j+1)``: it is on for the ``2^j``
    positions ``2^j .. 2^(j+1) - 1`` of each period, a run whose middle is ``1.5 · 2^j - 0.5``. Its
    smooth twin ``(1 - cos(π (m + 1/2 - 2^(j-1)) / 2^j)) / 2`` turns with the same period and peaks
    at the middle of each "on" run (and is lowest at the middle of each "off" run): it is the first
    harmonic of the steps as drawn. For ``j = 0`` it is ``(1 - cos(π m)) / 2`` and equals the bit at
    every integer. Bit ``j`` is drawn in ``pair_color(j)``: the lowest bit is the fastest hand.
    Artists: ``clocks`` (the smooth curves, lowest bit first).
    """
    n_bits = check_int("n_bits", n_bits, minimum=1)
    n_positions = check_int("n_positions", n_positions, minimum=2)
    m = np.arange(n_positions)
    fine = np.linspace(0, n_positions - 1, 20 * n_positions)
    clocks = []
    fig, axes = new_figure(8.0, 1.0 + 1.0 * n_bits, nrows=n_bits)
    axes = np.atleast_1d(axes)
    for j, ax in enumerate(axes):
        bits = (m >> j) & 1
        ax.step(m, bits, where="mid", color="0.4", linewidth=1.2, label=f"bit {j} (flips every {2**j})")
        (clock,) = ax.plot(
            fine,
            (1 - np.cos(np.pi * (fine + 0.5 - 2.0 ** (j - 1)) / 2**j)) / 2,
            color=pair_color(j),
            linewidth=1.8,
            label=f"clock, period {2 ** (j + 1)} tokens",
        )
        clocks.append(clock)
        ax.set_ylim(-0.15, 1.15)
        ax.set_yticks([0, 1])
        ax.set_xlim(-0.5, n_positions - 0.5)
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=7, frameon=False)
        if j < n_bits - 1:
            ax.tick_params(labelbottom=False)
    axes[0].set_title("binary counter (grey steps) and smooth clocks of the same periods")
    axes[-1].set_xlabel("position m (tokens)")
    axes[-1].set_xticks(m)
    fig.subplots_adjust(left=0.06, right=0.72, bottom=0.12, top=0.9, hspace=0.2)
    return _static("binary_counter", fig, {"clocks": clocks})


def many_clocks(base: float = 10000.0, d: int = 64, n_positions: int = 512, max_shift: int = 4096) -> Drawing:
    """Many hands at once: the table, the periods and how close two positions come, for any ``b`` and ``d``.

    Left, the table ``sinusoidal_pe(n_positions, d, base)`` as a heat map (the x axis is the
    dimension as a fraction of ``d``, so every ``d`` fills the panel). Middle, the period of each
    hand on a log axis against ``2i/d``, with the table's length for scale. Right, the gap
    ``‖p_(m+Δ) - p_m‖ = sqrt(Σ_i 4 sin²(Δθ_i/2))`` divided by the norm ``sqrt(d/2)`` for the offsets
    ``Δ = 1 .. max_shift - 1`` (the same for every ``m``), its minimum marked and the neighbours' gap
    (``Δ = 1``) dashed: when the minimum lies below the dashed line, two far-apart positions look
    more alike than neighbours. The title gives that offset and its gap on the axis's scale (gap / norm).
    ``artists["found"]`` holds ``shift`` (that offset), ``distance`` (its gap, not divided by the norm)
    and ``neighbour`` (the neighbours' gap, not divided).

    Parameters: ``base`` (> 1), ``d`` (even), ``n_positions``, ``max_shift``.
    """
    check_base("base", base)
    check_even_dim("d", d)
    n_positions = check_int("n_positions", n_positions, minimum=2)
    max_shift = check_int("max_shift", max_shift, minimum=2)
    fig, (map_ax, period_ax, dist_ax) = new_figure(10.5, 3.7, ncols=3)
    image = map_ax.imshow(
        np.zeros((n_positions, 2)),
        cmap="RdBu_r",
        vmin=-1,
        vmax=1,
        aspect="auto",
        interpolation="nearest",
        extent=(0.0, 1.0, n_positions - 0.5, -0.5),
    )
    colorbar = fig.colorbar(image, ax=map_ax, fraction=0.046, pad=0.03, ticks=[-1, 0, 1])
    colorbar.set_label("entry p_m[j]", fontsize=8, labelpad=-2)
    map_ax.set_xlabel("dimension / d  (fast → slow)")
    map_ax.set_title(f"the table p_m, {n_positions} positions")
    map_ax.set_ylabel("position m (tokens)")

    period_ax.set_yscale("log")
    period_ax.set_xlim(-0.03, 1.0)
    period_ax.set_ylim(1.0, 2e7)
    period_ax.axhline(n_positions, color="0.5", linestyle="--", linewidth=1.0, label=f"{n_positions} tokens")
    period_ax.axhline(max_shift, color="0.5", linestyle=":", linewidth=1.0, label=f"{max_shift} tokens")
    periods = period_ax.scatter([], [], s=14)
    period_ax.set_xlabel("2i/d  (pair i)")
    period_ax.set_ylabel("period 2π/θ_i (tokens)")
    period_ax.legend(loc="upper left", fontsize=7, frameon=False)

    shifts = np.arange(1, max_shift, dtype=np.float64)  # (K-1,)
    dist_ax.set_xscale("log")
    dist_ax.set_xlim(1, max_shift)
    dist_ax.set_ylim(0.0, 2.05)
    (curve,) = dist_ax.plot(
        shifts, np.zeros(len(shifts)), color=pair_color(0), linewidth=0.8, label="gap ‖p(m+Δ) − p(m)‖ / ‖p(m)‖"
    )
    (neighbour,) = dist_ax.plot(
        [1, max_shift], [0, 0], "--", color="0.4", linewidth=1.0, label="neighbours' gap, Δ = 1"
    )
    (closest,) = dist_ax.plot([], [], "o", color="crimson", markersize=7, label="closest pair")
    dist_ax.set_xlabel("offset Δ (tokens, log scale)")
    dist_ax.title.set_fontsize(10)
    period_ax.title.set_fontsize(10)
    dist_ax.set_ylabel("gap / norm")
    dist_ax.legend(loc="lower right", fontsize=7, frameon=True)
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.14, top=0.87, wspace=0.55)
    found = {}

    def update(base: float, d: int, n_positions: int, max_shift: int):
        base = check_base("base", base)
        d = check_even_dim("d", d)
        theta = frequencies(d, base).numpy()  # (d/2,) float64
        # The same formulas as sinusoidal_pe and shift_distance (the tests compare them), in numpy:
        # single-threaded, it stays fast while a slider moves on a busy machine.
        angle = np.outer(np.arange(n_positions), theta)  # (T, d/2)
        image.set_data(
            np.stack((np.sin(angle), np.cos(angle)), axis=-1).reshape(n_positions, d)
        )  # (T, d/2, 2) -> (T, d)
        exponent = np.arange(0, d, 2) / d  # (d/2,)
        periods.set_offsets(np.column_stack((exponent, 2 * math.pi / theta)))
        periods.set_color([pair_color(i) for i in range(d // 2)])
        norm = math.sqrt(d / 2)
        half = np.sin(np.outer(shifts, theta / 2.0).astype(np.float32))  # (K-1, d/2); float32 is plenty for a picture
        distance = 2.0 * np.sqrt((half * half).sum(axis=1, dtype=np.float64)) / norm  # (K-1,): ‖p_(m+Δ) - p_m‖ / ‖p_m‖
        curve.set_ydata(distance)
        best = int(np.argmin(distance))
        found.update(shift=best + 1, distance=float(distance[best]) * norm, neighbour=float(distance[0]) * norm)
        neighbour.set_ydata([distance[0], distance[0]])
        closest.set_data([best + 1], [distance[best]])
        period_ax.title.set_text(f"b = {base:,.0f}, d = {d}: longest period {2 * math.pi / theta[-1]:,.0f}")
        alarm = distance[best] < distance[0]
        dist_ax.title.set_text(
            f"closest pair: Δ = {best + 1}, gap / norm {distance[best]:.3f}"
            + ("\ncloser than neighbours" if alarm else "\n(neighbours)")
        )
        dist_ax.title.set_color("crimson" if alarm else "black")
        return None

    params = {"base": float(base), "d": int(d), "n_positions": n_positions, "max_shift": max_shift}
    update(**params)
    artists = {
        "image": image,
        "periods": periods,
        "curve": curve,
        "neighbour": neighbour,
        "closest": closest,
        "found": found,
    }
    animated = [image, periods, curve, neighbour, closest, period_ax.title, dist_ax.title]
    return Drawing("many_clocks", fig, update, params, artists, animated)
