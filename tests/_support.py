"""What several test files share: the devices to run on, how a bad-input message is checked, and
where the tensors an operation makes live."""

from __future__ import annotations

import re

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def device_params():
    """``cpu`` always; ``cuda`` (marked ``gpu``) where a CUDA device is present."""
    return [pytest.param(d, marks=pytest.mark.gpu) if d != "cpu" else d for d in DEVICES]


def raises_naming(error, call, *words):
    """``call()`` raises ``error`` and its message holds every one of ``words`` as a whole word.

    A whole word: the argument ``n_keys`` is not named by ``XXn_keysXX``, ``N_KEYS`` or ``n_keys2``,
    the argument ``dtype`` not by ``torch.dtype``, and the bound ``>= 1`` is not ``>= 10``.
    """
    with pytest.raises(error) as caught:
        call()
    message = str(caught.value)
    for word in words:
        assert re.search(rf"(?<![\w.]){re.escape(word)}(?!\w)", message), f"{word!r} missing from {message!r}"
    return message


class MadeOn(TorchDispatchMode):
    """Records the device type of every tensor an operation makes (of ``dtype`` only, when given)."""

    def __init__(self, dtype=None):
        super().__init__()
        self.dtype = dtype
        self.devices = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and (self.dtype is None or t.dtype == self.dtype):
                self.devices.add(t.device.type)
        return out
