"""Sinusoidal position encoding (Vaswani et al. 2017, §3.5; article 000 §3-5, article 001 §3).

Notation: ``T`` positions, ``d`` width (even), ``i`` pair index, ``θ_i = b^(-2i/d)`` the angular
speed of hand ``i`` in radians per token, ``b`` the base.

Layout: interleaved, as in the paper, ``p_m = [sin θ_0 m, cos θ_0 m, sin θ_1 m, cos θ_1 m, ...]``.
"""

from __future__ import annotations

import torch

from ._angles import sin_cos_table
from ._checks import as_positions, check_base, check_dtype, check_even_dim

__all__ = ["frequencies", "sinusoidal_pe"]


def frequencies(d: int, base: float = 10000.0, *, device=None, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Angular speeds ``θ_i = base^(-2i/d)`` for ``i = 0 .. d/2 - 1``, shape ``(d//2,)``.

    ``frequencies(8)`` is ``[1, 0.1, 0.01, 0.001]`` (article 000 §5); the period of hand ``i`` is
    ``2π / θ_i`` tokens. Computed in float64, then cast to ``dtype``.
    """
    d = check_even_dim("d", d)
    base = check_base("base", base)
    dtype = check_dtype("dtype", dtype)
    exponent = torch.arange(0, d, 2, dtype=torch.float64) / d  # (d/2,): 2i/d
    theta = torch.pow(torch.tensor(base, dtype=torch.float64), -exponent)
    return theta.to(device=device, dtype=dtype)


def sinusoidal_pe(
    positions, d: int, base: float = 10000.0, *, device=None, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """The sinusoidal table, shape ``(T, d)``, interleaved ``[sin θ_0 m, cos θ_0 m, ...]``.

    Args:
        positions: an int ``T`` (positions ``0 .. T-1``) or a 1-D tensor of positions.
        d: width, a positive even int.
        base: the base ``b`` of the geometric schedule, > 1.
        device: where to build the table; defaults to the device of ``positions`` if it is a
            tensor, else the CPU.
        dtype: floating dtype of the result. Angles are formed in float64 and reduced before the
            cast, so every position is as precise as position 0 (within 1e-6 in float32 up to
            at least 5,000,000).

    Returns:
        Tensor ``(T, d)``. Row ``m`` is the position vector ``p_m``; its norm is ``sqrt(d/2)``.
    """
    d = check_even_dim("d", d)
    base = check_base("base", base)
    dtype = check_dtype("dtype", dtype)
    pos = as_positions("positions", positions)
    if device is None:
        device = pos.device
    sin, cos = sin_cos_table(pos, frequencies(d, base), device=device, dtype=dtype)  # (T, d/2) each
    return torch.stack((sin, cos), dim=-1).reshape(pos.shape[0], d)  # (T, d/2, 2) -> (T, d)
