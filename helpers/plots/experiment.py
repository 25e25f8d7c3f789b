"""Pictures for notebook 08: the train-short / test-long panorama and attention maps.

Notation: ``L`` the training length, ``T`` an evaluation length, ``H`` heads.
Each scheme has one colour in every figure of the notebook (``SCHEME_COLORS``).
"""

from __future__ import annotations

import matplotlib.ticker
import numpy as np
import torch
from matplotlib.colors import PowerNorm

from .._validate import check_int
from ._drawing import FULL, Drawing, Layout, new_figure

__all__ = [
    "SCHEME_COLORS",
    "SCHEME_LABELS",
    "extrapolation_panorama",
    "loss_curves",
    "per_position_curves",
    "offset_attention",
    "attention_maps",
]

SCHEME_COLORS = {
    "none": "0.55",
    "none_bos": "0.15",
    "learned": "#d62728",
    "sinusoidal": "#ff7f0e",
    "rope": "#1f77b4",
    "alibi": "#2ca02c",
    "t5": "#9467bd",
    "alibi_8h": "#8fd18f",
    "alibi_x8": "#135e13",
    "t5_L": "#4a1e7a",
    "rope_L": "#0b3d6e",
}
SCHEME_LABELS = {
    "none": "NoPE",
    "none_bos": "NoPE + BOS",
    "learned": "learned",
    "sinusoidal": "sinusoidal",
    "rope": "RoPE",
    "alibi": "ALiBi",
    "t5": "T5 bias",
    "alibi_8h": "ALiBi, 8 heads (1/2 .. 1/256)",
    "alibi_x8": "ALiBi, slopes x8 (2 .. 1/32)",
    "t5_L": "T5, buckets ending at L",
    "rope_L": "RoPE, base with one turn in L",
}
_STYLES = {"none_bos": "--", "alibi_8h": "--", "alibi_x8": ":", "t5_L": ":", "rope_L": ":"}
_METRICS = ("accuracy", "loss")
_POSITIONS = ("beyond", "all")

_TASK_TITLES = {
    "lag": "copy the token {lag} places back",
    "pattern": "continue the repeated pattern",
    "text": "next character of English text",
}


def _label(scheme: str) -> str:
    return SCHEME_LABELS.get(scheme, scheme)


def _seeds(results: dict, task: str, schemes) -> str:
    """ "5 seeds", or "3 to 5 seeds" when the schemes shown of ``task`` differ in their seed count."""
    counts = sorted({len(results["summary"][task][s]["seeds"]) for s in schemes if s in results["summary"][task]})
    return f"{counts[0]} seeds" if len(counts) == 1 else f"{counts[0]} to {counts[-1]} seeds"


def _check_choice(name: str, value, options) -> None:
    if value not in options:
        raise ValueError(f"{name} must be one of {tuple(options)}, got {value!r}")


def extrapolation_panorama(
    results: dict, *, task: str | None = None, positions: str = "beyond", band: str = "minmax", schemes=None
) -> Drawing:
    """Accuracy and loss against evaluation length, one line per scheme (mean over seeds).

    Args:
        results: the dictionary of ``helpers.experiment.load_results`` / ``run_experiment``.
        task: which task to show (default: the first of ``results["tasks"]``).
        positions: ``"beyond"``, the positions ``t >= L`` only (the extrapolated part; undefined at
            ``T = L``), or ``"all"``, every scored position.
        band: the spread drawn around each line, ``"minmax"`` (lowest to highest seed) or
            ``"std"`` (mean ± one standard deviation over seeds).
        schemes: the lines to draw (default ``results["schemes"]``; the ablations are keys of
            ``results["summary"]`` too).

    The x axis is the evaluation length in tokens (log scale, ticks at the measured lengths); the
    grey dashed line marks the training length. Parameters: ``task``, ``positions``, ``band``.
    """
    task = results["tasks"][0] if task is None else task
    schemes = list(results["schemes"] if schemes is None else schemes)
    all_summary = results["summary"]
    for scheme in schemes:
        if not any(scheme in all_summary[t] for t in results["tasks"]):
            raise ValueError(f"schemes: no results for {scheme!r}; known: {sorted(all_summary[results['tasks'][0]])}")
    lengths = [int(t) for t in results["eval_lengths"]]
    train_length = int(results["config"]["train_length"])
    fig, axes = new_figure(10.0, 4.4, ncols=2)
    lines, bands, marks = {}, {}, []  # marks: the dashed line at L and its label, shown with every position
    for ax, metric in zip(axes, _METRICS, strict=True):
        for scheme in schemes:
            (line,) = ax.plot(
                lengths,
                np.zeros(len(lengths)),
                _STYLES.get(scheme, "-"),
                marker="o",
                color=SCHEME_COLORS.get(scheme, "k"),
                markersize=4,
                label=_label(scheme),
            )
            lines[(metric, scheme)] = line
        for scheme in schemes:
            zeros = np.zeros(len(lengths))
            bands[(metric, scheme)] = ax.fill_between(
                lengths, zeros, zeros, color=SCHEME_COLORS.get(scheme, "k"), alpha=0.18, linewidth=0
            )
        marks.append(ax.axvline(train_length, color="0.5", linestyle="--", linewidth=1.0))
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths, [str(t) for t in lengths])
        ax.minorticks_off()
        ax.set_xlabel("evaluation length T (tokens)")
        ax.grid(alpha=0.3)
    axes[0].set_ylim(-0.02, 1.02)
    axes[0].set_title("accuracy (higher is better)")

    def top_loss(task: str) -> float:
        rows = [all_summary[task][s][str(t)] for s in schemes if s in all_summary[task] for t in lengths]
        return max(v for r in rows for v in (r["loss_max"], r["loss_beyond_max"] or 0.0))

    for ax in axes:
        label = ax.text(
            train_length * 1.05,
            0.97,
            f"L = {train_length}",
            color="0.4",
            fontsize=8,
            va="top",
            transform=ax.get_xaxis_transform(),
        )
        marks.append(label)
    # The text task's two baselines that read no context (character frequencies, the most common
    # character), drawn when the text task is shown and the results record them.
    corpus = results.get("text_corpus") or {}
    baselines = {
        "accuracy": axes[0].axhline(corpus.get("most_common_accuracy", 0.0), color="0.3", linestyle=":", linewidth=1.2),
        "loss": axes[1].axhline(corpus.get("unigram_loss", 0.0), color="0.3", linestyle=":", linewidth=1.2),
    }
    baseline_labels = {
        "accuracy": axes[0].text(1.0, 0.0, " always the most common character", color="0.3", fontsize=7, va="bottom"),
        "loss": axes[1].text(1.0, 0.0, " character frequencies alone", color="0.3", fontsize=7, va="bottom"),
    }
    for metric, line in baselines.items():
        label = baseline_labels[metric]
        label.set_transform(axes[0 if metric == "accuracy" else 1].get_yaxis_transform())
        label.set_position((0.0, line.get_ydata()[0]))
    handles = [lines[("accuracy", scheme)] for scheme in schemes]
    fig.legend(
        handles=handles,
        loc="lower center",
        ncols=min(len(handles), 4 if len(handles) > 4 else len(handles)),
        fontsize=9,
        frameon=False,
        bbox_to_anchor=(0.5, 0.0),
    )
    labels = [axes[0].set_ylabel(""), axes[1].set_ylabel("")]
    note = fig.text(0.5, 0.875, "", ha="center", va="bottom", fontsize=8, color="0.3")
    bottom = 0.22 if len(handles) <= 4 else 0.27
    fig.subplots_adjust(left=0.07, right=0.98, bottom=bottom, top=0.8, wspace=0.25)
    title = fig.suptitle("")
    lag = results["config"].get("lag")

    def update(task: str, positions: str, band: str):
        _check_choice("task", task, results["tasks"])
        _check_choice("positions", positions, _POSITIONS)
        _check_choice("band", band, ("minmax", "std"))
        summary = all_summary[task]
        # Losses near zero (the synthetic tasks) spread out on a scale that is linear below 0.1 and
        # logarithmic above; text losses (1 to 4 nats) read best on a linear one.
        if task == "text":
            axes[1].set_yscale("linear")
            axes[1].set_ylim(0.0, top_loss(task) * 1.08)
            axes[1].set_title("loss (lower is better)")
        else:
            axes[1].set_yscale("symlog", linthresh=0.1)
            axes[1].set_ylim(0.0, top_loss(task) * 1.3)
            axes[1].set_title("loss (lower is better; linear below 0.1, log above)")
        # Past L there is nothing at T = L: the axes start just before 2L.
        for ax in axes:
            ax.set_xlim(lengths[0] * 0.9 if positions == "all" else lengths[1] * 0.85, lengths[-1] * 1.1)
        for mark in marks:
            mark.set_visible(positions == "all")
        for ax in axes:
            ax.set_xlabel(f"evaluation length T ({'characters' if task == 'text' else 'tokens'})")
        for metric in baselines:
            shown_baseline = (
                task == "text" and ("unigram_loss" if metric == "loss" else "most_common_accuracy") in corpus
            )
            baselines[metric].set_visible(shown_baseline)
            baseline_labels[metric].set_visible(shown_baseline)
        suffix = "_beyond" if positions == "beyond" else ""
        shown = [t for t in lengths if positions == "all" or t > train_length]
        for (metric, scheme), line in lines.items():
            rows = [summary[scheme][str(t)] for t in shown] if scheme in summary else []
            line.set_data(shown[: len(rows)], [r[f"{metric}{suffix}_mean"] for r in rows])
            low = [r[f"{metric}{suffix}_min"] for r in rows]
            high = [r[f"{metric}{suffix}_max"] for r in rows]
            if band == "std":
                low = [r[f"{metric}{suffix}_mean"] - r[f"{metric}{suffix}_std"] for r in rows]
                high = [r[f"{metric}{suffix}_mean"] + r[f"{metric}{suffix}_std"] for r in rows]
            bands[(metric, scheme)].set_data(shown[: len(rows)], low, high)  # the band is reshaped in place
        where = f"positions t >= {train_length} only" if positions == "beyond" else "every scored position"
        scored = "next characters" if task == "text" else "determined tokens"
        labels[0].set_text(f"accuracy on {scored}")
        labels[1].set_text(f"cross-entropy (nats per {'character' if task == 'text' else 'token'})")
        title.set_text(
            f"Task: {_TASK_TITLES.get(task, task).format(lag=lag)}. Trained at L = {train_length}, "
            f"tested at 1x-8x L; {where}"
        )
        what = "lowest to highest seed" if band == "minmax" else "mean ± 1 standard deviation"
        dashed = "; dashed line: L" if positions == "all" else ""
        dotted = "; dotted: no context at all" if task == "text" and corpus else ""
        note.set_text(f"lines: mean over {_seeds(results, task, schemes)}; shaded band: {what}{dashed}{dotted}")
        # Twelve states in all (3 tasks x 2 position sets x 2 bands): each frame is drawn once and kept.
        return Layout((task, positions, band))

    update(task, positions, band)
    artists = {"lines": lines, "bands": bands, "note": note, "title": title, "labels": labels, "baselines": baselines}
    return Drawing("extrapolation_panorama", fig, update, {"task": task, "positions": positions, "band": band}, artists)


def loss_curves(results: dict, *, tasks=None, schemes=None) -> Drawing:
    """Training loss at the training length against step, one panel per task, one line per seed.

    Each seed trains until its own loss has plateaued, so each line has its own length. A dot
    marks the step at which the seed's plateau rule held (filled) or the step limit stopped it
    (hollow): there its learning rate begins its fall to zero, the last stretch of the line. The y
    axis is logarithmic, so that a loss near zero and one near 1.5 nats are both readable.
    ``schemes`` defaults to every scheme and control that has results for a task.
    """
    tasks = list(results["tasks"] if tasks is None else tasks)
    fig, axes = new_figure(4.4 * len(tasks), 4.0, ncols=len(tasks))
    axes = np.atleast_1d(axes)
    lines, handles = {}, {}
    for ax, task in zip(axes, tasks, strict=True):
        chosen = schemes
        if chosen is None:
            chosen = list(results["summary"][task])  # the schemes, then the controls
        for scheme in chosen:
            runs = [r for r in results["runs"] if r["task"] == task and r["scheme"] == scheme]
            color = SCHEME_COLORS.get(scheme, "k")
            for run in runs:
                every = run["loss_curve_every"]
                curve = np.asarray(run["loss_curve"], dtype=float)
                steps = (np.arange(len(curve)) + 0.5) * every
                (line,) = ax.plot(
                    steps, curve, _STYLES.get(scheme, "-"), color=color, linewidth=0.8, alpha=0.75, label=_label(scheme)
                )
                lines[(task, scheme, run["seed"])] = line
                handles.setdefault(_label(scheme), line)
                index = min(int(run["stop_step"] // every), len(curve) - 1)
                ax.plot(
                    [steps[index]],
                    [curve[index]],
                    "o",
                    color=color,
                    markersize=4,
                    markerfacecolor=color if run["plateaued"] else "white",
                )
        ax.set_yscale("log")
        low, high = ax.get_ylim()
        if high / low < 20:
            # A narrow log range (text: 1.2 to 4.6 nats) holds one power of ten or none: label the
            # ticks between as plain numbers (2, 3, 4), not 2×10⁰.
            ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
            ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
            ax.tick_params(axis="y", which="minor", labelsize=7)
        ax.set_xlabel("training step")
        ax.set_title(_TASK_TITLES.get(task, task).format(lag=results["config"].get("lag")), fontsize=10)
        ax.grid(alpha=0.3, which="major")
    axes[0].set_ylabel("training loss at L (nats, log scale)")
    fig.legend(
        handles=list(handles.values()),
        loc="lower center",
        ncols=5,
        fontsize=8,
        frameon=False,
        bbox_to_anchor=(0.5, 0.0),
    )
    fig.suptitle(
        f"Training at L = {results['config']['train_length']}, one line per seed (means over "
        f"{results['runs'][0]['loss_curve_every']} steps). Dot: the plateau rule held and the cool-down "
        "begins (hollow: the step limit)",
        fontsize=10,
    )
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.27, top=0.86, wspace=0.22)

    def update():
        return FULL

    return Drawing("loss_curves", fig, update, {}, {"lines": lines})


def per_position_curves(results: dict, *, task: str | None = None, metric: str = "accuracy", schemes=None) -> Drawing:
    """Loss or accuracy at each position of the longest evaluation length (mean over seeds).

    Each point is one position ``t`` of the ``8 L``-token sequences; the dashed line is the training
    length. Parameters: ``task``, ``metric`` (``"accuracy"`` or ``"loss"``).
    """
    task = results["tasks"][0] if task is None else task
    schemes = list(results["schemes"] if schemes is None else schemes)
    train_length = int(results["config"]["train_length"])
    longest = max(int(t) for t in results["eval_lengths"])
    fig, ax = new_figure(9.0, 4.0)
    positions = np.arange(longest)
    lines = {}
    for scheme in schemes:
        (lines[scheme],) = ax.plot(
            positions,
            np.zeros(longest),
            _STYLES.get(scheme, "-"),
            color=SCHEME_COLORS.get(scheme, "k"),
            linewidth=1.0,
            label=_label(scheme),
        )
    ax.axvline(train_length, color="0.5", linestyle="--", linewidth=1.0)
    ax.set_xlabel(f"position t in a sequence of T = {longest} tokens")
    ax.set_xlim(0, longest - 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncols=4, loc="upper center", bbox_to_anchor=(0.5, -0.15), frameon=False)
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.3, top=0.88)
    title = ax.set_title("")

    def update(task: str, metric: str):
        _check_choice("task", task, results["tasks"])
        _check_choice("metric", metric, _METRICS)
        summary = results["summary"][task]
        values = []
        for scheme, line in lines.items():
            row = summary[scheme]["per_position"][metric] if scheme in summary else [None] * longest
            y = np.array([np.nan if v is None else v for v in row], dtype=float)
            line.set_ydata(y)
            values.append(y)
        if metric == "accuracy":
            ax.set_ylim(-0.02, 1.02)
            ax.set_ylabel("accuracy at position t")
        else:
            top = np.nanmax(np.concatenate(values))
            ax.set_ylim(0.0, top * 1.05)
            ax.set_ylabel("loss at position t (nats)")
        title.set_text(
            f"{_TASK_TITLES.get(task, task).format(lag=results['config'].get('lag'))}: {metric} at each position, "
            f"trained at L = {train_length} (dashed), mean over "
            f"{_seeds(results, task, list(lines))}"
        )
        return Layout((task, metric))  # one frame per task and metric, drawn once and kept

    update(task, metric)
    return Drawing("per_position_curves", fig, update, {"task": task, "metric": metric}, {"lines": lines})


def offset_attention(weights: dict, *, slopes: dict | None = None) -> Drawing:
    """Mean attention weight by offset ``Δ`` for each head, one panel per model.

    Args:
        weights: ``{name: (layers, H, Δmax + 1) array}``, from ``helpers.experiment.offset_weights``.
        slopes: ``{name: list of the ALiBi slopes of its heads}``, shown beside the rows, or None.

    Rows are the heads (``layer.head``), columns the offsets ``Δ = 0 .. Δmax``; the colour is the
    weight, on a square-root scale.
    """
    names = list(weights)
    for name in names:
        if np.ndim(weights[name]) != 3:
            raise ValueError(f"weights[{name!r}] must be (layers, H, offsets), got shape {np.shape(weights[name])}")
    fig, axes = new_figure(3.6 * len(names), 3.4, ncols=len(names))
    axes = np.atleast_1d(axes)
    images = {}
    for ax, name in zip(axes, names, strict=True):
        w = np.asarray(weights[name], dtype=float)  # (layers, H, Δ)
        layers, heads, offsets = w.shape
        image = images[name] = ax.imshow(
            w.reshape(layers * heads, offsets),
            cmap="magma",
            norm=PowerNorm(0.5, vmin=0.0, vmax=1.0),
            aspect="auto",
            interpolation="nearest",
        )
        rows = [f"{layer + 1}.{head + 1}" for layer in range(layers) for head in range(heads)]
        if slopes and name in slopes:
            rows = [f"{r}  m={_slope(slopes[name][i % heads])}" for i, r in enumerate(rows)]
        ax.set_yticks(range(layers * heads), rows, fontsize=7)
        ax.set_xticks(range(offsets))
        ax.set_xlabel("offset Δ = t - j (tokens back)")
        ax.set_title(_label(name), fontsize=10)
        for y in range(heads, layers * heads, heads):
            ax.axhline(y - 0.5, color="white", linewidth=1.0)
    axes[0].set_ylabel("layer.head")
    fig.colorbar(image, ax=list(axes), fraction=0.03, pad=0.02, label="mean attention weight (square-root scale)")
    fig.subplots_adjust(left=0.12, right=0.86, bottom=0.16, top=0.86, wspace=0.55)

    def update():
        return FULL

    return Drawing("offset_attention", fig, update, {}, {"images": images})


def _slope(m: float) -> str:
    return f"1/{round(1 / m)}" if m < 1 else f"{m:g}"


def _head_weights(model, tokens: torch.Tensor, layer: int, head: int) -> np.ndarray:
    """Attention weights ``(T, T)`` of one head for one sequence ``tokens`` ``(T,)``."""
    with torch.no_grad():
        _, weights = model(tokens[None, :], need_weights=True)  # list of (1, H, T, T)
    return weights[layer][0, head].double().cpu().numpy()


def _prefix_weights(full: np.ndarray, length: int) -> np.ndarray:
    """The weights of the first ``length`` tokens, cut from those of a longer sequence ``full``
    ``(T_max, T_max + extra)`` (``extra`` = 1 with a BOS key). The models are causal: query ``t``
    reads tokens ``0 .. t`` only, so its weights do not depend on what follows (the same numbers as a
    run on the prefix: compared in tests/test_explorer_latency.py)."""
    extra = full.shape[1] - full.shape[0]
    return full[:length, : length + extra]


def attention_maps(
    models: dict, tokens: torch.Tensor, heads: dict, *, length: int, train_length: int, window: int = 32
) -> Drawing:
    """Attention maps of trained models on one sequence, at an evaluation length.

    Args:
        models: ``{scheme: TinyTransformer}``.
        tokens: one long test sequence, int64 ``(T_max,)``; its first ``length`` tokens are read.
        heads: ``{scheme: (layer, head)}``, the heads to show, one panel each.
        length: evaluation length ``T`` (at most ``T_max``).
        train_length: the training length ``L``, marked on the maps.
        window: how many of the last queries to show (the full map of a long sequence is too
            small to read); the keys shown are all ``T`` positions.

    Each panel shows the weights of the last ``window`` queries (rows) over all keys (columns),
    on a square-root colour scale so that small weights stay visible; a dashed diagonal marks
    the keys ``train_length`` tokens before each query. Parameter: ``length``.
    """
    tokens = torch.as_tensor(tokens)
    if tokens.dim() != 1 or tokens.dtype != torch.int64:
        raise TypeError(f"tokens must be an int64 tensor of shape (T,), got {tuple(tokens.shape)} {tokens.dtype}")
    schemes = list(heads)
    fig, axes = new_figure(5.0 * len(schemes), 3.6, ncols=len(schemes))
    axes = np.atleast_1d(axes)
    images, marks = {}, {}
    for ax, scheme in zip(axes, schemes, strict=True):
        images[scheme] = ax.imshow(
            np.zeros((1, 1)),
            cmap="magma",
            norm=PowerNorm(0.5, vmin=0.0, vmax=1.0),
            aspect="auto",
            interpolation="nearest",
        )
        (marks[scheme],) = ax.plot([], [], color="cyan", linestyle="--", linewidth=1.0)
        ax.set_xlabel("key position (tokens)")
        ax.set_ylabel("query position (tokens)")
    bar = fig.colorbar(
        images[schemes[0]], ax=list(axes), fraction=0.03, pad=0.02, label="attention weight (square-root scale)"
    )
    bar.set_ticks([0.0, 0.01, 0.05, 0.2, 0.5, 1.0])
    fig.subplots_adjust(left=0.08, right=0.86, bottom=0.15, top=0.78, wspace=0.3)
    title = fig.suptitle("")
    full = {}  # scheme -> the head's weights over the whole sequence, (T_max, T_max): one model run each

    def update(length: int):
        length = check_int("length", length, minimum=2)
        if length > tokens.shape[0]:
            raise ValueError(f"length must be <= {tokens.shape[0]} (the sequence given), got {length}")
        rows = min(window, length)
        for ax, scheme in zip(axes, schemes, strict=True):
            layer, head = heads[scheme]
            if scheme not in full:
                full[scheme] = _head_weights(models[scheme], tokens, layer, head)
            weights = _prefix_weights(full[scheme], length)[-rows:]  # (rows, T)
            images[scheme].set_data(weights)
            images[scheme].set_extent((-0.5, length - 0.5, length - 0.5, length - rows - 0.5))
            queries = np.array([length - rows - 0.5, length - 0.5])
            marks[scheme].set_data(queries - train_length, queries)  # keys exactly L tokens back
            marks[scheme].set_visible(length > train_length)
            ax.set_xlim(-0.5, length - 0.5)
            ax.set_ylim(length - 0.5, length - rows - 0.5)
            label = _label(scheme)
            ax.set_title(f"{label}, layer {layer + 1} head {head + 1}", fontsize=10)
        second = (
            f"dashed: keys {train_length} tokens back; farther keys are at distances never trained"
            if length > train_length
            else "every distance here was seen in training"
        )
        title.set_text(
            f"Last {rows} queries of a length-{length} sequence ({length / train_length:g}x the training "
            f"length)\n{second}"
        )
        return Layout(length)  # the axes follow the length: one frame per length, drawn once and kept

    update(length)
    return Drawing("attention_maps", fig, update, {"length": length}, {"images": images, "marks": marks})
