"""What several test files share: the devices to run on."""

from __future__ import annotations

import pytest
import torch

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def device_params():
    """``cpu`` always; ``cuda`` (marked ``gpu``) where a CUDA device is present."""
    return [pytest.param(d, marks=pytest.mark.gpu) if d != "cpu" else d for d in DEVICES]
