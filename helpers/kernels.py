"""The position kernel: how alike two sinusoidal position vectors are (article 000 §6).

``p_m · p_n = Σ_i cos(Δ θ_i)`` with ``Δ = m - n``: it depends on the distance only. Divided by the
number of hands ``d/2`` it becomes the normalised kernel ``κ_d(Δ)``, with ``κ_d(0) = 1``.

For many hands the average over ``i`` approaches an integral over ``t = 2i/d`` in ``[0, 1]``:
``κ(Δ) ≈ ∫_0^1 cos(Δ b^(-t)) dt``. Substituting ``u = Δ b^(-t)`` turns it into
``(Ci(|Δ|) - Ci(|Δ|/b)) / ln b``, where ``Ci`` is the cosine integral.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.special import sici

from ._checks import check_base, check_even_dim
from .sinusoidal import frequencies

__all__ = ["position_kernel", "continuous_kernel"]


def _as_delta(delta) -> torch.Tensor:
    if isinstance(delta, bool):
        raise TypeError("delta must be a number or a tensor of distances, got a bool")
    if not isinstance(delta, torch.Tensor):
        try:
            delta = torch.as_tensor(np.asarray(delta, dtype=np.float64))
        except (TypeError, ValueError) as error:
            raise TypeError(f"delta must be a number or a tensor of distances, got {type(delta).__name__}") from error
    if delta.dtype == torch.bool or delta.is_complex():
        raise TypeError(f"delta must hold real distances, got dtype {delta.dtype}")
    return delta


def position_kernel(delta, d: int, base: float = 10000.0) -> torch.Tensor:
    """Normalised kernel ``κ_d(Δ) = (2/d) Σ_i cos(Δ θ_i)``, the same shape as ``delta``.

    Args:
        delta: distances ``Δ`` (a number, array or tensor of any shape).
        d: width of the position vectors, positive and even.
        base: the base ``b``.

    Returns:
        float64 tensor shaped like ``delta`` (or ``delta``'s floating dtype, on its device).
        Multiply by ``d/2`` for the raw inner product ``p_m · p_n``.
    """
    d = check_even_dim("d", d)
    base = check_base("base", base)
    delta = _as_delta(delta)
    out_dtype = delta.dtype if delta.is_floating_point() else torch.float64
    theta = frequencies(d, base, device=delta.device)  # (d/2,)
    flat = delta.reshape(-1).to(torch.float64)  # (N,)
    # Sum chunk by chunk so a million distances at d = 512 stay within a few MB.
    out = torch.empty_like(flat)
    step = max(1, (1 << 22) // theta.numel())
    for start in range(0, flat.numel(), step):
        chunk = flat[start : start + step]
        out[start : start + step] = torch.cos(torch.outer(chunk, theta)).mean(dim=1)
    return out.reshape(delta.shape).to(out_dtype)


def continuous_kernel(delta, base: float = 10000.0) -> torch.Tensor:
    """``∫_0^1 cos(Δ b^(-t)) dt = (Ci(|Δ|) - Ci(|Δ|/b)) / ln b``, the same shape as ``delta``.

    The limit of ``position_kernel`` as ``d`` grows (article 000 §6); 1 at ``Δ = 0``.
    Returns a float64 tensor on the CPU (the cosine integral comes from SciPy).
    """
    base = check_base("base", base)
    delta = _as_delta(delta)
    x = np.abs(delta.detach().cpu().numpy().astype(np.float64))
    out = np.ones_like(x)
    nonzero = x > 0
    ci_high = sici(x[nonzero])[1]
    ci_low = sici(x[nonzero] / base)[1]
    out[nonzero] = (ci_high - ci_low) / math.log(base)
    return torch.from_numpy(out)
