"""Precise sin/cos tables of ``position * frequency``, shared by sinusoidal PE and RoPE.

Why not ``torch.sin(pos.float() * freq.float())``? At position one million the float32 product
``m * θ`` carries an absolute error of about ``m * θ * 6e-8`` radians, up to 0.06 rad, and the
table is off by as much (article 000 §5 asks for positions "as accurate at 1,000,000 as at 10").
Here the product is formed in float64 and reduced to one turn, ``[-π, π]``, before it is cast:
the float32 sine of a reduced angle is within about 2e-7 of the truth at any position.

Devices without float64 (Apple's MPS) reduce on the CPU and move the reduced angles over; only
the cheap float32 sine and cosine run on the device. The result is as precise as elsewhere.

Notation: ``T`` positions, ``n`` frequencies.
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
        positions: 1-D tensor of ``T`` positions (integer or real).
        inv_freq: 1-D tensor of ``n`` angular speeds in radians per token (float64 preferred).
        device: where the tables are returned.
        dtype: dtype of the tables; float64 is computed in float64 throughout, every other dtype
            from float32 sines of reduced angles, then cast.
    """
    device = torch.device(device)
    compute_device = device if _device.supports_float64(device) else torch.device("cpu")
    pos = positions.to(device=compute_device, dtype=torch.float64)
    if dtype == torch.float64:
        angle = torch.outer(pos, inv_freq.to(device=compute_device, dtype=torch.float64))  # (T, n)
        return torch.sin(angle).to(device), torch.cos(angle).to(device)
    # Count the angle in turns, drop whole turns in float64, then go back to radians.
    turns = torch.outer(pos, inv_freq.to(device=compute_device, dtype=torch.float64) / TWO_PI)  # (T, n)
    turns -= torch.round(turns)  # in [-0.5, 0.5]
    angle = (turns * TWO_PI).to(device=device, dtype=torch.float32)  # (T, n), |angle| <= pi
    return torch.sin(angle).to(dtype), torch.cos(angle).to(dtype)
