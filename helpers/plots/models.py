"""Pictures for notebook 09: the RoPE settings of real model families, read from
``helpers/data/rope_models.json`` through ``helpers.rope_models`` (article 003 §8.4 and §10).

Notation: ``i`` pair index (fast to slow), ``r`` rotated width of a head (``r/2`` pairs), ``θ_i``
the speed of pair ``i`` in radians per token after the model's scaling, ``θ⁰_i`` the speed with
the same base and width but no scaling, ``λ_i = 2π/θ_i`` its wavelength in tokens, ``C`` a
context length in tokens, ``L`` the original (pre-scaling) context of a scaled model, ``a`` the
attention factor that multiplies the cos and sin tables.

A *variant* names one set of RoPE settings: a model key of the data file, optionally followed by
``/local`` (Gemma 3's sliding-window layers) or ``/recommended`` (the scaling a maker recommends
beside the shipped config, Qwen2.5's README YaRN). ``model_variants()`` lists them all.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from matplotlib.ticker import MaxNLocator

from ..model_catalog import model_rope, rope_models
from ._drawing import Drawing, new_figure
from ._style import pair_color

__all__ = [
    "model_variants",
    "variant_rope",
    "attention_span",
    "rope_model_turns",
    "curve_overlaps",
    "rope_model_scaling",
    "rope_slowest_angles",
    "rope_model_pairs",
    "CONTEXT_CHOICES",
    "token_count",
]

#: Context lengths offered by the explorer: powers of two from 256 to 16M tokens.
CONTEXT_CHOICES = tuple(2**k for k in range(8, 25))

_SUFFIXES = ("local", "recommended")


def _models(models=None) -> dict:
    return rope_models() if models is None else models


def variant_rope(variant: str, *, seq_len=None, models=None):
    """The ``ModelRope`` of a variant: ``"key"``, ``"key/local"`` or ``"key/recommended"``.

    ``seq_len`` passes through to ``model_rope`` (it picks LongRoPE's long factors once it exceeds
    the original context). ``models``: the dict of ``rope_models()`` (read from the data file when
    None).
    """
    if not isinstance(variant, str):
        raise TypeError(f"variant must be a string such as 'llama3_1_8b' or 'gemma3_27b/local', got {variant!r}")
    key, _, suffix = variant.partition("/")
    if suffix and suffix not in _SUFFIXES:
        raise ValueError(f"variant {variant!r}: the part after '/' must be one of {_SUFFIXES}, got {suffix!r}")
    entry = _models(models).get(key, key)  # an unknown key: model_rope names the known ones
    rope = model_rope(entry, seq_len=seq_len, local=suffix == "local", recommended=suffix == "recommended")
    if suffix == "recommended" and rope.original_context and "factor" in rope.scaling:
        # The shipped config's max_position_embeddings is the length before the recommended
        # scaling; with it the model reaches factor x L (Qwen2.5: 4 x 32,768 = 131,072).
        rope = dataclasses.replace(rope, context_length=int(rope.scaling["factor"] * rope.original_context))
    return rope


def attention_span(variant: str, *, models=None) -> tuple[int, str]:
    """How many tokens one attention layer of a variant that uses RoPE can see, and what sets it:
    ``(span, "context")`` for layers that attend over the whole published context
    (``max_position_embeddings``; for a recommended scaling, ``factor × L``), ``(span, "window")``
    for layers with a sliding window (Gemma 3's local layers; every layer of a model whose config
    gives ``sliding_window`` and no separate local layers, such as Mistral 7B v0.1), ``(span,
    "chunk")`` for layers with chunked attention (Llama 4 Scout's RoPE layers, config
    ``attention_chunk_size``: a query sees only the keys of its own block of that many tokens).

    A span of ``C`` tokens holds offsets ``Δ = 0 .. C − 1``; the longest offset is ``C − 1``."""
    rope = variant_rope(variant, models=models)
    key, _, suffix = variant.partition("/")
    config = _models(models)[key]["config"]
    chunk = config.get("attention_chunk_size")
    if chunk is not None and chunk < rope.context_length:
        return int(chunk), "chunk"
    window = config.get("sliding_window")
    every_layer_windowed = window is not None and config.get("rope_local_base_freq") is None
    if window is not None and (suffix == "local" or every_layer_windowed) and window < rope.context_length:
        return int(window), "window"
    return int(rope.context_length), "context"


def model_variants(models=None) -> list[tuple[str, str]]:
    """``(label, variant)`` for every model of the data file, in the file's order, with a second
    entry for Gemma 3's local layers and for a recommended scaling where the data has one."""
    choices = []
    for key, entry in _models(models).items():
        extra = []
        for suffix, label in (("local", "local layers"), ("recommended", "recommended scaling")):
            try:
                variant_rope(f"{key}/{suffix}", models=models)
            except ValueError:
                continue
            extra.append((f"{entry['name']} · {label}", f"{key}/{suffix}"))
        if extra:
            main = "global layers" if any(v.endswith("/local") for _, v in extra) else "shipped config"
            choices.append((f"{entry['name']} · {main}", key))
            choices.extend(extra)
        else:
            choices.append((entry["name"], key))
    return choices


def _label(variant: str, models=None) -> str:
    return dict((v, label) for label, v in model_variants(models))[variant]


def token_count(n: float) -> str:
    """A token count written short: 4,096 -> '4k', 131,072 -> '128k', 10,485,760 -> '10M'."""
    for unit, size in (("M", 2**20), ("k", 2**10)):
        if n >= size:
            value = n / size
            return f"{value:.0f}{unit}" if value == round(value) else f"{value:.3g}{unit}"
    return f"{n:,.0f}"


# ----- all models at once: turns of every pair over its own context -------------------------------


def _shipped(models) -> list[str]:
    """Every model's shipped settings (no local layers, no recommended scaling)."""
    return [v for _, v in model_variants(models) if "/" not in v]


def _agreeing_pairs(turns_a: np.ndarray, turns_b: np.ndarray) -> int:
    """How many pairs of ``a`` sit exactly where a pair of ``b`` does (the same ``i / (r/2)``) with the same
    number of turns (to 1e-9): the points where ``a``'s curve lies on ``b``'s."""
    n_a, n_b = len(turns_a), len(turns_b)
    i = np.arange(n_a)
    shared = (i * n_b) % n_a == 0  # pair i of a is at x = i / n_a, which b has iff i * n_b / n_a is whole
    j = (i[shared] * n_b) // n_a
    return int(np.isclose(turns_a[shared], turns_b[j], rtol=1e-9, atol=0).sum())


def curve_overlaps(turns: dict) -> tuple[dict, dict]:
    """Which curves of ``rope_model_turns`` lie on one another, from their turns (``{variant: (r/2,) array}``, in
    drawing order).

    Returns ``(same, shared)``. ``same[v] = w``: every point of ``v`` lies on ``w``'s curve (``w`` has as many
    points or more; of two equal curves the later is ``v``); ``v`` is drawn with open markers over ``w``'s line.
    ``shared[v] = (w, n)``: ``n >= 2`` of ``v``'s points lie on the curve of an earlier line ``w``, but not all;
    ``v`` is drawn dashed so that ``w`` shows through.
    """
    order = list(turns)
    same, shared = {}, {}
    for k, v in enumerate(order):
        for w in order:
            if w == v or len(turns[w]) < len(turns[v]):
                continue
            if _agreeing_pairs(turns[v], turns[w]) == len(turns[v]) and (
                len(turns[w]) > len(turns[v]) or order.index(w) < k
            ):
                same[v] = w
                break
    for k, v in enumerate(order):
        if v in same:
            continue
        for w in order[:k]:
            if w in same:
                continue
            n = max(_agreeing_pairs(turns[v], turns[w]), _agreeing_pairs(turns[w], turns[v]))
            if n >= 2:
                shared[v] = (w, n)
                break
    return same, shared


def rope_model_turns(variants=None, *, models=None) -> Drawing:
    """Turns each pair makes over the longest offset a layer sees, ``C θ_i / 2π`` with ``C`` from
    ``attention_span`` (the published context, the sliding window or the attention chunk), for every variant (default:
    every model's shipped settings).

    x: the pair's place in the rotated part, ``i / (r/2)`` from 0 (fastest) to 1 (slowest), so
    that heads of different widths share one axis; y: turns (log). Pairs on or above the line at 1
    complete a full turn within ``C``, pairs below never do. Scaled models use their scaled speeds.

    Every curve stays visible (``curve_overlaps``): a curve whose every point lies on another's
    (Mistral's window on Llama 2's context, Code Llama on Gemma 3's global layers) is drawn with open
    markers over that line and named in its legend entry; a curve that runs on an earlier one for part
    of its length (Llama 4 Scout on Llama 3, DeepSeek-V3 on Llama 2) is dashed. Static.
    """
    models = _models(models)
    variants = _shipped(models) if variants is None else list(variants)
    fig, ax = new_figure(10.0, 6.4)
    lines, counts, turns, spans = {}, {}, {}, {}
    for variant in variants:
        rope = variant_rope(variant, models=models)
        spans[variant] = attention_span(variant, models=models)
        turns[variant] = spans[variant][0] / rope.wavelengths.numpy()  # (r/2,)
        counts[variant] = int((turns[variant] >= 1.0).sum())
    same, shared = curve_overlaps(turns)
    markers = iter("os^Dv")
    for k, variant in enumerate(variants):
        pairs = len(turns[variant])
        span, kind = spans[variant]
        label = f"{_label(variant, models)}: {counts[variant]} of {pairs} in {token_count(span)}" + (
            f" ({kind})" if kind != "context" else ""
        )
        style = {"linestyle": "-", "marker": None}
        if variant in same:
            label += f" (same curve as {_label(same[variant], models)})"
            style = {"linestyle": "None", "marker": next(markers), "zorder": 3}
        elif variant in shared:
            other, n = shared[variant]
            label += f" (dashed: on {_label(other, models)} for {n} pairs)"
            style = {"linestyle": (0, (5, 3)), "marker": None, "zorder": 2.5}
        lines[variant] = ax.plot(
            np.arange(pairs) / pairs,
            turns[variant],
            markersize=3.5,
            markerfacecolor="none",
            color=pair_color(k),
            linewidth=1.4,
            label=label,
            **style,
        )[0]
    ax.axhline(1.0, color="0.2", linewidth=1.0)
    ax.text(0.005, 1.15, "one full turn", fontsize=8, va="bottom")
    ax.set_yscale("log")
    ax.set_xlim(0, 1)
    ax.set_xlabel("place of the pair in the rotated part, i / (r/2)  (fast → slow)")
    ax.set_ylabel("turns within C, C θ_i / 2π (log)")
    ax.set_title("Turns of every pair within the span C a RoPE layer sees (bends: where a scaling starts)", fontsize=10)
    ax.grid(alpha=0.3, which="major")
    ax.legend(
        fontsize=7.5,
        frameon=False,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.11),
        ncols=2,
        title="pairs completing a turn within C",
        title_fontsize=8,
    )
    fig.subplots_adjust(left=0.08, right=0.97, bottom=0.33, top=0.94)
    return Drawing(
        "rope_model_turns",
        fig,
        lambda **_: None,
        {},
        {"lines": lines, "counts": counts, "same": same, "shared": shared},
    )


# ----- what each scaling does to each pair ----------------------------------------------------------


def _scaling_text(rope) -> str:
    scaling = rope.scaling
    if not scaling:
        return "no scaling"
    kind = scaling.get("type", scaling.get("rope_type"))
    parts = [kind]
    if "factor" in scaling:
        parts.append(f"s = {scaling['factor']:g}")
    if rope.original_context:
        parts.append(f"L = {token_count(rope.original_context)}")
    return ", ".join(parts)


def rope_model_scaling(variants, *, models=None) -> Drawing:
    """The speed ratio ``θ_i / θ⁰_i`` of every pair, one panel per variant, side by side.

    A LongRoPE model (Phi-3) is drawn twice in its panel: its short factors (sequences up to
    ``L``) and its long factors (longer sequences). Each title gives the scaling type, its factor,
    ``L`` and the attention factor ``a`` of the tables. Static.
    """
    models = _models(models)
    n = len(variants)
    if n == 0:
        raise ValueError("variants must name at least one model variant")
    fig, axes = new_figure(2.6 * n + 0.6, 3.6, ncols=n)
    axes = np.atleast_1d(axes)
    ratios = {}
    low = 1.0
    for ax, variant in zip(axes, variants, strict=True):
        rope = variant_rope(variant, models=models)
        curves = {"": rope}
        kind = (rope.scaling or {}).get("type")
        if kind == "longrope":
            curves = {
                "short factors (T ≤ L)": rope,
                "long factors (T > L)": variant_rope(variant, seq_len=rope.original_context + 1, models=models),
            }
        ratios[variant] = {}
        for k, (name, r) in enumerate(curves.items()):
            ratio = (r.inv_freq / r.unscaled_inv_freq).numpy()  # (r/2,)
            ratios[variant][name] = ratio
            low = min(low, float(ratio.min()))
            ax.plot(np.arange(len(ratio)), ratio, "o-", markersize=2.5, linewidth=1.2, color=pair_color(k), label=name)
        if len(curves) > 1:
            ax.legend(fontsize=7, frameon=False, loc="lower left")
        ax.set_title(f"{_label(variant, models)}\n{_scaling_text(rope)}; a = {rope.attention_factor:.3f}", fontsize=8.5)
        ax.set_yscale("log")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=5))
        ax.set_xlabel(f"pair index i (of {len(ratio)})")
        ax.grid(alpha=0.3)
    for ax in axes:
        ax.set_ylim(low / 1.6, 1.6)
    axes[0].set_ylabel("speed ratio θ_i / θ⁰_i (log)")
    fig.suptitle("What each model's scaling does to each pair: 1 = kept, 1/s = slowed by the factor s", fontsize=10)
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.15, top=0.78, wspace=0.35)
    return Drawing("rope_model_scaling", fig, lambda **_: None, {}, {"ratios": ratios, "axes": list(axes)})


# ----- the slowest pair of each model ------------------------------------------------------------------


def rope_slowest_angles(variants=None, *, threshold: float = 3.0, models=None) -> Drawing:
    """How far the slowest pair of each variant turns over the longest offset ``C`` a layer sees
    (``attention_span``), in degrees (``C θ_(r/2-1)`` converted), as horizontal bars on a log axis
    beside the marks of one turn (360°) and of ``threshold`` degrees (default 3°). Static."""
    models = _models(models)
    variants = _shipped(models) if variants is None else list(variants)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold < 360:
        raise ValueError(f"threshold must be a number of degrees between 0 and 360, got {threshold!r}")
    angles = {}
    for variant in variants:
        rope = variant_rope(variant, models=models)
        span, _ = attention_span(variant, models=models)
        angles[variant] = math.degrees(span * float(rope.inv_freq[-1]))
    fig, ax = new_figure(8.0, 0.32 * len(variants) + 1.4)
    y = np.arange(len(variants))[::-1]
    bars = ax.barh(y, list(angles.values()), color=[pair_color(k) for k in range(len(variants))], height=0.6)
    for yk, value in zip(y, angles.values(), strict=True):
        ax.text(value * 1.1, yk, f"{value:,.3g}°", va="center", fontsize=7.5)
    ax.set_yticks(y, [_label(v, models) for v in variants], fontsize=8)
    ax.set_xscale("log")
    ax.axvline(360.0, color="0.2", linewidth=1.0)
    ax.axvline(threshold, color="0.2", linewidth=1.0, linestyle=":")
    ax.text(360.0 * 1.05, y[0] + 0.45, "one turn", fontsize=7.5)
    ax.text(threshold * 1.05, y[0] + 0.45, f"{threshold:g}°", fontsize=7.5)
    ax.set_xlim(min(min(angles.values()), threshold) / 3, max(max(angles.values()), 360.0) * 6)
    ax.set_xlabel("angle turned within C (degrees, log)")
    ax.set_title("The slowest pair of each model: the angle it turns within C", fontsize=10)
    ax.grid(alpha=0.3, axis="x")
    fig.subplots_adjust(left=0.36, right=0.98, bottom=1.0 / (0.32 * len(variants) + 1.4) * 0.55, top=0.9)
    return Drawing("rope_slowest_angles", fig, lambda **_: None, {}, {"bars": bars, "angles": angles})


# ----- the explorer's figure: one model, any context --------------------------------------------------


def rope_model_pairs(model: str = "llama3_1_8b", context: int | None = None, *, models=None) -> Drawing:
    """One model's pairs against a context length ``C`` of your choice.

    Left: wavelength ``λ_i`` of every pair (log), with the model's scaling (filled: completes a
    turn within ``C``; open red: never does) and without it (grey); the solid line is ``C``, the
    dashed one the longest offset a layer of the model sees (``attention_span``: the published
    context, the sliding window or the attention chunk), the dotted one ``L``. Right: the speed ratio
    ``θ_i / θ⁰_i`` of the scaling and its attention factor. LongRoPE switches to its long factors
    once ``C`` exceeds ``L``, as a model does for a sequence of that length.

    Parameters: ``model`` (a variant, see ``model_variants``), ``context`` (tokens; None: the
    variant's ``attention_span``). The pairs are placed at ``i / (r/2)`` (as in ``rope_model_turns``)
    so that heads of any width share the axes: no update lays the figure out again, each only moves
    the artists.
    """
    models = _models(models)
    fig, (wave_ax, ratio_ax) = new_figure(10.0, 4.0, ncols=2)
    (unscaled,) = wave_ax.plot([], [], "o", markersize=3, color="0.75", label="without the scaling")
    (wraps,) = wave_ax.plot([], [], "o", markersize=3.5, color=pair_color(0), label="completes a turn within C")
    (never,) = wave_ax.plot(
        [], [], "o", markersize=3.5, markerfacecolor="none", color=pair_color(3), label="never completes a turn"
    )
    context_line = wave_ax.axhline(1.0, color="0.1", linewidth=1.3, label="context C (slider)")
    published = wave_ax.axhline(
        1.0, color="0.45", linewidth=1.0, linestyle="--", label="span a RoPE layer sees (context, window or chunk)"
    )
    original = wave_ax.axhline(1.0, color="0.45", linewidth=1.0, linestyle=":", label="original context L")
    # One text for everything that changes: laying out text is most of a frame's cost (about 10 ms a
    # text artist on a laptop core), so the model, its scaling and the counts share one artist.
    info = fig.text(0.5, 0.985, "", fontsize=9.5, ha="center", va="top")
    wave_ax.set_yscale("log")
    wave_ax.set_ylim(1.0, 1e9)
    for ax in (wave_ax, ratio_ax):
        ax.set_xlim(-0.02, 1.0)
    wave_ax.set_xlabel("place of the pair, i / (r/2)  (fast → slow)")
    wave_ax.set_ylabel("wavelength λ_i = 2π/θ_i (tokens, log)")
    wave_ax.legend(fontsize=7, frameon=False, loc="upper left")
    wave_ax.set_title("wavelength of each pair against C", fontsize=9.5)
    wave_ax.grid(alpha=0.3)

    (ratio_line,) = ratio_ax.plot([], [], "o-", markersize=2.5, linewidth=1.2, color=pair_color(1))
    ratio_ax.axhline(1.0, color="0.6", linewidth=0.8)
    ratio_ax.set_yscale("log")
    ratio_ax.set_ylim(1e-2, 2.0)
    ratio_ax.set_xlabel("place of the pair, i / (r/2)  (fast → slow)")
    ratio_ax.set_ylabel("speed ratio θ_i / θ⁰_i (log)")
    ratio_ax.grid(alpha=0.3)
    ratio_ax.set_title("what the scaling does to each pair", fontsize=9.5)
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.12, top=0.8, wspace=0.25)

    labels = {variant: label for label, variant in model_variants(models)}
    known = {}  # variant -> (ModelRope, span, kind), computed once per drawing: a slider step only looks it up

    def settings(variant: str):
        if variant not in known:
            known[variant] = (variant_rope(variant, models=models), *attention_span(variant, models=models))
        return known[variant]

    def update(model: str, context):
        rope, span, kind = settings(model)
        if context is None:
            context = span
        if isinstance(context, bool) or not isinstance(context, (int, np.integer)) or context < 1:
            raise ValueError(f"context must be a positive whole number of tokens, got {context!r}")
        if rope.scaling and rope.scaling.get("type") == "longrope":
            rope = variant_rope(model, seq_len=int(context), models=models)
        wavelength = rope.wavelengths.numpy()  # (r/2,)
        pairs = len(wavelength)
        i = np.arange(pairs) / pairs  # the pair's place i / (r/2): every model on one axis, no new layout
        done = wavelength <= context
        unscaled.set_data(i, rope.unscaled_wavelengths.numpy())
        wraps.set_data(i[done], wavelength[done])
        never.set_data(i[~done], wavelength[~done])
        context_line.set_ydata([context, context])
        published.set_ydata([span, span])
        original.set_visible(rope.original_context is not None)
        if rope.original_context is not None:
            original.set_ydata([rope.original_context, rope.original_context])
        where = {"window": "sliding window", "chunk": "attention chunk"}.get(kind, "published context")
        beyond = f" (beyond the {where})" if context > span else ""
        ratio_line.set_data(i, (rope.inv_freq / rope.unscaled_inv_freq).numpy())
        info.set_text(
            f"{labels[model]}: {pairs} pairs, base b = {rope.base:,.0f}, {_scaling_text(rope)}, "
            f"attention factor a = {rope.attention_factor:.3f}\n"
            f"C = {context:,} tokens{beyond}: {int(done.sum())} of {pairs} pairs complete a turn, "
            f"{int((~done).sum())} never do"
        )

    params = {"model": model, "context": None if context is None else int(context)}
    update(**params)
    if params["context"] is None:
        params["context"] = settings(model)[1]
    artists = {
        "unscaled": unscaled,
        "wraps": wraps,
        "never": never,
        "context": context_line,
        "published": published,
        "original": original,
        "info": info,
        "ratio": ratio_line,
    }
    animated = [unscaled, wraps, never, context_line, published, original, ratio_line, info]
    return Drawing("rope_model_pairs", fig, update, params, artists, animated)
