"""The synthetic tasks of the train-short / test-long experiment (see ``helpers.experiment``).

Notation: ``B`` batch, ``T`` positions, ``V`` vocabulary size. Every batch function returns
``(inputs, targets, mask)``, each ``(B, T)``: the model reads ``inputs`` and is scored on
``targets`` where ``mask`` is True.
"""

from __future__ import annotations

import torch

from .._validate import check_int

TASKS = ("lag", "pattern", "text")

#: The characters of the text task: newline and printable ASCII; every other character becomes
#: one extra symbol (id ``len(TEXT_SYMBOLS)``).
TEXT_SYMBOLS = "\n" + "".join(chr(c) for c in range(32, 127))
TEXT_VOCAB = len(TEXT_SYMBOLS) + 1
#: The share of the corpus the text task trains on; the rest, its last topics, is held out.
TEXT_TRAIN_SHARE = 0.9


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
    noise: int = 0,
    prefix: int | None = None,
    generator: torch.Generator | None = None,
    device=None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch of "continue the pattern" examples (next-token prediction).

    A sequence is a prefix of ``p`` noise tokens, then a block of ``n`` distinct tokens repeated
    to the end (``n`` uniform in ``min_period .. max_period``). Block tokens are drawn without
    replacement from the first ``vocab - noise`` ids, noise tokens uniformly from the last
    ``noise`` ids, so a noise token never equals a block token. With ``noise > 0`` and ``prefix``
    None, ``p`` is uniform in ``0 .. T - 2n`` for each sequence: the block starts anywhere that
    leaves at least ``n`` scored positions, so where the answer sits is not fixed (at every length,
    not only the training length). A given ``prefix`` starts every block there (the probe of
    ``moved_block_accuracy``); ``noise = 0`` means no prefix (``p = 0``).

    Returns:
        ``inputs`` int64 ``(B, T)``; ``targets`` int64 ``(B, T)``, the next token of each input;
        ``mask`` bool ``(B, T)``, True where the next token is determined by what came before
        (``t >= p + n``: token ``t`` was already seen one period ago, followed by the answer).
    """
    batch_size = check_int("batch_size", batch_size, minimum=1)
    length = check_int("length", length, minimum=1)
    vocab = check_int("vocab", vocab, minimum=2)
    min_period = check_int("min_period", min_period, minimum=1)
    max_period = check_int("max_period", max_period, minimum=min_period)
    noise = check_int("noise", noise, minimum=0)
    if max_period > vocab - noise:
        raise ValueError(
            f"max_period must be <= vocab - noise ({vocab - noise}) for blocks of distinct tokens, got {max_period}"
        )
    if max_period >= length:
        raise ValueError(f"max_period must be < length ({length}) so that every block repeats, got {max_period}")
    if prefix is not None:
        prefix = check_int("prefix", prefix, minimum=0)
        if prefix > 0 and noise == 0:
            raise ValueError(f"prefix must be 0 when noise is 0 (no noise tokens to fill it), got {prefix}")
        if prefix > length - 2 * max_period:
            raise ValueError(
                f"prefix must be <= length - 2 max_period ({length - 2 * max_period}) so that every block repeats"
                f" at least once after it, got {prefix}"
            )
    periods = torch.randint(min_period, max_period + 1, (batch_size,), generator=generator)  # (B,)
    blocks = torch.rand(batch_size, vocab - noise, generator=generator).argsort(dim=-1)  # (B, V - noise)
    t = torch.arange(length + 1)  # (T+1,)
    if noise == 0:
        starts = torch.zeros(batch_size, dtype=torch.int64)  # (B,)
    elif prefix is None:
        room = length - 2 * periods + 1  # (B,) choices of p in 0 .. T - 2n
        starts = (torch.rand(batch_size, generator=generator) * room).long().clamp(max=room - 1)  # (B,)
    else:
        starts = torch.full((batch_size,), prefix, dtype=torch.int64)  # (B,)
    fill = torch.randint(vocab - noise, vocab, (batch_size, length + 1), generator=generator) if noise else None
    phase = (t[None, :] - starts[:, None]).clamp(min=0) % periods[:, None]  # (B, T+1)
    sequence = blocks.gather(1, phase)  # (B, T+1)
    if noise:
        sequence = torch.where(t[None, :] < starts[:, None], fill, sequence)  # noise before the block
    mask = t[None, :-1] >= (starts + periods)[:, None]  # (B, T)
    return sequence[:, :-1].to(device), sequence[:, 1:].to(device), mask.to(device)


def text_corpus() -> tuple[torch.Tensor, torch.Tensor]:
    """The text task's characters, ``(train, held_out)`` int64 ids, each ``(N,)``.

    The text is the reference documentation that ships inside Python itself (``pydoc_data.topics``,
    what ``help("topics")`` prints): about 80 topics, 465,000 characters of English prose and code
    (the exact text depends on the Python version). Topics are taken in sorted order; the last
    ones, about 10 % of the characters (``typesmapping`` to ``yield`` in Python 3.11), are held out
    for evaluation and the rest is for training, so the test text is other topics, never seen.
    Characters outside ``TEXT_SYMBOLS`` become one extra symbol. Nothing is downloaded. Reading
    takes about 0.1 s: a training loop reads it once and passes it to ``text_batch``.
    """
    from pydoc_data.topics import topics

    names = sorted(topics)
    total = sum(len(topics[name]) for name in names)
    held_out, size = [], 0
    for name in reversed(names):  # the last topics, until they hold the held-out share
        if size >= (1 - TEXT_TRAIN_SHARE) * total:
            break
        held_out.append(name)
        size += len(topics[name])
    lookup = {c: i for i, c in enumerate(TEXT_SYMBOLS)}
    other = len(TEXT_SYMBOLS)

    def encode(chosen):
        text = "\n\n".join(topics[name] for name in chosen)
        return torch.tensor([lookup.get(c, other) for c in text], dtype=torch.int64)  # (N,)

    train = [name for name in names if name not in held_out]
    return encode(train), encode(sorted(held_out))


def text_batch(
    batch_size: int,
    length: int,
    *,
    corpus: tuple[torch.Tensor, torch.Tensor] | None = None,
    split: str = "train",
    generator: torch.Generator | None = None,
    device=None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch of windows of ``length + 1`` consecutive characters of the text corpus.

    Args:
        corpus: ``text_corpus()``'s ``(train, held_out)``; None reads it (0.1 s: pass it in a loop).
        split: ``"train"`` or ``"held_out"``.

    Returns:
        ``inputs`` int64 ``(B, T)``; ``targets`` ``(B, T)``, the next character of each input;
        ``mask`` ``(B, T)``, all True (every next character is scored).
    """
    batch_size = check_int("batch_size", batch_size, minimum=1)
    length = check_int("length", length, minimum=1)
    if split not in ("train", "held_out"):
        raise ValueError(f"split must be 'train' or 'held_out', got {split!r}")
    train, held_out = text_corpus() if corpus is None else corpus
    ids = train if split == "train" else held_out
    if length + 1 > len(ids):
        raise ValueError(f"length must be < {len(ids)} (the {split} text), got {length}")
    starts = torch.randint(0, len(ids) - length, (batch_size,), generator=generator)  # (B,)
    windows = ids[starts[:, None] + torch.arange(length + 1)]  # (B, T + 1)
    mask = torch.ones(batch_size, length, dtype=torch.bool)
    return windows[:, :-1].to(device), windows[:, 1:].to(device), mask.to(device)


def decode(ids) -> str:
    """The text of text-task ids (the extra symbol shows as ``"?"``)."""
    return "".join(TEXT_SYMBOLS[i] if i < len(TEXT_SYMBOLS) else "?" for i in torch.as_tensor(ids).tolist())


#: "passkey": the token that marks the key, the token that asks for it, and the first key id.
PASSKEY_MARK, PASSKEY_QUERY, PASSKEY_FIRST_KEY = 0, 1, 2


def passkey_batch(
    batch_size: int,
    length: int,
    *,
    vocab: int,
    keys: int,
    generator: torch.Generator | None = None,
    device=None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch of "retrieve the passkey" examples: a key hidden at a random place, asked for at the end.

    A sequence is filler (uniform over the ids ``2 .. vocab - 1``, which include the keys) with
    the mark ``PASSKEY_MARK`` at a position ``p`` uniform in ``0 .. T - 3``, the key (one of the
    ``keys`` ids ``2 .. keys + 1``) at ``p + 1``, and the query ``PASSKEY_QUERY`` at the last
    position. The one scored prediction is the next token after the query: the key, ``T - 2 - p``
    positions back (from 1 to ``T - 2``), whatever the length. The key's id does not give it away
    (the filler holds the same ids): only its place, right after the mark, does. Chance is
    ``1 / keys``.

    Returns:
        ``inputs`` int64 ``(B, T)``; ``targets`` int64 ``(B, T)`` (the key at the last position,
        0 elsewhere); ``mask`` bool ``(B, T)``, True at the last position only.
    """
    batch_size = check_int("batch_size", batch_size, minimum=1)
    length = check_int("length", length, minimum=3)
    vocab = check_int("vocab", vocab, minimum=5)
    keys = check_int("keys", keys, minimum=2)
    if keys > vocab - PASSKEY_FIRST_KEY:
        raise ValueError(f"keys must be <= vocab - 2 ({vocab - 2}), the ids that are not marks, got {keys}")
    inputs = torch.randint(PASSKEY_FIRST_KEY, vocab, (batch_size, length), generator=generator)  # (B, T)
    where = torch.randint(0, length - 2, (batch_size,), generator=generator)  # (B,) the mark's position p
    key = torch.randint(PASSKEY_FIRST_KEY, PASSKEY_FIRST_KEY + keys, (batch_size,), generator=generator)  # (B,)
    rows = torch.arange(batch_size)
    inputs[rows, where] = PASSKEY_MARK
    inputs[rows, where + 1] = key
    inputs[:, -1] = PASSKEY_QUERY
    targets = torch.zeros_like(inputs)
    targets[:, -1] = key
    mask = torch.zeros(batch_size, length, dtype=torch.bool)
    mask[:, -1] = True
    return inputs.to(device), targets.to(device), mask.to(device)
