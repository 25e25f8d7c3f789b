"""Scaled dot-product attention and the four-term score (article 000 §1 and §7).

Notation: ``B`` batch, ``H`` heads (any leading dimensions ``...``), ``Tq`` queries, ``Tk`` keys,
``d`` query/key width, ``dv`` value width.

Causal alignment. When there are fewer queries than keys (decoding with a cache), query ``i`` is
taken to sit at position ``i + Tk - Tq``: the last query is the last key ("bottom-right", as in
FlashAttention 2 and ``alibi_bias``). With ``Tq == Tk`` this is the usual lower triangle. Note
that torch's ``scaled_dot_product_attention(is_causal=True)`` aligns top-left instead; here the
mask is always passed explicitly, so both paths agree.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._checks import check_float_tensor, check_int

__all__ = ["attention", "causal_mask", "score_terms"]


def causal_mask(n_queries: int, n_keys: int | None = None, *, device=None) -> torch.Tensor:
    """Boolean ``(Tq, Tk)`` mask, True where query ``i`` may see key ``j`` (``j <= i + Tk - Tq``)."""
    n_queries = check_int("n_queries", n_queries, minimum=0)
    n_keys = n_queries if n_keys is None else check_int("n_keys", n_keys, minimum=0)
    if n_queries > n_keys:
        raise ValueError(
            f"n_queries ({n_queries}) must be <= n_keys ({n_keys}) for a causal mask: "
            "with bottom-right alignment the first queries would see no key at all"
        )
    i = torch.arange(n_queries, device=device)[:, None] + (n_keys - n_queries)  # (Tq, 1)
    j = torch.arange(n_keys, device=device)[None, :]  # (1, Tk)
    return j <= i


def _check_qkv(q, k, v, bias):
    q = check_float_tensor("q", q)
    k = check_float_tensor("k", k)
    v = check_float_tensor("v", v)
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() < 2:
            raise ValueError(f"{name} must have shape (..., T, d), got shape {tuple(t.shape)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must share a dtype, got {q.dtype}, {k.dtype} and {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k and v must be on one device, got {q.device}, {k.device} and {v.device}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same width d, got q {tuple(q.shape)} and k {tuple(k.shape)}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same number of keys, got k {tuple(k.shape)} and v {tuple(v.shape)}")
    try:
        lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError as error:
        raise ValueError(
            f"the leading dimensions of q {tuple(q.shape)}, k {tuple(k.shape)} and v {tuple(v.shape)} do not broadcast"
        ) from error
    tq, tk = q.shape[-2], k.shape[-2]
    if bias is not None:
        bias = check_float_tensor("bias", bias)
        if bias.dim() < 2 or bias.shape[-2] not in (1, tq) or bias.shape[-1] not in (1, tk):
            raise ValueError(
                f"bias must broadcast to (..., Tq, Tk) = (..., {tq}, {tk}), got shape {tuple(bias.shape)}"
            )
        try:
            torch.broadcast_shapes(bias.shape[:-2], lead)
        except RuntimeError as error:
            raise ValueError(
                f"the leading dimensions of bias {tuple(bias.shape)} do not broadcast with those of q, k, v {tuple(lead)}"
            ) from error
        if bias.device != q.device:
            raise ValueError(f"bias must be on the device of q ({q.device}), got {bias.device}")
    return q, k, v, bias


def attention(q, k, v, *, bias=None, causal: bool = False, need_weights: bool = True):
    """``softmax(q kᵀ / sqrt(d) + bias) v`` with an optional causal mask.

    Args:
        q: queries ``(..., Tq, d)``, floating point.
        k: keys ``(..., Tk, d)``.
        v: values ``(..., Tk, dv)``.
        bias: additive score bias broadcastable to ``(..., Tq, Tk)`` (ALiBi, T5 buckets), or None.
            ``-inf`` entries mask a key out.
        causal: mask keys after the query, bottom-right aligned (see the module notes).
        need_weights: if True (teaching), also return the ``(..., Tq, Tk)`` weights; if False,
            call torch's fused ``scaled_dot_product_attention`` and return ``None`` for them.

    Returns:
        ``(output, weights)``: output ``(..., Tq, dv)``; weights ``(..., Tq, Tk)`` or None.
    """
    q, k, v, bias = _check_qkv(q, k, v, bias)
    tq, tk = q.shape[-2], k.shape[-2]
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {causal!r}")
    mask = causal_mask(tq, tk, device=q.device) if causal else None  # (Tq, Tk) bool
    additive = bias
    if mask is not None:
        mask_bias = torch.zeros((tq, tk), dtype=q.dtype, device=q.device).masked_fill(~mask, float("-inf"))
        additive = mask_bias if additive is None else additive + mask_bias
    if additive is not None and bool(torch.isneginf(additive).all(dim=-1).any()):
        raise ValueError("bias and causal mask leave some query with no visible key (a row of -inf)")
    if not need_weights:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=additive)  # (..., Tq, dv)
        return out, None
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)
    if additive is not None:
        scores = scores + additive
    weights = torch.softmax(scores, dim=-1)  # (..., Tq, Tk)
    return weights @ v, weights  # (..., Tq, dv), (..., Tq, Tk)


def score_terms(x, p, w_q, w_k) -> dict[str, torch.Tensor]:
    """Split the score ``q_m · k_n = (x_m + p_m)ᵀ A (x_n + p_n)``, ``A = W_Qᵀ W_K``, into four terms.

    Args:
        x: content (token embeddings) ``(T, d_model)``.
        p: position vectors ``(T, d_model)``.
        w_q, w_k: projection weights ``(d_k, d_model)`` (the ``weight`` of ``nn.Linear``), so that
            ``q_m = W_Q (x_m + p_m)``.

    Returns:
        dict of ``(T, T)`` tensors ``content_content`` (``x_mᵀ A x_n``), ``content_position``
        (``x_mᵀ A p_n``), ``position_content`` (``p_mᵀ A x_n``) and ``position_position``
        (``p_mᵀ A p_n``). They add up to the unscaled score ``Q Kᵀ`` (no ``1/sqrt(d_k)``).
    """
    x = check_float_tensor("x", x)
    p = check_float_tensor("p", p)
    w_q = check_float_tensor("w_q", w_q)
    w_k = check_float_tensor("w_k", w_k)
    if x.dim() != 2 or p.shape != x.shape:
        raise ValueError(f"x and p must both have shape (T, d_model), got x {tuple(x.shape)} and p {tuple(p.shape)}")
    d_model = x.shape[1]
    for name, w in (("w_q", w_q), ("w_k", w_k)):
        if w.dim() != 2 or w.shape[1] != d_model:
            raise ValueError(f"{name} must have shape (d_k, d_model={d_model}), got {tuple(w.shape)}")
    if w_q.shape != w_k.shape:
        raise ValueError(f"w_q and w_k must have the same shape, got {tuple(w_q.shape)} and {tuple(w_k.shape)}")
    a = w_q.T @ w_k  # (d_model, d_model)
    return {
        "content_content": x @ a @ x.T,  # (T, T)
        "content_position": x @ a @ p.T,
        "position_content": p @ a @ x.T,
        "position_position": p @ a @ p.T,
    }
