"""Train short, test long: tiny Transformers with different position schemes (article 001 §6.3, §7, §13)."""

from __future__ import annotations

__all__: list[str] = []
