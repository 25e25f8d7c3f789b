"""What several test files share: the devices to run on, and how a bad-input message is checked."""

from __future__ import annotations

import re

import pytest
import torch

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
