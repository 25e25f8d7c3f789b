"""Shared fixtures: the article's reference numbers."""

from __future__ import annotations

import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def article():
    return json.loads((ROOT / "data" / "article_numbers.json").read_text())
