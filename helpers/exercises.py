"""Self-checks for the exercises: say what is wrong, not only that something is."""

from __future__ import annotations

import numbers

import numpy as np
import torch

__all__ = ["check_answer"]


def _as_array(value):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().double().numpy()
    return np.asarray(value, dtype=float)


def check_answer(answer, expected, *, name: str = "answer", rtol: float = 1e-3, atol: float = 1e-6,
                 hint: str = "") -> None:
    """Compare a learner's ``answer`` with ``expected`` and print one line that explains.

    Prints "not answered yet" for ``None``; names a wrong type or shape; for a wrong value, says
    by how much and where it is furthest off, then the ``hint``. Returns nothing, so that the
    notebook shows only the sentence.
    """
    _verdict(answer, expected, name=name, rtol=rtol, atol=atol, hint=hint)


def _verdict(answer, expected, *, name, rtol, atol, hint) -> bool:
    if answer is None or answer is Ellipsis:
        print(f"{name}: not answered yet. Replace the placeholder with your answer and run the cell again.")
        return False
    if isinstance(answer, (str, bytes)) or not (isinstance(answer, (numbers.Number, torch.Tensor, np.ndarray, list, tuple))):
        print(f"{name}: expected a number or an array, got {type(answer).__name__}.")
        return False
    got, want = _as_array(answer), _as_array(expected)
    if got.shape != want.shape:
        print(f"{name}: expected shape {want.shape}, got shape {got.shape}." + (f" Hint: {hint}" if hint else ""))
        return False
    if not np.all(np.isfinite(got)):
        print(f"{name}: your answer contains NaN or infinity.")
        return False
    error = np.abs(got - want)
    allowed = atol + rtol * np.abs(want)
    if np.all(error <= allowed):
        print(f"{name}: correct.")
        return True
    if got.ndim == 0:
        print(f"{name}: {float(got):.6g} is not right (off by {float(error):.3g})." + (f" Hint: {hint}" if hint else ""))
    else:
        worst = np.unravel_index(np.argmax(error - allowed), got.shape)
        wrong = int(np.sum(error > allowed))
        print(f"{name}: {wrong} of {got.size} entries are off; the worst is at index {tuple(int(k) for k in worst)} "
              f"(got {got[worst]:.6g})." + (f" Hint: {hint}" if hint else ""))
    return False
