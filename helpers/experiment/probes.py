"""Looking inside the trained models of the train-short / test-long experiment (notebook 08).

Notation: ``T`` positions, ``H`` heads, ``Δ = t - j`` the offset from a query ``t`` back to a key ``j``.
"""

from __future__ import annotations

import torch

from .._validate import check_int
from .model import TinyTransformer
from .tasks import pattern_batch


def pattern_probe(config, *, period: int = 7, seed: int = 3) -> torch.Tensor:
    """One "pattern" sequence of ``4 L + 1`` tokens, a block of ``period`` distinct tokens repeated,
    int64 ``(4 L + 1,)``: what notebook 08 reads the trained models' attention on.

    One of the sequences training draws, with a prefix of length 0: the block's tokens come from the
    ids training uses for blocks, never from the ``config.noise_tokens`` ids it uses only for noise.
    """
    generator = torch.Generator().manual_seed(seed)
    tokens, _, _ = pattern_batch(
        1,
        4 * config.train_length + 1,
        vocab=config.vocab,
        min_period=period,
        max_period=period,
        noise=config.noise_tokens,
        prefix=0,
        generator=generator,
    )
    return tokens[0]


def answer_weights(model: TinyTransformer, tokens: torch.Tensor, length: int, period: int) -> torch.Tensor:
    """How much each head looks at the keys that hold the answer, ``(layers, H)``.

    For the first ``length`` tokens of a periodic sequence, the mean over queries ``t >= period``
    (those with an earlier copy of the next token in view) of the attention weight on the visible
    keys holding the token that comes next: near 1 for an induction head.
    """
    period = check_int("period", period, minimum=1)
    length = check_int("length", length, minimum=period + 1)
    if length >= tokens.shape[0]:
        raise ValueError(
            f"length must be < {tokens.shape[0]} (the sequence given, whose next tokens are read), got {length}"
        )
    x = tokens[:length]
    answer = tokens[1 : length + 1]  # (T,) the next token of each query
    hit = (x[None, :] == answer[:, None]) & torch.ones(length, length, dtype=torch.bool).tril()  # (T, T)
    with torch.no_grad():
        _, weights = model(x[None, :], need_weights=True)  # list of (1, H, T, T)
    rows = torch.arange(period, length)
    return torch.stack([(w[0][:, rows] * hit[rows]).sum(dim=-1).mean(dim=-1) for w in weights])


def induction_heads(models: dict, tokens: torch.Tensor, length: int, period: int) -> dict:
    """``{scheme: (layer, head)}``: each model's head with the largest ``answer_weights`` at ``length``."""
    heads = {}
    for scheme, model in models.items():
        weights = answer_weights(model, tokens, length, period)
        layer, head = divmod(int(weights.argmax()), weights.shape[1])
        heads[scheme] = (layer, head)
    return heads


def offset_weights(model: TinyTransformer, tokens: torch.Tensor, *, max_offset: int = 8, first: int | None = None):
    """Mean attention weight at each offset ``Δ = 0 .. max_offset``, per layer and head.

    Args:
        model: a trained ``TinyTransformer``.
        tokens: sequences, int64 ``(B, T)``.
        max_offset: the largest offset reported.
        first: average over the queries ``t >= first`` only (default ``max_offset``, so that every
            query has a key at every reported offset).

    Returns:
        float64 ``(layers, H, max_offset + 1)``: entry ``[l, h, Δ]`` is the weight head ``h`` of
        layer ``l`` puts on the key ``Δ`` tokens back, averaged over the sequences and queries.
    """
    if not isinstance(tokens, torch.Tensor) or tokens.dtype != torch.int64 or tokens.dim() != 2:
        raise TypeError(f"tokens must be an int64 tensor of shape (B, T), got {tokens!r:.60}")
    max_offset = check_int("max_offset", max_offset, minimum=0)
    first = max_offset if first is None else check_int("first", first, minimum=max_offset)
    t = tokens.shape[1]
    if first >= t:
        raise ValueError(f"first must be < T = {t} (some query must be averaged), got {first}")
    with torch.no_grad():
        _, weights = model(tokens, need_weights=True)  # list of (B, H, T, T'), T' = T (+1 with a BOS key)
    shift = weights[0].shape[-1] - t  # 1 when a BOS key sits in front
    queries = torch.arange(first, t)  # (Q,)
    out = []
    for w in weights:
        w = w.double()
        rows = [w[:, :, queries, queries + shift - delta].mean(dim=(0, 2)) for delta in range(max_offset + 1)]  # (H,)
        out.append(torch.stack(rows, dim=-1))  # (H, Δ)
    return torch.stack(out)  # (layers, H, Δ)


@torch.no_grad()
def moved_block_accuracy(model: TinyTransformer, config, starts, *, length: int | None = None) -> dict:
    """Accuracy on "pattern" with the block moved: ``{start: accuracy}``.

    For each ``start`` (an int position), ``config.eval_batch_size`` sequences of ``length``
    tokens (default the longest evaluation length) whose noise prefix ends exactly there, the
    same for every model. Each is scored on the ``L`` positions that follow the block's first
    period, ``start + n <= t < start + n + L``: what is asked there is what training asked (the
    answer one period back), only the place moves. A model that reads the answer by content keeps
    its accuracy at every start; one that learned where answers sit in training sequences loses it
    as soon as the block starts past where training put it.
    """
    length = max(config.eval_lengths) if length is None else check_int("length", length, minimum=1)
    device = next(model.parameters()).device
    out = {}
    for start in starts:
        start = check_int("start", start, minimum=0)
        generator = torch.Generator().manual_seed(config.eval_seed + 7919 * (start + 1))
        inputs, targets, mask = pattern_batch(
            config.eval_batch_size,
            length,
            vocab=config.vocab,
            min_period=config.min_period,
            max_period=config.max_period,
            noise=config.noise_tokens,
            prefix=start,
            generator=generator,
        )  # (B, T) each
        first = mask.float().argmax(dim=1)  # (B,) the first scored position, start + n
        t = torch.arange(length)
        window = mask & (t[None, :] < first[:, None] + config.train_length)  # (B, T)
        logits = model(inputs.to(device))  # (B, T, V)
        correct = (logits.argmax(dim=-1).cpu() == targets) & window
        out[start] = float(correct.sum() / window.sum())
    return out
