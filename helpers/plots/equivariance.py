"""Pictures for notebook 01: attention weights and Gram matrices side by side (article 000 §1-2).

Notation: ``T`` tokens (or positions), a weight matrix is ``(T, T)`` with queries as rows and keys
as columns; a Gram matrix ``G[m, n] = p_mᵀ p_n`` compares position vectors.
"""

from __future__ import annotations

import numpy as np
import torch

from ._drawing import Drawing, new_figure
from ._style import heatmap

__all__ = ["attention_pair", "gram_matrices"]


def _square(name: str, matrix) -> np.ndarray:
    if isinstance(matrix, torch.Tensor):
        matrix = matrix.detach().cpu().double().numpy()
    values = np.asarray(matrix, dtype=float)
    if values.ndim != 2 or values.shape[0] != values.shape[1]:
        raise ValueError(f"{name} must be a square (T, T) matrix, got shape {values.shape}")
    return values


def _labels(name: str, labels, size: int) -> list[str]:
    labels = [str(label) for label in labels]
    if len(labels) != size:
        raise ValueError(f"{name} must hold one label per token ({size}), got {len(labels)}")
    return labels


def attention_pair(weights_a, weights_b, labels_a, labels_b, *, titles=("sentence A", "sentence B")) -> Drawing:
    """Two attention-weight matrices side by side, each cell written out (a static picture).

    Args:
        weights_a, weights_b: ``(T, T)`` softmax weights (rows: queries, columns: keys), tensors or arrays.
        labels_a, labels_b: the ``T`` tokens of each sentence, in order.
        titles: the two panel titles.

    Returns:
        a ``Drawing``; ``artists["images"]`` holds the two ``AxesImage`` (read ``get_array()``).
    """
    a, b = _square("weights_a", weights_a), _square("weights_b", weights_b)
    if a.shape != b.shape:
        raise ValueError(f"weights_a and weights_b must have the same shape, got {a.shape} and {b.shape}")
    size = a.shape[0]
    labels = (_labels("labels_a", labels_a, size), _labels("labels_b", labels_b, size))
    fig, axes = new_figure(8.4, 3.8, ncols=2)
    images = []
    for ax, weights, names, title in zip(axes, (a, b), labels, titles, strict=True):
        image = heatmap(
            ax,
            weights,
            title=title,
            xlabel="key (attended to)",
            ylabel="query (attending)",
            cmap="Blues",
            symmetric=False,
            colorbar=False,
            vmin=0.0,
            vmax=1.0,
        )
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="attention weight")
        ax.set_xticks(range(size), names)
        ax.set_yticks(range(size), names)
        if size <= 8:
            for row in range(size):
                for col in range(size):
                    value = weights[row, col]
                    ax.text(
                        col,
                        row,
                        f"{value:.2f}",
                        ha="center",
                        va="center",
                        fontsize=9,
                        color="white" if value > 0.6 else "black",
                    )
        images.append(image)
    fig.subplots_adjust(left=0.1, right=0.9, bottom=0.16, top=0.88, wspace=0.7)
    return Drawing("attention_pair", fig, lambda: None, {}, {"images": images})


def gram_matrices(grams: dict, pairs=((10, 12), (100, 102))) -> Drawing:
    """Gram matrices ``G[m, n] = p_mᵀ p_n`` of several encodings side by side, a few pairs ringed.

    Each panel's title gives ``G`` at the ringed pairs, so a reader can see at once whether two
    pairs at the same distance get the same value.

    Args:
        grams: ``{name: (T, T) matrix}``, in display order (tensors or arrays).
        pairs: ``(m, n)`` positions to ring, each ``< T``.

    Returns:
        a ``Drawing``; ``artists["images"]`` holds the ``AxesImage`` of each panel.
    """
    if not isinstance(grams, dict) or not grams:
        raise TypeError(f"grams must be a non-empty dict {{name: (T, T) matrix}}, got {type(grams).__name__}")
    matrices = {name: _square(f"grams[{name!r}]", matrix) for name, matrix in grams.items()}
    sizes = {matrix.shape[0] for matrix in matrices.values()}
    if len(sizes) != 1:
        raise ValueError(f"every Gram matrix must have the same size, got sizes {sorted(sizes)}")
    size = sizes.pop()
    pairs = [(int(m), int(n)) for m, n in pairs]
    if any(not (0 <= k < size) for pair in pairs for k in pair):
        raise ValueError(f"pairs must hold positions in 0 .. {size - 1}, got {pairs}")
    fig, axes = new_figure(3.9 * len(matrices) + 0.8, 3.6 + 0.2 * len(pairs), ncols=len(matrices))
    axes = np.atleast_1d(axes)
    images = []
    for ax, (name, matrix) in zip(axes, matrices.items(), strict=True):
        values = "\n".join(f"G{pair} = {matrix[pair]:+.3f}" for pair in pairs)
        image = heatmap(
            ax,
            matrix,
            title=f"{name}\n{values}",
            xlabel="position n (tokens)",
            ylabel="position m (tokens)",
            vmin=-1.0,
            vmax=1.0,
            symmetric=False,
            colorbar=False,
        )
        ax.title.set_fontsize(9)
        for m, n in pairs:
            ax.plot([n], [m], "o", markersize=10, markerfacecolor="none", markeredgecolor="black", markeredgewidth=1.5)
        images.append(image)
    fig.subplots_adjust(
        left=0.06, right=0.9, bottom=0.13, top=1.0 - (0.25 + 0.2 * (len(pairs) + 1)) / fig.get_figheight(), wspace=0.3
    )
    top = axes[0].get_position()
    cax = fig.add_axes((0.92, top.y0, 0.012, top.height))
    fig.colorbar(images[-1], cax=cax, label="p_mᵀ p_n (unit vectors)")
    return Drawing("gram_matrices", fig, lambda: None, {}, {"images": images})
