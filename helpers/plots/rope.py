"""Pictures for notebook 06: rotations, layouts, long-range decay and context scaling of RoPE (article 003 §7-8)."""

from __future__ import annotations

__all__: list[str] = []
