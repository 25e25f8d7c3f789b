"""Explorers for notebook 05: the four terms of the attention score (article 000 §7)."""

from __future__ import annotations

__all__: list[str] = []
