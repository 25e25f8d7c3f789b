"""Where tensors live: the default device and what it can compute.

``default_device()`` picks CUDA, then Apple's MPS, then the CPU. The environment variable
``HELPERS_DEVICE`` (for example ``cpu`` or ``cuda:1``) overrides the choice, which lets a learner
with a GPU reproduce the CPU outputs exactly, and lets CI force the CPU.

Nothing here is cached: every call looks again, so changing the variable takes effect at once.
"""

from __future__ import annotations

import os

import torch

__all__ = ["default_device", "supports_float64", "ENV_DEVICE"]

ENV_DEVICE = "HELPERS_DEVICE"


def default_device() -> torch.device:
    """The device notebooks compute on: ``$HELPERS_DEVICE``, else CUDA, else MPS, else CPU."""
    chosen = os.environ.get(ENV_DEVICE, "").strip()
    if chosen:
        try:
            device = torch.device(chosen)
        except RuntimeError as error:
            raise ValueError(
                f"{ENV_DEVICE} must name a torch device such as 'cpu' or 'cuda:0', got {chosen!r}"
            ) from error
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"{ENV_DEVICE}={chosen!r} asks for CUDA, but torch sees no CUDA device")
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def supports_float64(device) -> bool:
    """Whether ``device`` computes in float64 (Apple's MPS does not)."""
    return torch.device(device).type != "mps"
