"""Pictures for notebook 04: the position kernel, its continuous limit and the paired clock faces (article 000 §6).

Notation: ``Δ = m - n`` the offset in tokens (``m`` the query's position, ``n`` the key's), ``d``
width, ``i`` pair (hand) index, ``θ_i = b^(-2i/d)`` radians per token, ``κ_d(Δ) = (2/d) Σ_i cos(Δ θ_i)``
the normalised kernel, ``b`` the base. The kernel is even in ``Δ``, so the figures use ``|Δ|``.

Clock faces. A hand at angle ``φ`` is drawn turned clockwise from twelve o'clock, like a real
clock: the reference position has every hand at twelve, the compared position has hand ``i``
turned by ``|Δ| θ_i``; the cosine of that angle is what hand ``i`` adds to ``p_mᵀ p_n``.
Hand ``i`` is drawn in ``pair_color(i)`` and, so that hands on top of each other stay visible,
faster hands are longer and thinner.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from matplotlib.ticker import FuncFormatter
from scipy.special import sici

from .._validate import check_base, check_even_dim, check_int
from ..kernels import continuous_kernel, position_kernel
from ..sinusoidal import frequencies
from ._drawing import FULL, Drawing, new_figure
from ._style import pair_color

__all__ = ["default_hands", "paired_clocks", "kernel_curves", "kernel_and_clocks", "continuous_kernel_curve"]


def default_hands(d: int) -> tuple[int, ...]:
    """Pair indices of a fast, a middle and a slow hand for width ``d``: about ``(0, n/3, 2n/3)``, ``n = d/2``,
    moved up a pair or two where needed so that the three colours ``pair_color(i)`` differ.

    For ``d = 8`` this is ``(0, 1, 2)``: ``θ = 1, 0.1, 0.01`` (article 000 Figure 1's three hands).
    """
    n = check_even_dim("d", d) // 2
    chosen: list[int] = []
    for pick in (0, round((n - 1) / 3), round(2 * (n - 1) / 3)):
        # pair_color repeats every ten pairs: step to the next pair until the colour is a new one
        while pick < n - 1 and (pick in chosen or any((pick - c) % 10 == 0 for c in chosen)):
            pick += 1
        if pick not in chosen:
            chosen.append(pick)
    return tuple(chosen)


def _check_hands(hands, d: int) -> tuple[int, ...]:
    if hands is None:
        return default_hands(d)
    hands = tuple(check_int("hands", int(h) if isinstance(h, np.integer) else h, minimum=0) for h in hands)
    if not hands or max(hands) >= d // 2:
        raise ValueError(f"hands must be pair indices in 0 .. {d // 2 - 1} for d = {d}, got {hands}")
    return hands


def _clock_face(ax, radius: float = 1.0) -> None:
    """An empty clock face on ``ax``: circle, twelve ticks, equal aspect, no axes."""
    ring = np.linspace(0.0, 2.0 * math.pi, 181)
    ax.plot(radius * np.cos(ring), radius * np.sin(ring), color="0.55", linewidth=1.2)
    for hour in range(12):
        a = hour * math.pi / 6
        inner = 0.86 if hour % 3 == 0 else 0.92
        ax.plot([inner * math.sin(a), math.sin(a)], [inner * math.cos(a), math.cos(a)], color="0.55", linewidth=1.0)
    ax.plot([0.0], [0.0], "o", color="0.3", markersize=3, zorder=5)
    ax.set_xlim(-1.15, 1.15)
    ax.set_ylim(-1.15, 1.15)
    ax.set_aspect("equal")
    ax.axis("off")


class _ClockPair:
    """Reference and compared clock faces for up to three hands, and what each hand votes.

    The votes ``cos(|Δ| θ_i)`` are written as lines of text beside the faces (``text_ax``, for
    the static figure) or drawn as bars (``bar_ax``, for the explorer: bars redraw much faster
    than text, which keeps a slider step quick).
    """

    def __init__(self, ref_ax, cmp_ax, *, text_ax=None, bar_ax=None, max_hands: int = 3, fontsize: float = 8.0):
        _clock_face(ref_ax)
        _clock_face(cmp_ax)
        self.ref_hands, self.cmp_hands, self.lines, self.bars, self.bar_names = [], [], [], [], []
        for k in range(max_hands):
            length, width = 0.95 - 0.17 * k, 1.6 + 1.3 * k
            (ref,) = ref_ax.plot([], [], linewidth=width, solid_capstyle="round", zorder=4 - k)
            (cmp,) = cmp_ax.plot([], [], linewidth=width, solid_capstyle="round", zorder=4 - k)
            ref.length = cmp.length = length
            self.ref_hands.append(ref)
            self.cmp_hands.append(cmp)
        self.total = None
        if text_ax is not None:
            for k in range(max_hands):
                self.lines.append(
                    text_ax.text(
                        0.0,
                        0.86 - 0.2 * k,
                        "",
                        fontsize=fontsize,
                        transform=text_ax.transAxes,
                        va="center",
                        ha="left",
                        family="monospace",
                    )
                )
            self.total = text_ax.text(
                0.0,
                0.86 - 0.2 * max_hands,
                "",
                fontsize=fontsize,
                transform=text_ax.transAxes,
                va="center",
                ha="left",
                family="monospace",
            )
            text_ax.axis("off")
        if bar_ax is not None:
            self.bars = list(bar_ax.bar(range(max_hands), np.zeros(max_hands), width=0.6))
            bar_ax.axhline(0.0, color="0.4", linewidth=0.8)
            bar_ax.set_xticks([])
            # Each bar named "i = .., θ = .." below the lowest bar, inside the axes: as animated text
            # it is redrawn with the bars (blitted), where tick labels would need the whole figure.
            self.bar_names = [bar_ax.text(k, -1.12, "", ha="center", va="top", fontsize=7) for k in range(max_hands)]
            bar_ax.set_ylim(-1.45, 1.05)
            bar_ax.set_yticks([-1.0, -0.5, 0.0, 0.5, 1.0])
            bar_ax.set_ylabel("vote cos(|Δ|θ_i)", fontsize=8)
            bar_ax.tick_params(labelsize=8)
        ref_ax.set_title("reference, Δ = 0", fontsize=9)
        cmp_ax.set_title(" ", fontsize=9)
        self.cmp_title = cmp_ax.title

    def artists(self) -> list:
        """The artists an update changes."""
        extra = [self.total] if self.total is not None else []
        return [*self.cmp_hands, *self.ref_hands, *self.lines, *self.bars, *self.bar_names, *extra, self.cmp_title]

    def update(self, delta: int, d: int, base: float, hands: tuple[int, ...]) -> dict:
        theta = frequencies(d, base).numpy()  # (d/2,)
        cosines = {}
        for k, (ref, cmp) in enumerate(zip(self.ref_hands, self.cmp_hands, strict=True)):
            shown = k < len(hands)
            partners = [ref, cmp] + ([self.lines[k]] if self.lines else []) + ([self.bars[k]] if self.bars else [])
            for artist in partners:
                artist.set_visible(shown)
            if not shown:
                continue
            i = hands[k]
            angle = abs(delta) * theta[i]
            cosines[i] = math.cos(angle)
            ref.set_data([0.0, 0.0], [0.0, ref.length])
            cmp.set_data([0.0, cmp.length * math.sin(angle)], [0.0, cmp.length * math.cos(angle)])
            for artist in partners:
                artist.set_color(pair_color(i))
            if self.lines:
                self.lines[k].set_text(
                    f"i={i:<3d} θ_i={theta[i]:<6.2g} |Δ|θ_i = {angle:7.3f} rad   cos = {cosines[i]:+.3f}"
                )
            if self.bars:
                self.bars[k].set_height(cosines[i])
        if self.bars:
            # pair_color repeats every ten pairs: each bar's name gives its hand (i and θ_i), in its colour
            for k, name in enumerate(self.bar_names):
                shown = k < len(hands)
                name.set_text(f"i = {hands[k]}, θ = {theta[hands[k]]:.3g}" if shown else "")
                if shown:
                    name.set_color(pair_color(hands[k]))
        if self.total is not None:
            kappa = float(position_kernel(float(delta), d, base))
            self.total.set_text(f"all {d // 2} hands: p_m·p_n = {kappa * d / 2:+.3f},  κ_d(Δ) = {kappa:+.3f}")
        self.cmp_title.set_text(f"compared, |Δ| = {abs(delta)}")
        return cosines


def paired_clocks(distances=(1, 3, 5), d: int = 8, base: float = 10000.0, hands=None) -> Drawing:
    """Article 000 Figure 1, recomputed: one row of paired clock faces per offset ``|Δ|``.

    Each row shows the reference position (every hand at twelve o'clock), the compared position
    (hand ``i`` turned by ``|Δ| θ_i``) and, beside them, the cosine each shown hand contributes
    to ``p_mᵀ p_n``, with the kernel over all ``d/2`` hands.

    Parameters: ``distances`` (the offsets ``Δ``, a tuple of ints; an update keeps their number), ``d``, ``base``,
    ``hands`` (pair indices, at most three; ``None`` means ``default_hands(d)``).
    Artists: ``cmp_hands`` (list per row of the compared hands' lines), ``texts`` (per row).
    """
    distances = tuple(check_int("distances", int(x)) for x in distances)
    if not 1 <= len(distances) <= 6:
        raise ValueError(f"distances must hold 1 to 6 distances, got {len(distances)}")
    d = check_even_dim("d", d)
    base = check_base("base", base)
    rows = len(distances)
    height = 1.9 * rows + 0.5
    fig = new_figure(8.0, height)[0]
    fig.clear()  # the rows are laid out on a grid of our own
    grid = fig.add_gridspec(
        rows,
        3,
        width_ratios=[1.0, 1.0, 2.6],
        left=0.01,
        right=0.99,
        top=1 - 0.55 / height,
        bottom=0.02,
        wspace=0.08,
        hspace=0.3,
    )
    pairs = [
        _ClockPair(fig.add_subplot(grid[r, 0]), fig.add_subplot(grid[r, 1]), text_ax=fig.add_subplot(grid[r, 2]))
        for r in range(rows)
    ]
    fig.suptitle("Paired clock faces: hand i of the compared position is turned by |Δ|θ_i", fontsize=10)

    def update(distances, d, base, hands):
        distances = tuple(int(x) for x in distances)
        if len(distances) != rows:
            raise ValueError(f"this drawing has {rows} rows; got {len(distances)} distances")
        d = check_even_dim("d", d)
        base = check_base("base", base)
        chosen = _check_hands(hands, d)
        if len(chosen) > 3:
            raise ValueError(f"at most three hands can be drawn, got {chosen}")
        for pair, delta in zip(pairs, distances, strict=True):
            pair.update(delta, d, base, chosen)
        return None

    params = {"distances": distances, "d": d, "base": base, "hands": None if hands is None else tuple(hands)}
    update(**params)
    artists = {
        "cmp_hands": [p.cmp_hands for p in pairs],
        "ref_hands": [p.ref_hands for p in pairs],
        "texts": [p.lines for p in pairs],
        "totals": [p.total for p in pairs],
    }
    return Drawing("paired_clocks", fig, update, params, artists)


def kernel_curves(ds=(8, 64, 512), base: float = 10000.0, max_delta: int = 100_000) -> Drawing:
    """``κ_d(Δ)`` at every integer ``Δ = 1 .. max_delta`` on a log axis, one panel per width ``d``,
    with the continuous curve ``∫_0^1 cos(Δ b^(-t)) dt`` drawn over each.

    Parameters: ``base``. Artists: ``lines`` (one finite-sum line per d, in the order of ``ds``),
    ``continuous`` (one per panel).
    """
    ds = tuple(check_even_dim("ds", int(d)) for d in ds)
    if not 1 <= len(ds) <= 6:
        raise ValueError(f"ds must hold 1 to 6 widths, got {len(ds)}")
    max_delta = check_int("max_delta", max_delta, minimum=2)
    fig = new_figure(8.4, 1.0 + 1.9 * len(ds))[0]
    fig.clear()
    axes = np.atleast_1d(fig.subplots(len(ds), 1, sharex=True))
    delta = np.arange(1, max_delta + 1, dtype=np.float64)  # (N,)
    lines, continuous = [], []
    for ax, d in zip(axes, ds, strict=True):
        (line,) = ax.plot(
            delta, np.zeros_like(delta), color="#6a51a3", linewidth=0.6, label=f"finite sum κ_d(Δ), d = {d}"
        )
        (curve,) = ax.plot(
            delta,
            np.zeros_like(delta),
            color="black",
            linewidth=1.8,
            linestyle="--",
            label="continuous ∫₀¹ cos(Δ b^(-t)) dt (article 000, Figure 2)",
        )
        ax.axhline(0.0, color="0.6", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_xlim(1, max_delta)
        ax.set_ylim(-1.05, 1.05)
        ax.set_ylabel("κ_d(Δ)")
        ax.legend(loc="lower left", fontsize=7.5, framealpha=0.9)
        lines.append(line)
        continuous.append(curve)
    axes[-1].set_xlabel("offset |Δ| = |m − n| (tokens, log scale)")
    fig.subplots_adjust(
        left=0.08, right=0.98, bottom=0.5 / (1.0 + 1.9 * len(ds)), top=1 - 0.45 / (1.0 + 1.9 * len(ds)), hspace=0.12
    )

    def update(base):
        base = check_base("base", base)
        curve = continuous_kernel(torch.from_numpy(delta), base).numpy()
        for line, line_c, d in zip(lines, continuous, ds, strict=True):
            line.set_ydata(position_kernel(torch.from_numpy(delta), d, base).numpy())
            line_c.set_ydata(curve)
        fig.suptitle(
            f"Normalised kernel κ_d(Δ), base b = {base:g}: finite sums (purple) and the continuous curve", fontsize=10
        )
        return FULL

    params = {"base": base}
    update(**params)
    return Drawing("kernel_curves", fig, update, params, {"lines": lines, "continuous": continuous})


def kernel_and_clocks(d: int = 64, base: float = 10000.0, delta: int = 5, max_delta: int = 200) -> Drawing:
    """The explorer's picture: ``κ_d(Δ)`` and its continuous curve for ``Δ = 0 .. max_delta``, the
    current ``Δ`` marked, the paired clock faces of ``default_hands(d)`` at that ``Δ``, and each
    shown hand's vote ``cos(|Δ| θ_i)`` as a bar in the hand's colour, its tick naming the hand
    (``i = 11, θ = 0.0562``): colours repeat every ten pairs, so the colour alone does not say which
    hand it is. ``delta`` is the offset ``Δ = m - n``.

    Parameters: ``d``, ``base``, ``delta``. Artists: ``kernel`` (finite sum line), ``continuous``,
    ``marker`` (the dot at the current Δ), ``cmp_hands``, ``bars`` (the votes), ``title``.
    """
    max_delta = check_int("max_delta", max_delta, minimum=2)
    fig = new_figure(9.0, 4.0)[0]
    fig.clear()  # kernel on the left, clock faces and their cosines on the right
    grid = fig.add_gridspec(
        2,
        3,
        height_ratios=[1.5, 1.0],
        width_ratios=[2.3, 1.0, 1.0],
        left=0.08,
        right=0.98,
        top=0.84,
        bottom=0.12,
        wspace=0.25,
        hspace=0.35,
    )
    ax = fig.add_subplot(grid[:, 0])
    pair = _ClockPair(fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[0, 2]), bar_ax=fig.add_subplot(grid[1, 1:]))
    xs = np.arange(0, max_delta + 1, dtype=np.float64)  # (N,)
    (kernel_line,) = ax.plot(xs, np.zeros_like(xs), color="#54278f", linewidth=1.0, label="finite sum κ_d(Δ)")
    (continuous,) = ax.plot(
        xs, np.zeros_like(xs), color="black", linestyle="--", linewidth=1.6, label="continuous (Ci(Δ) - Ci(Δ/b)) / ln b"
    )
    (marker,) = ax.plot([], [], "o", color="crimson", markersize=7, label="current Δ")
    ax.axhline(0.0, color="0.6", linewidth=0.8)
    ax.set_xlim(0, max_delta)
    ax.set_ylim(-1.05, 1.05)
    ax.set_xlabel("offset |Δ| = |m − n| (tokens)")
    ax.set_ylabel("normalised kernel κ")
    ax.legend(loc="upper right", fontsize=7.5, framealpha=0.9)
    title = fig.suptitle(" ", fontsize=10, y=0.97)

    def update(d, base, delta):
        d = check_even_dim("d", d)
        base = check_base("base", base)
        delta = check_int("delta", int(delta))
        kernel = position_kernel(torch.from_numpy(xs), d, base).numpy()
        kernel_line.set_ydata(kernel)
        continuous.set_ydata(continuous_kernel(torch.from_numpy(xs), base).numpy())
        shown = min(abs(delta), max_delta)
        marker.set_data([shown], [float(position_kernel(float(shown), d, base))])
        kappa = float(position_kernel(float(delta), d, base))
        title.set_text(f"d = {d} ({d // 2} hands), b = {base:,.0f}:  κ_d({abs(delta)}) = {kappa:+.3f}")
        pair.update(delta, d, base, default_hands(d))

    params = {"d": check_even_dim("d", d), "base": check_base("base", base), "delta": check_int("delta", delta)}
    update(**params)
    artists = {
        "kernel": kernel_line,
        "continuous": continuous,
        "marker": marker,
        "cmp_hands": pair.cmp_hands,
        "bars": pair.bars,
        "title": title,
    }
    animated = [kernel_line, continuous, marker, title, *pair.artists()]
    return Drawing("kernel_and_clocks", fig, update, params, artists, animated)


def continuous_kernel_curve(base: float = 10000.0, max_delta: int = 1_000_000) -> Drawing:
    """Article 000's Figure 2, recomputed from its formula: the continuous kernel
    ``κ(Δ) = ∫_0^1 cos(Δ b^(-t)) dt = (Ci(|Δ|) - Ci(|Δ|/b)) / ln b`` against the offset ``|Δ|``.

    Left, ``|Δ| = 1 .. max_delta`` on a log axis: the curve starts near 1 and falls. Right, a
    close-up of ``|Δ| = 0 .. min(max_delta, 12 b)`` on a linear axis with the slow trend
    ``-Ci(|Δ|/b) / ln b`` dashed: the curve goes negative, has its lowest point near ``πb/2`` and comes back up, then
    swings around 0 with a shrinking amplitude. Its slope is ``(cos Δ - cos(Δ/b)) / (Δ ln b)``.

    The marked points are searched on the integer offsets ``1 .. max_delta`` and kept in
    ``artists["found"]``: ``first_negative`` (the first ``Δ`` where the curve is below 0),
    ``minimum_at`` and ``minimum`` (its lowest point), ``positive_again`` (the first ``Δ`` after
    that where it is above 0 again; ``None`` if not within ``max_delta``).

    Parameters: ``base``. Artists: ``curve`` (left), ``close_up``, ``trend``, ``minimum``,
    ``crossings`` (the two sign changes), ``found``.
    """
    max_delta = check_int("max_delta", max_delta, minimum=2)
    fig, (log_ax, lin_ax) = new_figure(10.0, 3.6, ncols=2)
    integers = np.arange(1, max_delta + 1, dtype=np.float64)  # (N,): where the marked points are searched
    shown = np.unique(np.concatenate((np.geomspace(1.0, max_delta, 3000), [float(max_delta)])))  # (M,) log grid
    (curve,) = log_ax.plot(shown, np.zeros_like(shown), color="black", linewidth=1.6)
    (close_up,) = lin_ax.plot([], [], color="black", linewidth=1.4, label="κ(Δ), continuous")
    (trend,) = lin_ax.plot([], [], color="#6a51a3", linewidth=1.0, linestyle="--", label="slow trend −Ci(Δ/b) / ln b")
    (minimum,) = lin_ax.plot([], [], "v", color="crimson", markersize=7, label="lowest point")
    (crossings,) = lin_ax.plot([], [], "o", color="#2b8cbe", markersize=6, label="sign changes")
    for ax in (log_ax, lin_ax):
        ax.axhline(0.0, color="0.6", linewidth=0.8)
        ax.set_ylabel("κ(Δ)")
    log_ax.set_xscale("log")
    log_ax.set_xlim(1, max_delta)
    log_ax.set_ylim(-0.15, 1.05)
    log_ax.set_xlabel("offset |Δ| = |m − n| (tokens, log scale)")
    log_ax.set_title("∫₀¹ cos(Δ b^(−t)) dt: article 000, Figure 2, recomputed", fontsize=10)
    lin_ax.set_xlabel("offset |Δ| = |m − n| (tokens)")
    lin_ax.legend(loc="upper right", fontsize=7.5, framealpha=0.9)
    lin_ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))
    fig.subplots_adjust(left=0.07, right=0.965, bottom=0.15, top=0.88, wspace=0.28)
    found: dict = {}

    def update(base):
        base = check_base("base", base)
        values = continuous_kernel(torch.from_numpy(integers), base).numpy()  # (N,)
        curve.set_ydata(continuous_kernel(torch.from_numpy(shown), base).numpy())
        close = np.linspace(1.0, min(float(max_delta), 12.0 * base), 4000)  # (M,) linear grid
        close_up.set_data(close, continuous_kernel(torch.from_numpy(close), base).numpy())
        trend.set_data(close, -sici(close / base)[1] / math.log(base))
        lin_ax.set_xlim(0, close[-1])
        negative = np.flatnonzero(values < 0)
        found.clear()
        found.update(first_negative=None, minimum_at=None, minimum=None, positive_again=None)
        if negative.size:
            first = int(negative[0])
            found["first_negative"] = first + 1
            later = np.flatnonzero(values[first:] > 0)
            stop = first + int(later[0]) if later.size else values.size
            low = first + int(np.argmin(values[first:stop]))
            found.update(minimum_at=low + 1, minimum=float(values[low]))
            if later.size:
                found["positive_again"] = stop + 1
        marks = [found[key] for key in ("first_negative", "positive_again") if found[key] is not None]
        crossings.set_data(marks, [0.0] * len(marks))
        if found["minimum_at"] is None:
            minimum.set_data([], [])
        else:
            minimum.set_data([found["minimum_at"]], [found["minimum"]])
        depth = max(0.02, -(found["minimum"] or 0.0))
        lin_ax.set_ylim(-1.6 * depth, 2.4 * depth)
        lin_ax.set_title(
            f"close-up, b = {base:g}: lowest point {found['minimum'] or 0:+.5f} at |Δ| = {found['minimum_at'] or 0:,}",
            fontsize=10,
        )
        return FULL

    params = {"base": base}
    update(**params)
    artists = {
        "curve": curve,
        "close_up": close_up,
        "trend": trend,
        "minimum": minimum,
        "crossings": crossings,
        "found": found,
    }
    return Drawing("continuous_kernel_curve", fig, update, params, artists)
