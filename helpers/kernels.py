"""The position kernel: how alike two sinusoidal position vectors are (article 000 §6).

``p_m · p_n = Σ_i cos(Δ θ_i)`` with the offset ``Δ = m - n`` (``m`` the query's position, ``n`` the
key's): it depends on the offset only, and only through ``|Δ|``. Divided by the number of hands
``d/2`` it becomes the normalised kernel ``κ_d(Δ)``, with ``κ_d(0) = 1``. It is linked to the gap
between the two vectors by ``‖p_(m+Δ) - p_m‖² = d (1 - κ_d(Δ))``.

For many hands the average over ``i`` approaches an integral over ``t = 2i/d`` in ``[0, 1]``:
``κ(Δ) ≈ ∫_0^1 cos(Δ b^(-t)) dt``. Substituting ``u = Δ b^(-t)`` turns it into
``(Ci(|Δ|) - Ci(|Δ|/b)) / ln b``, where ``Ci`` is the cosine integral. Its slope is
``(cos Δ - cos(Δ/b)) / (Δ ln b)``: unlike ``κ_d`` it tends to 0, but it is not monotone either
(for ``b = 10⁴`` it is below 0 from ``Δ ≈ 0.6165 b`` to ``Δ ≈ 3.3842 b``, lowest near ``πb/2``).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ._validate import check_base, check_even_dim, check_float_tensor
from .sinusoidal import frequencies

__all__ = [
    "position_kernel",
    "continuous_kernel",
    "toeplitz_projection",
    "toeplitz_spread",
    "block_rotation",
    "rotation_commuting_matrix",
]


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
        delta: offsets ``Δ = m - n`` in tokens (a number, array or tensor of any shape).
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

    The limit of ``position_kernel`` as ``d`` grows (article 000 §6, whose Figure 2 draws it); 1 at
    ``Δ = 0``, tends to 0 as ``|Δ|`` grows.
    Returns a float64 tensor on the CPU (the cosine integral comes from SciPy).
    """
    from scipy.special import sici  # imported on use: 0.1 s that `import helpers` need not pay

    base = check_base("base", base)
    delta = _as_delta(delta)
    x = np.abs(delta.detach().cpu().numpy().astype(np.float64))
    out = np.ones_like(x)
    nonzero = x > 0
    ci_high = sici(x[nonzero])[1]
    ci_low = sici(x[nonzero] / base)[1]
    out[nonzero] = (ci_high - ci_low) / math.log(base)
    return torch.from_numpy(out)


# ---------------------------------------------------------------------------------------------
# How far a (T, T) score matrix is from depending on m - n only (article 000 §7), and the
# matrices A for which p_mᵀ A p_n keeps depending on m - n only (the door to RoPE, §9).
# ---------------------------------------------------------------------------------------------


def _check_square(name: str, matrix) -> torch.Tensor:
    matrix = check_float_tensor(name, matrix)
    if matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty square matrix (T, T), got shape {tuple(matrix.shape)}")
    return matrix


def toeplitz_projection(matrix) -> torch.Tensor:
    """Replace every entry ``M[m, n]`` by the mean of its diagonal ``m - n``, shape ``(T, T)``.

    The result depends on ``m - n`` only (a Toeplitz matrix); it is the nearest such matrix to
    ``matrix`` in the Frobenius norm (an orthogonal projection). Dtype and device follow the input.
    """
    matrix = _check_square("matrix", matrix)
    t = matrix.shape[0]
    rows = torch.arange(t, device=matrix.device)
    offset = rows[:, None] - rows[None, :] + (t - 1)  # (T, T): m - n shifted to 0 .. 2T-2
    sums = torch.zeros(2 * t - 1, dtype=matrix.dtype, device=matrix.device).index_add_(
        0,
        offset.reshape(-1),
        matrix.reshape(-1),  # (T*T,)
    )  # (2T-1,)
    counts = torch.bincount(offset.reshape(-1), minlength=2 * t - 1).to(matrix.dtype)  # (2T-1,)
    return (sums / counts)[offset]  # (T, T)


def toeplitz_spread(matrix) -> torch.Tensor:
    """How far ``matrix`` is from depending on ``m - n`` only: a 0-d tensor in ``[0, 1]``.

    ``‖M - P(M)‖ / ‖M‖`` (Frobenius norms), where ``P(M)`` is ``toeplitz_projection(M)``: the
    root-mean-square spread of the entries along their diagonals, relative to the size of the
    entries. 0 exactly when every diagonal is constant; 0 for the zero matrix.
    """
    matrix = _check_square("matrix", matrix)
    total = torch.linalg.matrix_norm(matrix)
    if float(total) == 0.0:
        return torch.zeros((), dtype=matrix.dtype, device=matrix.device)
    return torch.linalg.matrix_norm(matrix - toeplitz_projection(matrix)) / total


def _check_angles(name: str, values) -> torch.Tensor:
    values = check_float_tensor(name, values)
    if values.dim() != 1 or values.numel() == 0:
        raise ValueError(f"{name} must be a non-empty 1-D tensor (one value per pair), got shape {tuple(values.shape)}")
    return values


def block_rotation(angles) -> torch.Tensor:
    """Block-diagonal rotation, shape ``(d, d)`` with ``d = 2 * len(angles)``.

    Block ``i`` turns the pair ``(x_2i, x_2i+1)`` by ``angles[i]`` radians counter-clockwise:
    ``[[cos φ_i, -sin φ_i], [sin φ_i, cos φ_i]]`` (the interleaved layout of ``sinusoidal_pe``).
    For the table ``[sin mθ_i, cos mθ_i]`` a shift by ``Δ`` is ``block_rotation(-Δ θ)``:
    ``p_(m+Δ) = block_rotation(-Δ * theta) @ p_m``. Dtype and device follow ``angles``.
    """
    angles = _check_angles("angles", angles)
    cos, sin = torch.cos(angles), torch.sin(angles)  # (d/2,) each
    blocks = torch.stack((torch.stack((cos, -sin), -1), torch.stack((sin, cos), -1)), -2)  # (d/2, 2, 2)
    return torch.block_diag(*blocks)  # (d, d)


def rotation_commuting_matrix(scales, angles) -> torch.Tensor:
    """A block-diagonal ``A`` whose block ``i`` is ``scales[i]`` times a rotation by ``angles[i]``.

    Each block ``[[a, -c], [c, a]]`` commutes with every 2-D rotation, so ``A`` commutes with every
    ``block_rotation`` and every ``shift_matrix``; then ``p_mᵀ A p_n = Σ_i s_i cos(Δθ_i + φ_i)``
    with ``Δ = m - n`` (the sign of ``φ_i`` is that of the ``[sin, cos]`` layout of ``sinusoidal_pe``).
    If and only if: when no two speeds are equal or opposite modulo ``2π``, none is a multiple of
    ``π`` (true for every ``θ_i = b^(-2i/d)``, ``b > 1``) and the window has ``T ≥ d + 1``
    positions, ``p_mᵀ A p_n`` depends on ``m - n`` only exactly when ``A`` is of this form
    (notebook 05, section 3).

    Args:
        scales: ``(d/2,)`` float tensor, the scale of each block.
        angles: ``(d/2,)`` float tensor, the turn of each block in radians.

    Returns:
        ``(d, d)`` tensor, dtype and device of ``scales``.
    """
    scales = _check_angles("scales", scales)
    angles = _check_angles("angles", angles)
    if scales.shape != angles.shape:
        raise ValueError(
            f"scales and angles must have the same shape (d/2,), got {tuple(scales.shape)} and {tuple(angles.shape)}"
        )
    rotation = block_rotation(angles.to(device=scales.device, dtype=scales.dtype))  # (d, d)
    return rotation * scales.repeat_interleave(2)[None, :]  # (d, d): column j scaled by its block's scale
