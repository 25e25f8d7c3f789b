"""The synthetic tasks of the train-short / test-long experiment (see ``helpers.experiment``).

Notation: ``B`` batch, ``T`` positions, ``V`` vocabulary size. Every batch function returns
``(inputs, targets, mask)``, each ``(B, T)``: the model reads ``inputs`` and is scored on
``targets`` where ``mask`` is True.
"""

from __future__ import annotations

import torch

from ._checks import check_int

TASKS = ("lag", "pattern")


def lag_batch(
    batch_size: int, length: int, *, vocab: int, lag: int, generator: torch.Generator | None = None, device=None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch of "copy the token ``lag`` places back" examples.

    Returns:
        ``inputs`` int64 ``(B, T)`` uniform random tokens; ``targets`` int64 ``(B, T)`` with
        ``targets[:, t] = inputs[:, t - lag]``; ``mask`` bool ``(B, T)``, True where ``t >= lag``.
    """
    batch_size = check_int("batch_size", batch_size, minimum=1)
    length = check_int("length", length, minimum=1)
    vocab = check_int("vocab", vocab, minimum=2)
    lag = check_int("lag", lag, minimum=0)
    if lag >= length:
        raise ValueError(f"lag must be < length ({length}), got {lag}")
    inputs = torch.randint(0, vocab, (batch_size, length), generator=generator)  # (B, T)
    targets = inputs.roll(lag, dims=1)  # (B, T): targets[:, t] = inputs[:, t - lag] for t >= lag
    mask = (torch.arange(length) >= lag)[None, :].expand(batch_size, length)  # (B, T)
    return inputs.to(device), targets.to(device), mask.to(device)


def pattern_batch(
    batch_size: int,
    length: int,
    *,
    vocab: int,
    min_period: int,
    max_period: int,
    generator: torch.Generator | None = None,
    device=None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch of "continue the pattern" examples (next-token prediction).

    A sequence repeats a block of ``n`` distinct tokens (``n`` uniform in
    ``min_period .. max_period``, tokens drawn without replacement from ``0 .. vocab-1``).

    Returns:
        ``inputs`` int64 ``(B, T)``; ``targets`` int64 ``(B, T)``, the next token of each input;
        ``mask`` bool ``(B, T)``, True where the next token is determined by what came before
        (``t >= n``: token ``t`` was already seen one period ago, followed by the answer).
    """
    batch_size = check_int("batch_size", batch_size, minimum=1)
    length = check_int("length", length, minimum=1)
    vocab = check_int("vocab", vocab, minimum=2)
    min_period = check_int("min_period", min_period, minimum=1)
    max_period = check_int("max_period", max_period, minimum=min_period)
    if max_period > vocab:
        raise ValueError(f"max_period must be <= vocab ({vocab}) for blocks of distinct tokens, got {max_period}")
    if max_period >= length:
        raise ValueError(f"max_period must be < length ({length}) so that every block repeats, got {max_period}")
    periods = torch.randint(min_period, max_period + 1, (batch_size,), generator=generator)  # (B,)
    blocks = torch.rand(batch_size, vocab, generator=generator).argsort(dim=-1)  # (B, V): random permutations
    t = torch.arange(length + 1)  # (T+1,)
    sequence = blocks.gather(1, t[None, :] % periods[:, None])  # (B, T+1)
    mask = t[None, :-1] >= periods[:, None]  # (B, T)
    return sequence[:, :-1].to(device), sequence[:, 1:].to(device), mask.to(device)
