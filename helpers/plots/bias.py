"""Pictures for notebook 07: ALiBi and relative position biases (article 001 §2.2, §7.4, §9.9; article 003 §6, §9).

Notation: ``H`` heads, ``h`` head index, ``m_h`` its slope (a rate per token, not a position),
``i`` the query's position and ``j`` the key's, ``Δ = i - j`` the offset from the query back to a
key in tokens (the collection's ``Δ = m - n``, query minus key; T5's and Shaw's relative position
``j - i`` is ``-Δ``). Heads are coloured from a sequential map, steep (dark) to shallow
(light); frequency-pair colours (``pair_color``) are kept for the sinusoidal curves.

Bias heat maps share one colour scale that saturates at ``-ln 100 ≈ -4.61``: a cell drawn in the
darkest colour holds a key whose prior weight is below 1% of the nearest key's.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.ticker import MaxNLocator

from ..alibi import alibi_bias, alibi_decay_distance, alibi_slopes
from ..kernels import position_kernel
from ..relative import relative_position_bucket
from ._drawing import FULL, Drawing, Layout, new_figure
from ._style import pair_color

__all__ = [
    "head_color",
    "slope_label",
    "alibi_bias_maps",
    "alibi_heads",
    "prior_shapes",
    "alibi_extrapolation",
    "recency_price",
    "relative_family",
]

#: Colour scale floor of the bias heat maps: ``exp(-4.61) = 1%``.
BIAS_FLOOR = -math.log(100.0)


def head_color(h: int, n_heads: int):
    """Colour of head ``h`` of ``n_heads`` (dark for the steepest slope, light for the shallowest)."""
    return colormaps["viridis"](0.85 * h / max(n_heads - 1, 1))


def slope_label(m: float, *, math_text: bool = True) -> str:
    """``m`` as a power of two: ``$m = 2^{-1.5}$`` (mathtext) or ``m = 2^-1.5`` (plain, faster to draw)."""
    exponent = math.log2(m)
    text = f"{exponent:.0f}" if abs(exponent - round(exponent)) < 1e-9 else f"{exponent:.3f}".rstrip("0")
    return rf"$m = 2^{{{text}}}$" if math_text else f"m = 2^{text}"


def _integer_ticks(axis) -> None:
    """Ticks at whole numbers only, for axes that count (tokens, heads, buckets)."""
    axis.set_major_locator(MaxNLocator(integer=True))


def _bias_cmap():
    return colormaps["magma"].with_extremes(bad="0.88")  # -inf (the masked future) in light grey


def _masked(bias: torch.Tensor) -> np.ndarray:
    values = bias.detach().cpu().double().numpy()
    return np.ma.masked_invalid(np.where(np.isneginf(values), np.nan, values))


def alibi_bias_maps(n_heads: int = 8, n_tokens: int = 16, causal: bool = True) -> Drawing:
    """One heat map of ``alibi_bias`` per head, on a common colour scale (saturating at 1%).

    ``n_heads`` and ``n_tokens`` fix the grid; parameter ``causal`` switches between the causal
    form ``-m (i - j)`` (future in grey) and the symmetric ``-m |i - j|``.
    """
    ncols = min(n_heads, 4)
    nrows = math.ceil(n_heads / ncols)
    fig, axes = new_figure(2.3 * ncols + 0.8, 2.3 * nrows + 0.5, ncols=ncols, nrows=nrows)
    axes = np.atleast_1d(axes).ravel()
    slopes = alibi_slopes(n_heads).tolist()
    images = []
    for h, ax in enumerate(axes):
        if h >= n_heads:
            ax.set_visible(False)
            continue
        image = ax.imshow(
            np.zeros((n_tokens, n_tokens)), cmap=_bias_cmap(), vmin=BIAS_FLOOR, vmax=0.0, interpolation="nearest"
        )
        ax.set_title(f"head {h}: " + slope_label(slopes[h]), fontsize=9)
        ax.set_xticks([0, n_tokens - 1])
        ax.set_yticks([0, n_tokens - 1])
        if h % ncols == 0:
            ax.set_ylabel("query i (token)")
        if h >= n_heads - ncols:
            ax.set_xlabel("key j (token)")
        images.append(image)
    fig.subplots_adjust(left=0.07, right=0.86, bottom=0.1, top=0.85, wspace=0.25, hspace=0.35)
    colorbar_ax = fig.add_axes((0.89, 0.15, 0.02, 0.65))
    bar = fig.colorbar(images[0], cax=colorbar_ax)
    bar.set_label("bias added to the score")
    title = fig.suptitle("")

    def update(causal: bool):
        bias = alibi_bias(n_heads, n_tokens, causal=causal, dtype=torch.float64)  # (H, T, T)
        for h, image in enumerate(images):
            image.set_data(_masked(bias[h]))
        form = "causal bias -m(i-j), future masked (grey)" if causal else "symmetric bias -m|i-j|"
        title.set_text(f"ALiBi, {n_heads} heads, {n_tokens} tokens: {form}; darkest = below 1% of the nearest key")
        return FULL

    params = {"causal": bool(causal)}
    update(**params)
    return Drawing("alibi_bias_maps", fig, update, params, {"images": images, "title": title})


def _content_scores(n_keys: int, seed: int) -> np.ndarray:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(n_keys, generator=generator, dtype=torch.float64).numpy()  # (Tk,) one score per key


def alibi_heads(
    n_heads: int = 8,
    head: int = 0,
    content: float = 0.0,
    n_tokens: int = 32,
    window: int = 128,
    max_heads: int = 32,
    seed: int = 0,
) -> Drawing:
    """One head of ALiBi: its bias, the weights of the newest token, and every head's 1% distance.

    Left, the ``n_tokens × n_tokens`` causal bias of head ``head`` (shared colour scale). Middle,
    the attention weights of the last token of a ``window``-token sequence against the offset
    ``Δ = i - j``, divided by the weight at ``Δ = 0`` (log scale): with content off this is ``exp(-m Δ)``, a
    straight line that crosses 1% at ``ln 100 / m``; with ``content`` > 0 a fixed random content
    score of that strength (standard deviation, score units) is added to each key. Right, the 1%
    distance of every head, the chosen one circled, over head indices ``0 .. n_heads - 1`` (the axis
    follows ``n_heads``); the dashed line is the middle panel's ``window``: a head above it keeps more
    than 1% of its nearest key's weight on every key the middle panel shows. The legend lists only
    the lines on show (the content line appears when ``content`` > 0); the headline writes the slope as ``$2^{-1}$``.

    Parameters: ``n_heads`` (1 .. ``max_heads``), ``head`` (clamped to ``n_heads - 1``), ``content``.
    """
    fig, (bias_ax, weight_ax, dist_ax) = new_figure(10.5, 3.5, ncols=3)
    fig.subplots_adjust(left=0.05, right=0.985, bottom=0.14, top=0.8, wspace=0.6)
    # One changing line of text above the panels (each Text costs a glyph render per frame).
    headline = fig.text(0.5, 0.96, "", ha="center", va="top", fontsize=10)
    image = bias_ax.imshow(
        np.zeros((n_tokens, n_tokens)), cmap=_bias_cmap(), vmin=BIAS_FLOOR, vmax=0.0, interpolation="nearest"
    )
    bias_ax.set_xlabel("key j (token)")
    bias_ax.set_ylabel("query i (token)")
    _integer_ticks(bias_ax.xaxis)
    _integer_ticks(bias_ax.yaxis)
    bias_ax.set_title(f"its causal bias -m(i-j), first {n_tokens} tokens", fontsize=9)
    bar = fig.colorbar(image, ax=bias_ax, fraction=0.046, pad=0.03)
    bar.set_label("bias added to the score", fontsize=8)

    distance = np.arange(window)  # (window,) offset Δ = i - j of each key
    noise = _content_scores(window, seed)  # (window,) content score of the key at each offset
    (prior_line,) = weight_ax.plot([], [], color="black", linewidth=2.0, label=r"content off: $e^{-m\Delta}$")
    (content_line,) = weight_ax.plot([], [], color="tab:orange", linewidth=1.0, label="with content")
    one_percent = weight_ax.axhline(
        0.01, color="tab:red", linestyle="--", linewidth=1.0, label=r"1% of the weight at $\Delta = 0$"
    )
    cutoff = weight_ax.axvline(0.0, color="tab:red", linestyle=":", linewidth=1.2)
    weight_ax.set_yscale("log")
    weight_ax.set_ylim(1e-4, 30.0)
    weight_ax.set_xlim(0, window - 1)
    weight_ax.set_xlabel("offset Δ = i - j (tokens back)")
    weight_ax.set_ylabel("weight / weight at Δ = 0")
    weight_ax.set_title("newest token's weights, relative", fontsize=9)
    legend_state = {"content": None, "n_heads": None}

    def show_legend(with_content: bool) -> None:
        """Legend of the visible lines only (it is part of the background: two layouts, kept)."""
        if legend_state["content"] == with_content:
            return
        handles = [prior_line] + ([content_line] if with_content else []) + [one_percent]
        weight_ax.legend(handles=handles, loc="upper right", fontsize=7, frameon=False)  # replaces the old one
        legend_state["content"] = with_content

    (all_heads,) = dist_ax.plot([], [], "o-", color="0.45", markersize=4, linewidth=1.0, label="every head")
    (chosen,) = dist_ax.plot(
        [],
        [],
        "o",
        markersize=11,
        markerfacecolor="none",
        markeredgecolor="tab:red",
        markeredgewidth=2.0,
        label="chosen head",
    )
    dist_ax.axhline(window, color="0.7", linewidth=0.8, linestyle="--", label=f"middle panel's {window} tokens")
    dist_ax.set_yscale("log")
    dist_ax.set_ylim(1.0, 3000.0)
    _integer_ticks(dist_ax.xaxis)
    dist_ax.set_xlabel("head index h")
    dist_ax.set_ylabel("1% distance ln(100)/m (tokens)")
    dist_ax.set_title("1% distance of each head", fontsize=9)
    dist_ax.legend(loc="lower right", fontsize=7, frameon=False)

    def update(n_heads: int, head: int, content: float):
        head = min(max(int(head), 0), int(n_heads) - 1)
        if legend_state["n_heads"] != int(n_heads):  # head indices 0 .. n_heads - 1 only
            dist_ax.set_xlim(-0.7, int(n_heads) - 0.3)
            legend_state["n_heads"] = int(n_heads)
        m = float(alibi_slopes(int(n_heads))[head])
        image.set_data(_masked(alibi_bias(int(n_heads), n_tokens, dtype=torch.float64)[head]))  # (T, T)
        prior = np.exp(-m * distance)  # (window,) weight relative to distance 0
        mixed = np.exp(-m * distance + content * (noise - noise[0]))
        prior_line.set_data(distance, prior)
        content_line.set_data(distance, mixed)
        content_line.set_visible(content > 0)
        reach = math.log(100.0) / m
        cutoff.set_xdata([min(reach, window - 1)] * 2)
        all_heads.set_data(np.arange(n_heads), alibi_decay_distance(int(n_heads)).numpy())  # (H,)
        chosen.set_data([head], [reach])
        headline.set_text(
            f"head {head} of {n_heads}: {slope_label(m)} = {m:.4g};   "
            f"1% distance {reach:.1f} tokens"
            + ("" if reach < window else " (off the axis)")
            + f";   content strength {content:.1f}"
        )
        show_legend(content > 0)
        # The background: with or without the content line's legend entry; the head axis is drawn
        # over it once per head count (an occasional artist) instead of laying out the whole figure.
        return Layout(content > 0, layer=int(n_heads))

    params = {"n_heads": int(n_heads), "head": int(head), "content": float(content)}
    update(**params)
    artists = {
        "image": image,
        "prior_line": prior_line,
        "content_line": content_line,
        "cutoff": cutoff,
        "all_heads": all_heads,
        "chosen": chosen,
        "headline": headline,
        "colorbar": bar,
    }
    animated = [image, prior_line, content_line, cutoff, all_heads, chosen, headline]
    return Drawing("alibi_heads", fig, update, params, artists, animated, occasional=[dist_ax.xaxis])


def prior_shapes(n_heads: int = 8, d: int = 8, n_distances: int = 16) -> Drawing:
    """What position alone adds to a score, content switched off: ALiBi's lines beside sinusoidal's waves.

    Two different quantities, compared by shape only. Left, ALiBi's *bias* ``-m_h Δ`` for every
    head, added to the scaled score ``q·k/sqrt(d)``: each falls strictly with the offset ``Δ``.
    Right, the sinusoidal *position-position dot product* ``p_i · p_j = Σ_f cos(Δ θ_f)`` for width
    ``d`` (raw: no ``W_Q``, ``W_K`` and no ``1/sqrt(d)``; ``d/2`` at ``Δ = 0``, article 001 §6.5
    and §7.4), which dips and comes back up (for ``d = 8`` at ``Δ`` = 4 and 5).
    Parameter ``d`` (even).
    """
    fig, (alibi_ax, sin_ax) = new_figure(10.0, 3.8, ncols=2, sharey=False)
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.14, top=0.86, wspace=0.25)
    k = np.arange(n_distances)
    for h, m in enumerate(alibi_slopes(n_heads).tolist()):
        alibi_ax.plot(k, -m * k, "o-", markersize=3, color=head_color(h, n_heads), label=slope_label(m))
    alibi_ax.set_title(f"ALiBi, {n_heads} heads: " + r"bias $-m\Delta$ falls strictly")
    alibi_ax.set_xlabel("offset Δ = i - j (tokens back)")
    alibi_ax.set_ylabel(r"ALiBi bias $-m\Delta$ (added to the score)")
    _integer_ticks(alibi_ax.xaxis)
    alibi_ax.legend(fontsize=7, ncols=2, frameon=False, loc="lower left")
    (wave,) = sin_ax.plot([], [], "o-", markersize=4, color=pair_color(0), label="position dot product")
    (rebound,) = sin_ax.plot(
        [],
        [],
        "o",
        markersize=10,
        markerfacecolor="none",
        markeredgecolor="tab:red",
        markeredgewidth=2.0,
        label=r"higher than at $\Delta - 1$",
    )
    sin_ax.set_xlabel("offset Δ = i - j (tokens back)")
    sin_ax.set_ylabel(r"raw $p_i \cdot p_j$ (no $W_Q$, $W_K$, $1/\sqrt{d}$)")
    _integer_ticks(sin_ax.xaxis)
    sin_ax.legend(fontsize=8, frameon=False, loc="upper right")

    def update(d: int):
        score = (d / 2) * position_kernel(torch.arange(n_distances, dtype=torch.float64), d).numpy()  # (K,)
        wave.set_data(k, score)
        up = np.flatnonzero(np.diff(score) > 0) + 1
        rebound.set_data(k[up], score[up])
        sin_ax.set_title(f"sinusoidal, d = {d}: " + r"$p_i \cdot p_j = (d/2)\,\kappa_d(\Delta)$ oscillates")
        sin_ax.relim()
        sin_ax.autoscale_view()
        return FULL

    params = {"d": int(d)}
    update(**params)
    return Drawing("prior_shapes", fig, update, params, {"wave": wave, "rebound": rebound})


def alibi_extrapolation(n_heads: int = 8, short: int = 32, long: int = 1024) -> Drawing:
    """Why ALiBi extrapolates: the newest token of a ``long`` sequence against a ``short`` one.

    Content off throughout (zero queries and keys): the prior alone. Left, for every head, the
    prior weights of the newest token over its last ``short`` keys: in
    the short sequence (dots) and in the long one renormalised over those keys (lines); they are
    one picture because the bias depends on distance only. Right, the share of the long
    sequence's weight that falls further back than ``short`` tokens, per head: what the shallow
    heads see that a ``short``-token training sequence never showed them.
    """
    fig, (left, right) = new_figure(10.5, 3.8, ncols=2)
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.14, top=0.86, wspace=0.3)
    slopes = alibi_slopes(n_heads).tolist()
    short_bias = alibi_bias(n_heads, 1, short, dtype=torch.float64)[:, 0]  # (H, short) newest token
    long_bias = alibi_bias(n_heads, 1, long, dtype=torch.float64)[:, 0]  # (H, long)
    short_w = torch.softmax(short_bias, dim=-1).flip(-1).numpy()  # (H, short) by distance 0..short-1
    long_w = torch.softmax(long_bias, dim=-1).flip(-1).numpy()  # (H, long) by distance
    k = np.arange(short)  # offsets Δ = 0 .. short - 1
    lines = []
    for h in range(n_heads):
        color = head_color(h, n_heads)
        renorm = long_w[h, :short] / long_w[h, :short].sum()
        (line,) = left.plot(k, renorm, color=color, linewidth=1.5, label=slope_label(slopes[h]))
        left.plot(k, short_w[h], "o", color=color, markersize=3)
        lines.append(line)
    left.set_yscale("log")
    left.set_xlabel("offset Δ = i - j (tokens back)")
    _integer_ticks(left.xaxis)
    left.set_ylabel(f"prior weight, renormalised\nover the last {short} keys")
    left.set_title(f"content off: {short} tokens (dots) = last {short} of {long} (lines)", fontsize=10)
    left.legend(fontsize=7, ncols=2, frameon=False, loc="lower left")
    beyond = long_w[:, short:].sum(axis=1)  # (H,)
    bars = right.bar(np.arange(n_heads), beyond, color=[head_color(h, n_heads) for h in range(n_heads)])
    right.set_yscale("log")
    right.set_ylim(1e-9, 2.0)
    right.set_xlabel("head index h")
    _integer_ticks(right.xaxis)
    right.set_ylabel(f"weight at Δ > {short - 1}")
    right.set_title(f"content off, {long} tokens: weight beyond Δ = {short - 1}", fontsize=10)
    update = lambda: None  # noqa: E731  (a static picture)
    return Drawing("alibi_extrapolation", fig, update, {}, {"lines": lines, "bars": bars})


def recency_price(n_heads: int = 8, n_tokens: int = 1024) -> Drawing:
    """The price of the recency prior: the content score a key at distance ``D`` needs to take half
    of the newest token's attention, when every other key has content score 0.

    Under head ``h`` it is ``m_h D + ln Σ_(Δ≠D) exp(-m_h Δ)``: almost exactly linear in ``D``
    (slope ``m_h``) once ``exp(-m_h D)`` is small. Without positions
    it would be ``ln(n_tokens - 1)`` at every distance (dashed). Below the dashed line the prior
    *helps* (a near key needs less than without positions), above it the prior costs; on the
    log-log axes the curves bend towards slope 1, the ``+m_h`` per token of a straight line.
    """
    fig, ax = new_figure(7.5, 4.0)
    fig.subplots_adjust(left=0.1, right=0.97, bottom=0.13, top=0.87)
    distance = np.arange(1, n_tokens)  # (D,)
    lines = []
    for h, m in enumerate(alibi_slopes(n_heads).tolist()):
        all_k = np.exp(-m * np.arange(n_tokens))  # (T,)
        need = m * distance + np.log(all_k.sum() - np.exp(-m * distance))
        (line,) = ax.plot(distance, need, color=head_color(h, n_heads), label=slope_label(m))
        lines.append(line)
    ax.axhline(math.log(n_tokens - 1), color="black", linestyle="--", linewidth=1.0, label="no position bias")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("offset D = i - j of the key that should win (tokens back)")
    ax.set_ylabel("content score margin needed")
    ax.set_title(
        f"Margin for half of the attention, {n_tokens}-token context\n"
        "(below the dashed line the prior helps, above it the prior costs)",
        fontsize=10,
    )
    ax.legend(fontsize=7, ncols=3, frameon=False, loc="upper left")
    return Drawing("recency_price", fig, lambda: None, {}, {"lines": lines})


def _bucket_starts(bidirectional: bool, num_buckets: int, max_distance: int) -> list[int]:
    """The smallest offset ``Δ >= 0`` (a key ``Δ`` tokens back, relative position ``-Δ``) in each bucket
    that past keys reach, found with ``relative_position_bucket`` itself."""
    offsets = torch.arange(0, 64 * max_distance + 1)  # far past max_distance: every past bucket is reached
    buckets = relative_position_bucket(-offsets, bidirectional, num_buckets, max_distance)  # (N,)
    first: dict[int, int] = {}
    for delta, b in zip(offsets.tolist(), buckets.tolist(), strict=True):
        first.setdefault(b, delta)
    return [first[b] for b in sorted(first)]


def relative_family(
    num_buckets: int = 32, max_distance: int = 128, slope: float = 1 / 16, clip: int = 8, span: int = 160
) -> Drawing:
    """The relative family side by side, against the offset ``Δ = i - j`` (T5's relative position is ``-Δ``).

    Left, T5's bucket for each offset (bidirectional and unidirectional), with dotted lines where
    the *last* bucket begins: with the defaults at ``Δ = 91`` for the encoder (and ``Δ = -91`` for
    keys after the query) and ``Δ = 113`` for the decoder, well before ``max_distance`` = 128 (the
    offset at which the logarithmic formula would reach one bucket past the last). Right, the bias
    each member gives against ``Δ`` when set to imitate ALiBi's slope ``m``, so that they are
    comparable: Shaw's term ``q_i · a_r / sqrt(d)`` for one fixed query whose dot products with the
    table rows happen to be ``-m min(Δ, clip)`` (another query reads other numbers from the same
    table), T5 with bucket ``b`` set to ``-m`` times its first offset (steps that widen with ``Δ``),
    and ALiBi's ``-m Δ``, the one with nothing to learn. In the left panel the decoder puts keys after
    the query (``Δ < 0``, removed by the causal mask anyway) into bucket 0.
    """
    fig, (bucket_ax, bias_ax) = new_figure(11.0, 3.9, ncols=2)
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.14, top=0.86, wspace=0.25)
    delta = torch.arange(-span, span + 1)  # (R,) offsets Δ = i - j
    both = relative_position_bucket(-delta, True, num_buckets, max_distance).numpy()
    past = relative_position_bucket(-delta, False, num_buckets, max_distance).numpy()
    bucket_ax.step(delta.numpy(), both, where="mid", color="tab:blue", label="bidirectional (encoder)")
    bucket_ax.step(delta.numpy(), past, where="mid", color="tab:orange", label="unidirectional (decoder)")
    encoder_last = _bucket_starts(True, num_buckets, max_distance)[-1]
    decoder_last = _bucket_starts(False, num_buckets, max_distance)[-1]
    markers = {
        "encoder_last": [
            bucket_ax.axvline(
                x,
                color="tab:blue",
                linestyle=":",
                linewidth=1.2,
                label=f"encoder's last buckets: |Δ| ≥ {encoder_last}" if x > 0 else None,
            )
            for x in (-encoder_last, encoder_last)
        ],
        "decoder_last": bucket_ax.axvline(
            decoder_last,
            color="tab:orange",
            linestyle=":",
            linewidth=1.2,
            label=f"decoder's last bucket: Δ ≥ {decoder_last}",
        ),
    }
    bucket_ax.set_xlabel("offset Δ = i - j (tokens back); T5's relative_position = -Δ")
    bucket_ax.set_ylabel("bucket index")
    _integer_ticks(bucket_ax.yaxis)
    bucket_ax.set_title(f"T5 buckets: {num_buckets} buckets, max_distance {max_distance}")
    bucket_ax.legend(fontsize=7, loc="lower left", bbox_to_anchor=(0.0, 0.06), framealpha=1.0, edgecolor="none")

    k = np.arange(span + 1)  # (K,) offsets Δ into the past
    buckets = relative_position_bucket(-torch.from_numpy(k), False, num_buckets, max_distance).numpy()
    first = {}
    for offset, b in zip(k.tolist(), buckets.tolist(), strict=True):
        first.setdefault(b, offset)
    t5 = np.array([-slope * first[b] for b in buckets.tolist()])
    shaw = -slope * np.minimum(k, clip)
    lines = {
        "shaw": bias_ax.plot(
            k,
            shaw,
            color="tab:green",
            linewidth=1.5,
            label=f"Shaw, table set for one fixed query, clipped at K = {clip}",
        )[0],
        "t5": bias_ax.step(k, t5, where="post", color="tab:orange", linewidth=1.5, label="T5: one value per bucket")[0],
        "alibi": bias_ax.plot(
            k, -slope * k, color="black", linestyle="--", linewidth=1.5, label=r"ALiBi: fixed line $-m\Delta$"
        )[0],
    }
    bias_ax.set_xlabel("offset Δ = i - j (tokens back)")
    bias_ax.set_ylabel("bias added to the score")
    bias_ax.set_title(f"Each member set to imitate ALiBi's slope m = 1/{round(1 / slope)}")
    bias_ax.legend(fontsize=8, frameon=False, loc="lower left")
    return Drawing("relative_family", fig, lambda: None, {}, {**lines, **markers})
