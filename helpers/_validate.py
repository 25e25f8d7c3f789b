"""Argument checks shared by every module.

Each check raises ``ValueError`` or ``TypeError`` with a message that names the argument, the value
it got and what was expected, so that a mistake in a notebook points at its cause.
"""

from __future__ import annotations

import math
import numbers

import torch


def check_int(name: str, value, *, minimum: int | None = None) -> int:
    """An int (not a bool), at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {value!r} of type {type(value).__name__}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value}")
    return value


def check_even_dim(name: str, value) -> int:
    """A positive even width: sin/cos and rotations work on pairs of dimensions."""
    value = check_int(name, value, minimum=2)
    if value % 2:
        raise ValueError(f"{name} must be a positive even int (dimensions come in pairs), got {value}")
    return value


def check_base(name: str, value) -> float:
    """A finite real number > 1 (the base b of the geometric schedule)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number > 1, got {value!r} of type {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value) or value <= 1.0:
        raise ValueError(f"{name} must be a finite number > 1, got {value}")
    return value


def check_positive(name: str, value) -> float:
    """A finite real number > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number > 0, got {value!r} of type {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value) or value <= 0.0:
        raise ValueError(f"{name} must be a finite number > 0, got {value}")
    return value


def check_float_tensor(name: str, value) -> torch.Tensor:
    """A floating-point torch tensor."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if not value.is_floating_point():
        raise TypeError(
            f"{name} must be a floating-point tensor, got dtype {value.dtype}; "
            f"convert it first, for example {name}.float()"
        )
    if value.layout is not torch.strided:
        raise TypeError(
            f"{name} must be a dense (strided) tensor, got layout {value.layout}; "
            f"convert it first, for example {name}.to_dense()"
        )
    return value


def check_dtype(name: str, value) -> torch.dtype:
    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        raise TypeError(f"{name} must be a floating torch.dtype such as torch.float32, got {value!r}")
    return value


def as_positions(name: str, positions, *, device=None) -> torch.Tensor:
    """Positions as a 1-D float64 tensor (or float32 where float64 is missing).

    ``positions`` is an int ``T`` (meaning ``0, 1, ..., T-1``) or a 1-D sequence or tensor of
    positions (integers or, for interpolated positions, real numbers).
    """
    if isinstance(positions, bool):
        raise TypeError(f"{name} must be an int T or a 1-D tensor of positions, got a bool")
    if isinstance(positions, numbers.Integral):
        count = check_int(name, positions, minimum=0)
        return torch.arange(count, dtype=torch.int64, device=device)
    if not isinstance(positions, torch.Tensor):
        try:
            positions = torch.as_tensor(positions)
        except (TypeError, ValueError, RuntimeError) as error:
            raise TypeError(
                f"{name} must be an int T or a 1-D tensor of positions, got {type(positions).__name__}"
            ) from error
    if positions.dim() != 1:
        raise ValueError(f"{name} must be 1-D (one position per token), got shape {tuple(positions.shape)}")
    if positions.dtype == torch.bool or positions.is_complex():
        raise TypeError(f"{name} must hold integer or real positions, got dtype {positions.dtype}")
    if positions.is_floating_point() and not bool(torch.isfinite(positions).all()):
        raise ValueError(f"{name} must hold finite positions, got a NaN or infinity")
    if device is not None:
        positions = positions.to(device)
    return positions
