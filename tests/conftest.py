"""Shared fixtures: the article's reference numbers and the devices to test on."""

from __future__ import annotations

import json
import pathlib

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def device_params():
    """``cpu`` always; ``cuda`` (marked ``gpu``) where a CUDA device is present."""
    return [pytest.param(d, marks=pytest.mark.gpu) if d != "cpu" else d for d in DEVICES]


@pytest.fixture(scope="session")
def article():
    return json.loads((ROOT / "data" / "article_numbers.json").read_text())
