"""Pictures for notebook 08: the train-short / test-long panorama and attention maps.

Notation: ``L`` the training length, ``T`` an evaluation length, ``H`` heads.
Each scheme has one colour in every figure of the notebook (``SCHEME_COLORS``).
"""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.colors import PowerNorm

from .._checks import check_int
from ._drawing import FULL, Drawing, new_figure

__all__ = ["SCHEME_COLORS", "SCHEME_LABELS", "extrapolation_panorama", "attention_maps"]

SCHEME_COLORS = {
    "none": "0.45",
    "learned": "#d62728",
    "sinusoidal": "#ff7f0e",
    "rope": "#1f77b4",
    "alibi": "#2ca02c",
}
SCHEME_LABELS = {
    "none": "NoPE",
    "learned": "learned",
    "sinusoidal": "sinusoidal",
    "rope": "RoPE",
    "alibi": "ALiBi",
}
_METRICS = ("accuracy", "loss")


_TASK_TITLES = {"lag": "copy the token {lag} places back", "pattern": "continue the repeated pattern"}


def extrapolation_panorama(results: dict, *, task: str | None = None, band: str = "minmax") -> Drawing:
    """Accuracy and loss against evaluation length, one line per scheme (mean over seeds).

    Args:
        results: the dictionary of ``helpers.experiment.load_results`` / ``run_experiment``.
        task: which task to show (default: the first of ``results["tasks"]``).
        band: the spread drawn around each line, ``"minmax"`` (lowest to highest seed) or
            ``"std"`` (mean ± one standard deviation over seeds).

    The x axis is the evaluation length in tokens (log scale, ticks at the measured lengths); the
    grey dashed line marks the training length. Parameters: ``task``, ``band``.
    """
    task = results["tasks"][0] if task is None else task
    all_summary = results["summary"]
    lengths = [int(t) for t in results["eval_lengths"]]
    train_length = int(results["config"]["train_length"])
    n_seeds = len(results["seeds"])
    fig, axes = new_figure(10.0, 4.2, ncols=2)
    lines, bands = {}, {}
    for ax, metric in zip(axes, _METRICS, strict=True):
        for scheme in results["schemes"]:
            (line,) = ax.plot(
                lengths,
                np.zeros(len(lengths)),
                "-o",
                color=SCHEME_COLORS.get(scheme, "k"),
                markersize=4,
                label=SCHEME_LABELS.get(scheme, scheme),
            )
            lines[(metric, scheme)] = line
        for scheme in results["schemes"]:
            zeros = np.zeros(len(lengths))
            bands[(metric, scheme)] = ax.fill_between(
                lengths, zeros, zeros, color=SCHEME_COLORS.get(scheme, "k"), alpha=0.18, linewidth=0
            )
        ax.axvline(train_length, color="0.5", linestyle="--", linewidth=1.0)
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths, [str(t) for t in lengths])
        ax.minorticks_off()
        ax.set_xlabel("evaluation length T (tokens)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy on determined tokens")
    axes[0].set_ylim(-0.02, 1.02)
    axes[0].set_title("accuracy (higher is better)")
    axes[1].set_ylabel("cross-entropy (nats per token)")
    axes[1].set_title("loss (lower is better)")
    axes[1].set_yscale("symlog", linthresh=0.1)
    top = max(
        all_summary[k][s][str(t)]["loss_max"] for k in results["tasks"] for s in results["schemes"] for t in lengths
    )
    axes[1].set_ylim(0.0, top * 1.3)
    for ax in axes:
        ax.text(
            train_length * 1.05,
            0.97,
            f"L = {train_length}",
            color="0.4",
            fontsize=8,
            va="top",
            transform=ax.get_xaxis_transform(),
        )
    handles = [lines[("accuracy", scheme)] for scheme in results["schemes"]]
    fig.legend(
        handles=handles, loc="lower center", ncols=len(handles), fontsize=9, frameon=False, bbox_to_anchor=(0.5, 0.0)
    )
    note = fig.text(0.5, 0.885, "", ha="center", va="bottom", fontsize=8, color="0.3")
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.24, top=0.8, wspace=0.25)
    title = fig.suptitle("")
    lag = results["config"].get("lag")

    def update(task: str, band: str):
        if task not in results["tasks"]:
            raise ValueError(f"task must be one of {results['tasks']}, got {task!r}")
        if band not in ("minmax", "std"):
            raise ValueError(f"band must be 'minmax' or 'std', got {band!r}")
        summary = all_summary[task]
        for (metric, scheme), line in lines.items():
            line.set_ydata([summary[scheme][str(t)][f"{metric}_mean"] for t in lengths])
        title.set_text(
            f"Task: {_TASK_TITLES.get(task, task).format(lag=lag)}. Trained at L = {train_length}, tested at 1x-8x L"
        )
        for metric in _METRICS:
            for scheme in results["schemes"]:
                rows = [summary[scheme][str(t)] for t in lengths]
                if band == "minmax":
                    low = [r[f"{metric}_min"] for r in rows]
                    high = [r[f"{metric}_max"] for r in rows]
                else:
                    low = [r[f"{metric}_mean"] - r[f"{metric}_std"] for r in rows]
                    high = [r[f"{metric}_mean"] + r[f"{metric}_std"] for r in rows]
                bands[(metric, scheme)].set_data(lengths, low, high)  # the band is reshaped in place
        what = "lowest to highest seed" if band == "minmax" else "mean ± 1 standard deviation"
        note.set_text(f"lines: mean over {n_seeds} seeds; shaded band: {what}; dashed line: training length")
        # The axes' limits are fixed above, so only the lines, bands and texts are redrawn.

    update(task, band)
    artists = {"lines": lines, "bands": bands, "note": note, "title": title}
    animated = [*bands.values(), *lines.values(), note, title]
    return Drawing("extrapolation_panorama", fig, update, {"task": task, "band": band}, artists, animated)


def _head_weights(model, tokens: torch.Tensor, layer: int, head: int) -> np.ndarray:
    """Attention weights ``(T, T)`` of one head for one sequence ``tokens`` ``(T,)``."""
    with torch.no_grad():
        _, weights = model(tokens[None, :], need_weights=True)  # list of (1, H, T, T)
    return weights[layer][0, head].double().cpu().numpy()


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

    def update(length: int):
        length = check_int("length", length, minimum=2)
        if length > tokens.shape[0]:
            raise ValueError(f"length must be <= {tokens.shape[0]} (the sequence given), got {length}")
        rows = min(window, length)
        for ax, scheme in zip(axes, schemes, strict=True):
            layer, head = heads[scheme]
            weights = _head_weights(models[scheme], tokens[:length], layer, head)[-rows:]  # (rows, T)
            images[scheme].set_data(weights)
            images[scheme].set_extent((-0.5, length - 0.5, length - 0.5, length - rows - 0.5))
            queries = np.array([length - rows - 0.5, length - 0.5])
            marks[scheme].set_data(queries - train_length, queries)  # keys exactly L tokens back
            marks[scheme].set_visible(length > train_length)
            ax.set_xlim(-0.5, length - 0.5)
            ax.set_ylim(length - 0.5, length - rows - 0.5)
            label = {"rope": "RoPE", "alibi": "ALiBi"}.get(scheme, scheme)
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
        return FULL

    update(length)
    return Drawing("attention_maps", fig, update, {"length": length}, {"images": images, "marks": marks})
