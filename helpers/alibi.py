"""ALiBi, attention with linear biases (Press et al. 2022; article 001 §7.4, article 003 §9).

Notation: ``H`` heads, ``Tq`` queries, ``Tk`` keys, ``m_h`` the slope of head ``h``.

No position vectors: each head subtracts ``m_h`` times the distance from the score. Queries and
keys align bottom-right, like ``helpers.attention``: query ``i`` sits at position
``i + Tk - Tq``, so when decoding one query against a cache it is the newest position.
"""

from __future__ import annotations

import math

import torch

from ._checks import check_dtype, check_int

__all__ = ["alibi_slopes", "alibi_bias"]


def _power_of_two_slopes(n: int) -> list[float]:
    # Geometric sequence starting at 2^(-8/n) with the same ratio: 2^(-8/n), 2^(-16/n), ..., 2^-8.
    start = 2.0 ** (-(2.0 ** -(math.log2(n) - 3)))
    return [start * start**i for i in range(n)]


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """Head slopes ``(H,)`` float64, as the ALiBi reference code computes them.

    For a power of two ``n``, the geometric sequence ``2^(-8/n), 2^(-16/n), ..., 2^(-8)``
    (8 heads: 1/2, 1/4, ..., 1/256). Otherwise the slopes of the closest smaller power of two,
    followed by every other slope of the next power of two, until there are ``n``.
    """
    n_heads = check_int("n_heads", n_heads, minimum=1)
    if n_heads & (n_heads - 1) == 0:
        return torch.tensor(_power_of_two_slopes(n_heads), dtype=torch.float64)
    closest = 2 ** math.floor(math.log2(n_heads))
    extra = alibi_slopes(2 * closest)[0::2][: n_heads - closest]
    return torch.cat((torch.tensor(_power_of_two_slopes(closest), dtype=torch.float64), extra))


def alibi_bias(
    n_heads: int, n_queries: int, n_keys: int | None = None, *, causal: bool = True, device=None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """ALiBi bias ``(H, Tq, Tk)`` to add to attention scores.

    Causal: ``-m_h (i - j)`` for ``j <= i`` and ``-inf`` above the diagonal. Not causal:
    ``-m_h |i - j|``. Query ``i`` sits at position ``i + Tk - Tq`` (bottom-right alignment).
    """
    n_heads = check_int("n_heads", n_heads, minimum=1)
    n_queries = check_int("n_queries", n_queries, minimum=0)
    n_keys = n_queries if n_keys is None else check_int("n_keys", n_keys, minimum=0)
    dtype = check_dtype("dtype", dtype)
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {causal!r}")
    if causal and n_queries > n_keys:
        raise ValueError(f"n_queries ({n_queries}) must be <= n_keys ({n_keys}) when causal")
    i = torch.arange(n_queries, device=device, dtype=torch.float64)[:, None] + (n_keys - n_queries)  # (Tq, 1)
    j = torch.arange(n_keys, device=device, dtype=torch.float64)[None, :]  # (1, Tk)
    distance = i - j  # (Tq, Tk)
    slopes = alibi_slopes(n_heads).to(device)[:, None, None]  # (H, 1, 1)
    if causal:
        bias = -slopes * distance  # (H, Tq, Tk)
        bias = bias.masked_fill(distance < 0, float("-inf"))
    else:
        bias = -slopes * distance.abs()
    return bias.to(dtype)
