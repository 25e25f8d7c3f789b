"""Learned relative position biases: Shaw-style clipped tables and T5 buckets (article 001 §2.2, article 003 §6).

Notation: ``H`` heads, ``Tq`` queries, ``Tk`` keys, ``d`` head width. The relative position is
``j - i``, key position minus query position (Hugging Face T5's ``memory_position -
context_position``, and Shaw et al.'s ``clip(j - i, k)``): negative for keys in the past. It is
``-Δ`` in the collection's convention ``Δ = m - n`` (query minus key), whereas ALiBi's ``i - j``
is ``Δ`` itself. Queries align bottom-right as in
``helpers.attention``: query ``i`` sits at position ``i + Tk - Tq``.

The family. Every member adds to the score ``q_i · k_j / sqrt(d)`` (T5: to the unscaled
``q_i · k_j``) a term indexed by the relative position ``j - i``: a learned vector dotted with
``q_i`` for Shaw, a scalar per head for T5 and ALiBi.

- Shaw et al. (2018): a learned vector ``a_r`` of width ``d`` for each relative position
  ``r`` clipped to ``[-K, K]``; the extra score is ``q_i · a_(j-i) / sqrt(d)`` (it depends on
  the query too). The paper also adds a second table to the values,
  ``z_i = Σ_j α_ij (v_j + a^V_(j-i))``; ``ShawRelativeBias`` covers the key term only (a bias
  cannot reach the values).
- T5 (Raffel et al. 2020): one learned number per head for each *bucket* of relative positions;
  buckets are exact for small distances and logarithmically wider beyond. T5 does not scale
  ``q · k`` by ``1/sqrt(d)`` at all (its initialisation of ``W_Q`` absorbs the factor) and adds
  the bias to the unscaled score.
- ALiBi (``helpers.alibi``): nothing learned, ``-m_h Δ = -m_h (i - j)`` with the causal mask
  (``-m_h |i - j|`` only in the symmetric form without it): the fixed, linear member.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._validate import check_float_tensor, check_int

__all__ = [
    "relative_positions",
    "relative_position_bucket",
    "T5RelativeBias",
    "ShawRelativeBias",
]


def relative_positions(n_queries: int, n_keys: int | None = None, *, device=None) -> torch.Tensor:
    """``j - i`` as an int64 ``(Tq, Tk)`` tensor, query ``i`` at position ``i + Tk - Tq``."""
    n_queries = check_int("n_queries", n_queries, minimum=0)
    n_keys = n_queries if n_keys is None else check_int("n_keys", n_keys, minimum=0)
    i = torch.arange(n_queries, device=device)[:, None] + (n_keys - n_queries)  # (Tq, 1)
    j = torch.arange(n_keys, device=device)[None, :]  # (1, Tk)
    return j - i  # (Tq, Tk)


def _check_bool(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return value


def _check_bucket_args(bidirectional, num_buckets, max_distance) -> tuple[bool, int, int]:
    bidirectional = _check_bool("bidirectional", bidirectional)
    num_buckets = check_int("num_buckets", num_buckets, minimum=4 if bidirectional else 2)
    max_distance = check_int("max_distance", max_distance, minimum=1)
    max_exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
    if max_distance <= max_exact:
        raise ValueError(
            f"max_distance must be > {max_exact} (the exact buckets) for num_buckets={num_buckets}, got {max_distance}"
        )
    return bidirectional, num_buckets, max_distance


def relative_position_bucket(
    relative_position, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128
) -> torch.Tensor:
    """T5's bucket of each relative position ``j - i``, an int64 tensor of the same shape.

    Bidirectional (encoder): half of the buckets for keys at or before the query, half (offset by
    ``num_buckets // 2``) for keys after it. Unidirectional (decoder): keys after the query share
    bucket 0 with distance 0 (the causal mask removes them anyway). Within the ``nb`` buckets of one
    side (``nb = num_buckets // 2`` bidirectional, ``nb = num_buckets`` unidirectional), distances
    ``0 .. nb/2 - 1`` get a bucket each; larger distances ``n`` get
    ``nb/2 + floor(log(n / (nb/2)) / log(max_distance / (nb/2)) * nb/2)``, capped at ``nb - 1``.
    The formula would reach ``nb`` (one past the last bucket) at ``n = max_distance``, so the last
    bucket begins well *before* ``max_distance``: where the value reaches ``nb - 1``, at
    ``n = (nb/2) (max_distance / (nb/2))^((nb/2 - 1) / (nb/2))``, rounded up. With the defaults
    the bidirectional bucket 15 starts at distance 91 and the unidirectional bucket 31 at 113.

    The logarithm is taken in float32 and truncated toward zero, in the order Hugging Face's
    ``T5Attention`` uses, so the buckets agree with its values (default settings: distances 0-7
    exact, 8-11 bucket 8, 12-15 bucket 9, 16-22 bucket 10, ..., 91 and beyond bucket 15).

    Args:
        relative_position: integer tensor of ``j - i`` values, any shape.
        bidirectional: encoder (True) or decoder (False) bucketing.
        num_buckets: total number of buckets (T5: 32).
        max_distance: the distance at which the logarithmic buckets would run past the last one
            (T5: 128); the last bucket itself starts earlier (91 or 113 with the defaults).
    """
    if not isinstance(relative_position, torch.Tensor):
        raise TypeError(f"relative_position must be an integer torch.Tensor, got {type(relative_position).__name__}")
    if relative_position.is_floating_point() or relative_position.is_complex() or relative_position.dtype == torch.bool:
        raise TypeError(f"relative_position must hold integers, got dtype {relative_position.dtype}")
    bidirectional, num_buckets, max_distance = _check_bucket_args(bidirectional, num_buckets, max_distance)
    relative_position = relative_position.long()
    offset = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        offset = (relative_position > 0).long() * num_buckets  # keys after the query use the upper half
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)  # the future folds onto distance 0
    max_exact = num_buckets // 2
    # Clamp before the log so that small distances (handled exactly) never take log(0).
    scaled = distance.clamp(min=max_exact).float() / max_exact
    large = max_exact + (torch.log(scaled) / math.log(max_distance / max_exact) * (num_buckets - max_exact)).long()
    large = large.clamp(max=num_buckets - 1)
    return offset + torch.where(distance < max_exact, distance, large)


class T5RelativeBias(nn.Module):
    """T5-style learned bias: one number per head and bucket, ``(H, Tq, Tk)`` from ``forward``.

    ``bias[h, i, j] = weight[bucket(j - i), h]``; pass it as ``bias=`` to ``helpers.attention``.
    T5 shares one such table across the layers of a stack.

    Scaling. T5 computes ``softmax(q kᵀ + bias)``: no ``1/sqrt(d)`` anywhere (the factor is folded
    into the initialisation of ``W_Q``). ``helpers.attention`` computes ``softmax(q kᵀ / sqrt(d) +
    bias)``: the bias is added unscaled there too, but the content score is divided by
    ``sqrt(d)``. To reproduce T5's scores exactly, pass ``q * sqrt(d)`` as the queries. The weights start as
    ``nn.Embedding`` does (standard normal); set ``self.embedding.weight`` to explore by hand.
    """

    def __init__(self, n_heads: int, *, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128):
        super().__init__()
        self.n_heads = check_int("n_heads", n_heads, minimum=1)
        self.bidirectional, self.num_buckets, self.max_distance = _check_bucket_args(
            bidirectional, num_buckets, max_distance
        )
        self.embedding = nn.Embedding(self.num_buckets, self.n_heads)  # (num_buckets, H)

    def forward(self, n_queries: int, n_keys: int | None = None) -> torch.Tensor:
        """Bias ``(H, Tq, Tk)`` for ``Tq`` queries against ``Tk`` keys (default ``Tk = Tq``)."""
        rel = relative_positions(n_queries, n_keys, device=self.embedding.weight.device)  # (Tq, Tk)
        buckets = relative_position_bucket(rel, self.bidirectional, self.num_buckets, self.max_distance)
        return self.embedding(buckets).permute(2, 0, 1)  # (Tq, Tk, H) -> (H, Tq, Tk)

    def extra_repr(self) -> str:
        return (
            f"n_heads={self.n_heads}, bidirectional={self.bidirectional}, num_buckets={self.num_buckets}, "
            f"max_distance={self.max_distance}"
        )


class ShawRelativeBias(nn.Module):
    """Shaw-style relative keys: ``q_i · a_(clip(j - i)) / sqrt(d)``, with ``2K + 1`` learned vectors.

    Relative positions beyond ``±K`` (``max_relative_position``) share the end vectors. The result
    is the extra score of Shaw et al.'s ``e_ij = q_i (k_j + a_ij)ᵀ / sqrt(d)``, ready to pass as
    ``bias=`` to ``helpers.attention`` (which adds the ``q_i · k_j / sqrt(d)`` part itself).

    Only the key term. Shaw et al. also add a second learned table to the values,
    ``z_i = Σ_j α_ij (v_j + a^V_(clip(j - i)))``; that term changes the output, not the scores,
    so no bias can express it. With the weights ``α`` from ``helpers.attention`` it is
    ``torch.einsum("...ij,ijd->...id", weights, table_v[index])``.
    """

    def __init__(self, head_dim: int, max_relative_position: int):
        super().__init__()
        self.head_dim = check_int("head_dim", head_dim, minimum=1)
        self.max_relative_position = check_int("max_relative_position", max_relative_position, minimum=0)
        self.embedding = nn.Embedding(2 * self.max_relative_position + 1, self.head_dim)  # (2K+1, d)

    def index(self, n_queries: int, n_keys: int | None = None) -> torch.Tensor:
        """Row of the table for each pair: ``clip(j - i, -K, K) + K``, int64 ``(Tq, Tk)``."""
        k = self.max_relative_position
        rel = relative_positions(n_queries, n_keys, device=self.embedding.weight.device)  # (Tq, Tk)
        return rel.clamp(-k, k) + k

    def forward(self, q: torch.Tensor, n_keys: int | None = None) -> torch.Tensor:
        """Extra scores ``(..., Tq, Tk)`` for queries ``q`` of shape ``(..., Tq, d)``."""
        q = check_float_tensor("q", q)
        if q.dim() < 2 or q.shape[-1] != self.head_dim:
            raise ValueError(f"q must have shape (..., Tq, {self.head_dim}), got {tuple(q.shape)}")
        table = self.embedding(self.index(q.shape[-2], n_keys)).to(q.dtype)  # (Tq, Tk, d)
        return torch.einsum("...id,ijd->...ij", q, table) / math.sqrt(self.head_dim)  # (..., Tq, Tk)
