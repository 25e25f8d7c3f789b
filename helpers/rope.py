"""Rotary position embedding, RoPE (Su et al. 2021; article 000 §9, article 003 §7-8).

Notation: ``T`` positions, ``d`` head width (even), ``i`` pair index, ``θ_i = b^(-2i/d)``.

RoPE rotates each pair of a query or key by ``m θ_i`` at position ``m``; then
``(R_m q)ᵀ (R_n k) = qᵀ R_(n-m) k`` depends on the positions only through ``n - m``.

Two layouts pair the dimensions differently; both are in use and mixing them is a classic
checkpoint-conversion bug:

- ``"interleaved"``: pairs ``(x0, x1), (x2, x3), ...``, as in the RoFormer paper and Meta's LLaMA
  code (complex multiplication of ``x[2i] + i x[2i+1]``).
- ``"half"``: pairs ``(x_j, x_(j + d/2))``, as in GPT-NeoX and Hugging Face transformers
  (``x * cos + rotate_half(x) * sin``).

The tables are half width, ``(T, d/2)``: one angle per pair, whatever the layout.
"""

from __future__ import annotations

import torch

from ._angles import sin_cos_table
from ._checks import as_positions, check_base, check_dtype, check_even_dim, check_float_tensor
from .sinusoidal import frequencies

__all__ = ["rope_frequencies", "rope_cos_sin", "apply_rope", "LAYOUTS"]

LAYOUTS = ("interleaved", "half")


def rope_frequencies(d: int, base: float = 10000.0, *, scaling=None) -> tuple[torch.Tensor, float]:
    """Per-pair angular speeds and the attention factor: ``(inv_freq, attention_factor)``.

    Args:
        d: head width (even).
        base: the base ``b``.
        scaling: None for plain RoPE.

    Returns:
        ``inv_freq``: float64 tensor ``(d//2,)``, ``θ_i = base^(-2i/d)``;
        ``attention_factor``: float that multiplies the cos and sin tables (1.0 without scaling).
    """
    d = check_even_dim("d", d)
    base = check_base("base", base)
    if scaling is not None:
        raise ValueError(f"scaling must be None, got {scaling!r}")
    return frequencies(d, base), 1.0


def rope_cos_sin(
    positions, d: int, base: float = 10000.0, *, scaling=None, device=None, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """Half-width tables ``cos(m θ_i)`` and ``sin(m θ_i)``, each ``(T, d//2)``.

    Angles are formed in float64 and reduced to one turn before the cast, so a float32, float16 or
    bfloat16 table is as precise at position 5,000,000 as at position 5. Both tables are
    multiplied by the attention factor of ``scaling`` (1.0 when there is none).
    """
    dtype = check_dtype("dtype", dtype)
    inv_freq, factor = rope_frequencies(d, base, scaling=scaling)
    pos = as_positions("positions", positions)
    if device is None:
        device = pos.device
    sin, cos = sin_cos_table(pos, inv_freq, device=device, dtype=torch.float32 if dtype != torch.float64 else dtype)
    if factor != 1.0:
        cos, sin = cos * factor, sin * factor
    return cos.to(dtype), sin.to(dtype)


def apply_rope(x, cos, sin, *, layout: str = "interleaved") -> torch.Tensor:
    """Rotate ``x`` ``(..., T, d)`` by the tables ``cos``, ``sin`` ``(T', d//2)`` with ``T' >= T``.

    Row ``t`` of ``x`` is rotated by row ``t`` of the tables. The result has ``x``'s dtype; the
    rotation itself is done in ``x``'s dtype promoted with the tables' dtype.

    Args:
        x: queries or keys ``(..., T, d)``, floating point.
        cos, sin: tables from ``rope_cos_sin``, ``(T', d//2)``.
        layout: ``"interleaved"`` (RoFormer, Meta) or ``"half"`` (GPT-NeoX, Hugging Face).
    """
    x = check_float_tensor("x", x)
    cos = check_float_tensor("cos", cos)
    sin = check_float_tensor("sin", sin)
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if x.dim() < 2:
        raise ValueError(f"x must have shape (..., T, d), got {tuple(x.shape)}")
    t, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"x's last dimension d must be even for rotation pairs, got {d}")
    if cos.shape != sin.shape or cos.dim() != 2:
        raise ValueError(f"cos and sin must both have shape (T, d/2), got {tuple(cos.shape)} and {tuple(sin.shape)}")
    if cos.shape[1] != d // 2:
        raise ValueError(f"cos and sin must have d/2 = {d // 2} columns for x of width {d}, got {cos.shape[1]}")
    if cos.shape[0] < t:
        raise ValueError(f"cos and sin have {cos.shape[0]} rows but x has T = {t} positions; build longer tables")
    cos, sin = cos[:t], sin[:t]  # (T, d/2)
    if layout == "interleaved":
        x1, x2 = x[..., 0::2], x[..., 1::2]  # (..., T, d/2) each
        out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)  # (..., T, d/2, 2)
        return out.flatten(-2).to(x.dtype)  # (..., T, d)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]  # (..., T, d/2) each
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).to(x.dtype)  # (..., T, d)
