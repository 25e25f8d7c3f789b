"""Pictures for notebook 06: rotations, long-range decay, the base, and context scaling of RoPE
(article 000 §9, article 003 §7-8 and §10).

Notation: ``m`` position of the query, ``n`` of the key, ``Δ = m - n`` their offset (``Δ >= 0``: the
key is ``Δ`` tokens back), ``d`` head width (per head, not ``d_model``), ``i`` pair index,
``θ_i = b^(-2i/d)`` radians per token, ``λ_i = 2π/θ_i`` wavelength in tokens, ``s`` scaling
factor, ``L`` training (original) context length.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.ticker import MaxNLocator

from .. import rope as _rope
from ._drawing import Drawing, Layout, new_figure
from ._style import pair_color

__all__ = ["rope_rotation", "rope_upper_bound", "rope_wavelengths", "rope_scaling", "SCALING_METHODS"]

#: Methods offered by ``rope_scaling`` (``"none"`` is plain RoPE).
SCALING_METHODS = ("none", "linear", "ntk", "yarn")


def rope_rotation(theta_deg: float = 30.0, m: int = 2) -> Drawing:
    """One pair turned by ``m θ``: the vector ``(1, 0)`` and its images at positions ``0 .. m``.

    Parameters: ``theta_deg`` (degrees per token), ``m`` (position). Article 003 §7.5's example is
    ``θ = 30°``, ``m = 2``: ``(1, 0)`` turns by 60° to ``(0.5, 0.866)``.
    """
    fig, ax = new_figure(4.6, 4.4)
    ring = np.linspace(0.0, 2.0 * math.pi, 241)
    ax.plot(np.cos(ring), np.sin(ring), color="0.8", linewidth=1.0)
    ax.axhline(0.0, color="0.9", linewidth=0.8, zorder=0)
    ax.axvline(0.0, color="0.9", linewidth=0.8, zorder=0)
    ax.annotate("", xy=(1.0, 0.0), xytext=(0.0, 0.0), arrowprops=dict(arrowstyle="-|>", color="0.45", lw=1.5))
    steps = ax.scatter([], [], s=16, color=pair_color(0), alpha=0.4, label="positions 0 .. m")
    (arc,) = ax.plot([], [], color=pair_color(1), linewidth=1.5, label="angle mθ")
    (hand,) = ax.plot([], [], color=pair_color(0), linewidth=2.5, label="(1, 0) turned by mθ")
    (tip,) = ax.plot([], [], "o", color=pair_color(0), markersize=7)
    label = ax.text(0.0, 0.0, "", fontsize=9, ha="left", va="bottom")
    ax.plot([], [], color="0.45", linewidth=1.5, label="(1, 0)")
    ax.set_aspect("equal")
    ax.set_xlim(-1.3, 1.3)
    ax.set_ylim(-1.3, 1.3)
    ax.set_xlabel("first coordinate")
    ax.set_ylabel("second coordinate")
    ax.legend(loc="lower left", fontsize=7, frameon=False)
    fig.subplots_adjust(left=0.16, right=0.97, bottom=0.12, top=0.9)

    def update(theta_deg: float, m: int):
        angle = math.radians(theta_deg)
        k = np.arange(m + 1)
        steps.set_offsets(np.column_stack((np.cos(k * angle), np.sin(k * angle))))
        sweep = np.linspace(0.0, m * angle, 60)
        arc.set_data(0.3 * np.cos(sweep), 0.3 * np.sin(sweep))
        x, y = math.cos(m * angle), math.sin(m * angle)
        hand.set_data([0.0, x], [0.0, y])
        tip.set_data([x], [y])
        label.set_position((1.08 * x, 1.08 * y))
        label.set_horizontalalignment("left" if x >= 0 else "right")
        label.set_text(f"({x:.3f}, {y:.3f})")
        ax.title.set_text(f"θ = {theta_deg:g}° per token, m = {m}: turned by mθ = {m * theta_deg:g}°")

    params = {"theta_deg": float(theta_deg), "m": int(m)}
    update(**params)
    return Drawing(
        "rope_rotation",
        fig,
        update,
        params,
        {"hand": hand, "steps": steps},
        animated=[steps, arc, hand, tip, label, ax.title],
    )


def _upper_bound(distance: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """RoFormer's relative upper bound ``(1/(d/2)) Σ_j |Σ_(k<j) e^(iΔθ_k)|``, shape of ``distance``."""
    phase = np.exp(1j * np.outer(distance, theta))  # (D, d/2)
    partial = np.cumsum(phase, axis=1)  # (D, d/2): S_j = sum of the first j+1 terms
    return np.abs(partial).mean(axis=1)


def rope_upper_bound(bases=(100.0, 10000.0, 500000.0), d: int = 128, max_distance: int = 100000) -> Drawing:
    """RoFormer's long-term-decay bound against distance, one curve per base.

    Su et al. write the score as ``Re Σ_i h_i e^(ιΔθ_i)`` (``ι`` the imaginary unit, ``h_i`` the
    product of pair ``i`` of the query with the conjugate of pair ``i`` of the key, ``Δ = m - n``)
    and bound it by ``max_i |h_(i+1) - h_i| · Σ_j |S_j|`` with ``S_j = Σ_(l<j) e^(ιΔθ_l)``; the
    curve is the mean ``(1/(d/2)) Σ_j |S_j|``, on a log axis of the offset from 1 to
    ``max_distance`` tokens. The bound is even in ``Δ``. Static (no parameters to move).

    Every integer offset is computed: each of 700 log-spaced bins of the axis is drawn as the range
    of the bound over the offsets in it (a band) and its largest value (the line), so that a narrow
    peak far out, which a sample of offsets would step over, shows.
    """
    fig, ax = new_figure(7.5, 3.6)
    edges = np.unique(np.round(np.logspace(0, math.log10(max_distance), 701)).astype(np.int64))  # bin edges
    lines = {}
    for k, base in enumerate(bases):
        theta = _rope.rope_frequencies(d, base)[0].numpy()
        bound = np.concatenate(
            [
                _upper_bound(np.arange(a, min(a + 4096, max_distance + 1)), theta)
                for a in range(1, max_distance + 1, 4096)
            ]
        )  # (max_distance,): offsets 1 .. max_distance
        starts = edges[:-1] - 1  # bins [edges[b], edges[b + 1]) as indices into bound
        top = np.maximum.reduceat(bound, starts)
        low = np.minimum.reduceat(bound, starts)
        ax.fill_between(edges[:-1], low, top, color=pair_color(k), alpha=0.18, linewidth=0)
        lines[base] = ax.plot(edges[:-1], top, color=pair_color(k), linewidth=1.0, label=f"base b = {base:,.0f}")[0]
    ax.set_xscale("log")
    ax.set_xlabel("offset Δ = m - n (tokens, log scale)")
    ax.set_ylabel("relative upper bound, mean |S_j|")
    ax.set_title(f"RoFormer's long-range bound, d = {d}: it falls with the offset, not monotonically")
    ax.legend(fontsize=8, frameon=False)
    ax.grid(alpha=0.3)
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.15, top=0.9)
    return Drawing("rope_upper_bound", fig, lambda **_: None, {}, {"lines": lines})


def rope_wavelengths(bases=(10000.0, 500000.0, 1000000.0), d: int = 128, contexts=(4096, 131072)) -> Drawing:
    """Wavelength ``λ_i = 2π b^(2i/d)`` of every pair against ``i``, one line per base, beside
    horizontal lines at the context lengths: pairs above a line never complete one turn within
    that context. Static (no parameters to move)."""
    fig, ax = new_figure(7.5, 3.8)
    i = np.arange(d // 2)
    lines = {}
    for k, base in enumerate(bases):
        theta = _rope.rope_frequencies(d, base)[0].numpy()
        lines[base] = ax.plot(
            i,
            2.0 * math.pi / theta,
            "o-",
            markersize=2.5,
            color=pair_color(k),
            linewidth=1.2,
            label=f"b = {base:,.0f}: longest 2πb^((d-2)/d) = {2 * math.pi / theta[-1]:,.0f}",
        )[0]
    for context, style in zip(contexts, ("--", ":", "-."), strict=False):  # up to three contexts drawn
        ax.axhline(context, color="0.3", linestyle=style, linewidth=1.0, label=f"context {context:,} tokens")
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("pair index i")
    ax.set_ylabel("wavelength λ_i (tokens, log scale)")
    ax.set_title(f"Wavelengths of the d/2 = {d // 2} pairs against the context length")
    ax.legend(fontsize=7.5, frameon=False, loc="upper left")
    ax.grid(alpha=0.3)
    fig.subplots_adjust(left=0.1, right=0.98, bottom=0.14, top=0.9)
    return Drawing("rope_wavelengths", fig, lambda **_: None, {}, {"lines": lines})


def _cosine_sum(count: int, theta: np.ndarray, weight: np.ndarray, block: int = 64) -> np.ndarray:
    """``Σ_i w_i cos(Δ θ_i)`` for ``Δ = 0 .. count-1``, shape ``(count,)``.

    Writing ``Δ = block·a + b`` turns the sum into one small complex matrix product,
    ``Re(A Bᵀ)`` with ``A[a, i] = w_i e^(i block a θ_i)`` and ``B[b, i] = e^(i b θ_i)``: the same
    numbers as the direct sum, without ``count × d/2`` cosines (fast enough for a slider).
    """
    rows = -(-count // block)
    a = weight * np.exp(1j * np.outer(block * np.arange(rows), theta))  # (rows, d/2)
    b = np.exp(1j * np.outer(np.arange(block), theta))  # (block, d/2)
    # einsum, not @: numpy's BLAS matmul fights torch's threads for the cores (30 ms, not 0.1 ms).
    return np.einsum("ai,bi->ab", a, b).real.reshape(-1)[:count]  # (rows, block) -> (count,)


def _scaling_dict(method: str, factor: float, original_len: int):
    if method == "none":
        return None
    if method == "yarn":
        return {"type": "yarn", "factor": factor, "original_max_len": original_len}
    return {"type": method, "factor": factor}


def rope_scaling(
    base: float = 10000.0, factor: float = 4.0, method: str = "yarn", d: int = 128, original_len: int = 2048
) -> Drawing:
    """Long-context scaling: per-pair frequency scale and the score out to the target length ``sL``.

    Left: ``θ'_i / θ_i`` against pair ``i`` for Position Interpolation (``"linear"``), NTK-aware
    (``"ntk"``) and YaRN (``"yarn"``) at the same ``s``; the chosen ``method`` is drawn bold.
    Right: the score of one query with keys of the same content at offset ``Δ = m - n``,
    ``a² Σ_i |q_i|² cos(Δ θ'_i) / |q|²`` (``a`` the attention factor), against plain RoPE (grey);
    the score is even in ``Δ``. The axis follows ``s``: it reaches the power of two times ``L`` at
    or above the target length ``sL`` (2L for s <= 2, then 4L, 8L, 16L), and a dotted line marks
    ``sL`` itself. Moving ``s`` within one such span only moves the curves and the mark (a fast
    update); the first visit to a span lays the figure out (a full draw), and its background is kept
    for every later visit (``Layout(span)``).

    Parameters: ``base`` (b), ``factor`` (s >= 1), ``method`` (one of ``SCALING_METHODS``).
    """
    if method not in SCALING_METHODS:
        raise ValueError(f"method must be one of {SCALING_METHODS}, got {method!r}")
    fig, (scale_ax, score_ax) = new_figure(9.0, 3.5, ncols=2)
    i = np.arange(d // 2)
    weight = np.random.default_rng(0).standard_normal((d // 2, 2))
    weight = (weight**2).sum(axis=1)
    weight /= weight.sum()  # |q_i|^2 / |q|^2, (d/2,)
    state = {"span": None}  # the right end of the offset axis now drawn, in tokens

    def offsets(span: int):
        """All offsets ``0 .. span`` and the ones drawn on the log axis: every offset up to 512, then
        1500 log-spaced ones (a pixel there spans tens of tokens; drawing all of them costs more
        time than a slider can spare). Always 2012 points, whatever ``span``: a repeated offset
        after rounding is drawn twice, harmlessly, and the lines keep their length."""
        return span + 1, np.concatenate((np.arange(1, 513), np.geomspace(513, span, 1500).round().astype(int)))

    curves = {}
    for k, name in enumerate(SCALING_METHODS[1:]):
        curves[name] = scale_ax.plot([], [], color=pair_color(k + 1), linewidth=1.2, label=name)[0]
    scale_ax.set_yscale("log")
    scale_ax.set_xlim(0, d // 2 - 1)
    scale_ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    scale_ax.set_ylim(1.0 / 100.0, 1.6)  # room below 1/16 (the largest s of the explorer) for the legend
    scale_ax.set_xlabel("pair index i (fast to slow)")
    scale_ax.set_ylabel("frequency scale θ'_i / θ_i (log)")
    scale_ax.legend(fontsize=8, frameon=False, loc="lower left", title="bold: chosen", title_fontsize=8)
    scale_ax.grid(alpha=0.3)

    (plain_line,) = score_ax.plot([], [], color="0.6", linewidth=0.7, label="plain RoPE")
    (scaled_line,) = score_ax.plot([], [], color=pair_color(0), linewidth=0.8, label="chosen method")
    score_ax.axvline(original_len, color="0.2", linestyle="--", linewidth=1.0)
    score_ax.axvspan(original_len, 64 * original_len, color="0.5", alpha=0.08, linewidth=0)  # clipped by xlim
    score_ax.text(original_len * 0.93, 1.62, "training length L", fontsize=8, va="top", ha="right")
    target = score_ax.axvline(
        factor * original_len, color="0.2", linestyle=":", linewidth=1.2, label="target length sL"
    )
    score_ax.set_xscale("log")
    score_ax.set_ylim(-0.6, 1.75)
    score_ax.set_xlabel(f"offset Δ = m - n (tokens, log scale; L = {original_len:,})")
    score_ax.set_ylabel("score / |q|²")
    score_ax.legend(fontsize=8, frameon=False, loc="lower left")
    info = scale_ax.text(0.98, 0.97, "", transform=scale_ax.transAxes, fontsize=8, ha="right", va="top")
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.14, top=0.9, wspace=0.28)

    def score(count, theta, a):
        return a * a * _cosine_sum(count, theta, weight)  # (count,): offsets 0 .. count-1

    def update(base: float, factor: float, method: str):
        if method not in SCALING_METHODS:
            raise ValueError(f"method must be one of {SCALING_METHODS}, got {method!r}")
        span = original_len * 2 ** max(1, math.ceil(math.log2(max(factor, 1.0)) - 1e-9))  # 2L, 4L, 8L, 16L, ... >= sL
        count, shown = offsets(span)
        relayout = span != state["span"]
        if relayout:
            state["span"] = span
            score_ax.set_xlim(1, span)
            score_ax.set_title(f"Score of one query, keys out to {span // original_len}L (d = {d})", fontsize=10)
        target.set_xdata([factor * original_len, factor * original_len])
        plain = _rope.rope_frequencies(d, base)[0].numpy()
        for name, line in curves.items():
            theta = _rope.rope_frequencies(d, base, scaling=_scaling_dict(name, factor, original_len))[0].numpy()
            line.set_data(i, theta / plain)
            line.set_linewidth(3.0 if name == method else 1.0)
            line.set_alpha(1.0 if name == method else 0.45)
        theta, a = _rope.rope_frequencies(d, base, scaling=_scaling_dict(method, factor, original_len))
        plain_line.set_data(shown, score(count, plain, 1.0)[shown])
        scaled_line.set_data(shown, score(count, theta.numpy(), a)[shown])
        extra = ""
        if method == "yarn":
            low, high = _rope.yarn_correction_range(d, base, original_len)
            extra = f"ramp over pairs {low}..{high}\nattention factor a = {a:.3f}"
        info.set_text(extra)
        scale_ax.title.set_text(f"{method}: s = {factor:g}, b = {base:,.0f}")
        return Layout(span)  # one background per span of the offset axis, kept for the next visit

    params = {"base": float(base), "factor": float(factor), "method": method}
    update(**params)
    artists = {"curves": curves, "plain": plain_line, "scaled": scaled_line, "target": target}
    animated = [*curves.values(), plain_line, scaled_line, target, scale_ax.title, info]
    return Drawing("rope_scaling", fig, update, params, artists, animated)
