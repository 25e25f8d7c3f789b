"""Pictures for notebook 08: the train-short / test-long panorama and attention maps."""

from __future__ import annotations

__all__: list[str] = []
