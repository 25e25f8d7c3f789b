"""Scaled dot-product attention and the four-term score (article 000 §1 and §7).

Notation: ``B`` batch, ``H`` heads (any leading dimensions ``...``), ``Tq`` queries, ``Tk`` keys,
``d`` query/key width, ``dv`` value width, ``m_h`` the ALiBi slope of head ``h``.

Causal alignment. When there are fewer queries than keys (decoding with a cache), query ``i`` is
taken to sit at position ``i + Tk - Tq``: the last query is the last key ("bottom-right", as in
FlashAttention 2, ``flash_attn_func`` and ``alibi_bias``). Query ``i`` sees key ``j`` when
``j <= i + Tk - Tq``; with ``Tq == Tk`` this is the usual lower triangle. torch's
``scaled_dot_product_attention(is_causal=True)`` aligns top-left instead (query ``i`` sees keys
``0 .. i``), which differs as soon as ``Tq < Tk``: here ``is_causal`` is used only when
``Tq == Tk``, where the two agree, and the bottom-right mask is passed explicitly otherwise.
ALiBi's distance uses the same alignment: ``i + Tk - Tq - j``.

Three ways to compute the same thing, chosen by ``attention``'s arguments:

- ``need_weights=True`` (teaching, the default): scores, softmax and weights are formed in
  plain tensor code and the ``(..., Tq, Tk)`` weights are returned.
- ``need_weights=False``: torch's fused ``scaled_dot_product_attention``; no ``(Tq, Tk)``
  weights are kept. A causal mask alone costs no ``(Tq, Tk)`` tensor when ``Tq == Tk``; a
  ``bias`` or ALiBi without FlexAttention is materialised once as an additive mask.
- ``need_weights=False`` with ``alibi_slopes`` and no ``bias``: FlexAttention
  (``torch.nn.attention.flex_attention``, compiled with ``torch.compile``) with a score
  modifier ``score - m_h |i + Tk - Tq - j|`` and, when causal, a block mask that skips the
  key blocks above the diagonal. Nothing of size ``(Tq, Tk)`` is ever stored. It needs a torch
  with FlexAttention, a C++ compiler on the CPU (inference only: no gradients there) or Triton
  on CUDA. Where it is not available the ALiBi bias is materialised instead.

When FlexAttention is used (``flex``). Compiling takes seconds (on a CPU up to a minute), so by default
(``flex=None``) it is used only where it pays: two queries or more, and at least
``FLEX_MIN_SCORES`` ALiBi scores ``H·Tq·Tk`` (below that the materialised bias is at most 4 MiB in
float32 and the plain path runs in milliseconds). A decoding step (one query) always takes the
plain path: its bias is one row per head, ``(H, 1, Tk)``, no larger than its scores. ``flex=True``
asks for FlexAttention at any shape. FlexAttention is compiled once per process and kind of
device, so that new lengths reuse the kernel. On the CPU with dynamic shapes from the first call
(``torch.compile(flex_attention, dynamic=True)``), where each compile is slow. On CUDA with
torch's default: the first shape static (on an H200 with torch 2.11 a static kernel took 1.26 ms
where a dynamic one took 1.60: causal, 16 heads, 4,096 tokens, bfloat16), then one recompile
with the sizes that changed made dynamic, which then stay dynamic in that process. Either way
torch recompiles only a few times as a sequence first crosses a few sizes (one key block and two,
then a new number of 128-key blocks, once), never per length.
If compiling or running it raises (torch wraps compiler failures in ``RuntimeError``; with static
shapes torch 2.14's CPU template failed to compile one query against 512, 1,024 or 2,048 keys),
the plain path computes the result instead and the failure is remembered for that device, dtype,
mask, widths and size-1 pattern, so it is not compiled again in this process: silently under
``flex=None``, with a ``RuntimeWarning`` naming the error under ``flex=True``. Out-of-memory
errors are raised, not hidden.
"""

from __future__ import annotations

import math
import shutil
import sys
import warnings

import torch
import torch.nn.functional as F

from ._validate import check_float_tensor, check_int

__all__ = ["attention", "causal_mask", "score_terms"]

# flex=None compiles FlexAttention only from this many ALiBi scores H·Tq·Tk (module notes).
FLEX_MIN_SCORES = 1 << 20

_compiled_flex: dict = {}  # device type -> (the torch.compile it was made with, flex_attention compiled)
_flex_failures: dict[tuple, str] = {}  # what failed to compile or run, by _flex_key, and why


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
            raise ValueError(f"bias must broadcast to (..., Tq, Tk) = (..., {tq}, {tk}), got shape {tuple(bias.shape)}")
        try:
            torch.broadcast_shapes(bias.shape[:-2], lead)
        except RuntimeError as error:
            raise ValueError(
                f"the leading dimensions of bias {tuple(bias.shape)} do not broadcast "
                f"with those of q, k, v {tuple(lead)}"
            ) from error
        if bias.device != q.device:
            raise ValueError(f"bias must be on the device of q ({q.device}), got {bias.device}")
    return q, k, v, bias


def _alibi_distance_bias(slopes, tq: int, tk: int, *, dtype) -> torch.Tensor:
    """``-m_h |i + Tk - Tq - j|``, shape ``(H, Tq, Tk)``, computed in float64 and cast."""
    i = torch.arange(tq, device=slopes.device, dtype=torch.float64)[:, None] + (tk - tq)  # (Tq, 1)
    j = torch.arange(tk, device=slopes.device, dtype=torch.float64)[None, :]  # (1, Tk)
    return (-slopes.to(torch.float64)[:, None, None] * (i - j).abs()).to(dtype)  # (H, Tq, Tk)


def _check_slopes(slopes, q, lead):
    slopes = check_float_tensor("alibi_slopes", slopes)
    if slopes.dim() != 1 or slopes.shape[0] < 1:
        raise ValueError(f"alibi_slopes must have shape (H,), one slope per head, got shape {tuple(slopes.shape)}")
    if slopes.device != q.device:
        raise ValueError(f"alibi_slopes must be on the device of q ({q.device}), got {slopes.device}")
    if not bool(torch.isfinite(slopes).all()):
        raise ValueError("alibi_slopes must be finite, got a NaN or infinity")
    if len(lead) == 0 or lead[-1] not in (1, slopes.shape[0]):
        raise ValueError(
            f"alibi_slopes has {slopes.shape[0]} slopes, but the head dimension (dim -3) of q, k, v is "
            f"{tuple(lead)[-1:] or 'missing'}; expected (..., H={slopes.shape[0]}, T, d)"
        )
    return slopes


def _flex_unavailable(q, k, v) -> str | None:
    """Why FlexAttention cannot run ALiBi for these tensors here, or None if it can."""
    try:
        from torch.nn.attention import flex_attention  # noqa: F401
    except ImportError:
        return f"torch {torch.__version__} has no torch.nn.attention.flex_attention (it needs torch >= 2.5)"
    if not torch._dynamo.is_dynamo_supported():
        return "torch.compile (which FlexAttention needs) does not support this Python"
    if v.shape[-1] != q.shape[-1]:
        return f"the value width dv = {v.shape[-1]} differs from the query width d = {q.shape[-1]}"
    kind = q.device.type
    if kind == "cpu":
        if q.dtype != torch.float32:
            return f"on the CPU only float32 is used with FlexAttention, got {q.dtype}"
        if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
            return "FlexAttention on the CPU has no backward pass and q, k or v requires grad"
        if sys.platform == "win32":
            return "torch.compile on the CPU builds C++ kernels (g++, clang++ or MSVC): not relied on under Windows"
        if not any(shutil.which(c) for c in ("g++", "c++", "clang++")):
            return "torch.compile on the CPU needs a C++ compiler (g++ or clang++) and none was found"
        return None
    if kind == "cuda":
        from torch.utils._triton import has_triton

        if not has_triton():
            return "FlexAttention on CUDA needs Triton, which is not installed"
        if q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
            return f"FlexAttention on CUDA takes float16, bfloat16 or float32, got {q.dtype}"
        return None
    return f"FlexAttention is not used on {kind} devices here"


def _causal_block_mask(tq: int, tk: int, device, block: int = 128):
    """FlexAttention ``BlockMask`` of the bottom-right causal mask, built without a ``(Tq, Tk)`` tensor.

    Query block ``r`` needs the key blocks ``0 .. c`` where ``c`` holds the key of its last query.
    """
    from torch.nn.attention.flex_attention import BlockMask

    offset = torch.tensor(tk - tq, device=device)  # a tensor, not a constant: new lengths reuse the kernel
    n_q, n_k = -(-tq // block), -(-tk // block)
    last = (torch.arange(1, n_q + 1, device=device) * block).clamp(max=tq) - 1 + (tk - tq)  # (n_q,)
    count = (last // block + 1).clamp(max=n_k).to(torch.int32)[None, None]  # (1, 1, n_q)
    index = (
        torch.arange(n_k, device=device, dtype=torch.int32).expand(n_q, n_k)[None, None].contiguous()
    )  # (1, 1, n_q, n_k)

    def visible(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx + offset

    return BlockMask.from_kv_blocks(count, index, BLOCK_SIZE=block, mask_mod=visible, seq_lengths=(tq, tk))


def _flex_alibi(q, k, v, slopes, causal: bool, lead) -> torch.Tensor:
    """ALiBi attention through compiled FlexAttention; output ``(*lead, Tq, dv)``."""
    tq, tk, d, dv = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    n_heads = lead[-1]
    q4 = q.expand(*lead, tq, d).reshape(-1, n_heads, tq, d)  # (B, H, Tq, d), B = prod of lead[:-1]
    k4 = k.expand(*lead, tk, d).reshape(-1, n_heads, tk, d)  # (B, H, Tk, d)
    v4 = v.expand(*lead, tk, dv).reshape(-1, n_heads, tk, dv)  # (B, H, Tk, dv)
    slopes = slopes.to(torch.float32).expand(n_heads).contiguous()  # (H,)
    offset = torch.tensor(tk - tq, device=q.device)  # query i sits at i + Tk - Tq

    def alibi(score, b, h, q_idx, kv_idx):
        return score - slopes[h] * (q_idx + offset - kv_idx).abs()

    block_mask = _causal_block_mask(tq, tk, q.device) if causal else None
    with warnings.catch_warnings():
        # The compiler imports torch.utils.mkldnn, whose TorchScript classes warn on import.
        warnings.filterwarnings(
            "ignore", message=r"`torch\.jit\.script_method` is deprecated", category=DeprecationWarning
        )
        out = _compiled_flex_attention(q.device)(q4, k4, v4, score_mod=alibi, block_mask=block_mask)  # (B, H, Tq, dv)
    return out.reshape(*lead, tq, dv)


def _compiled_flex_attention(device: torch.device):
    """``flex_attention`` compiled once per kind of device (module notes), so that new lengths reuse it.

    On the CPU with dynamic shapes from the first call; elsewhere with torch's default (the first
    shape static, then one recompile with the sizes that changed made dynamic). Made again only if
    ``torch.compile`` itself was replaced (as tests do to run it uncompiled).
    """
    from torch.nn.attention.flex_attention import flex_attention

    options = {"dynamic": True} if device.type == "cpu" else {}
    compile_ = torch.compile
    made = _compiled_flex.get(device.type)
    if made is None or made[0] is not compile_:
        made = _compiled_flex[device.type] = (compile_, compile_(flex_attention, **options))
    return made[1]


def _flex_key(q, v, causal: bool, lead, tq: int, tk: int) -> tuple:
    """What a compiled FlexAttention graph is specialised on: a failure is remembered by this key.

    torch specialises sizes 0 and 1 even with dynamic shapes, so which sizes are 1 is part of it.
    """
    batch = math.prod(lead[:-1])
    ones = tuple(n == 1 for n in (batch, lead[-1], tq, tk))
    return (q.device, q.dtype, causal, q.shape[-1], v.shape[-1], ones)


def _flex_worth_it(tq: int, tk: int, lead) -> bool:
    """Whether ``flex=None`` compiles FlexAttention: two queries or more and ``FLEX_MIN_SCORES`` scores."""
    return tq >= 2 and lead[-1] * tq * tk >= FLEX_MIN_SCORES


def attention(
    q, k, v, *, bias=None, causal: bool = False, alibi_slopes=None, need_weights: bool = True, flex: bool | None = None
):
    """``softmax(q kᵀ / sqrt(d) + bias) v`` with an optional causal mask and ALiBi.

    Args:
        q: queries ``(..., Tq, d)``, floating point.
        k: keys ``(..., Tk, d)``.
        v: values ``(..., Tk, dv)``.
        bias: additive score bias broadcastable to ``(..., Tq, Tk)`` (ALiBi, T5 buckets), or None.
            ``-inf`` entries mask a key out.
        causal: mask keys after the query, bottom-right aligned (see the module notes).
        alibi_slopes: None, or ALiBi slopes ``(H,)`` (``alibi_slopes(H)``): head ``h`` (dimension
            -3 of ``q``, ``k``, ``v``) adds ``-m_h |i + Tk - Tq - j|`` to its scores, as
            ``flash_attn_func(alibi_slopes=...)`` does. With ``causal=True`` this equals
            ``bias=alibi_bias(H, Tq, Tk)``.
        need_weights: if True (teaching), also return the ``(..., Tq, Tk)`` weights; if False,
            use a fused kernel (module notes) and return ``None`` for them.
        flex: only for ALiBi with ``need_weights=False`` and no ``bias``. None: FlexAttention
            where it is available and pays (two queries or more and ``FLEX_MIN_SCORES`` scores
            ``H·Tq·Tk``; never for a decoding step), else a materialised bias; True:
            FlexAttention at any shape, or a ``ValueError`` saying why it cannot be used here;
            False: always the materialised bias. If compiling fails, the materialised bias is
            used instead (with a ``RuntimeWarning`` under ``flex=True``; module notes).

    Returns:
        ``(output, weights)``: output ``(..., Tq, dv)``; weights ``(..., Tq, Tk)`` or None.
    """
    q, k, v, bias = _check_qkv(q, k, v, bias)
    tq, tk = q.shape[-2], k.shape[-2]
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {causal!r}")
    if not isinstance(need_weights, bool):
        raise TypeError(f"need_weights must be a bool, got {need_weights!r}")
    if flex is not None and not isinstance(flex, bool):
        raise TypeError(f"flex must be None, True or False, got {flex!r}")
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if alibi_slopes is not None:
        alibi_slopes = _check_slopes(alibi_slopes, q, lead)
        lead = torch.broadcast_shapes(lead, alibi_slopes.shape)
    if bias is not None:
        visible = ~torch.isneginf(bias)  # (..., Tq, Tk): -inf hides a key
        if causal:
            visible = visible & causal_mask(tq, tk, device=q.device)
        if not bool(visible.any(dim=-1).all()):
            raise ValueError("bias and causal mask leave some query with no visible key (a row of -inf)")
    elif causal and tq > tk:
        causal_mask(tq, tk)  # raises: bottom-right aligned, the first queries would see no key

    flex_applies = not need_weights and alibi_slopes is not None and bias is None
    if flex and not flex_applies:
        raise ValueError(
            "flex=True applies to ALiBi only: it needs alibi_slopes, need_weights=False and bias=None, got "
            f"alibi_slopes={'given' if alibi_slopes is not None else None}, need_weights={need_weights}, "
            f"bias={'given' if bias is not None else None}"
        )
    if flex_applies and (flex or (flex is None and _flex_worth_it(tq, tk, lead))):
        reason = _flex_unavailable(q, k, v)
        if reason is not None and flex:
            raise ValueError(f"flex=True, but FlexAttention cannot be used: {reason}")
        if reason is None and tq > 0 and tk > 0:
            key = _flex_key(q, v, causal, lead, tq, tk)
            failure = _flex_failures.get(key)
            if failure is None:
                try:
                    return _flex_alibi(q, k, v, alibi_slopes, causal, lead), None
                except torch.OutOfMemoryError:
                    raise
                except RuntimeError as error:  # torch wraps every compiler failure in a RuntimeError
                    failure = f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:300]}"
                    _flex_failures[key] = failure
            if flex:
                warnings.warn(
                    f"flex=True, but FlexAttention failed for these shapes ({failure}); the materialised "
                    "ALiBi bias is used instead, and FlexAttention is not tried again for them in this process",
                    RuntimeWarning,
                    stacklevel=2,
                )

    additive = bias
    if alibi_slopes is not None:
        alibi = _alibi_distance_bias(alibi_slopes, tq, tk, dtype=q.dtype)  # (H, Tq, Tk)
        additive = alibi if additive is None else additive + alibi
    if not need_weights and additive is None:
        if causal and tq == tk:  # torch's top-left alignment agrees here, and no mask is stored
            return F.scaled_dot_product_attention(q, k, v, is_causal=True), None  # (..., Tq, dv)
        mask = causal_mask(tq, tk, device=q.device) if causal else None  # (Tq, Tk) bool, True = visible
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), None  # (..., Tq, dv)
    mask = causal_mask(tq, tk, device=q.device) if causal else None  # (Tq, Tk) bool
    if not need_weights:
        if mask is not None:
            additive = additive.masked_fill(~mask, float("-inf"))  # (..., Tq, Tk)
        full = torch.broadcast_shapes(lead, additive.shape[:-2])  # leading dims of the output
        if q.shape[:-2] != full:
            # torch broadcasts q against k and v, not against the mask: heads (or batches) that only the
            # bias or the slopes have are given to q as a view, not a copy.
            q = q.expand(*full, tq, q.shape[-1])  # (*full, Tq, d)
        if bias is None and additive.dim() < len(full) + 2:
            # ALiBi alone: the (H, Tq, Tk) bias viewed with q's leading dimensions. On the CPU, torch's
            # fused kernel takes a mask with as many dimensions as q, and a shorter one falls back to the
            # unfused formula (several times slower, for a decoding step too).
            additive = additive.view((1,) * (len(full) + 2 - additive.dim()) + tuple(additive.shape))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=additive), None  # (..., Tq, dv)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)
    if additive is not None:
        scores = scores + additive
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
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
