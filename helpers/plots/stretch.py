"""Figures of notebook 11 (stretching a trained model's context): what each RoPE setting does to the
pairs of a head, the scores before and after fine-tuning, and how spread the attention becomes."""

from __future__ import annotations

import math

import numpy as np

from ._drawing import FULL, Drawing, new_figure

__all__ = ["stretch_pairs", "stretch_scores", "stretch_budgets", "stretch_entropy"]

#: One colour and marker per method, the same in every figure of the notebook.
METHOD_STYLE = {
    "none": ("#444444", "o"),
    "linear": ("#1f77b4", "s"),
    "ntk": ("#d62728", "^"),
    "dynamic": ("#ff7f0e", "v"),
    "yarn": ("#2ca02c", "D"),
    "llama3": ("#9467bd", "P"),
}
METHOD_LABEL = {
    "none": "none (as trained)",
    "linear": "linear (PI)",
    "ntk": "NTK-aware",
    "dynamic": "dynamic NTK",
    "yarn": "YaRN",
    "llama3": "llama3",
}
_TASK_METRIC = {"text": "loss", "lag": "accuracy", "passkey": "accuracy"}
_TASK_TITLE = {
    "text": "text: loss (nats, lower is better)",
    "lag": "lag: accuracy",
    "passkey": "passkey: accuracy",
}


def _style(method: str):
    return METHOD_STYLE.get(method, ("k", "o"))


def stretch_pairs(d: int, base: float, factor: float, train_length: int, methods) -> Drawing:
    """Each method's speed of every pair divided by the trained one, ``θ'_i / θ_i``, against the pair
    index, for a head of width ``d``; the top axis gives each pair's turns in ``L`` tokens. The
    dynamic setting is drawn at the target length ``sL`` (at ``L`` it is the trained RoPE)."""
    from .. import rope as _rope  # the maths, imported on use
    from ..experiment.stretch import method_scaling

    fig, ax = new_figure(7.6, 3.6)
    pairs = np.arange(d // 2)
    plain = _rope.rope_frequencies(d, base)[0].numpy()
    lines = {}
    for method in methods:
        scaling = method_scaling(method, factor, train_length, seq_len=int(factor * train_length))
        speeds = _rope.rope_frequencies(d, base, scaling=scaling)[0].numpy()
        color, marker = _style(method)
        (lines[method],) = ax.plot(
            pairs,
            speeds / plain,
            marker=marker,
            color=color,
            label=METHOD_LABEL.get(method, method)
            + (f" (read at {int(factor * train_length)})" if method == "dynamic" else ""),
            linewidth=1.2,
        )
    ax.axhline(1.0, color="k", linewidth=0.5)
    ax.axhline(1.0 / factor, color="k", linewidth=0.5, linestyle=":")
    ax.set_yscale("log", base=2)
    lowest = min(min(line.get_ydata()) for line in lines.values())
    ticks = [2.0**-k for k in range(0, 12) if 2.0**-k >= lowest / 1.5]
    ax.set_yticks(ticks, ["1" if t == 1 else f"1/{round(1 / t)}" for t in ticks])
    ax.set_xlabel("pair i (fast to slow)")
    ax.set_ylabel("speed ratio θ'_i / θ_i")
    top = ax.secondary_xaxis("top")
    top.set_xticks(pairs, [f"{train_length * p / (2 * math.pi):.3g}" for p in plain], fontsize=7)
    top.set_xlabel(f"turns of the pair in L = {train_length} tokens (as trained)", fontsize=8)
    ax.legend(fontsize=8, ncols=3, loc="lower left", frameon=False)
    ax.grid(alpha=0.3)
    fig.subplots_adjust(left=0.1, right=0.98, bottom=0.14, top=0.83)

    def update():
        return FULL

    return Drawing("stretch_pairs", fig, update, {}, {"lines": lines})


def _entry(results: dict, task: str, method: str, budget: int, length: int, band: str):
    """``[mean, lowest, highest]`` over seeds, or None."""
    metric = _TASK_METRIC[task]
    try:
        return results["summary"][task][method][str(budget)][str(length)][f"{metric}_{band}"]
    except KeyError:
        return None


def stretch_scores(results: dict, *, budget: int = 0, highlight: str = "all", methods=None) -> Drawing:
    """One panel per task: each method's score (mean over seeds, bar from the lowest seed to the
    highest) in three places: within ``L`` read at ``L``, from ``L`` to ``sL`` read at ``sL``, and
    from ``sL`` to ``8L`` read at ``8L`` (for passkey, the key's distance in those ranges).

    Parameters: ``budget``, the fine-tuning steps at ``sL`` (one of the run's budgets; a method
    scored without fine-tuning only is left out above 0), and ``highlight``, a method drawn at full
    strength with the others faded (``"all"``: none faded). The axes are fixed over every budget,
    so an update only moves the markers and bars."""
    config = results["config"]
    length, factor = config["base"]["train_length"], config["factor"]
    longest = max(config["eval_lengths"])
    methods = list(methods or config["methods"])
    budgets = [int(b) for b in config["budgets"]]
    places = [("within", length), ("past", factor * length), ("beyond", longest)]
    ticks = [
        f"within L\n(read at {length})",
        f"past: L to {factor:g}L\n(read at {factor * length})",
        f"beyond: {factor:g}L to {longest // length}L\n(read at {longest})",
    ]
    tasks = list(config["tasks"])
    fig, axes = new_figure(4.1 * len(tasks), 3.8, ncols=len(tasks))
    axes = np.atleast_1d(axes)
    offsets = np.linspace(-0.3, 0.3, len(methods))
    markers, bars = {}, {}
    for ax, task in zip(axes, tasks, strict=True):
        values = []
        for offset, method in zip(offsets, methods, strict=True):
            color, marker = _style(method)
            for x, (band, at) in enumerate(places):
                for b in budgets:
                    entry = _entry(results, task, method, b, at, band)
                    if entry is not None:
                        values.extend(entry)
                (bars[(task, method, band)],) = ax.plot([x + offset] * 2, [np.nan, np.nan], color=color, linewidth=1.5)
                (markers[(task, method, band)],) = ax.plot(
                    [x + offset], [np.nan], marker=marker, color=color, linestyle="none"
                )
            # the legend's entry, drawn once with the background
            ax.plot([], [], marker=marker, color=color, linestyle="none", label=METHOD_LABEL.get(method, method))
        ax.set_xticks(range(len(places)), ticks, fontsize=8)
        ax.set_xlim(-0.5, len(places) - 0.5)
        ax.set_title(_TASK_TITLE.get(task, task), fontsize=10)
        ax.grid(alpha=0.3, axis="y")
        if _TASK_METRIC[task] == "accuracy":
            ax.set_ylim(-0.03, 1.03)
            chance = 1 / config["passkey_keys"] if task == "passkey" else 1 / config["base"]["vocab"]
            ax.axhline(chance, color="k", linewidth=0.6, linestyle=":", label="chance" if task == "passkey" else None)
        elif values:
            low, high = min(values), max(values)
            ax.set_ylim(low - 0.05 * (high - low), high + 0.05 * (high - low))
    handles, labels = [], []
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    fig.legend(handles, labels, loc="lower center", ncols=len(labels), fontsize=8, frameon=False)
    fig.suptitle(
        f"Models trained at L = {length}, factor s = {factor:g}: mean over seeds, "
        "bar from the lowest seed to the highest",
        fontsize=10,
        y=0.985,
    )
    caption = fig.text(0.5, 0.905, "", ha="center", fontsize=10)

    def update(budget, highlight):
        if int(budget) not in budgets:
            raise ValueError(f"budget must be one of {budgets}, got {budget!r}")
        if highlight != "all" and highlight not in methods:
            raise ValueError(f"highlight must be 'all' or one of {methods}, got {highlight!r}")
        for task in tasks:
            for method in methods:
                alpha = 1.0 if highlight in ("all", method) else 0.15
                for band, at in places:
                    entry = _entry(results, task, method, int(budget), at, band)
                    mean, low, high = (np.nan, np.nan, np.nan) if entry is None else entry
                    bars[(task, method, band)].set_ydata([low, high])
                    markers[(task, method, band)].set_ydata([mean])
                    bars[(task, method, band)].set_alpha(alpha)
                    markers[(task, method, band)].set_alpha(alpha)
        caption.set_text(
            "no fine-tuning"
            if int(budget) == 0
            else f"after {int(budget)} fine-tuning steps at {factor * length} tokens"
        )

    fig.subplots_adjust(left=0.05, right=0.99, bottom=0.25, top=0.8, wspace=0.22)
    update(budget, highlight)
    animated = [*bars.values(), *markers.values(), caption]
    return Drawing(
        "stretch_scores",
        fig,
        update,
        {"budget": int(budget), "highlight": highlight},
        {"markers": markers, "bars": bars, "caption": caption},
        animated=animated,
    )


def stretch_budgets(results: dict, *, band: str = "past", methods=None) -> Drawing:
    """One panel per task: each method's score in ``band`` at the length where it is read (``sL`` for
    "past", ``8L`` for "beyond") against the fine-tuning budget, mean over seeds with the range
    shaded. Methods scored without fine-tuning only are a single point at budget 0."""
    config = results["config"]
    length, factor = config["base"]["train_length"], config["factor"]
    at = factor * length if band == "past" else max(config["eval_lengths"])
    methods = list(methods or config["methods"])
    tasks = list(config["tasks"])
    budgets = list(config["budgets"])
    fig, axes = new_figure(4.1 * len(tasks), 3.6, ncols=len(tasks))
    axes = np.atleast_1d(axes)
    lines = {}
    for ax, task in zip(axes, tasks, strict=True):
        for method in methods:
            color, marker = _style(method)
            rows = [(b, _entry(results, task, method, b, at, band)) for b in budgets]
            rows = [(b, e) for b, e in rows if e is not None]
            x = np.array([max(b, 0) for b, _ in rows], dtype=float)
            mean = np.array([e[0] for _, e in rows])
            low, high = np.array([e[1] for _, e in rows]), np.array([e[2] for _, e in rows])
            (lines[(task, method)],) = ax.plot(x, mean, marker=marker, color=color, label=METHOD_LABEL.get(method))
            ax.fill_between(x, low, high, color=color, alpha=0.12, linewidth=0)
        ax.set_xscale("symlog", linthresh=25)
        ax.set_xticks(budgets, [str(b) for b in budgets])
        ax.set_xlabel(f"fine-tuning steps at {factor * length} tokens (linear to 25, logarithmic above)", fontsize=8)
        ax.set_title(_TASK_TITLE.get(task, task), fontsize=10)
        ax.grid(alpha=0.3)
        if _TASK_METRIC[task] == "accuracy":
            ax.set_ylim(-0.03, 1.03)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncols=len(methods), fontsize=8, frameon=False)
    where = f"from L to {factor:g}L, read at {at}" if band == "past" else f"from {factor:g}L on, read at {at}"
    fig.suptitle(
        f"The budget ladder: scores {where} (passkey: the key's distance), mean over seeds, "
        "shaded from the lowest seed to the highest",
        fontsize=10,
    )
    fig.subplots_adjust(left=0.05, right=0.99, bottom=0.27, top=0.86, wspace=0.22)

    def update():
        return FULL

    return Drawing("stretch_budgets", fig, update, {"band": band}, {"lines": lines})


def stretch_entropy(entropies: dict, reference: dict, *, length: int, train_length: int) -> Drawing:
    """Attention entropy (nats) per layer for each method at ``length`` tokens, queries past ``L``
    (``entropies[method]["past"]``), beside the trained model's own (``reference``: the "within"
    band read at ``L``). A name that is not a method (a variant such as "yarn, factor 1") takes
    the style of the method it starts with, hatched."""
    methods = list(entropies)
    layers = len(next(iter(entropies.values()))["past"])
    fig, axes = new_figure(4.6 * layers, 3.9, ncols=layers)
    axes = np.atleast_1d(axes)
    bars = {}

    def label(name):
        return METHOD_LABEL.get(name, name.replace("yarn, factor 1", "YaRN, factor 1"))

    for layer, ax in enumerate(axes):
        values = [entropies[m]["past"][layer] for m in methods]
        colors = [_style(m.split(",")[0])[0] for m in methods]
        bars[layer] = ax.bar(range(len(methods)), values, color=colors)
        for bar, name in zip(bars[layer], methods, strict=True):
            if name not in METHOD_STYLE:
                bar.set_hatch("//")
                bar.set_alpha(0.6)
        ax.axhline(
            reference["within"][layer],
            color="k",
            linestyle=":",
            linewidth=1,
            label=f"as trained, queries within L (read at {train_length})",
        )
        ax.set_xticks(range(len(methods)), [label(m) for m in methods], rotation=35, ha="right", fontsize=8)
        ax.set_title(f"layer {layer}", fontsize=10)
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel("attention entropy (nats)")
    axes[0].legend(fontsize=8, loc="lower left", frameon=True)
    fig.suptitle(
        f"How spread the attention of queries past L = {train_length} is, read at {length} tokens\n"
        "(mean over heads, queries and sequences)",
        fontsize=10,
    )
    fig.subplots_adjust(left=0.08, right=0.99, bottom=0.27, top=0.84, wspace=0.2)

    def update():
        return FULL

    return Drawing("stretch_entropy", fig, update, {"length": length}, {"bars": bars})
