"""Explorer for notebook 09: one real model's RoPE pairs against a context length of your choice
(article 003 §8.4 and §10)."""

from __future__ import annotations

import math

import ipywidgets

from .. import plots
from ._explorer import Explorer, records_call

__all__ = ["rope_models_explorer"]


@records_call()
def rope_models_explorer(model: str = "llama3_1_8b", context: int | None = None) -> Explorer:
    """A drop-down of the models of ``helpers/data/rope_models.json`` (with Gemma 3's local layers and
    Qwen2.5's recommended YaRN as their own entries) and a slider over the context length ``C``
    in powers of two from 256 to 16M tokens, over ``plots.rope_model_pairs``: which pairs complete a
    turn within ``C``, and what the model's scaling does to each pair.

    ``context``: the slider's starting value, a power of two in that range; None: the power of two
    nearest (on a log scale) to the model's published context.
    """
    choices = plots.model_variants()
    known = [variant for _, variant in choices]
    if model not in known:
        raise ValueError(f"model must be one of {known}, got {model!r}")
    options = list(plots.CONTEXT_CHOICES)
    if context is None:
        published = plots.variant_rope(model).context_length
        context = min(options, key=lambda c: abs(math.log2(c / published)))
    if context not in options:
        raise ValueError(f"context must be a power of two from {options[0]:,} to {options[-1]:,}, got {context!r}")
    controls = {
        "model": ipywidgets.Dropdown(options=choices, value=model, description="model"),
        "context": ipywidgets.SelectionSlider(
            options=[(plots.token_count(c), c) for c in options], value=context, description="context C (tokens)"
        ),
    }
    return Explorer(plots.rope_model_pairs(model=model, context=context), controls)
