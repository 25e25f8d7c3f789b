"""Sinusoidal position encoding (Vaswani et al. 2017, §3.5; article 000 §3-5, article 001 §3).

Notation: ``T`` positions, ``d`` width (even), ``i`` pair index, ``θ_i = b^(-2i/d)`` the angular
speed of hand ``i`` in radians per token, ``b`` the base.

Layout: interleaved, as in the paper, ``p_m = [sin θ_0 m, cos θ_0 m, sin θ_1 m, cos θ_1 m, ...]``.
"""

from __future__ import annotations

import numbers

import torch

from ._angles import sin_cos_interleaved, sin_cos_table
from ._validate import as_positions, check_base, check_dtype, check_even_dim, check_int

__all__ = ["frequencies", "sinusoidal_pe", "shift_matrix", "shift_distance", "nearest_collision"]


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
    return theta.to(dtype=dtype).to(device)  # cast on the CPU first: some devices (MPS) have no float64


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
    return sin_cos_interleaved(pos, frequencies(d, base), device=device, dtype=dtype)  # (T, d)


def _check_shift(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number of tokens, got {value!r} of type {type(value).__name__}")
    value = float(value)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{name} must be a finite number of tokens, got {value}")
    return value


def shift_matrix(k, d: int, base: float = 10000.0, *, device=None, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The linear map ``M_k`` with ``PE(m + k) = M_k PE(m)`` for every ``m``, shape ``(d, d)``.

    ``M_k`` is block-diagonal: block ``i`` acts on the pair ``[sin mθ_i, cos mθ_i]`` and is the
    rotation ``[[cos kθ_i, sin kθ_i], [-sin kθ_i, cos kθ_i]]`` (article 001 §4.2). It depends on
    the shift ``k`` only, never on ``m``. A row vector table ``pe`` of shape ``(T, d)`` is shifted
    by ``pe @ M_k.T``.

    Args:
        k: the shift in tokens (an int, or a real number for interpolated positions).
        d: width, a positive even int.
        base: the base ``b`` of the geometric schedule, > 1.
        device, dtype: of the result (float64 by default: the matrix is for checking identities).
    """
    k = _check_shift("k", k)
    d = check_even_dim("d", d)
    base = check_base("base", base)
    dtype = check_dtype("dtype", dtype)
    sin, cos = sin_cos_table(
        torch.tensor([k], dtype=torch.float64), frequencies(d, base), device=device or "cpu", dtype=dtype
    )  # (1, d/2) each
    sin, cos = sin[0], cos[0]  # (d/2,)
    even = torch.arange(0, d, 2, device=sin.device)  # (d/2,): the sin slot of each pair
    matrix = torch.zeros((d, d), dtype=dtype, device=sin.device)
    matrix[even, even] = cos
    matrix[even, even + 1] = sin
    matrix[even + 1, even] = -sin
    matrix[even + 1, even + 1] = cos
    return matrix


def _as_speeds(theta) -> torch.Tensor:
    """One angular speed (a number) or a 1-D tensor of them, as float64 ``(n,)``."""
    if isinstance(theta, bool):
        raise TypeError("theta must be a number or a 1-D tensor of angular speeds (radians per token), got a bool")
    if isinstance(theta, numbers.Real):
        theta = torch.tensor([float(theta)], dtype=torch.float64)
    if not isinstance(theta, torch.Tensor):
        raise TypeError(
            f"theta must be a number or a 1-D tensor of angular speeds (radians per token), got {type(theta).__name__}"
        )
    if theta.dim() != 1 or theta.numel() == 0:
        raise ValueError(f"theta must be a number or a non-empty 1-D tensor of speeds, got shape {tuple(theta.shape)}")
    if theta.dtype == torch.bool or theta.is_complex():
        raise TypeError(f"theta must hold real angular speeds, got dtype {theta.dtype}")
    theta = theta.detach().to(device="cpu", dtype=torch.float64)
    if not bool(torch.isfinite(theta).all()):
        raise ValueError("theta must hold finite angular speeds, got a NaN or infinity")
    return theta


def shift_distance(shifts, theta) -> torch.Tensor:
    """``‖p_(m+k) - p_m‖`` for each shift ``k``: how far a position moves when shifted by ``k`` tokens.

    For clocks turning at speeds ``θ_i`` (one pair ``[sin, cos]`` or ``[cos, sin]`` each) the
    distance is the same for every ``m``:  ``sqrt(Σ_i 4 sin²(kθ_i / 2))``. It is 0 exactly when every
    hand is back where it started. Written with ``sin²`` rather than ``d - 2 Σ cos(kθ_i)`` so that
    near-collisions keep their digits (no cancellation).

    Args:
        shifts: an int ``K`` (shifts ``0 .. K-1``) or a 1-D tensor of shifts, in tokens.
        theta: one angular speed (a number, one clock) or a 1-D tensor of speeds, shape ``(n,)``,
            for example ``frequencies(d, base)``.

    Returns:
        float64 tensor ``(K,)`` on the CPU.
    """
    k = as_positions("shifts", shifts).to(device="cpu", dtype=torch.float64)  # (K,)
    theta = _as_speeds(theta)  # (n,)
    half = torch.sin(torch.outer(k, theta) / 2.0)  # (K, n)
    return 2.0 * torch.sqrt((half * half).sum(dim=1))  # (K,)


def nearest_collision(theta, max_shift: int, *, tol: float = 1e-9) -> tuple[int, float]:
    """The shift ``k`` in ``1 .. max_shift`` that brings ``p_(m+k)`` closest to ``p_m``, and that gap.

    The gap ``‖p_(m+k) - p_m‖`` is the same for every ``m`` (see ``shift_distance``). A hand comes
    back exactly iff ``θ/2π`` is rational, ``p/q`` in lowest terms, and then first after ``q``
    tokens: ``θ = 2π/10`` and ``θ = 0.6π`` (period 3.33 tokens) both give ``(10, ~0)``. Otherwise
    the gap is never 0 but can come close (``θ = 1``: ``k = 710``, gap ``6e-5``).

    "Exactly" means up to round-off: a float ``θ`` is never exactly ``2π p/q`` (``θ = 2π/10`` comes
    back after 10 tokens with a gap of about ``2e-16``, not 0). That is why a tolerance exists.

    Ties. When the hand returns exactly, every multiple of ``q`` has a gap of 0 up to round-off
    (about ``1e-16 k``), and the smallest float would pick one of them by chance (``θ = π`` once
    gave ``k = 58``). So the rule is: find the smallest gap ``g_min`` over ``1 .. max_shift``, keep
    every shift whose gap is at most ``g_min + tol`` (default ``tol = 1e-9``), and return the
    smallest such ``k`` with its gap.

    Args:
        theta: one angular speed or a 1-D tensor of speeds ``(n,)`` (radians per token).
        max_shift: the largest shift searched, an int >= 1.
        tol: the tie tolerance on the gap, a real number >= 0.

    Returns:
        ``(k, gap)`` as a Python int and float.
    """
    max_shift = check_int("max_shift", max_shift, minimum=1)
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real):
        raise TypeError(
            f"tol must be a real number >= 0 (a tolerance on the gap), got {tol!r} of type {type(tol).__name__}"
        )
    tol = float(tol)
    if not tol >= 0.0 or tol == float("inf"):
        raise ValueError(f"tol must be a finite number >= 0 (a tolerance on the gap), got {tol}")
    shifts = torch.arange(1, max_shift + 1, dtype=torch.float64)  # (K,)
    gap = shift_distance(shifts, theta)  # (K,)
    ties = torch.nonzero(gap <= gap.min() + tol)  # (n_ties, 1), in increasing k
    best = int(ties[0, 0])
    return best + 1, float(gap[best])
