"""``check_position_ids`` and ``check_cached_decoding``: which positions a model reads (left
padding) and decoding with a key/value cache against the full causal pass."""

from __future__ import annotations

import torch

from .._validate import check_base, check_dtype, check_even_dim, check_int
from ..rope import LAYOUTS, apply_rope, rope_cos_sin
from ..self_attention import attention
from ._report import (
    CheckReport,
    Finding,
    _Bad,
    _call,
    _check_callable,
    _check_device,
    _eps,
    _num,
    _report,
    _tensor_out,
)

_MASK = torch.tensor(
    [
        [0, 0, 0, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 1],
        [0, 0, 0, 0, 0, 0, 1],
    ],
    dtype=torch.int64,
)


def check_position_ids(position_ids_fn, *, attention_mask: torch.Tensor | None = None) -> CheckReport:
    """Check the position ids of a left-padded batch: each row's first real token is at position 0.

    Args:
        position_ids_fn: ``position_ids_fn(attention_mask) -> position_ids``: ``attention_mask``
            an int64 ``(B, T)`` tensor, 1 for a real token and 0 for padding (padding on the left,
            as for batched generation); ``position_ids`` an integer ``(B, T)`` tensor. Only the
            real tokens' positions are compared (what padding gets is free).
        attention_mask: the batch to try; by default three rows padded by 3, 0 and 6 tokens.

    Findings: ``left padding``. It sees one call on a whole prompt: positions computed right for
    the prompt and wrong at a later decoding step (a batch-wide cache position used for every
    row) are outside what it can see.
    """
    position_ids_fn = _check_callable("position_ids_fn", position_ids_fn)
    if attention_mask is None:
        attention_mask = _MASK
    if (
        not isinstance(attention_mask, torch.Tensor)
        or attention_mask.dim() != 2
        or not bool(((attention_mask == 0) | (attention_mask == 1)).all())
    ):
        got = (
            f"shape {tuple(attention_mask.shape)}"
            if isinstance(attention_mask, torch.Tensor)
            else "a " + type(attention_mask).__name__
        )
        raise ValueError(f"attention_mask must be a (B, T) tensor of 0s and 1s, got {got}")
    mask = attention_mask.long()
    if bool((mask[:, 1:] < mask[:, :-1]).any()):
        row = int((mask[:, 1:] < mask[:, :-1]).any(-1).nonzero()[0])
        raise ValueError(
            f"attention_mask must be left-padded (0s before 1s in each row), got row {row}: {mask[row].tolist()}"
        )
    shown = f"attention_mask of shape {tuple(mask.shape)}, rows padded by {(mask == 0).sum(-1).tolist()} tokens"
    try:
        out = _call(position_ids_fn, "position_ids_fn", (mask.clone(),), shown)
        out = _tensor_out(out, "position_ids_fn", tuple(mask.shape), shown, integer=True).long()
    except _Bad as bad:
        return _report("check_position_ids", [bad.finding], ("left padding",))
    real = mask.bool()
    want = mask.cumsum(-1) - 1  # the count of real tokens before each one
    if torch.equal(out[real], want[real]):
        return CheckReport(
            "check_position_ids",
            (Finding("left padding", True, "every row's real tokens are numbered 0, 1, 2, ... from its first one"),),
        )
    b, t = (int(x) for x in torch.nonzero(real & (out != want))[0])
    text = f"row {b}, column {t}: position {int(out[b, t])}, expected {int(want[b, t])}."
    arange = torch.arange(mask.shape[1]).expand_as(mask)
    if torch.equal(out[real], arange[real]):
        text += (
            " Positions are counted from the first column, padding included, so a row padded by k tokens starts "
            "at position k: left padding is ignored (build them from the attention mask: cumsum - 1)."
        )
    elif torch.equal(out[real], want[real] + 1):
        text += " Every position is one too large: the cumulative sum of the mask without its - 1."
    return CheckReport("check_position_ids", (Finding("left padding", False, text),))


def check_cached_decoding(
    step_fn,
    *,
    d: int = 16,
    base: float = 10000.0,
    layout: str = "interleaved",
    chunks: tuple[int, ...] = (5, 3, 1, 1, 1),
    dtype: torch.dtype = torch.float64,
    device=None,
) -> CheckReport:
    """Check decoding with a key/value cache against the full causal pass with RoPE.

    Args:
        step_fn: ``step_fn(q, k, v, cache) -> (output, cache)``. ``q``, ``k``, ``v`` are the new
            tokens' queries, keys and values, ``(n, d)``, not yet rotated; ``cache`` is ``None`` at
            the first call and afterwards whatever ``step_fn`` returned. It must rotate the new
            queries and keys at their absolute positions (the number of cached tokens onwards),
            keep the keys and values, and return the new tokens' attention outputs ``(n, d)``:
            causal, each new token seeing every cached token and the new ones up to itself.
        d, base, layout: the RoPE settings ``step_fn`` uses.
        chunks: how many tokens each call brings (the first is the prompt).
        dtype: of ``q``, ``k``, ``v``; tolerances follow it.
        device: where ``q``, ``k``, ``v`` are created (default the CPU); outputs are compared on the CPU.

    The reference is ``helpers.apply_rope`` on all tokens at positions ``0 .. T-1`` and
    ``helpers.attention(causal=True)``. Findings: ``cache``, with the first step that differs and,
    when recognised, the cause (each step rotated from position 0; tables memoized by the step's
    length without its offset; the new tokens one position off, or only their queries; the values
    rotated too; the other layout; a causal mask aligned top-left); a fault it does not recognise is
    reported as a difference only.
    """
    step_fn = _check_callable("step_fn", step_fn)
    d = check_even_dim("d", d)
    base = check_base("base", base)
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if not isinstance(chunks, (tuple, list)) or len(chunks) < 2:
        raise ValueError(f"chunks must be a tuple of at least two token counts, got {chunks!r}")
    chunks = tuple(check_int("chunks", c, minimum=1) for c in chunks)
    dtype = check_dtype("dtype", dtype)
    device = _check_device(device)
    T = sum(chunks)
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(T, d, generator=gen, dtype=torch.float64) for _ in range(3))
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    bounds = [0]
    for c in chunks:
        bounds.append(bounds[-1] + c)
    reference, hypotheses = _decoding_hypotheses(q, k, v, chunks, bounds, d, base, layout)
    tol = max(1e3 * _eps(dtype), 1e-6)  # float32 tables inside a float64 step pass; a real fault is far above
    cache = None
    got_all = []
    for step, (s, e) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        shown = f"step {step}: q, k, v of shape ({e - s}, {d}) for positions {s}..{e - 1}, {s} tokens cached"
        try:
            out, cache = _decoding_step(step_fn, (q, k, v), s, e, d, cache, device, shown)
        except _Bad as bad:
            return _report("check_cached_decoding", [bad.finding], ("cache",))
        got_all.append(out)
        diff = float((out - reference[s:e]).abs().max())
        if diff > tol:
            text = (
                f"step {step} (the prompt is step 0; {e - s} new token{'s' if e - s > 1 else ''} at "
                f"{f'positions {s}..{e - 1}' if e - s > 1 else f'position {s}'}, {s} cached) "
                f"differs from the full pass by up to {_num(diff)} (tolerance {_num(tol)})."
            )
            if step == 0:
                text += " The prompt alone already differs, with nothing cached: the fault is not in the cache."
            got = torch.cat(got_all)
            text += next(
                (story for outputs, story in hypotheses if torch.allclose(got, outputs[:e], rtol=0, atol=tol)), ""
            )
            return CheckReport("check_cached_decoding", (Finding("cache", False, text),))
    return CheckReport(
        "check_cached_decoding",
        (Finding("cache", True, f"{len(chunks)} steps ({', '.join(map(str, chunks))} tokens) match the full pass"),),
    )


def _decoding_step(step_fn, qkv, s, e, d, cache, device, shown):
    """One call of ``step_fn`` with the tokens ``s .. e - 1``: ``(output (e - s, d) float64 on the CPU, cache)``."""
    new = (t[s:e].to(device, copy=True) for t in qkv)
    result = _call(step_fn, "step_fn", (*new, cache), shown)
    if not isinstance(result, tuple) or len(result) != 2:
        raise _Bad(
            Finding(
                "output",
                False,
                f"step_fn returned {type(result).__name__} at {shown}; expected a tuple (output, cache)",
            )
        )
    out, cache = result
    return _tensor_out(out, "step_fn", (e - s, d), shown).detach().to("cpu", torch.float64), cache


def _decoding_hypotheses(q, k, v, chunks, bounds, d, base, layout):
    """The full causal pass, and what each known fault would output for all ``T`` tokens: ``(reference,
    [(outputs (T, d), the sentence that names the fault)])``, in the order they are tried."""
    T = bounds[-1]
    cos, sin = rope_cos_sin(T, d, base, dtype=torch.float64)
    cos_1, sin_1 = rope_cos_sin(T + 1, d, base, dtype=torch.float64)  # one row more, for a late position
    steps = list(zip(bounds[:-1], bounds[1:], strict=True))

    def rotate(x, positions=None, which=layout, tables=(cos, sin)):
        return apply_rope(x.double(), *tables, layout=which, positions=positions)

    def full(q_rot, k_rot, values=None):
        out, _ = attention(q_rot.double(), k_rot.double(), v.double() if values is None else values, causal=True)
        return out

    q_rot, k_rot = rotate(q), rotate(k)
    reference = full(q_rot, k_rot)
    # Every step rotated from position 0 (the offset forgotten).
    from_zero = torch.cat([torch.arange(e - s) for s, e in steps])
    # Tables memoized by the step's length, not its offset: every step of a given length is rotated
    # as the first step of that length was.
    first_start: dict[int, int] = {}
    for s, e in steps:
        first_start.setdefault(e - s, s)
    memo = torch.cat([torch.arange(e - s) + first_start[e - s] for s, e in steps])
    other = "half" if layout == "interleaved" else "interleaved"
    hypotheses = [
        (
            full(rotate(q, which=other), rotate(k, which=other)),
            f" It matches the full pass with the {other} layout: step_fn rotates pairs "
            f"{'(x_i, x_i+d/2)' if other == 'half' else '(x_2i, x_2i+1)'}; pass layout={other!r} if that is "
            "what the model was trained with.",
        ),
        (
            full(rotate(q, from_zero), rotate(k, from_zero)),
            " It matches rotating every step from position 0: the new tokens must be rotated at their "
            "absolute positions, the number of cached tokens onwards "
            "(apply_rope(..., layout=..., positions=offset)).",
        ),
        (
            full(rotate(q, memo), rotate(k, memo)),
            " It matches rotating each step as the first step of the same length was: the tables are "
            "memoized by the number of new tokens, and the offset is not part of the memo's key.",
        ),
    ]
    # The tokens after the prompt one position off (cache_len - 1 or + 1), then only their queries
    # (a query position taken from a counter that the key cache does not share).
    late_tables = (cos_1, sin_1)
    for delta in (-1, 1):
        shifted = torch.arange(T) + delta * (torch.arange(T) >= chunks[0])  # (T,)
        hypotheses.append(
            (
                full(rotate(q, shifted, tables=late_tables), rotate(k, shifted, tables=late_tables)),
                f" It matches rotating every token after the prompt one position {'early' if delta < 0 else 'late'}"
                f" (at cache length {'- 1' if delta < 0 else '+ 1'}): the first new token's position is the "
                "number of cached tokens, counted from 0.",
            )
        )
    for delta in (-1, 1):
        shifted = torch.arange(T) + delta * (torch.arange(T) >= chunks[0])  # (T,)
        hypotheses.append(
            (
                full(rotate(q, shifted, tables=late_tables), rotate(k, tables=late_tables)),
                f" It matches rotating the queries after the prompt one position {'early' if delta < 0 else 'late'}"
                " while the keys are right: the query's position and the key cache's length are counted "
                "separately; rotate the new queries and keys at the same positions, from the cache length.",
            )
        )
    hypotheses.append(
        (
            full(q_rot, k_rot, values=rotate(v)),
            " It matches rotating the values as well as the queries and keys: RoPE turns q and k only, "
            "so that their dot product sees the offset; a rotated value carries its position into the output.",
        )
    )
    # Right rotations, causal mask top-left within each step (torch's is_causal with Tq < Tk).
    top_left = []
    for s, e in steps:
        i = torch.arange(e - s)[:, None]
        j = torch.arange(e)[None, :]
        mask = torch.zeros(e - s, e, dtype=torch.float64).masked_fill(j > i, float("-inf"))
        out, _ = attention(q_rot[s:e], k_rot[:e], v[:e].double(), bias=mask)
        top_left.append(out)
    hypotheses.append(
        (
            torch.cat(top_left),
            " It matches a causal mask aligned top-left (query i of the step sees keys 0..i): with a cache "
            "the new queries are the newest tokens, query i sees keys up to i + Tk - Tq (torch's "
            "scaled_dot_product_attention(is_causal=True) aligns top-left when Tq < Tk).",
        )
    )
    return reference, hypotheses
