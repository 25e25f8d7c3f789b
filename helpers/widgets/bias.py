"""Explorers for notebook 07: ALiBi and relative position biases (article 001 §7.4, article 003 §9)."""

from __future__ import annotations

import ipywidgets

from .. import plots
from ._explorer import Explorer, records_call

__all__ = ["alibi_explorer"]


@records_call()
def alibi_explorer(n_heads: int = 8, head: int = 0, content: float = 0.0, max_heads: int = 32) -> Explorer:
    """Sliders for the number of heads, the head shown and the content strength over ``plots.alibi_heads``.

    The head slider's range follows the number of heads.
    """
    controls = {
        "n_heads": ipywidgets.IntSlider(value=n_heads, min=1, max=max_heads, description="heads H"),
        "head": ipywidgets.IntSlider(value=head, min=0, max=n_heads - 1, description="head h"),
        "content": ipywidgets.FloatSlider(
            value=content, min=0.0, max=4.0, step=0.1, description="content strength", readout_format=".1f"
        ),
    }

    def follow(change):
        controls["head"].max = change["new"] - 1  # clamps the value, which redraws once more if it moved

    controls["n_heads"].observe(follow, names="value")
    drawing = plots.alibi_heads(n_heads=n_heads, head=head, content=content, max_heads=max_heads)
    drawing.warm([{"content": 0.0}, {"content": 1.0}])  # the two legends: both backgrounds drawn now
    return Explorer(drawing, controls)
