"""Precise sin/cos tables of ``position * frequency``, shared by sinusoidal PE and RoPE.

Notation: ``T`` positions, ``n`` frequencies (pairs), ``θ_i`` angular speed in radians per token.

Why not ``torch.sin(pos.float() * freq.float())`` (the common formula, article 001 §8.1)? At
position one million the float32 product ``m θ`` carries an absolute error of about
``m θ * 6e-8`` radians, up to 0.06 rad, and the table is off by as much (article 000 §5 asks for
positions "as accurate at 1,000,000 as at 10"). Here the product is formed in float64, counted
in turns, and the nearest whole turn is subtracted (exactly) before the cast: what reaches float32
is an angle in ``[-π, π]``, whose float32 rounding is at most ``1.2e-7`` rad. With the float32
sine's own error and the final rounding, every entry is within about ``2e-7`` of the float64
value at any position (tested at every position up to 5,000,000).

Cost: one float64 product, a rounding and an in-place subtraction, a scaling written straight to
float32, then the two float32 sines; on a CPU within 2x of the common formula. ``sin_cos_interleaved`` writes the
sines and cosines straight into the interleaved ``[sin, cos, ...]`` layout of the sinusoidal
table, which saves a ``stack`` copy that costs more than the sines.

Devices without float64 (Apple's MPS, see ``helpers.device.supports_float64``) reduce on the CPU
and move the reduced float32 angles over; only the sine and cosine run on the device, and the
result is exactly as precise as elsewhere.
"""

from __future__ import annotations

import math

import torch

from . import device as _device

TWO_PI = 2.0 * math.pi


def sin_cos_table(
    positions: torch.Tensor, inv_freq: torch.Tensor, *, device, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """``sin`` and ``cos`` of ``positions[:, None] * inv_freq[None, :]``, each ``(T, n)``.

    Args:
        positions: 1-D tensor of ``T`` positions (integer or real), on any device.
        inv_freq: 1-D tensor of ``n`` angular speeds in radians per token (float64 preferred).
        device: where the tables are returned.
        dtype: dtype of the tables; float64 is computed in float64 throughout, every other dtype
            from float32 sines of angles reduced to [-π, π], then cast.

    Returns:
        ``(sin, cos)``, each ``(T, n)`` of ``dtype`` on ``device``.
    """
    device = torch.device(device)
    # Where the float64 product is formed: the target device if it has float64, else the CPU.
    has_float64 = _device.supports_float64(device)
    compute = device if has_float64 else torch.device("cpu")
    pos = positions.to(device=compute, dtype=torch.float64)  # (T,)
    speed = inv_freq.to(device=compute, dtype=torch.float64)  # (n,)
    if dtype == torch.float64:
        if not has_float64:
            raise TypeError(f"dtype must not be torch.float64 on {device}, which has no float64; use torch.float32")
        angle = torch.outer(pos, speed)  # (T, n)
        return torch.sin(angle).to(device), torch.cos(angle).to(device)
    angle = _reduced_angle(pos, speed, device)  # (T, n) float32, |angle| <= π
    sin, cos = torch.sin(angle), torch.cos(angle)
    if dtype != torch.float32:
        sin, cos = sin.to(dtype), cos.to(dtype)
    return sin, cos


def sin_cos_interleaved(positions: torch.Tensor, inv_freq: torch.Tensor, *, device, dtype: torch.dtype) -> torch.Tensor:
    """The interleaved table ``[sin, cos, sin, cos, ...]`` of ``positions[:, None] * inv_freq``, ``(T, 2n)``.

    Equal to ``torch.stack(sin_cos_table(...), dim=-1).reshape(T, 2n)``, but the float32 sines
    and cosines are written straight into their slots, which saves the stack's copy (on a CPU
    ``stack(dim=-1)`` costs more than the two sines together).
    """
    device = torch.device(device)
    if dtype == torch.float64:
        sin, cos = sin_cos_table(positions, inv_freq, device=device, dtype=dtype)  # (T, n) each
        return torch.stack((sin, cos), dim=-1).reshape(sin.shape[0], 2 * sin.shape[1])  # (T, n, 2) -> (T, 2n)
    compute = device if _device.supports_float64(device) else torch.device("cpu")
    pos = positions.to(device=compute, dtype=torch.float64)  # (T,)
    speed = inv_freq.to(device=compute, dtype=torch.float64)  # (n,)
    angle = _reduced_angle(pos, speed, device)  # (T, n)
    table = torch.empty((*angle.shape, 2), device=device, dtype=torch.float32)  # (T, n, 2)
    torch.sin(angle, out=table[..., 0])
    torch.cos(angle, out=table[..., 1])
    return table.reshape(angle.shape[0], 2 * angle.shape[1]).to(dtype)  # (T, 2n)


def _reduced_angle(pos: torch.Tensor, speed: torch.Tensor, device) -> torch.Tensor:
    """float32 ``pos * speed`` less its nearest whole turn, ``(T, n)`` on ``device``; inputs float64."""
    turns = torch.outer(pos, speed / TWO_PI)  # (T, n)
    turns -= torch.round(turns)  # whole turns dropped, exactly: [-0.5, 0.5] turns
    if turns.device == device:
        angle = torch.empty(turns.shape, device=device, dtype=torch.float32)
        return torch.mul(turns, TWO_PI, out=angle)  # product in float64, one rounding to float32
    return turns.mul_(TWO_PI).to(device=device, dtype=torch.float32)
