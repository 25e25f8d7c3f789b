"""RoPE settings as model configurations write them: the ``scaling`` dict and whole model configs.

Hugging Face configs spell RoPE settings two ways. Old (transformers 4): ``rope_scaling`` beside
``rope_theta`` and ``partial_rotary_factor`` at the top level, the type as ``type`` or
``rope_type``. New (transformers 5): ``rope_parameters`` with ``rope_type`` and ``rope_theta``
(and ``partial_rotary_factor``) inside; transformers writes a config back with both ``type`` and
``rope_type``. This module reads both into helpers' own spelling (``rope.py``'s module docstring):
``original_max_position_embeddings`` is ``original_max_len``, ``rope_type`` is ``type``.

A key nobody knows is refused with its nearest known spelling; a key known but not used by the
type (``beta_fast`` under "linear", ``mrope_section``) is ignored, as transformers ignores it
(``rope_frequencies(..., unused_keys="error")`` refuses it).
"""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Mapping

import torch

from ._validate import check_base, check_even_dim, check_int, check_positive

#: Scaling types and their keys: (required, optional with defaults). Every type also takes
#: ``rope_theta`` (the base) and ``partial_rotary_factor`` (see ``COMMON_KEYS``).
SCALING_TYPES = {
    "default": (set(), {}),
    "linear": ({"factor"}, {}),
    "ntk": ({"factor"}, {}),
    "dynamic": ({"factor", "original_max_len"}, {"seq_len": None}),
    "yarn": (
        {"factor", "original_max_len"},
        {
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "attention_factor": None,
            "mscale": None,
            "mscale_all_dim": None,
            "truncate": True,
        },
    ),
    "longrope": (
        {"short_factor", "long_factor", "original_max_len"},
        {"factor": None, "attention_factor": None, "seq_len": None},
    ),
    "llama3": ({"factor", "original_max_len"}, {"low_freq_factor": 1.0, "high_freq_factor": 4.0}),
}

#: Keys every type takes: the base and the rotated fraction of the head.
COMMON_KEYS = {"rope_theta": None, "partial_rotary_factor": None}

#: Hugging Face spellings accepted as aliases of helpers' own.
ALIASES = {"rope_type": "type", "original_max_position_embeddings": "original_max_len"}

#: Keys that configs carry for something other than the speeds (multimodal position sections,
#: Ministral's attention scaling): known, never used here.
OTHER_KEYS = {"mrope_section", "mrope_interleaved", "llama_4_scaling_beta"}

KNOWN_KEYS = sorted(
    {"type", *ALIASES, *COMMON_KEYS, *OTHER_KEYS}
    | {key for required, optional in SCALING_TYPES.values() for key in (*required, *optional)}
)

UNUSED_KEYS = ("error", "ignore")


def _check_nonnegative(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number >= 0, got {value!r} of type {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value) or value < 0.0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value}")
    return value


def _check_factor_list(name: str, value) -> torch.Tensor:
    """A list (or tuple, or 1-D tensor) of finite positive numbers, as float64."""
    if isinstance(value, torch.Tensor) and value.dim() == 1:
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(x, numbers.Real) and not isinstance(x, bool) for x in value
    ):
        raise TypeError(
            f"{name} must be a list of positive numbers, one per pair, got {value!r} of type {type(value).__name__}"
        )
    factors = torch.tensor([float(x) for x in value], dtype=torch.float64)
    if not bool(torch.isfinite(factors).all()) or bool((factors <= 0).any()):
        raise ValueError(f"{name} must hold finite numbers > 0, got {value!r}")
    return factors


def unknown_key_message(where: str, key) -> str:
    """``unknown key 'facotr'; did you mean 'factor'?``, or the list of known keys."""
    close = difflib.get_close_matches(key, KNOWN_KEYS, n=1)
    if close:
        return f"{where}: unknown key {key!r}; did you mean {close[0]!r}?"
    return f"{where}: unknown key {key!r}; the known keys are {KNOWN_KEYS}"


def scaling_options(scaling, unused_keys: str = "error", where: str = "scaling") -> tuple[str, dict]:
    """Validate a ``scaling`` dict; return its type and its options in helpers' spelling.

    Every option of the type is present, defaults filled in; ``rope_theta`` and
    ``partial_rotary_factor`` are present (None when not given). A value None counts as absent,
    as in transformers. Lists (``short_factor``, ``long_factor``) become float64 tensors.
    """
    if unused_keys not in UNUSED_KEYS:
        raise ValueError(f"unused_keys must be one of {UNUSED_KEYS}, got {unused_keys!r}")
    if not isinstance(scaling, Mapping):
        raise TypeError(
            f"{where} must be None or a dict such as {{'type': 'linear', 'factor': 4.0}}, got {scaling!r} "
            f"of type {type(scaling).__name__}"
        )
    options, spelled = {}, {}
    for key, value in scaling.items():
        if not isinstance(key, str):
            raise TypeError(f"{where}'s keys must be strings, got the key {key!r} of type {type(key).__name__}")
        if key not in KNOWN_KEYS:
            raise ValueError(unknown_key_message(where, key))
        if value is None:
            continue
        name = ALIASES.get(key, key)
        if name in options and options[name] != value:
            raise ValueError(
                f"{where} gives {spelled[name]!r} and {key!r} (its alias) different values: "
                f"{options[name]!r} and {value!r}"
            )
        options[name], spelled[name] = value, key
    kind = options.pop("type", None)
    if kind is None and set(options) <= {"partial_rotary_factor", "rope_theta"}:
        kind = "default"  # a dict that only narrows the rotated width or sets the base: no scaling
    if kind not in SCALING_TYPES:
        raise ValueError(f"{where}['type'] must be one of {sorted(SCALING_TYPES)}, got {kind!r}")
    required, optional = SCALING_TYPES[kind]
    missing = sorted(required - set(options))
    if missing:
        raise ValueError(
            f"{where} of type {kind!r} needs the keys {sorted(required)}; missing {missing} "
            f"(if {kind!r} is not the type you meant: the type must be one of {sorted(SCALING_TYPES)})"
        )
    unused = sorted(set(options) - required - set(optional) - set(COMMON_KEYS))
    if unused and unused_keys == "error":
        raise ValueError(
            f"{where} of type {kind!r} takes the keys {sorted(required | set(optional) | set(COMMON_KEYS))}; "
            f"unknown to that type: {unused}. Pass unused_keys='ignore' to ignore them, as transformers does"
        )
    options = {**COMMON_KEYS, **optional, **{key: options[key] for key in options if key not in unused}}
    return kind, _check_values(kind, options, where)


def _check_values(kind: str, options: dict, where: str) -> dict:
    """Type and range checks of the options of one type (helpers' spelling)."""

    def name(key):
        return f"{where}[{key!r}]"

    if options.get("factor") is not None:
        options["factor"] = check_positive(name("factor"), options["factor"])
    if "original_max_len" in options:
        options["original_max_len"] = check_int(name("original_max_len"), options["original_max_len"], minimum=1)
    for key in ("beta_fast", "beta_slow", "low_freq_factor", "high_freq_factor", "attention_factor"):
        if options.get(key) is not None:
            options[key] = check_positive(name(key), options[key])
    for key in ("mscale", "mscale_all_dim"):
        if options.get(key) is not None:
            options[key] = _check_nonnegative(name(key), options[key])
    for key in ("short_factor", "long_factor"):
        if key in options:
            options[key] = _check_factor_list(name(key), options[key])
    if options.get("seq_len") is not None:
        options["seq_len"] = check_int(name("seq_len"), options["seq_len"], minimum=1)
    if not isinstance(options.get("truncate", True), bool):
        raise TypeError(f"{name('truncate')} must be a bool, got {options['truncate']!r}")
    if options["rope_theta"] is not None:
        options["rope_theta"] = check_base(name("rope_theta"), options["rope_theta"])
    p = options["partial_rotary_factor"]
    if p is not None:
        p = check_positive(name("partial_rotary_factor"), p)
        if p > 1.0:
            raise ValueError(f"{name('partial_rotary_factor')} must lie in (0, 1], got {p}")
        options["partial_rotary_factor"] = p
    if kind == "yarn" and options["beta_fast"] <= options["beta_slow"]:
        raise ValueError(
            f"{name('beta_fast')} must be > {name('beta_slow')}, got {options['beta_fast']} and {options['beta_slow']}"
        )
    if kind == "llama3" and options["high_freq_factor"] < options["low_freq_factor"]:
        # Equal factors are a step at wavelength L with no blend band (Llama 4 Scout ships 1 and 1).
        raise ValueError(
            f"{name('high_freq_factor')} must be >= {name('low_freq_factor')}, got "
            f"{options['high_freq_factor']} and {options['low_freq_factor']}"
        )
    if kind == "longrope" and options["factor"] is None and options["attention_factor"] is None:
        raise ValueError(
            f"{where} of type 'longrope' needs 'factor' (transformers: max_position_embeddings / "
            "original_max_position_embeddings) or 'attention_factor' to set the attention factor; got neither"
        )
    return options


def rotated_width(d: int, partial_rotary_factor, where: str = "scaling") -> int:
    """``int(d p)``, the rotated width, checked to be a positive even int (``d`` when ``p`` is None)."""
    if partial_rotary_factor is None:
        return d
    r = int(d * partial_rotary_factor)  # as transformers truncates
    if r < 2 or r % 2:
        raise ValueError(
            f"{where}['partial_rotary_factor'] = {partial_rotary_factor} of d = {d} rotates int({partial_rotary_factor}"
            f" * {d}) = {r} dimensions; the rotated width must be a positive even int"
        )
    return r


def _config_int(config: Mapping, key: str, minimum: int = 1):
    value = config.get(key)
    return None if value is None else check_int(f"config[{key!r}]", value, minimum=minimum)


def rope_settings_from_config(config, head_dim=None, *, seq_len=None) -> tuple[int, float, dict | None]:
    """The RoPE settings of a whole model config, in helpers' spelling: ``(d, base, scaling)``.

    ``rope_frequencies(d, base, scaling=scaling)`` and ``rope_cos_sin(T, d, base, scaling=scaling)``
    then give what transformers computes for that config. Every value transformers derives from
    other entries is written out in ``scaling``, which holds only keys its type uses.

    Args:
        config: a model config as a dict (``json.load`` of a config.json, or
            ``PretrainedConfig.to_dict()``). Read: ``hidden_size``, ``num_attention_heads``,
            ``head_dim``, ``qk_rope_head_dim``, ``rope_theta``, ``partial_rotary_factor``,
            ``max_position_embeddings``, ``original_max_position_embeddings``, GPT-NeoX's
            ``rotary_pct`` and ``rotary_emb_base`` and the RoPE dict ``rope_scaling``
            (transformers 4) or ``rope_parameters`` (transformers 5; both may be given if they
            agree). Other entries are ignored.
        head_dim: the head width ``d``; default ``config['qk_rope_head_dim']`` (DeepSeek's
            multi-head latent attention, whose rotated part of a head is that wide, as
            transformers sets ``head_dim`` for DeepSeek-V2/V3), else ``config['head_dim']``, else
            ``hidden_size // num_attention_heads`` (as transformers).
        seq_len: the current sequence length, for "dynamic" and "longrope" (whose speeds depend
            on it); None: the speeds transformers sets up at initialisation.

    How transformers (5.x) fills in what a config leaves out, followed here:

    - the type: ``rope_type``, else ``type``, else "default"; ``rope_theta``: the dict's, else the
      top level's, else 10000; ``partial_rotary_factor`` likewise (none: the whole head rotates);
    - "yarn", "longrope", "llama3": ``L`` is the top-level ``original_max_position_embeddings`` if
      the config has one (Phi-3), else the dict's, else ``max_position_embeddings``; "yarn" and
      "longrope" without ``factor`` take ``max_position_embeddings / L``;
    - "dynamic": ``L`` is ``max_position_embeddings`` (the dict's ``original_max_position_embeddings``
      is not read);
    - "default" rotates ``int(d p)`` dimensions, as GPT-NeoX, Phi and most models do (transformers'
      Llama code alone ignores ``partial_rotary_factor`` for "default");
    - GPT-NeoX's spellings: ``rotary_emb_base`` is the base and ``rotary_pct`` the rotated fraction
      when ``rope_theta`` / ``partial_rotary_factor`` are absent, as ``GPTNeoXConfig`` maps them (it
      also defaults ``rotary_pct`` to 0.25 for GPT-NeoX configs that give none; a config read here
      without the model type rotates the whole head unless it says otherwise). Both spellings of
      one setting with different values are refused.
    """
    if not isinstance(config, Mapping):
        raise TypeError(
            f"config must be a dict (a model config; for a transformers PretrainedConfig pass config.to_dict()), "
            f"got {type(config).__name__}"
        )
    rope = _rope_dict(config)
    kind = rope.get("rope_type") or rope.get("type") or "default"
    if head_dim is None:
        head_dim = _config_int(config, "qk_rope_head_dim", minimum=2)
    if head_dim is None:
        head_dim = _config_int(config, "head_dim", minimum=2)
    if head_dim is None:
        hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
        if hidden is None or heads is None:
            raise ValueError(
                "config must give 'head_dim', or 'hidden_size' and 'num_attention_heads' to derive it "
                f"(or pass head_dim=); got head_dim=None, hidden_size={hidden!r}, num_attention_heads={heads!r}"
            )
        head_dim = check_int("config['hidden_size']", hidden, minimum=1) // check_int(
            "config['num_attention_heads']", heads, minimum=1
        )
    d = check_even_dim("head_dim", head_dim)
    where = f"config[{_rope_where(config)!r}]"
    base, base_name = rope.get("rope_theta"), f"{where}['rope_theta']"
    if base is None:
        base, base_name = _one_of(config, "rope_theta", "rotary_emb_base")
    base = 10000.0 if base is None else check_base(base_name, base)
    partial = rope.get("partial_rotary_factor")
    if partial is None:
        partial, _ = _one_of(config, "partial_rotary_factor", "rotary_pct")
    if seq_len is not None:
        seq_len = check_int("seq_len", seq_len, minimum=1)

    scaling = {key: value for key, value in rope.items() if key not in ("rope_theta", "partial_rotary_factor")}
    scaling["type"] = kind
    scaling.pop("rope_type", None)
    max_len = _config_int(config, "max_position_embeddings")
    if kind in ("yarn", "longrope", "llama3"):
        original = _config_int(config, "original_max_position_embeddings")
        if original is None:
            original = rope.get("original_max_position_embeddings", rope.get("original_max_len"))
        if original is None:
            original = max_len
        if original is None:
            raise ValueError(
                f"{where} of type {kind!r} needs original_max_position_embeddings, and config has no "
                "max_position_embeddings to take it from"
            )
        scaling.pop("original_max_position_embeddings", None)
        scaling["original_max_len"] = original
        if kind in ("yarn", "longrope") and scaling.get("factor") is None and max_len is not None:
            scaling["factor"] = max_len / check_int(f"{where}['original_max_position_embeddings']", original, minimum=1)
    if kind == "dynamic":
        if max_len is None:
            raise ValueError(f"{where} of type 'dynamic' needs config['max_position_embeddings'] (its L)")
        scaling.pop("original_max_position_embeddings", None)
        scaling["original_max_len"] = max_len
    if kind in ("dynamic", "longrope") and seq_len is not None:
        scaling["seq_len"] = seq_len
    if partial is not None:
        scaling["partial_rotary_factor"] = partial
    kind, options = scaling_options(scaling, unused_keys="ignore", where=where)
    required, optional = SCALING_TYPES[kind]
    out = {"type": kind}
    for key in (*sorted(required), *optional, *COMMON_KEYS):
        value = options.get(key)
        if key == "rope_theta" or value is None or (key in optional and value == optional[key]):
            continue
        out[key] = value.tolist() if isinstance(value, torch.Tensor) else value
    if out == {"type": "default"}:
        return d, base, None
    return d, base, out


def _one_of(config: Mapping, key: str, neox_key: str):
    """``(value, "config[...]")`` of a top-level setting given as ``key`` or GPT-NeoX's ``neox_key``."""
    value, other = config.get(key), config.get(neox_key)
    if value is not None and other is not None and value != other:
        raise ValueError(
            f"config gives {key!r} = {value!r} and GPT-NeoX's spelling of it {neox_key!r} = {other!r}; give one"
        )
    if value is None and other is not None:
        return other, f"config[{neox_key!r}]"
    return value, f"config[{key!r}]"


def _rope_where(config: Mapping) -> str:
    return "rope_scaling" if config.get("rope_scaling") else "rope_parameters"


def _rope_dict(config: Mapping) -> dict:
    """The config's RoPE dict: ``rope_scaling`` and ``rope_parameters`` merged (they must agree)."""
    merged, origin = {}, {}
    for where in ("rope_parameters", "rope_scaling"):
        rope = config.get(where)
        if rope is None:
            continue
        if not isinstance(rope, Mapping):
            raise TypeError(f"config[{where!r}] must be a dict or None, got {rope!r} of type {type(rope).__name__}")
        nested = [key for key, value in rope.items() if isinstance(value, Mapping)]
        if nested:
            raise ValueError(
                f"config[{where!r}] is nested by layer type ({nested}); pass one layer type's dict, for example "
                f"{{**config, {where!r}: config[{where!r}][{nested[0]!r}]}}"
            )
        for key, value in rope.items():
            if value is None:
                continue
            if key in merged and merged[key] != value:
                raise ValueError(
                    f"config[{origin[key]!r}] and config[{where!r}] disagree on {key!r}: {merged[key]!r} and {value!r}"
                )
            merged[key], origin[key] = value, where
    types = {merged.get("type"), merged.get("rope_type")} - {None}
    if len(types) > 1:
        raise ValueError(
            f"config's RoPE dict (rope_scaling / rope_parameters) gives 'type' and 'rope_type' different values: "
            f"{merged.get('type')!r} and {merged.get('rope_type')!r}"
        )
    return merged
