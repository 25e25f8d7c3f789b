"""Learned relative position biases: T5 buckets and Shaw-style tables (article 001 §2, article 003 §6)."""

from __future__ import annotations

__all__: list[str] = []
