"""Rotary position embedding, RoPE (Su et al. 2021; article 000 §9, article 003 §7-8 and §10).

Notation: ``T`` positions, ``d`` head width (even; the width of one attention head, not
``d_model``), ``i`` pair index, ``θ_i = b^(-2i/d)``, ``s`` scaling factor, ``L`` original
(training) context length, ``m`` the query's position, ``n`` the key's, ``Δ = m - n`` their offset.

RoPE rotates each pair of a query or key (not a value, in standard RoPE), head by head, by ``m θ_i`` at position
``m``; then ``(R_m q)ᵀ (R_n k) = qᵀ R_(n-m) k = qᵀ R_(-Δ) k`` depends on the positions only through
the offset ``Δ = m - n``.

Two layouts pair the dimensions differently; both are in use and mixing them is a classic
checkpoint-conversion bug:

- ``"interleaved"``: pairs ``(x0, x1), (x2, x3), ...``, as in the RoFormer paper and Meta's LLaMA
  code (complex multiplication of ``x[2i] + i x[2i+1]``).
- ``"half"``: pairs ``(x_j, x_(j + d/2))``, as in GPT-NeoX and Hugging Face transformers
  (``x * cos + rotate_half(x) * sin``).

The tables are half width, ``(T, d/2)``: one angle per pair, whatever the layout. Decoding with a
cache: build the tables once, rotate each new query and key at its absolute position
(``apply_rope(x, cos, sin, layout=..., positions=offset)``) and attend over the cached, already rotated keys;
that is the full causal pass, step by step (``tests/test_rope_hf.py``). A step's tensors are small,
so its cost is per call: ``apply_rope_qk`` rotates the query and the key in one call, and
``rope_gather`` reads per-row positions' rows once for all layers.

Long-context scaling (``scaling=`` dict, keys as in Hugging Face's ``rope_scaling`` /
``rope_parameters``, old and new spellings: ``rope_type`` may stand for ``type`` and
``original_max_position_embeddings`` for ``original_max_len``; ``helpers.rope_config`` reads them).
Every type also takes ``rope_theta`` (the base, instead of the ``base`` argument) and
``partial_rotary_factor`` ``p`` (only the first ``r = int(d p)`` dimensions rotate, at speeds
``b^(-2i/r)``). A key no type knows is refused with its nearest spelling; a key the type does not
use is ignored, as transformers ignores it (``unused_keys="error"`` refuses it instead). For the
types Hugging Face has, "default", "linear", "dynamic", "yarn", "longrope" and "llama3", the formulas are those of
transformers' ``modeling_rope_utils``, computed here in float64 (transformers computes the speeds in
float32; ``tests/test_rope_hf.py`` checks both). ``factor`` and ``original_max_len`` are used as
given; transformers derives them from other config entries when a config leaves them out (its
"dynamic" takes ``L`` from ``max_position_embeddings``, its "yarn" and "longrope" ``factor`` from
``max_position_embeddings / L``): ``rope_from_config`` and ``rope_settings_from_config`` read a
whole model config and do the same.

- ``{"type": "default"}``: plain RoPE (the same as ``scaling=None``).
- ``{"type": "linear", "factor": s}``: Position Interpolation (Chen et al. 2023), every ``θ_i / s``.
- ``{"type": "ntk", "factor": s}``: NTK-aware scaling (bloc97, 2023), a fixed base
  ``b s^(d/(d-2))``. Hugging Face's shared RoPE types have no such type (HunYuan's model code has
  one, ``ntk_alpha``): its "dynamic" recomputes the base from the current length.
- ``{"type": "dynamic", "factor": s, "original_max_len": L, "seq_len": T}``: Hugging Face's dynamic
  NTK, the factor grown from 1 as the sequence passes ``L``: base ``b (s T/L - (s-1))^(d/(d-2))``.
  The grown factor reaches ``s`` at ``T = (2 - 1/s) L`` and ``s² - s + 1`` at ``T = sL``.
- ``{"type": "yarn", "factor": s, "original_max_len": L}`` (optional ``beta_fast=32``,
  ``beta_slow=1``, ``attention_factor``; Peng et al. 2023): pairs that turn more than
  ``beta_fast`` times in ``L`` tokens keep ``θ_i``, pairs that turn less than ``beta_slow`` times
  get ``θ_i / s``, and in between a ramp that is linear in the pair index ``i`` between
  ``yarn_correction_range``'s two indices, as in the reference code and Hugging Face (the paper
  writes the ramp as linear in the number of turns ``L/λ_i``, which differs inside the range).
  Tables are multiplied by ``a = 0.1 ln s + 1``, so a score (query and key both rotated) by ``a²``.
  Options as in transformers: ``mscale`` and ``mscale_all_dim`` (DeepSeek; when both are given and
  non-zero ``a = (0.1 mscale ln s + 1) / (0.1 mscale_all_dim ln s + 1)``, 1 for DeepSeek-V3, whose
  modelling code puts the rest into the softmax scale) and ``truncate=False`` (the correction range
  not rounded to whole pairs).
- ``{"type": "longrope", "short_factor": [...], "long_factor": [...], "original_max_len": L}``
  (optional ``factor``, ``attention_factor``, ``seq_len``; Phi-3): ``θ_i / short_factor[i]`` while
  the sequence is at most ``L`` tokens (``seq_len`` None or ``<= L``), ``θ_i / long_factor[i]``
  once it is longer; tables multiplied by ``a = sqrt(1 + ln s / ln L)`` (``s = factor``) unless
  ``attention_factor`` is given.
- ``{"type": "llama3", "factor": s, "original_max_len": L}`` (optional ``low_freq_factor=1``,
  ``high_freq_factor=4``): wavelengths below ``L/4`` kept, above ``L`` divided by ``s``, in
  between a blend linear in the number of turns ``L/λ_i`` (Llama 3.1's "llama3" rope type). Equal
  factors (Llama 4 Scout: 1 and 1) leave no blend band: wavelengths above ``L`` divided by ``s``.
"""

from __future__ import annotations

import math
import numbers

import torch

from . import device as _device
from ._angles import sin_cos_table
from ._validate import (
    as_positions,
    check_base,
    check_dtype,
    check_even_dim,
    check_float_tensor,
    check_int,
)
from .rope_config import SCALING_TYPES, rope_settings_from_config, rotated_width, scaling_options
from .sinusoidal import frequencies

__all__ = [
    "rope_frequencies",
    "rope_cos_sin",
    "rope_from_config",
    "rope_settings_from_config",
    "apply_rope",
    "apply_rope_qk",
    "rope_gather",
    "yarn_correction_range",
    "LAYOUTS",
    "SCALING_TYPES",
]

LAYOUTS = ("interleaved", "half")


def yarn_correction_range(
    d: int,
    base: float,
    original_max_len: int,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    *,
    truncate: bool = True,
) -> tuple[float, float]:
    """YaRN's pair-index range ``(low, high)``: pairs below ``low`` turn more than ``beta_fast``
    times in ``original_max_len`` tokens, pairs above ``high`` fewer than ``beta_slow`` times.

    Pair ``i`` turns ``L θ_i / 2π`` times in ``L`` tokens; solving for ``i`` gives
    ``i(r) = d ln(L / (2π r)) / (2 ln b)``. The range is ``(floor(i(beta_fast)), ceil(i(beta_slow)))``
    clipped to ``[0, d-1]`` as in Hugging Face (d = 128, b = 10000, L = 2048 gives (16, 41)); with
    ``truncate=False`` (transformers' ``truncate`` option, gpt-oss) the two indices are not rounded.
    """

    def pair_index(turns: float) -> float:
        return d * math.log(original_max_len / (turns * 2.0 * math.pi)) / (2.0 * math.log(base))

    low, high = pair_index(beta_fast), pair_index(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, d - 1)


def _yarn_attention_factor(s: float, mscale, mscale_all_dim) -> float:
    """YaRN's ``a``: ``0.1 ln s + 1``, or DeepSeek's ``(0.1 mscale ln s + 1) / (0.1 mscale_all_dim ln s + 1)``
    when both are given and non-zero (as transformers); 1 when ``s <= 1``."""

    def get_mscale(m: float) -> float:
        return 0.1 * m * math.log(s) + 1.0 if s > 1.0 else 1.0

    if mscale and mscale_all_dim:
        return get_mscale(mscale) / get_mscale(mscale_all_dim)
    return get_mscale(1.0)


def rope_frequencies(
    d: int, base: float | None = None, *, scaling=None, unused_keys: str = "ignore"
) -> tuple[torch.Tensor, float]:
    """Per-pair angular speeds and the attention factor: ``(inv_freq, attention_factor)``.

    Args:
        d: head width (even), or the rotated width when only part of the head is rotated.
        base: the base ``b``; None: ``scaling['rope_theta']`` if given, else 10000 (giving both,
            different, is an error).
        scaling: None for plain RoPE, or a dict (see the module docstring) in helpers' or Hugging
            Face's spelling, for example ``{"type": "yarn", "factor": 8.0, "original_max_len": 4096}``
            or a config's ``rope_parameters``. With ``partial_rotary_factor`` ``p`` only the first
            ``r = int(d p)`` dimensions rotate, at speeds ``base^(-2i/r)``.
        unused_keys: ``"ignore"`` (keys the type does not use are ignored, as transformers does) or
            ``"error"`` (they are refused: a check that a dict holds nothing unexpected). A key no
            type knows is always refused, with its nearest known spelling.

    Returns:
        ``inv_freq``: float64 tensor ``(r//2,)`` in radians per token (``θ_i = base^(-2i/r)``
        without scaling; ``r = d`` unless ``partial_rotary_factor``); ``attention_factor``: float
        that multiplies the cos and sin tables (1.0 except for YaRN and longrope).
    """
    d = check_even_dim("d", d)
    if base is not None:
        base = check_base("base", base)
    if scaling is None:
        return frequencies(d, 10000.0 if base is None else base), 1.0
    kind, opt = scaling_options(scaling, unused_keys)
    if opt["rope_theta"] is not None:
        if base is not None and base != opt["rope_theta"]:
            raise ValueError(
                f"base = {base} and scaling['rope_theta'] = {opt['rope_theta']} disagree; give the base once"
            )
        base = opt["rope_theta"]
    base = 10000.0 if base is None else base
    d = rotated_width(d, opt["partial_rotary_factor"])
    theta = frequencies(d, base)  # (d/2,)
    if kind == "default":
        return theta, 1.0
    s = opt["factor"]
    if kind == "linear":
        return theta / s, 1.0
    if kind == "ntk":
        return frequencies(d, base * s ** (d / (d - 2))), 1.0
    if kind == "dynamic":
        length = max(opt["seq_len"] or opt["original_max_len"], opt["original_max_len"])
        grown = s * length / opt["original_max_len"] - (s - 1.0)
        return frequencies(d, base * grown ** (d / (d - 2))), 1.0
    if kind == "longrope":
        return _longrope(theta, opt)
    if kind == "yarn":
        low, high = yarn_correction_range(
            d, base, opt["original_max_len"], opt["beta_fast"], opt["beta_slow"], truncate=opt["truncate"]
        )
        if low == high:
            high += 0.001  # a ramp of zero width would divide by zero
        i = torch.arange(d // 2, dtype=torch.float64)  # (d/2,)
        interpolate = ((i - low) / (high - low)).clamp(0.0, 1.0)  # 0: keep θ_i, 1: θ_i / s
        factor = opt["attention_factor"]
        if factor is None:
            factor = _yarn_attention_factor(s, opt["mscale"], opt["mscale_all_dim"])
        return theta * (1.0 - interpolate) + (theta / s) * interpolate, float(factor)
    # llama3
    length = opt["original_max_len"]
    low_wavelength = length / opt["low_freq_factor"]  # longer than this: divide by s
    high_wavelength = length / opt["high_freq_factor"]  # shorter than this: keep
    wavelength = 2.0 * math.pi / theta  # (d/2,)
    out = torch.where(wavelength > low_wavelength, theta / s, theta)
    if opt["high_freq_factor"] == opt["low_freq_factor"]:
        return out, 1.0  # a step at wavelength L, no blend band (Llama 4 Scout)
    smooth = (length / wavelength - opt["low_freq_factor"]) / (opt["high_freq_factor"] - opt["low_freq_factor"])
    blended = (1.0 - smooth) * theta / s + smooth * theta
    middle = (wavelength >= high_wavelength) & (wavelength <= low_wavelength)
    return torch.where(middle, blended, out), 1.0


def _longrope(theta: torch.Tensor, opt: dict) -> tuple[torch.Tensor, float]:
    """LongRoPE (Phi-3): ``θ_i / short_factor[i]`` up to ``T = L``, ``θ_i / long_factor[i]`` past it."""
    length = opt["original_max_len"]
    for key in ("short_factor", "long_factor"):
        if opt[key].shape[0] != theta.shape[0]:
            raise ValueError(
                f"scaling[{key!r}] must hold one factor per rotated pair, {theta.shape[0]}, got {opt[key].shape[0]}"
            )
    long = opt["seq_len"] is not None and opt["seq_len"] > length  # transformers: long once T > L
    inv_freq = theta / (opt["long_factor"] if long else opt["short_factor"])
    factor = opt["attention_factor"]
    if factor is None:
        s = opt["factor"]
        factor = math.sqrt(1.0 + math.log(s) / math.log(length)) if s > 1.0 else 1.0
    return inv_freq, float(factor)


def rope_from_config(config, head_dim=None, *, seq_len=None) -> tuple[torch.Tensor, float]:
    """``(inv_freq, attention_factor)`` of a whole model config, as transformers computes them.

    Args:
        config: a model config as a dict (a config.json read with ``json.load``, or
            ``PretrainedConfig.to_dict()``), RoPE settings in Hugging Face's spellings old
            (``rope_scaling``, ``rope_theta`` beside it) or new (``rope_parameters`` with
            ``rope_type`` and ``rope_theta`` inside).
        head_dim: the head width; default ``config['head_dim']``, else ``hidden_size //
            num_attention_heads``.
        seq_len: the current sequence length, for "dynamic" and "longrope"; None: their speeds at
            initialisation (no growth; longrope's short factors).

    Returns:
        As ``rope_frequencies``: float64 ``inv_freq`` ``(r//2,)`` (``r = int(head_dim p)`` with a
        ``partial_rotary_factor`` ``p``, else ``head_dim``) and the attention factor. Keys the type
        does not use are ignored, as transformers ignores them; ``rope_settings_from_config`` shows
        the settings in helpers' spelling and how transformers fills in what a config leaves out.
    """
    d, base, scaling = rope_settings_from_config(config, head_dim, seq_len=seq_len)
    return rope_frequencies(d, base, scaling=scaling)


def rope_cos_sin(
    positions,
    d: int,
    base: float | None = None,
    *,
    scaling=None,
    unused_keys: str = "ignore",
    device=None,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Half-width tables ``a cos(m θ_i)`` and ``a sin(m θ_i)``, each ``(T, d//2)``.

    ``a`` is the attention factor of ``scaling`` (1.0 when there is none). Angles are formed in
    float64 and reduced to one turn before any cast, and the factor is applied before the final
    cast, so a table is as precise at position 5,000,000 as at position 5. What holds, entry by
    entry, against the exact value ``a cos(m θ_i)``:

    - float64: computed in float64 throughout;
    - float16 and bfloat16: computed in float64 and correctly rounded to the dtype (torch's own
      float64 cast rounds twice, through float32, and is avoided); on a device without float64,
      such as MPS, from float32 sines, then at most one step off in rare cases;
    - float32: float32 sines of the reduced angle, within 2e-7 of the exact value, times the
      attention factor ``a`` where it is above 1 (a few units in the last place; not always the
      correctly rounded float32 number).

    Args:
        positions: an int ``T`` (positions ``0 .. T-1``) or a 1-D tensor of positions.
        d: width of the rotated part (even), or the head width when ``scaling`` gives
            ``partial_rotary_factor`` (the tables are then ``(T, int(d p)//2)``; pass
            ``rotary_dim=int(d p)`` to ``apply_rope``).
        base, scaling, unused_keys: as in ``rope_frequencies``.
        device: where to return the tables; defaults to the device of ``positions``.
        dtype: floating dtype of the tables.
    """
    dtype = check_dtype("dtype", dtype)
    inv_freq, factor = rope_frequencies(d, base, scaling=scaling, unused_keys=unused_keys)
    pos = as_positions("positions", positions)
    if device is None:
        device = pos.device
    # float64 where it exists for float64, float16 and bfloat16 tables: one rounding to a short
    # dtype from a float64 value is a correct rounding (a float32 value rounded again is not always).
    # float32 tables take the fast float32 sines, within 2e-7 of the exact value.
    short = dtype in (torch.float16, torch.bfloat16) and _device.supports_float64(torch.device(device))
    work = torch.float64 if dtype == torch.float64 or short else torch.float32
    sin, cos = sin_cos_table(pos, inv_freq, device=device, dtype=work)  # (T, d/2) each
    if factor != 1.0:
        cos, sin = cos * factor, sin * factor  # in the working precision, before the one cast
    if work == torch.float64 and dtype != torch.float64:
        return _round_from_float64(cos, dtype), _round_from_float64(sin, dtype)
    return cos.to(dtype), sin.to(dtype)


def _round_from_float64(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """float64 ``x`` correctly rounded (to nearest) to float16 or bfloat16.

    torch converts float64 to these through float32, rounding twice, which is wrong for values just
    past a half-way point of the short dtype (1 + 2^-8 + 2^-30 becomes 1.0 in bfloat16). Rounding
    to float32 "to odd" first (toward zero, then the last bit set when inexact) keeps enough
    information for the second rounding to be the correct one.
    """
    single = x.to(torch.float32)  # to nearest
    back = single.double()
    inexact = back != x
    bits = single.view(torch.int32)  # sign and magnitude: bits - 1 is one step toward zero
    bits -= (inexact & (back.abs() > x.abs())).to(torch.int32)
    bits |= inexact.to(torch.int32)
    return single.to(dtype)


def _layout_hint(x: torch.Tensor, n_positions: int) -> str:
    """The end of a message about positions: which dimension of ``x`` is read as positions, and,
    where dimension -3 has the size that was expected, the likely cause (a ``(B, T, H, d)`` tensor)."""
    t = x.shape[-2]
    hint = f"; x of shape {tuple(x.shape)} is read as (..., T, d): its dimension -2 (size {t}) holds the positions"
    if x.dim() >= 3 and x.shape[-3] == n_positions != t:
        hint += (
            f", and its dimension -3 has size {n_positions}: if x is (B, T, H, d), pass x.transpose(-3, -2), "
            "which is (B, H, T, d)"
        )
    return hint


def _check_tables(x, cos, sin, positions, rotary_dim):
    """Validate ``apply_rope``'s arguments; return the rotated width and the rows of the tables.

    The rows are ``(T, r/2)`` for positions None, an int or a ``(T,)`` tensor, and ``(B, 1, ..., 1,
    T, r/2)`` (as many dimensions as ``x``) for a ``(B, T)`` tensor, one row of positions per batch row.
    """
    if x.dim() < 2:
        raise ValueError(f"x must have shape (..., T, d), got {tuple(x.shape)}")
    t, d = x.shape[-2], x.shape[-1]
    if rotary_dim is None:
        if d % 2:
            raise ValueError(f"x's last dimension d must be even for rotation pairs, got {d}")
        r = d
    else:
        r = check_int("rotary_dim", rotary_dim, minimum=2)
        if r % 2 or r > d:
            raise ValueError(f"rotary_dim must be a positive even int <= d = {d}, got {r}")
    if x.dtype not in _FLOAT_DTYPES or cos.dtype not in _FLOAT_DTYPES:
        raise TypeError(
            f"x and the tables must be float64, float32, bfloat16 or float16, got x {x.dtype} and cos {cos.dtype}"
        )
    if cos.dtype != sin.dtype:
        raise TypeError(f"cos and sin must have one dtype, got {cos.dtype} and {sin.dtype}")
    shape = cos.shape
    if shape != sin.shape or len(shape) not in (2, 3):
        raise ValueError(
            f"cos and sin must both have shape (T, d/2) (tables, read at positions) or (B, T, d/2) (the rows of "
            f"each batch row, from rope_gather), got {tuple(shape)} and {tuple(sin.shape)}"
        )
    if shape[-1] != r // 2:
        raise ValueError(f"cos and sin must have {r // 2} columns (half the rotated width {r}), got {shape[-1]}")
    device = x.device
    if cos.device != device or sin.device != device:
        raise ValueError(f"x, cos and sin must be on one device, got {device}, {cos.device} and {sin.device}")
    if len(shape) == 3:
        return r, *_gathered_rows(x, cos, sin, positions)
    if positions is None:
        positions = 0
    if isinstance(positions, numbers.Integral) and not isinstance(positions, bool):
        start = check_int("positions", positions, minimum=0)
        if cos.shape[0] < start + t:
            fits = x.dim() >= 3 and start + x.shape[-3] <= cos.shape[0]  # dimension -3 would fit the tables
            hint = _layout_hint(x, x.shape[-3] if fits else -1)
            raise ValueError(
                f"cos and sin have {cos.shape[0]} rows but x needs rows {start} .. {start + t - 1} "
                f"(T = {t}, positions = {start}); build longer tables{hint}"
            )
        return r, cos[start : start + t], sin[start : start + t]  # (T, r/2) views, no copy
    if not isinstance(positions, torch.Tensor) or positions.dtype not in _INDEX_DTYPES:
        raise TypeError(
            f"positions must be None, an int offset or a signed integer tensor of row indices (int64, int32, int16 "
            f"or int8; torch reads uint8 as a mask), (T,) or (B, T) with T = {t}, got {positions!r}"
        )
    shape = tuple(positions.shape)
    if positions.dim() not in (1, 2):
        raise ValueError(f"positions must have shape (T,) or (B, T) with T = {t}, got shape {shape}")
    if shape[-1] != t:
        raise ValueError(
            f"positions must hold one row index per position of x, shape ({t},) or (B, {t}), got shape {shape}"
            + _layout_hint(x, shape[-1])
        )
    if positions.dim() == 2:
        if x.dim() < 3:
            raise ValueError(
                f"positions of shape (B, T) = {shape} give each batch row its own positions, so x must be "
                f"(B, ..., T, d), with 3 dimensions or more; got x of shape {tuple(x.shape)}"
            )
        if shape[0] not in (1, x.shape[0]):
            raise ValueError(
                f"positions of shape {shape} hold {shape[0]} rows of positions, but x of shape {tuple(x.shape)} has "
                f"{x.shape[0]} batch rows (dimension 0); expected positions of shape ({x.shape[0]}, {t}) or (1, {t})"
            )
    positions = _checked_rows(positions, cos.shape[0], x.device, "x's device")
    if positions.dim() == 1:
        return r, cos[positions], sin[positions]  # (T, r/2)
    rows = (shape[0], *(1,) * (x.dim() - 3), t, r // 2)  # (B, 1, ..., 1, T, r/2): the same rows in every head
    return r, cos[positions].view(rows), sin[positions].view(rows)


def _gathered_rows(x, cos, sin, positions):
    """Tables ``(B, T, r/2)`` that are already each batch row's rows, as ``(B, 1, ..., 1, T, r/2)`` views."""
    if positions is not None:
        raise ValueError(
            f"positions must be None with cos and sin of shape (B, T, r/2) = {tuple(cos.shape)}, which are already the "
            f"rows of each batch row (rope_gather reads them at the positions), got positions {positions!r}"
        )
    t = x.shape[-2]
    if x.dim() < 3 or cos.shape[0] not in (1, x.shape[0]) or cos.shape[1] != t:
        raise ValueError(
            f"cos and sin of shape (B, T, r/2) = {tuple(cos.shape)} must have T = {t} rows (x.shape[-2]) and B = 1 or "
            f"x's batch rows, for x of shape (B, ..., T, d) with 3 dimensions or more; got x of shape {tuple(x.shape)}"
            + (_layout_hint(x, cos.shape[1]) if x.dim() >= 3 and cos.shape[1] != t else "")
        )
    if x.dim() == 4:  # (B, H, T, d): (B, 1, T, r/2), the same rows in every head
        return cos.unsqueeze(1), sin.unsqueeze(1)
    rows = (cos.shape[0], *(1,) * (x.dim() - 3), t, cos.shape[-1])  # (B, 1, ..., 1, T, r/2)
    return cos.reshape(rows), sin.reshape(rows)


def rope_gather(cos, sin, positions) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows of the tables ``cos``, ``sin`` ``(T', r/2)`` at ``positions``, checked, for
    ``apply_rope`` and ``apply_rope_qk`` with ``positions=None``.

    A model rotates the queries and keys of every layer at the same positions: gather the rows once
    per forward pass and pass them to every layer, instead of passing ``positions`` and gathering in
    every call (Hugging Face's rotary module likewise makes its ``(B, T, d)`` tables once per pass).

    Args:
        cos, sin: tables from ``rope_cos_sin``, ``(T', r/2)`` each.
        positions: an integer tensor of row indices, ``(B, T)`` (per-row positions, as for left
            padding or packed sequences) or ``(T,)``, on the tables' device or on the CPU, each in
            ``0 .. T'-1``.

    Returns:
        ``(cos_rows, sin_rows)``, each ``(B, T, r/2)`` (or ``(T, r/2)`` for ``(T,)`` positions),
        on the tables' device: ``cos_rows[b, t] = cos[positions[b, t]]``.
    """
    cos = check_float_tensor("cos", cos)
    sin = check_float_tensor("sin", sin)
    if cos.shape != sin.shape or cos.dim() != 2:
        raise ValueError(f"cos and sin must both have shape (T', r/2), got {tuple(cos.shape)} and {tuple(sin.shape)}")
    if sin.device != cos.device:
        raise ValueError(f"cos and sin must be on one device, got {cos.device} and {sin.device}")
    if not isinstance(positions, torch.Tensor) or positions.dtype not in _INDEX_DTYPES or positions.dim() not in (1, 2):
        raise TypeError(
            f"positions must be a signed integer tensor of row indices (int64, int32, int16 or int8; torch reads "
            f"uint8 as a mask), (B, T) or (T,), got {positions!r}"
        )
    positions = _checked_rows(positions, cos.shape[0], cos.device, "the tables' device")
    return cos[positions], sin[positions]


def _checked_rows(positions: torch.Tensor, n_rows: int, device, where: str) -> torch.Tensor:
    """Integer ``positions`` on ``device`` (moved from the CPU), each a row ``0 .. n_rows - 1`` of the
    tables. The range check is free for positions on the CPU and one synchronisation on an
    accelerator (min and max read together); meta tensors have no values to check."""
    if positions.device != device and positions.device.type != "cpu":
        raise ValueError(
            f"positions must be on {where} or on the CPU (then moved there), got positions on {positions.device} "
            f"and {where} {device}"
        )
    if positions.numel() and positions.device.type != "meta":
        _check_row_range(positions, n_rows)
    if positions.dtype in (torch.int8, torch.int16):  # torch indexes with int64 and int32 only
        return positions.to(device=device, dtype=torch.int64)
    return positions.to(device)


def _check_row_range(positions: torch.Tensor, n_rows: int) -> None:
    if positions.device.type == "cpu":
        low, high = (v.item() for v in torch.aminmax(positions))
    else:
        low, high = torch.stack(torch.aminmax(positions)).tolist()
    if low < 0 or high >= n_rows:
        raise ValueError(f"positions must lie in 0 .. {n_rows - 1} (the rows of the tables), got {low} .. {high}")


def _complex_ok(x: torch.Tensor, compute: torch.dtype) -> bool:
    """Whether ``x``'s pairs can be read as complex numbers in place (interleaved layout)."""
    return (
        compute in (torch.float32, torch.float64)
        and x.dtype in (torch.float32, torch.float64)
        and x.stride(-1) == 1
        and x.storage_offset() % 2 == 0
        and all(stride % 2 == 0 for size, stride in zip(x.shape[:-1], x.stride()[:-1], strict=True) if size > 1)
    )


def _interleaved_path(x_rot: torch.Tensor, compute: torch.dtype) -> str:
    """Which kernel rotates interleaved pairs: ``"complex"`` (in place as complex numbers),
    ``"complex_copy"`` (a float32 complex copy, for bfloat16 / float16 on the CPU) or ``"strided"``
    (one multiplication and two fused multiply-adds; elsewhere, for example bfloat16 on CUDA)."""
    if _complex_ok(x_rot, compute):
        return "complex"
    return "complex_copy" if x_rot.device.type == "cpu" else "strided"


def apply_rope(x, cos, sin, *, layout: str | None = None, positions=None, rotary_dim=None) -> torch.Tensor:
    """Rotate ``x`` ``(..., T, d)`` by the tables ``cos``, ``sin`` ``(T', r/2)``.

    Position ``t`` of ``x`` is rotated by row ``t`` of the tables, or by row ``positions + t``
    (an int offset, for decoding with a cache and tables longer than the sequence), or by row
    ``positions[t]`` (a 1-D integer tensor of ``T`` row indices), or, in batch row ``b``, by row
    ``positions[b, t]`` (a ``(B, T)`` integer tensor: per-row positions, as for left padding or
    packed sequences; the same rows in every head, with no loop over ``b``). The first ``r = rotary_dim``
    dimensions are rotated (all ``d`` by default); the rest pass through unchanged (partial
    rotary, as in GPT-NeoX and GPT-J). bfloat16 and float16 on the CPU are computed in float32 (or
    float64) and rounded once, whatever the tables' dtype, so a decode step is the full pass to the
    bit in the half layout, and in the interleaved layout where ``r`` is a multiple of 32 (as are
    GPT-J's 64 and the 128 of Meta's LLaMA code): at other interleaved widths torch's complex multiplication
    rounds a row's last pairs differently in a decode step and in the full pass (its vectorised loop
    and its scalar remainder), by up to one unit in the last place of float32, rarely visible once
    rounded to bfloat16 or float16, and present in float32 results themselves. Under
    ``torch.compile`` the fused code may differ by one unit in the last place. The result
    is a new tensor of ``x``'s dtype and shape;
    the arithmetic runs in ``x``'s dtype promoted with the tables' dtype, except on the strided
    path (the half layout, or interleaved pairs that cannot be read as complex numbers, in float32
    or float64), where the first product is rounded to ``x``'s dtype before the second is added.

    Args:
        x: queries or keys ``(..., T, d)``, floating point, any leading dimensions.
        cos, sin: tables from ``rope_cos_sin``, ``(T', r/2)``, on ``x``'s device; or the rows of
            each batch row, ``(B, T, r/2)`` (from ``rope_gather``, ``B`` 1 or ``x``'s batch), with
            positions None, for ``x`` of shape ``(B, ..., T, d)``.
        layout: ``"interleaved"`` (RoFormer, Meta: pairs ``(x_2i, x_2i+1)``) or ``"half"``
            (GPT-NeoX, Hugging Face's Llama 1-3 code: pairs ``(x_i, x_i+r/2)``); with ``rotary_dim`` the pairing is
            within the first ``r`` dimensions. Required: the two pair different dimensions, a
            checkpoint's weights hold only for the one it was trained with, and nothing in ``x``
            tells which that is, so there is no default to fall back on silently.
        positions: None (rows ``0 .. T-1``), an int offset, a 1-D integer tensor ``(T,)``, or a
            ``(B, T)`` integer tensor for ``x`` of shape ``(B, ..., T, d)`` (``(B, H, T, d)``: one row
            of positions per batch row, broadcast over the heads; ``(1, T)`` is the same for every
            row). A tensor is on ``x``'s device or on the CPU (then moved); positions on another
            device raise ``ValueError``. Its values are checked against the tables' rows: free for
            positions on the CPU, one synchronisation for positions on an accelerator.
        rotary_dim: even number of leading dimensions to rotate, ``<= d``.

    Which dimension holds the positions. ``x`` is read as ``(..., T, d)``: dimension -2 holds the
    positions, so a ``(B, T, H, d)`` tensor (Meta's order) must be transposed to ``(B, H, T, d)``
    first. Where the arguments show the mix-up, a ``ValueError`` names ``x``'s shape and the
    dimension read as positions: a positions tensor whose length ``T`` is not ``x.shape[-2]``, and
    tables too short for ``x.shape[-2]`` positions. What cannot be detected: positions None or an
    int offset with tables long enough for ``H`` positions (a ``(B, T, H, d)`` tensor is then
    rotated by head index, its heads read as positions, with no error), and a positions tensor
    when ``H == T``.

    Speed. The rotation is memory-bound: the floor is one read and one write of ``x``, the cost
    of ``x.clone()``. The interleaved layout in float32/float64 is one complex multiplication
    written straight into the result (bfloat16/float16 on the CPU go through float32 complex
    numbers); otherwise the result is formed in place with one multiplication and two fused
    multiply-adds (``addcmul_``), about half the memory traffic of the textbook
    ``x * cos + rotate_half(x) * sin`` (``benchmarks/bench_rope.py`` measures both). Under autograd
    the same kernels run and the backward pass is the same rotation turned the other way
    (``sin -> -sin``); only tables that require a gradient (learned angles) take a plain
    differentiable formula. A small ``x`` (a decoding step) costs its calls, not its arithmetic:
    rotate queries and keys with one call of ``apply_rope_qk``, and in a model with many layers
    gather the rows of per-row positions once per forward pass with ``rope_gather`` and pass them
    as the tables (``(B, T, r/2)``, positions None); ``benchmarks/bench_rope_vs_hf.py`` times both
    against Hugging Face's ``apply_rotary_pos_emb``.
    """
    x = check_float_tensor("x", x)
    cos = check_float_tensor("cos", cos)
    sin = check_float_tensor("sin", sin)
    _check_layout(layout)
    r, cos, sin = _check_tables(x, cos, sin, positions, rotary_dim)  # (T, r/2) each, or (B, 1, ..., T, r/2)
    return _rotate(x, cos, sin, layout, r)


def apply_rope_qk(q, k, cos, sin, *, layout: str | None = None, positions=None, rotary_dim=None):
    """Rotate queries ``q`` and keys ``k`` together: ``(apply_rope(q, ...), apply_rope(k, ...))``.

    The same numbers, bit for bit, as two calls of ``apply_rope`` with the same arguments, from one
    validation and one gather of the tables' rows instead of two, as an attention layer rotates
    them (Hugging Face's ``apply_rotary_pos_emb(q, k, cos, sin)`` takes the same pair). What it
    saves is per call, so it matters where the tensors are small: a decoding step (where the
    interleaved layout's rotated width ``r`` is not a multiple of 32, q and k are rotated one at a
    time, as two calls would: torch's complex multiplication could round them differently side by
    side).

    Args:
        q, k: ``(..., T, d)`` each, with the same ``T`` and ``d``; the other dimensions may differ
            (fewer key heads than query heads, as in grouped-query attention), except that with
            ``(B, T)`` positions both are ``(B, ..., T, d)`` with as many dimensions and the same ``B``.
        cos, sin, layout, positions, rotary_dim: as in ``apply_rope``.

    Returns:
        ``(q_rotated, k_rotated)``, each of its input's dtype and shape.
    """
    step = _decode_step(q, k, cos, sin, layout, positions, rotary_dim)
    if step is not None:
        return step
    q = check_float_tensor("q", q)
    k = check_float_tensor("k", k)
    cos = check_float_tensor("cos", cos)
    sin = check_float_tensor("sin", sin)
    _check_layout(layout)
    if k.dim() < 2 or q.dim() < 2 or k.shape[-2:] != q.shape[-2:]:
        raise ValueError(
            f"q and k must both be (..., T, d) with the same T and d, got q of shape {tuple(q.shape)} and k of "
            f"shape {tuple(k.shape)}"
        )
    if k.device != q.device:
        raise ValueError(f"q and k must be on one device, got {q.device} and {k.device}")
    r, cos, sin = _check_tables(q, cos, sin, positions, rotary_dim)  # (T, r/2) each, or (B, 1, ..., T, r/2)
    if cos.dim() > 2 and (k.dim() != q.dim() or k.shape[0] != q.shape[0]):
        raise ValueError(
            f"positions of shape (B, T) need q and k of shape (B, ..., T, d) with as many dimensions and the same "
            f"B, got q of shape {tuple(q.shape)} and k of shape {tuple(k.shape)}"
        )
    if (
        q.numel() <= _SMALL
        and k.numel() <= _SMALL
        and q.dtype == k.dtype
        and (q.shape == k.shape or (q.dim() >= 3 and q.shape[:-3] == k.shape[:-3]))
        and q.is_contiguous()
        and k.is_contiguous()
        and (layout == "half" or r % (2 * _COMPLEX_RUN) == 0)
        and not (
            torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or cos.requires_grad or sin.requires_grad)
        )
    ):
        return _rotate_pair(q, k, cos, sin, layout, r)
    return _rotate(q, cos, sin, layout, r), _rotate(k, cos, sin, layout, r)


def _decode_step(q, k, cos, sin, layout, positions, rotary_dim):
    """``apply_rope_qk`` for the common decoding step on the CPU, or None where it does not apply.

    A decoding step costs its calls (kernel launches, views, argument checks), not its arithmetic:
    this path takes only arguments that every check of the general path would accept (checked
    here with attribute reads, no tensor call), and makes the fewest calls: queries and keys
    ``(B, H, T, d)`` and ``(B, H_kv, T, d)``, contiguous and small, in the half layout with every
    dimension rotated, float32 (or bfloat16 / float16, computed in float32 and rounded once), with
    float32 rows from ``rope_gather`` ``(B or 1, T, d/2)`` or tables ``(T', d/2)`` read from an int
    offset; no gradient recorded. The same kernels in the same order as ``_rotate_pair``, so the
    same numbers, bit for bit (``tests/test_rope.py`` compares them). Anything else returns None and
    takes the general path, which validates and names what is wrong.
    """
    if (
        rotary_dim is not None
        or type(layout) is not str
        or layout != "half"
        or type(q) is not torch.Tensor
        or type(k) is not torch.Tensor
        or type(cos) is not torch.Tensor
        or type(sin) is not torch.Tensor
    ):
        return None
    dtype, float32 = q.dtype, torch.float32
    if (
        k.dtype is not dtype
        or cos.dtype is not float32
        or sin.dtype is not float32
        or (dtype is not float32 and dtype is not torch.bfloat16 and dtype is not torch.float16)
        or not (q.is_cpu and k.is_cpu and cos.is_cpu and sin.is_cpu)
        or not (q.is_contiguous() and k.is_contiguous() and cos.is_contiguous() and sin.is_contiguous())
        or q.numel() > _SMALL
        or k.numel() > _SMALL
    ):
        return None
    shape, k_shape, rows_shape = q.shape, k.shape, cos.shape
    if len(shape) != 4 or len(k_shape) != 4 or rows_shape != sin.shape:
        return None
    b, hq, t, d = shape
    kb, hk, kt, kd = k_shape
    h = d // 2
    if kb != b or kt != t or kd != d or t < 1 or d != 2 * rows_shape[-1]:
        return None
    if positions is None and len(rows_shape) == 3 and rows_shape[1] == t and rows_shape[0] in (1, b):
        rows = rows_shape[0]  # rows from rope_gather
    elif type(positions) is int and len(rows_shape) == 2 and 0 <= positions and positions + t <= rows_shape[0]:
        rows = 1  # an offset into the tables: rows positions .. positions + t - 1, views
        cos, sin = cos.narrow(0, positions, t), sin.narrow(0, positions, t)
    else:
        return None
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or cos.requires_grad or sin.requires_grad):
        return None
    # Heads side by side, halves apart: (B, H + H_kv, T, 2, h), or (B, H + H_kv, 2, h) for one
    # position (fewer dimensions to broadcast over, a little faster); the tables' rows broadcast
    # over the heads.
    if t == 1:
        x = torch.cat((q, k), 1).view(b, hq + hk, 2, h)
        cos, sin, pair = cos.view(rows, 1, 1, h), sin.view(rows, 1, h), 2
    else:
        x = torch.cat((q, k), 1).view(b, hq + hk, t, 2, h)
        cos, sin, pair = cos.view(rows, 1, t, 1, h), sin.view(rows, 1, t, h), 3
    if dtype is not float32:
        x = x.float()  # computed in float32, rounded once below
    out = x * cos  # both halves times cos
    (x1, x2), (o1, o2) = x.unbind(pair), out.unbind(pair)  # views, a half each
    o1.addcmul_(x2, sin, value=-1)  # x1 cos - x2 sin
    o2.addcmul_(x1, sin)  # x2 cos + x1 sin
    out = out.view(b, hq + hk, t, d)
    q_part, k_part = out.narrow(1, 0, hq), out.narrow(1, hq, hk)
    if dtype is float32:  # results that own their memory, contiguous
        return q_part.clone(), k_part.clone()
    return q_part.to(dtype), k_part.to(dtype)


def _rotate_pair(q, k, cos, sin, layout: str, r: int):
    """Small ``q`` and ``k`` (a decoding step) rotated as one tensor: their cost is kernel launches,
    not memory traffic. The rotation is elementwise, so the numbers are those of one at a time.
    Each result is copied out so that it owns its memory (a cache that keeps the rotated key does
    not keep the query alive) and is not a view."""
    dtype = q.dtype
    if q.dim() >= 3 and q.shape[:-3] == k.shape[:-3]:  # heads side by side: any number of key heads (GQA)
        x = torch.cat((q, k), dim=-3)  # (..., Hq + Hk, T, d)
    else:  # (T, d) each, one shape
        x = torch.stack((q, k), dim=-3)  # (2, T, d)
    if layout == "half" and r == x.shape[-1] and dtype in _SHORT and x.is_cpu:
        # as _rotate_rows computes bfloat16 / float16 on the CPU (float32, rounded once), with the
        # rounding done by the copies out
        if cos.dtype == torch.float64:
            rotated = _half_rotation(x.double(), cos, sin, r // 2)
        else:
            rotated = _half_rotation(x.float(), cos.float(), sin.float(), r // 2)
    else:
        rotated = _rotate_rows(x, cos, sin, layout, r)
    heads = 1 if q.dim() < 3 else q.shape[-3]
    q_part, k_part = rotated.narrow(-3, 0, heads), rotated.narrow(-3, heads, rotated.shape[-3] - heads)
    if q.dim() < 3:
        q_part, k_part = q_part[0], k_part[0]
    if rotated.dtype == dtype:  # clone: contiguous strides, whether the part is dense (B = 1) or not
        return q_part.clone(), k_part.clone()
    return q_part.to(dtype), k_part.to(dtype)


#: Elements per tensor up to which ``apply_rope_qk`` rotates q and k as one tensor (heads side by side).
_SMALL = 1 << 16
#: torch's complex multiplication on the CPU rounds its vectorised loop (16 complex numbers a step
#: with AVX-512, 8 with AVX2) and its scalar remainder differently, by up to one unit in the last
#: place of float32: with a multiple of 16 pairs per row, the interleaved layout's rows never reach
#: a remainder, whatever the tensor's shape, and rotating q and k side by side gives the bits of
#: one at a time. Other widths rotate them one at a time.
_COMPLEX_RUN = 16


def _check_layout(layout) -> None:
    if layout is None:
        raise TypeError(
            "layout must be given: 'interleaved' (RoFormer, Meta, GPT-J: pairs (x_2i, x_2i+1)) or 'half' (GPT-NeoX, "
            "Hugging Face's Llama 1-3 code: pairs (x_i, x_i+d/2)), got None (no default: the two pair different "
            "dimensions, and weights trained with one are wrong with the other)"
        )
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")


def _rotate(x, cos, sin, layout: str, r: int) -> torch.Tensor:
    """Rotate the first ``r`` dimensions of ``x`` by the rows ``cos``, ``sin`` (validated, ``(T, r/2)``
    or ``(B, 1, ..., 1, T, r/2)``); differentiable where gradients are recorded."""
    if torch.is_grad_enabled() and (x.requires_grad or cos.requires_grad or sin.requires_grad):
        if cos.requires_grad or sin.requires_grad:
            return _apply_rope_autograd(x, cos, sin, layout, r)  # gradients for the tables too
        return _Rotation.apply(x, cos, sin, layout, r)
    return _rotate_rows(x, cos, sin, layout, r)


class _Rotation(torch.autograd.Function):
    """The rotation with the gradient of ``x`` only: the backward pass is the same kernel, turned the
    other way (a rotation's transpose is the rotation by the opposite angle, ``sin -> -sin``)."""

    @staticmethod
    def forward(x, cos, sin, layout, r):
        return _rotate_rows(x, cos, sin, layout, r, own=True)

    @staticmethod
    def setup_context(ctx, inputs, output):  # the form torch.func's transforms need
        _, cos, sin, layout, r = inputs
        ctx.save_for_backward(cos, sin)
        ctx.save_for_forward(cos, sin)
        ctx.layout, ctx.r = layout, r

    @staticmethod
    def backward(ctx, grad):
        cos, sin = ctx.saved_tensors
        # differentiable again when the graph of the gradient is being built (create_graph=True)
        return _rotate(grad, cos, -sin, ctx.layout, ctx.r), None, None, None, None

    @staticmethod
    def jvp(ctx, x_tangent, *_):  # forward-mode: the rotation is linear in x
        cos, sin = ctx.saved_tensors
        return _rotate(x_tangent, cos, sin, ctx.layout, ctx.r)


def _rotate_rows(x, cos, sin, layout: str, r: int, own: bool = False) -> torch.Tensor:
    """The rotation without autograd (see ``apply_rope``'s note on speed); ``own``: a result that is
    not a view of another tensor."""
    h, d, dtype = r // 2, x.shape[-1], x.dtype
    compute = torch.promote_types(dtype, cos.dtype)
    if layout == "half" and r == d and x.is_contiguous():
        # The fewest kernels, which is what counts for a small tensor (a decoding step); the same
        # numbers as the general path below (tests/test_rope.py compares them bit for bit).
        if dtype in _SHORT and x.is_cpu:
            if x.numel() <= _COPY_BLOCK:  # as the copy path below, in one block: float32, rounded once
                work = torch.float64 if compute == torch.float64 else torch.float32
                return _half_rotation(x.to(work), cos.to(work), sin.to(work), h).to(dtype)
        elif compute == dtype:
            return _half_rotation(x, cos, sin, h, own)
    out = torch.empty_like(x, memory_format=torch.contiguous_format)  # (..., T, d)
    if r < d:
        out[..., r:] = x[..., r:]  # the tail passes through
        x_rot, out_rot = x[..., :r], out[..., :r]  # (..., T, r) views
    else:
        x_rot, out_rot = x, out
    path = _interleaved_path(x_rot, compute) if layout == "interleaved" else "strided"
    if path == "complex":
        # (x_2i + i x_2i+1) e^(i m θ_i): one kernel, read x once, write the result once.
        turn = torch.complex(cos.to(compute), sin.to(compute))  # (T, r/2)
        x_c = torch.view_as_complex(x_rot.unflatten(-1, (h, 2)))  # (..., T, r/2) complex view
        torch.mul(x_c, turn, out=torch.view_as_complex(out_rot.unflatten(-1, (h, 2))))
        return out
    if path == "complex_copy" or (
        layout == "half" and x_rot.device.type == "cpu" and x_rot.dtype in (torch.bfloat16, torch.float16)
    ):
        # bfloat16 / float16 on the CPU: strided in-place updates are not vectorised in these dtypes.
        # A float32 copy is rotated with float32 kernels (a complex multiplication for the interleaved
        # layout) and rounded once when it is written back, a block of positions at a time so that
        # the copy stays in the cache (a whole (1, 32, 2048, 128) copy is 32 MB and runs several
        # times slower than its blocks).
        work = torch.promote_types(compute, torch.float32)
        t = x_rot.shape[-2]
        rows = max(1, _COPY_BLOCK // max(1, math.prod(x_rot.shape[:-2]) * x_rot.shape[-1]))  # positions per block
        for a in range(0, t, rows):
            b = min(t, a + rows)
            _rotate_copy(x_rot[..., a:b, :], out_rot[..., a:b, :], cos[..., a:b, :], sin[..., a:b, :], layout, work)
        return out
    if layout == "interleaved":
        x_p, out_p = x_rot.unflatten(-1, (h, 2)), out_rot.unflatten(-1, (h, 2))  # (..., T, r/2, 2) views
        (x1, x2), (o1, o2) = x_p.unbind(-1), out_p.unbind(-1)  # (..., T, r/2) views
        torch.mul(x_p, cos.unsqueeze(-1), out=out_p)  # (..., T, r/2, 2): both members times cos
    else:
        x_p, out_p = x_rot.unflatten(-1, (2, h)), out_rot.unflatten(-1, (2, h))  # (..., T, 2, r/2) views
        (x1, x2), (o1, o2) = x_p.unbind(-2), out_p.unbind(-2)  # (..., T, r/2) views
        torch.mul(x_p, cos.unsqueeze(-2), out=out_p)  # (..., T, 2, r/2): both halves times cos
    o1.addcmul_(x2, sin, value=-1)  # x1 cos - x2 sin
    o2.addcmul_(x1, sin)  # x2 cos + x1 sin
    return out


def _half_rotation(x, cos, sin, h: int, own: bool = False) -> torch.Tensor:
    """The half layout, ``x`` contiguous ``(..., T, 2h)``: one multiplication and two fused
    multiply-adds into a result of ``x``'s dtype promoted with the tables'."""
    x_p = x.unflatten(-1, (2, h))  # (..., T, 2, h) view
    if own:  # a result that is not a view (for autograd's custom function: changed in place after)
        out = torch.empty(x.shape, dtype=torch.promote_types(x.dtype, cos.dtype), device=x.device)  # (..., T, 2h)
        torch.mul(x_p, cos.unsqueeze(-2), out=out.unflatten(-1, (2, h)))  # both halves times cos
    else:  # no out= argument: forward-mode AD and vmap can run through it
        out = (x_p * cos.unsqueeze(-2)).flatten(-2)  # (..., T, 2h)
    (x1, x2), (o1, o2) = x.chunk(2, -1), out.chunk(2, -1)  # (..., T, h) views (chunk: the cheapest call)
    o1.addcmul_(x2, sin, value=-1)  # x1 cos - x2 sin
    o2.addcmul_(x1, sin)  # x2 cos + x1 sin
    return out


_SHORT = (torch.bfloat16, torch.float16)
#: Index dtypes torch reads as row numbers (uint8 and bool index as masks).
_INDEX_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8)
#: The dtypes apply_rope computes in.
_FLOAT_DTYPES = (torch.float64, torch.float32, torch.bfloat16, torch.float16)

#: Elements of x rotated per block on the copy paths (2 MB of float32).
_COPY_BLOCK = 1 << 19


def _rotate_copy(x_rot, out_rot, cos, sin, layout: str, work: torch.dtype) -> None:
    """Rotate ``x_rot`` ``(..., T, r)`` into ``out_rot`` through a copy in ``work`` (float32): the
    result is rounded once, when it is written. No ``out=`` arguments and no buffers made outside
    ``x``: forward-mode AD and vmap run through it."""
    h = x_rot.shape[-1] // 2
    copy = x_rot.to(work, copy=True, memory_format=torch.contiguous_format)  # (..., T, r), a fresh copy
    if layout == "interleaved":
        turn = torch.complex(cos.to(work), sin.to(work))  # (T, r/2)
        torch.view_as_complex(copy.unflatten(-1, (h, 2))).mul_(turn)  # rotated in place, (..., T, r/2) complex
        out_rot.copy_(copy)
        return
    # Both halves times cos, as _half_rotation; with cos written twice side by side, the product
    # runs over whole rows (about twice as fast here as broadcasting cos over the two halves).
    rotated = copy * torch.cat((cos, cos), -1)  # (..., T, r)
    (x1, x2), (o1, o2) = copy.chunk(2, -1), rotated.chunk(2, -1)  # (..., T, h) views
    o1.addcmul_(x2, sin, value=-1)  # x1 cos - x2 sin
    o2.addcmul_(x1, sin)  # x2 cos + x1 sin
    out_rot.copy_(rotated)  # rounded once


def _apply_rope_autograd(x, cos, sin, layout: str, r: int) -> torch.Tensor:
    """Differentiable version of ``apply_rope`` (same arguments after validation)."""
    h = r // 2
    x_rot, tail = x[..., :r], x[..., r:]  # (..., T, r), (..., T, d - r)
    compute = torch.promote_types(x.dtype, cos.dtype)
    if layout == "interleaved" and _complex_ok(x_rot, compute):
        # One complex multiplication, differentiable, and about a third of the time of the real
        # formula below (it reads x once instead of through strided halves).
        turn = torch.complex(cos.to(compute), sin.to(compute))  # (T, r/2)
        x_c = torch.view_as_complex(x_rot.to(compute).unflatten(-1, (h, 2)))  # (..., T, r/2) complex
        rotated = torch.view_as_real(x_c * turn).flatten(-2)  # (..., T, r)
    elif layout == "interleaved":
        x1, x2 = x_rot[..., 0::2], x_rot[..., 1::2]  # (..., T, r/2) each
        rotated = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)  # (..., T, r)
    else:
        x1, x2 = x_rot[..., :h], x_rot[..., h:]  # (..., T, r/2) each
        rotated = torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)  # (..., T, r)
    if r == x.shape[-1]:
        return rotated.to(x.dtype)  # (..., T, d)
    return torch.cat((rotated.to(x.dtype), tail), dim=-1)  # (..., T, d)
