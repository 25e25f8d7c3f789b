"""Pictures for notebook 01: attention weights and Gram matrices side by side (article 000 §1-2)."""

from __future__ import annotations

__all__: list[str] = []
