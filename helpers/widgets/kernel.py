"""Explorers for notebook 04: the position kernel, its continuous limit and the paired clock faces (article 000 §6)."""

from __future__ import annotations

__all__: list[str] = []
