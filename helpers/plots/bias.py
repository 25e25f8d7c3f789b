"""Pictures for notebook 07: ALiBi and relative position biases (article 001 §7.4, article 003 §9)."""

from __future__ import annotations

__all__: list[str] = []
