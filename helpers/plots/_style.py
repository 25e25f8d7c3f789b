"""Colours and small drawing pieces shared by every figure of the collection.

One colour for one frequency across the whole collection: hand ``i`` (pair index ``i``) is drawn
in ``pair_color(i)`` everywhere, fast hands first (blue, orange, green, ... as in article 000's
Figure 1: fast, middle, slow).
"""

from __future__ import annotations

import numpy as np
from matplotlib import colormaps

__all__ = ["pair_color", "PAIR_COLORS", "heatmap"]

PAIR_COLORS = [colormaps["tab10"](k) for k in range(10)]


def pair_color(i: int):
    """The colour of hand (frequency pair) ``i``."""
    return PAIR_COLORS[int(i) % len(PAIR_COLORS)]


def heatmap(
    ax,
    matrix,
    *,
    title: str = "",
    xlabel: str = "",
    ylabel: str = "",
    cmap: str = "RdBu_r",
    symmetric: bool = True,
    colorbar: bool = True,
    vmin=None,
    vmax=None,
):
    """Draw a matrix as an image (row 0 at the top) and return the ``AxesImage``.

    With ``symmetric`` the colour scale is centred on 0, so positive and negative read alike.
    """
    values = np.asarray(matrix, dtype=float)
    if symmetric and vmin is None and vmax is None:
        finite = values[np.isfinite(values)]
        limit = float(np.max(np.abs(finite))) if finite.size else 1.0
        vmin, vmax = -limit, limit
    image = ax.imshow(values, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return image
