"""The RoPE of real models: published settings (``helpers/data/rope_models.json``) turned into speeds.

Notation as in ``rope.py``: ``d`` head width, ``r`` rotated width (``int(d p)`` with a partial
rotary factor ``p``; DeepSeek's ``qk_rope_head_dim``), ``b`` base, ``θ_i`` speeds, ``λ_i = 2π/θ_i``
wavelengths in tokens, ``s`` scaling factor, ``L`` original context.

The data file holds each model's RoPE-relevant config.json entries as the model spells them, with
the source of every value. Nothing is computed here: ``rope_settings_from_config`` reads a config
and ``rope_frequencies`` computes the speeds, as for any other config (``tests/test_rope_models.py``
checks every entry against transformers' own RoPE code). The file is package data: it ships inside
the ``helpers`` package (and its wheel) and is read through ``importlib.resources``, so an
installed ``helpers`` finds it outside the repository too (``tests/test_packaging.py`` installs
the wheel and checks).

- ``rope_models()``: key -> entry, every entry's config checked to be readable.
- ``model_rope(model, *, seq_len=None, local=False, recommended=False)``: a ``ModelRope`` with
  the speeds with and without the model's scaling. ``local=True``: Gemma 3's sliding-window layers
  (their own base, no scaling). ``recommended=True``: the maker's recommended ``rope_scaling``
  (Qwen2.5's YaRN) instead of the shipped one.
- ``rope_layers(model)``: per layer, which RoPE it uses ("rope", "global", "local") or "none".
- An entry's optional ``pair_layout`` says which dimensions its maker's code pairs, and its optional
  ``checkpoint_layout`` which dimensions transformers' code for the model pairs, that is the layout of
  the checkpoint transformers loads (both one of ``PAIR_LAYOUTS``; ``tests/test_rope_models.py`` checks
  ``checkpoint_layout`` against transformers' code).
"""

from __future__ import annotations

import difflib
import importlib.resources
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from ._validate import check_int
from .rope import rope_frequencies
from .rope_config import rope_settings_from_config

__all__ = [
    "ModelRope",
    "rope_models",
    "model_rope",
    "rope_layers",
    "ROPE_MODELS_PATH",
    "LAYER_KINDS",
    "PAIR_LAYOUTS",
]

#: The data file read by default: ``data/rope_models.json`` inside the ``helpers`` package (a
#: ``pathlib.Path`` wherever the package is installed as files, as pip and an editable install do).
ROPE_MODELS_PATH = importlib.resources.files(__package__) / "data" / "rope_models.json"

#: What a layer does with positions: the model's RoPE, Gemma 3's global or local RoPE, or nothing.
LAYER_KINDS = ("rope", "global", "local", "none")

_ENTRY_KEYS = {"key", "name", "family", "year", "config", "sources", "notes"}
_OPTIONAL_KEYS = {"recommended_rope_scaling", "layer_pattern", "pair_layout", "checkpoint_layout"}

#: Which dimensions form a rotated pair (notebook 06, the two layouts): in a maker's reference code
#: (``pair_layout``) or in transformers' code for the model (``checkpoint_layout``).
PAIR_LAYOUTS = ("half", "interleaved")


@dataclass(frozen=True)
class ModelRope:
    """One model's RoPE as ``helpers`` computes it from the published config.

    Fields: ``key``, ``name``; ``head_dim`` (``d``) and ``rotated_dim`` (``r``, the width that
    rotates); ``base``; ``scaling`` (helpers' spelling, None for plain RoPE); ``context_length``
    (``max_position_embeddings``); ``original_context`` (``L`` of the scaling, None without one);
    ``inv_freq`` (float64 ``(r//2,)``, radians per token); ``attention_factor`` (multiplies the
    cos and sin tables); ``unscaled_inv_freq`` (same base and width, no scaling).
    """

    key: str
    name: str
    head_dim: int
    rotated_dim: int
    base: float
    scaling: dict | None
    context_length: int | None
    original_context: int | None
    inv_freq: torch.Tensor
    attention_factor: float
    unscaled_inv_freq: torch.Tensor

    @property
    def wavelengths(self) -> torch.Tensor:
        """``λ_i = 2π / θ_i`` in tokens, float64 ``(r//2,)``."""
        return 2.0 * math.pi / self.inv_freq

    @property
    def unscaled_wavelengths(self) -> torch.Tensor:
        """The wavelengths without the scaling, float64 ``(r//2,)``."""
        return 2.0 * math.pi / self.unscaled_inv_freq


def rope_models(path=None) -> dict[str, dict]:
    """The entries of the data file, by key, each checked to be readable by ``helpers``.

    Args:
        path: the JSON file; None: ``ROPE_MODELS_PATH`` (the package's ``data/rope_models.json``).

    Raises ``ValueError`` naming the file when it is missing, is not JSON, or holds an entry whose
    config (or recommended scaling) ``rope_settings_from_config`` refuses.
    """
    if path is None:
        path = ROPE_MODELS_PATH  # a Path, or another importlib.resources Traversable: both read_text
    elif isinstance(path, (str, Path)):
        path = Path(path)
    else:
        raise TypeError(f"path must be None, a str or a pathlib.Path, got {path!r} of type {type(path).__name__}")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ValueError(f"path: cannot read the RoPE model table {str(path)!r}: {error}") from error
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"path: {str(path)!r} is not valid JSON: {error}") from error
    if not isinstance(data, Mapping) or not isinstance(data.get("models"), list):
        raise ValueError(f"{str(path)!r} must hold a JSON object with a list 'models', got {type(data).__name__}")
    models = {}
    for i, entry in enumerate(data["models"]):
        where = f"{str(path)!r}, models[{i}]"
        _check_entry(entry, where)
        if entry["key"] in models:
            raise ValueError(f"{where}: the key {entry['key']!r} appears twice")
        models[entry["key"]] = entry
    return models


def _check_entry(entry, where: str) -> None:
    if not isinstance(entry, Mapping):
        raise ValueError(f"{where} must be a JSON object, got {type(entry).__name__}")
    missing = sorted(_ENTRY_KEYS - set(entry))
    unknown = sorted(set(entry) - _ENTRY_KEYS - _OPTIONAL_KEYS)
    if missing or unknown:
        raise ValueError(f"{where}: missing keys {missing}, unknown keys {unknown}")
    if not isinstance(entry["key"], str) or not isinstance(entry["config"], Mapping):
        raise ValueError(f"{where}: 'key' must be a string and 'config' an object")
    if not entry["sources"] or not all(isinstance(s, Mapping) and s.get("where") for s in entry["sources"]):
        raise ValueError(
            f"{where} ({entry['key']!r}): every value needs a source; 'sources' is empty or has no 'where'"
        )
    for name in ("pair_layout", "checkpoint_layout"):
        if name in entry and entry[name] not in PAIR_LAYOUTS:
            raise ValueError(f"{where} ({entry['key']!r}): {name} must be one of {PAIR_LAYOUTS}, got {entry[name]!r}")
    try:
        _settings(entry, local=False, recommended=False)
        if "recommended_rope_scaling" in entry:
            _settings(entry, local=False, recommended=True)
        if _has_local(entry):
            _settings(entry, local=True, recommended=False)
        if "layer_pattern" in entry:
            _layers(entry)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where} ({entry['key']!r}): {error}") from error


def _has_local(entry) -> bool:
    return entry["config"].get("rope_local_base_freq") is not None


def _config(entry, *, local: bool, recommended: bool) -> dict:
    """The config to read: the shipped one, its local-layer form, or with the recommended scaling."""
    config = dict(entry["config"])
    if recommended:
        for key in ("rope_scaling", "rope_parameters"):
            config.pop(key, None)
        config["rope_scaling"] = dict(entry["recommended_rope_scaling"])
    if local:
        # Gemma 3's sliding-window layers: base rope_local_base_freq, no scaling (as transformers
        # builds its "sliding_attention" RoPE).
        for key in ("rope_scaling", "rope_parameters"):
            config.pop(key, None)
        config["rope_theta"] = config.pop("rope_local_base_freq")
    return config


def _settings(entry, *, local: bool, recommended: bool, seq_len=None):
    config = _config(entry, local=local, recommended=recommended)
    return config, rope_settings_from_config(config, seq_len=seq_len)


def model_rope(model, *, seq_len=None, local: bool = False, recommended: bool = False) -> ModelRope:
    """One model's RoPE speeds, from its published config.

    Args:
        model: a key of ``rope_models()`` (for example ``"llama3_1_8b"``) or an entry dict.
        seq_len: the current sequence length, for "dynamic" and "longrope" scalings; None: the
            speeds at initialisation.
        local: Gemma 3's sliding-window layers (base ``rope_local_base_freq``, no scaling); only
            for models with such layers.
        recommended: apply the entry's ``recommended_rope_scaling`` (Qwen2.5's YaRN for long
            inputs) instead of the shipped config's scaling; only where the entry has one.

    Returns:
        A ``ModelRope``. ``inv_freq`` and ``attention_factor`` are ``rope_frequencies(d, base,
        scaling=...)`` of ``rope_settings_from_config(config)``; ``unscaled_inv_freq`` the same
        base and rotated width without scaling.
    """
    entry = _entry(model)
    if not isinstance(local, bool) or not isinstance(recommended, bool):
        raise TypeError(f"local and recommended must be bools, got {local!r} and {recommended!r}")
    if seq_len is not None:
        seq_len = check_int("seq_len", seq_len, minimum=1)
    if local and not _has_local(entry):
        raise ValueError(
            f"local=True: {entry['key']!r} has no sliding-window layers with a RoPE of their own "
            "(no 'rope_local_base_freq' in its config; Gemma 3 has them)"
        )
    if recommended and "recommended_rope_scaling" not in entry:
        raise ValueError(
            f"recommended=True: {entry['key']!r} has no recommended_rope_scaling (its maker recommends none "
            "beside the shipped config)"
        )
    config, (d, base, scaling) = _settings(entry, local=local, recommended=recommended, seq_len=seq_len)
    inv_freq, factor = rope_frequencies(d, base, scaling=scaling)
    partial = None if scaling is None else scaling.get("partial_rotary_factor")
    plain = None if partial is None else {"type": "default", "partial_rotary_factor": partial}
    unscaled, _ = rope_frequencies(d, base, scaling=plain)
    context = config.get("max_position_embeddings")
    return ModelRope(
        key=entry["key"],
        name=entry["name"],
        head_dim=d,
        rotated_dim=2 * inv_freq.shape[0],
        base=base,
        scaling=scaling,
        context_length=None if context is None else int(context),
        original_context=None if scaling is None else scaling.get("original_max_len"),
        inv_freq=inv_freq,
        attention_factor=float(factor),
        unscaled_inv_freq=unscaled,
    )


def _entry(model) -> dict:
    if isinstance(model, str):
        models = rope_models()
        if model not in models:
            close = difflib.get_close_matches(model, list(models), n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"model: unknown key {model!r}{hint} The keys are {sorted(models)}")
        return models[model]
    if isinstance(model, Mapping):
        _check_entry(model, "model")
        return dict(model)
    raise TypeError(
        f"model must be a key of rope_models() (a str) or an entry dict, got {model!r} of type {type(model).__name__}"
    )


def rope_layers(model) -> list[str]:
    """Per layer, from layer 0, what it does with positions: one of ``LAYER_KINDS``.

    "rope": the model's RoPE (``model_rope(model)``); "global" and "local": Gemma 3's
    full-attention RoPE (``model_rope(model)``) and sliding-window RoPE (``model_rope(model,
    local=True)``); "none": no position encoding in that layer (Llama 4's NoPE layers). Only for
    entries that record a ``layer_pattern`` (Gemma 3, Llama 4 Scout); others raise ``ValueError``.
    """
    entry = _entry(model)
    if "layer_pattern" not in entry:
        raise ValueError(
            f"model: {entry['key']!r} records no layer_pattern (every layer uses the same RoPE); "
            "rope_layers needs one (Gemma 3, Llama 4 Scout)"
        )
    return _layers(entry)


def _layers(entry) -> list[str]:
    pattern = entry["layer_pattern"]
    if not isinstance(pattern, Mapping) or set(pattern) != {"num_hidden_layers", "pattern"}:
        raise ValueError(f"layer_pattern must be {{'num_hidden_layers': n, 'pattern': [...]}}, got {pattern!r}")
    n = check_int("layer_pattern['num_hidden_layers']", pattern["num_hidden_layers"], minimum=1)
    kinds = pattern["pattern"]
    if not isinstance(kinds, list) or not kinds or any(kind not in LAYER_KINDS for kind in kinds):
        raise ValueError(f"layer_pattern['pattern'] must be a non-empty list of {LAYER_KINDS}, got {kinds!r}")
    if ("local" in kinds) != _has_local(entry):
        raise ValueError("layer_pattern has 'local' layers exactly when the config gives rope_local_base_freq")
    return [kinds[i % len(kinds)] for i in range(n)]
