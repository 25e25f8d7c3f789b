"""The tiny decoder-only Transformer of the train-short / test-long experiment (see ``helpers.experiment``).

Notation: ``B`` batch, ``T`` positions, ``H`` heads, ``d`` model width, ``dh = d / H`` head width,
``V`` vocabulary size.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._checks import check_int
from .alibi import alibi_bias
from .attention import attention
from .rope import apply_rope, rope_cos_sin
from .sinusoidal import sinusoidal_pe

SCHEMES = ("none", "learned", "sinusoidal", "rope", "alibi")


class _Block(nn.Module):
    """Pre-norm block: ``x + attn(ln(x))``, then ``x + mlp(ln(x))``."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int):
        super().__init__()
        self.n_heads = n_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def forward(self, x, *, rope=None, bias=None, need_weights=False):
        b, t, d = x.shape
        h = self.n_heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)  # (B, T, d) each
        q, k, v = (z.view(b, t, h, d // h).transpose(1, 2) for z in (q, k, v))  # (B, H, T, dh)
        if rope is not None:
            cos, sin = rope  # (T, dh/2) each
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        out, weights = attention(q, k, v, bias=bias, causal=True, need_weights=need_weights)  # (B, H, T, dh)
        out = out.transpose(1, 2).reshape(b, t, d)  # (B, H, T, dh) -> (B, T, d)
        x = x + self.proj(out)
        x = x + self.mlp(self.ln2(x))
        return x, weights


class TinyTransformer(nn.Module):
    """A small decoder-only Transformer whose position scheme is a parameter.

    Args:
        scheme: one of ``SCHEMES``: ``"none"``, ``"learned"``, ``"sinusoidal"``, ``"rope"``, ``"alibi"``.
        vocab, d_model, n_heads, n_layers, d_ff: sizes.
        max_len: rows of the learned table (the longest sequence ``"learned"`` can read).
        rope_base: the base ``b`` of RoPE and of the sinusoidal table.

    ``forward(tokens)`` maps int64 ``(B, T)`` to logits ``(B, T, V)``; with ``need_weights=True``
    it returns ``(logits, weights)``, ``weights`` a list of ``(B, H, T, T)``, one per layer.
    """

    def __init__(
        self,
        scheme: str,
        *,
        vocab: int,
        d_model: int = 64,
        n_heads: int = 4,
        n_layers: int = 2,
        d_ff: int = 128,
        max_len: int = 256,
        rope_base: float = 10000.0,
    ):
        super().__init__()
        if scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
        vocab = check_int("vocab", vocab, minimum=2)
        d_model = check_int("d_model", d_model, minimum=2)
        n_heads = check_int("n_heads", n_heads, minimum=1)
        if d_model % n_heads or (d_model // n_heads) % 2:
            raise ValueError(f"d_model / n_heads must be an even int, got d_model={d_model}, n_heads={n_heads}")
        self.scheme = scheme
        self.d_model, self.n_heads = d_model, n_heads
        self.max_len = check_int("max_len", max_len, minimum=1)
        self.rope_base = float(rope_base)
        # Token vectors with unit-size entries: sqrt(d) * N(0, 1/d), the scale of Vaswani's embedding.
        self.embed = nn.Embedding(vocab, d_model)
        nn.init.normal_(self.embed.weight, std=d_model**-0.5)
        if scheme == "learned":
            # Same size as the scaled token vectors, so the untrained rows are noise of the same size.
            self.pos_table = nn.Parameter(torch.randn(self.max_len, d_model))
        self.blocks = nn.ModuleList(_Block(d_model, n_heads, d_ff) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens: torch.Tensor, *, need_weights: bool = False):
        if not isinstance(tokens, torch.Tensor) or tokens.dtype != torch.int64 or tokens.dim() != 2:
            raise TypeError(f"tokens must be an int64 tensor of shape (B, T), got {tokens!r:.60}")
        _, t = tokens.shape
        x = self.embed(tokens) * math.sqrt(self.d_model)  # (B, T, d)
        rope, bias = None, None
        if self.scheme == "learned":
            if t > self.max_len:
                raise ValueError(f"the learned table has {self.max_len} rows, got a sequence of length {t}")
            x = x + self.pos_table[:t]  # (T, d) broadcast over B
        elif self.scheme == "sinusoidal":
            x = x + sinusoidal_pe(t, self.d_model, self.rope_base, device=x.device, dtype=x.dtype)  # (T, d)
        elif self.scheme == "rope":
            rope = rope_cos_sin(t, self.d_model // self.n_heads, self.rope_base, device=x.device, dtype=x.dtype)
        elif self.scheme == "alibi":
            bias = alibi_bias(self.n_heads, t, device=x.device, dtype=x.dtype)  # (H, T, T), -inf above diagonal
        all_weights = []
        for block in self.blocks:
            x, weights = block(x, rope=rope, bias=bias, need_weights=need_weights)
            all_weights.append(weights)
        logits = self.head(self.ln_f(x))  # (B, T, V)
        return (logits, all_weights) if need_weights else logits
