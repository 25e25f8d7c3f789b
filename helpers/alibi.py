"""ALiBi, attention with linear biases (Press et al. 2022; article 001 §7.4 and §9.9, article 003 §9).

Notation: ``H`` heads, ``Tq`` queries, ``Tk`` keys, ``m_h`` the slope of head ``h`` (a penalty per
token of offset; the letter is the ALiBi paper's, not a position), ``i`` the query's position and
``j`` the key's. The offset ``i - j`` (how many tokens the key lies back from the query) is the
collection's ``Δ = m - n``, query minus key; T5's and Shaw's relative position ``j - i`` is ``-Δ``.

No position vectors: each head subtracts ``m_h`` times the distance from the score. Queries and
keys align bottom-right, like ``helpers.attention``: query ``i`` sits at position
``i + Tk - Tq``, so when decoding one query against a cache it is the newest position.

Two ways to write the causal bias, equivalent in exact arithmetic. ``alibi_bias`` gives the
distance form ``-m_h (i - j)`` of the paper. The ALiBi reference code and BLOOM add ``+m_h j``
instead (``alibi_key_bias``), one row shared by all queries: within a row the two differ by the
constant ``m_h i``, and softmax ignores a constant added to a whole row, so the causal attention
weights are the same. (The reference code, in fairseq, still adds that row to a full ``(T, T)``
causal mask buffer per head and batch; BLOOM keeps the ``(batch·H, 1, T)`` row.) Without the causal
mask they are not equivalent: the symmetric ``-m_h |i - j|`` has no row-constant form.

Precision caveat: ``+m_h j`` grows with ``j``, and in a low-precision dtype its rounding step
grows too. In bfloat16 (8 bits of mantissa) the step between neighbouring keys of head 0
(``m = 1/2``) is lost once ``m_h j`` passes 128 (256 keys): at 2048 keys the two newest keys get the same bias
and the weights differ from the exact ones by more than 0.1 (from 258 keys on); float16 loses it
from 2,050 keys. BLOOM
casts its row to the model's dtype. MPT anchors the newest key at 0 instead,
``m_h (j - (Tk - 1))``, which equals ``alibi_bias``'s last row: small numbers where the newest
query's weight is, but the same row serves every query, and for query ``i`` it is
``-m_h (i - j) - m_h (Tk - 1 - i)``, large again far from the newest. In bfloat16 that row fixes
only the queries near the newest (notebook 07 counts the rest); what keeps transformers' MPT exact
is that it leaves the row in float32. Only the per-cell ``-m_h (i - j)`` of ``alibi_bias``, or a
float32 row, holds for every query.
"""

from __future__ import annotations

import math
import numbers

import torch

from ._validate import check_dtype, check_int

__all__ = ["alibi_slopes", "alibi_bias", "alibi_key_bias", "alibi_decay_distance"]


def _power_of_two_slopes(n: int) -> list[float]:
    # Geometric sequence starting at 2^(-8/n) with the same ratio: 2^(-8/n), 2^(-16/n), ..., 2^-8.
    start = 2.0 ** (-(2.0 ** -(math.log2(n) - 3)))
    return [start * start**i for i in range(n)]


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """Head slopes ``(H,)`` float64, as the ALiBi reference code computes them.

    For a power of two ``n``, the geometric sequence ``2^(-8/n), 2^(-16/n), ..., 2^(-8)``
    (8 heads: 1/2, 1/4, ..., 1/256). This is a hand-chosen recipe of Press et al. (2022), not
    derived from anything; the shallowest slope is always ``2^-8`` and the steepest ``2^(-8/n)``,
    so with few heads every head is shallow (4 heads: 1/4 at most; 1 head: 1/256). Otherwise the
    slopes of the closest smaller power of two, followed by every other slope of the next power of
    two ``N``, until there are ``n`` (12 heads: 1/2, ..., 1/256, then 2^-0.5, 2^-1.5, 2^-2.5,
    2^-3.5); the steepest is then ``2^(-8/N)``, the first slope of ``N`` heads (12 heads: 2^-0.5;
    6 heads: 2^-1; 3 heads: 2^-2).
    """
    n_heads = check_int("n_heads", n_heads, minimum=1)
    if n_heads & (n_heads - 1) == 0:
        return torch.tensor(_power_of_two_slopes(n_heads), dtype=torch.float64)
    closest = 2 ** math.floor(math.log2(n_heads))
    extra = alibi_slopes(2 * closest)[0::2][: n_heads - closest]
    return torch.cat((torch.tensor(_power_of_two_slopes(closest), dtype=torch.float64), extra))


def _check_causal(causal) -> bool:
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {causal!r}")
    return causal


def alibi_bias(
    n_heads: int,
    n_queries: int,
    n_keys: int | None = None,
    *,
    causal: bool = True,
    device=None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """ALiBi bias ``(H, Tq, Tk)`` to add to attention scores (the distance form of the paper).

    Causal: ``-m_h (i - j)`` for ``j <= i`` and ``-inf`` above the diagonal. Not causal:
    ``-m_h |i - j|``. Query ``i`` sits at position ``i + Tk - Tq`` (bottom-right alignment, as in
    ``helpers.attention``), so the last query is always the newest token.

    Args:
        n_heads: number of heads ``H`` (slopes from ``alibi_slopes``).
        n_queries: ``Tq``.
        n_keys: ``Tk`` (default ``Tq``); with ``causal`` it must be at least ``Tq``.
        causal: mask the future with ``-inf`` (decoder) or use the symmetric form (encoder).
        device, dtype: of the result (computed in float64, then cast).
    """
    n_heads = check_int("n_heads", n_heads, minimum=1)
    n_queries = check_int("n_queries", n_queries, minimum=0)
    n_keys = n_queries if n_keys is None else check_int("n_keys", n_keys, minimum=0)
    dtype = check_dtype("dtype", dtype)
    causal = _check_causal(causal)
    if causal and n_queries > n_keys:
        raise ValueError(f"n_queries ({n_queries}) must be <= n_keys ({n_keys}) when causal")
    i = torch.arange(n_queries, dtype=torch.float64)[:, None] + (n_keys - n_queries)  # (Tq, 1)
    j = torch.arange(n_keys, dtype=torch.float64)[None, :]  # (1, Tk)
    distance = i - j  # (Tq, Tk)
    slopes = alibi_slopes(n_heads)[:, None, None]  # (H, 1, 1)
    if causal:
        bias = -slopes * distance.clamp(min=0.0)  # (H, Tq, Tk)
        bias = bias.masked_fill(distance < 0, float("-inf"))
    else:
        bias = -slopes * distance.abs()
    bias = bias + 0.0  # turn -0.0 on the diagonal into 0.0
    return bias.to(dtype=dtype).to(device)  # cast before the move: MPS has no float64


def alibi_key_bias(n_heads: int, n_keys: int, *, device=None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The row-constant form ``+m_h j`` of the reference code and BLOOM, shape ``(H, 1, Tk)``.

    The same row for every query (it broadcasts over ``Tq``). Row ``i`` of ``alibi_bias`` minus
    this is the constant ``-m_h i``, so with the causal mask both give the same attention weights
    in exact arithmetic (and in float32 or float64 at ordinary lengths). Use it only with
    ``causal=True``: it is not equivalent to the symmetric form.

    Not in a low-precision ``dtype`` at length: the values reach ``m_h (Tk - 1)``, and in bfloat16
    at 2048 keys head 0's two newest keys already get the same bias (the 0.5 step is rounded away),
    which moves its weights by more than 0.1. MPT's anchored form ``m_h (j - (Tk - 1))``, that is
    ``alibi_bias(H, 1, Tk)``, keeps the step for the newest query only (the row is shared by
    every query); keep the row in float32, as transformers' MPT does, or use ``alibi_bias``.
    """
    n_heads = check_int("n_heads", n_heads, minimum=1)
    n_keys = check_int("n_keys", n_keys, minimum=0)
    dtype = check_dtype("dtype", dtype)
    j = torch.arange(n_keys, dtype=torch.float64)  # (Tk,)
    bias = alibi_slopes(n_heads)[:, None, None] * j[None, None, :]  # (H, 1, Tk)
    return bias.to(dtype=dtype).to(device)  # cast before the move: MPS has no float64


def alibi_decay_distance(n_heads: int, fraction: float = 0.01) -> torch.Tensor:
    """For each head, the distance ``ln(1/fraction) / m_h`` (tokens) where the prior weight has fallen
    to ``fraction`` of the weight on distance 0; ``(H,)`` float64.

    With content switched off a head's weights are ``∝ exp(-m_h Δ)`` at offset ``Δ = i - j``, so
    the ratio to the nearest key is ``exp(-m_h Δ)``; it drops below ``fraction`` just beyond this
    distance (1%: ``ln 100 / m_h ≈ 4.61 / m_h``; 8 heads: 9.2 tokens for ``m = 1/2``, 1179 for ``1/256``).
    """
    n_heads = check_int("n_heads", n_heads, minimum=1)
    if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real) or not 0.0 < float(fraction) < 1.0:
        raise ValueError(f"fraction must be a number strictly between 0 and 1, got {fraction!r}")
    return math.log(1.0 / float(fraction)) / alibi_slopes(n_heads)
