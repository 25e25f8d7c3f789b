"""The tiny decoder-only Transformer of the train-short / test-long experiment (see ``helpers.experiment``).

Notation: ``B`` batch, ``T`` positions, ``H`` heads, ``d`` model width, ``dh = d / H`` head width,
``V`` vocabulary size.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .._validate import check_int
from ..alibi import alibi_bias
from ..relative import T5RelativeBias, relative_position_bucket, relative_positions
from ..rope import apply_rope, rope_cos_sin
from ..self_attention import attention
from ..sinusoidal import sinusoidal_pe

SCHEMES = ("none", "learned", "sinusoidal", "rope", "alibi", "t5")

#: GPT-2's initial spread of its learned position table (Radford et al. 2019; article 001 §6.1).
LEARNED_INIT_STD = 0.02


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
            q, k = apply_rope(q, cos, sin, layout="interleaved"), apply_rope(k, cos, sin, layout="interleaved")
        out, weights = attention(q, k, v, bias=bias, causal=True, need_weights=need_weights)  # (B, H, T, dh)
        out = out.transpose(1, 2).reshape(b, t, d)  # (B, H, T, dh) -> (B, T, d)
        x = x + self.proj(out)
        x = x + self.mlp(self.ln2(x))
        return x, weights


def _scaling_at(scaling, length: int):
    """A model's ``rope_scaling`` (None, or a ``helpers.rope_cos_sin`` scaling dict) for a sequence of
    ``length`` tokens: "dynamic" reads the length (its base grows past the original length)."""
    if scaling is not None and scaling.get("type") == "dynamic":
        return {**scaling, "seq_len": length}
    return scaling


class TinyTransformer(nn.Module):
    """A small decoder-only Transformer whose position scheme is a parameter.

    Args:
        scheme: one of ``SCHEMES``: ``"none"``, ``"learned"``, ``"sinusoidal"``, ``"rope"``, ``"alibi"``,
            ``"t5"``.
        vocab, d_model, n_heads, n_layers, d_ff: sizes.
        max_len: rows of the learned table (the longest sequence ``"learned"`` can read).
        rope_base: the base ``b`` of RoPE and of the sinusoidal table.
        bos: prepend a beginning-of-sequence token (id ``vocab``, an extra row of the embedding) to
            every input; its output is dropped, so logits still have ``T`` rows.
        alibi_scale: multiplies every ALiBi slope (1: the reference slopes ``2^(-8h/H)``).
        t5_max_distance: the distance where T5's last (logarithmic) bucket begins (T5's own: 128).

    Initialisation: token vectors ``sqrt(d) E[token]`` with ``E ~ N(0, 1/d)`` (entries of size 1, as
    Vaswani et al. scale them); the learned table ``N(0, 0.02^2)`` as GPT-2; the T5 bias ``N(0, 1/d)``
    as T5's own initialisation (``d_model^-0.5``); linear layers as ``torch.nn`` does.

    ``forward(tokens)`` maps int64 ``(B, T)`` to logits ``(B, T, V)``; with ``need_weights=True``
    it returns ``(logits, weights)``, ``weights`` a list of ``(B, H, T, T)``, one per layer.

    ``rope_scaling``: None, or a ``helpers.rope_cos_sin`` scaling dict for the RoPE tables at every
    length ("dynamic" reads each sequence's length); ``helpers.experiment.stretch`` sets it. It is a setting of
    the forward pass, not a weight: it is not in the state dict.
    """

    rope_scaling = None

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
        bos: bool = False,
        alibi_scale: float = 1.0,
        t5_max_distance: int = 128,
    ):
        super().__init__()
        #: The constructor's arguments, so that a copy (``TinyEnsemble.member``) can be built.
        self.arguments = dict(
            scheme=scheme,
            vocab=vocab,
            d_model=d_model,
            n_heads=n_heads,
            n_layers=n_layers,
            d_ff=d_ff,
            max_len=max_len,
            rope_base=rope_base,
            bos=bos,
            alibi_scale=alibi_scale,
            t5_max_distance=t5_max_distance,
        )
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
        if not isinstance(bos, bool):
            raise TypeError(f"bos must be a bool, got {bos!r}")
        if not isinstance(alibi_scale, (int, float)) or not math.isfinite(alibi_scale) or alibi_scale <= 0:
            raise ValueError(f"alibi_scale must be a finite number > 0, got {alibi_scale!r}")
        self.bos, self.alibi_scale, self.vocab = bos, float(alibi_scale), vocab
        # Token vectors with unit-size entries: sqrt(d) * N(0, 1/d), the scale of Vaswani's embedding.
        self.embed = nn.Embedding(vocab + int(bos), d_model)
        nn.init.normal_(self.embed.weight, std=d_model**-0.5)
        if scheme == "learned":
            # GPT-2's initialisation: rows that never receive a gradient stay near zero (size 0.02
            # against token entries of size 1), so past the training length they add almost nothing.
            self.pos_table = nn.Parameter(torch.randn(self.max_len, d_model) * LEARNED_INIT_STD)
        if scheme == "t5":
            # One table shared by the layers, as in T5; causal (one-sided) buckets.
            self.t5_bias = T5RelativeBias(n_heads, bidirectional=False, max_distance=t5_max_distance)
            nn.init.normal_(self.t5_bias.embedding.weight, std=d_model**-0.5)
        self.blocks = nn.ModuleList(_Block(d_model, n_heads, d_ff) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens: torch.Tensor, *, need_weights: bool = False):
        if not isinstance(tokens, torch.Tensor) or tokens.dtype != torch.int64 or tokens.dim() != 2:
            raise TypeError(f"tokens must be an int64 tensor of shape (B, T), got {tokens!r:.60}")
        if self.bos:
            start = torch.full_like(tokens[:, :1], self.vocab)  # (B, 1) the BOS id
            tokens = torch.cat([start, tokens], dim=1)  # (B, T + 1)
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
            rope = rope_cos_sin(
                t,
                self.d_model // self.n_heads,
                self.rope_base,
                scaling=_scaling_at(self.rope_scaling, t),
                device=x.device,
                dtype=x.dtype,
            )
        elif self.scheme == "alibi":
            bias = alibi_bias(self.n_heads, t, device=x.device, dtype=x.dtype)  # (H, T, T), -inf above diagonal
            if self.alibi_scale != 1.0:
                bias = bias * self.alibi_scale  # every slope times the scale; -inf stays -inf
        elif self.scheme == "t5":
            bias = self.t5_bias(t).to(x.dtype)  # (H, T, T); the causal mask is applied by attention
        all_weights = []
        for block in self.blocks:
            x, weights = block(x, rope=rope, bias=bias, need_weights=need_weights)
            all_weights.append(weights)
        if self.bos:
            x = x[:, 1:]  # drop the BOS position: (B, T, d)
            all_weights = [w[..., 1:, :] if w is not None else None for w in all_weights]  # keys keep the BOS
        logits = self.head(self.ln_f(x))  # (B, T, V)
        return (logits, all_weights) if need_weights else logits


class TinyEnsemble(nn.Module):
    """``E`` independent ``TinyTransformer`` models of one kind (one per seed), run as one model.

    Every parameter of the members is stacked along a new first dimension ``E``, and the forward
    pass runs the members side by side with batched matrix products (``torch.baddbmm``): one
    optimiser step trains every seed, with a few large operations instead of ``E`` times as many
    small ones. Members never mix: member ``e``'s logits depend only on its own parameters and its
    own tokens, so the gradient of the summed loss with respect to member ``e``'s parameters is the
    gradient of member ``e``'s own loss, and an elementwise optimiser such as Adam treats every
    member exactly as it would treat it alone.

    Args:
        models: the members, ``TinyTransformer`` instances made with the same arguments.

    ``forward(tokens)`` maps int64 ``(E, B, T)`` to logits ``(E, B, T, V)``; ``member(e)``
    returns member ``e`` as a ``TinyTransformer`` of its own (to save, to draw attention maps).
    ``rope_scaling`` as in ``TinyTransformer`` (the members' own setting is not read; ``member`` and
    ``select`` carry the ensemble's).
    """

    rope_scaling = None

    def __init__(self, models):
        super().__init__()
        models = list(models)
        if not models or not all(isinstance(m, TinyTransformer) for m in models):
            raise TypeError(f"models must be a non-empty list of TinyTransformer, got {models!r:.80}")
        self.arguments = dict(models[0].arguments)
        if any(m.arguments != self.arguments for m in models):
            raise ValueError("models must all be made with the same arguments (one scheme, one set of sizes)")
        self.members = len(models)
        self.names = [name for name, _ in models[0].named_parameters()]
        # nn.ParameterDict keys may not contain dots: "blocks.0.qkv.weight" is stored as "blocks__0__qkv__weight".
        self.stacked = nn.ParameterDict(
            {
                name.replace(".", "__"): nn.Parameter(
                    torch.stack([dict(m.named_parameters())[name].detach() for m in models])
                )
                for name in self.names
            }
        )  # each (E, *shape of the member's parameter)
        a = self.arguments
        self.scheme, self.d_model, self.n_heads, self.n_layers = a["scheme"], a["d_model"], a["n_heads"], a["n_layers"]
        self.vocab, self.bos, self.max_len = a["vocab"], a["bos"], a["max_len"]
        if self.scheme == "t5":  # the bucket settings only; the weights are in ``stacked``
            t5 = models[0].t5_bias
            self._buckets = (t5.bidirectional, t5.num_buckets, t5.max_distance)

    def _p(self, name: str) -> torch.Tensor:
        return self.stacked[name.replace(".", "__")]

    def member(self, e: int) -> TinyTransformer:
        """Member ``e`` as a ``TinyTransformer`` (a copy, on the ensemble's device, in eval mode)."""
        e = check_int("e", e, minimum=0)
        if e >= self.members:
            raise ValueError(f"e must be < {self.members} (the number of members), got {e}")
        model = TinyTransformer(**self.arguments)
        model.load_state_dict({name: self._p(name)[e].detach().clone() for name in self.names})
        model.rope_scaling = self.rope_scaling
        return model.to(self._p("embed.weight").device).eval()

    def select(self, rows) -> "TinyEnsemble":
        """The members at ``rows`` (a list of member indices) as a new ensemble, in that order.

        Their parameters are copied, on this ensemble's device; the new ensemble is in training mode.
        """
        rows = [check_int("rows", e, minimum=0) for e in rows]
        if not rows or max(rows) >= self.members:
            raise ValueError(f"rows must be a non-empty list of member indices < {self.members}, got {rows}")
        chosen = TinyEnsemble.__new__(TinyEnsemble)
        nn.Module.__init__(chosen)
        chosen.arguments, chosen.names, chosen.members = dict(self.arguments), list(self.names), len(rows)
        chosen.rope_scaling = self.rope_scaling
        index = torch.tensor(rows, device=self._p("embed.weight").device)
        chosen.stacked = nn.ParameterDict(
            {key: nn.Parameter(p.detach().index_select(0, index).clone()) for key, p in self.stacked.items()}
        )  # each (len(rows), *shape of the member's parameter)
        for name in ("scheme", "d_model", "n_heads", "n_layers", "vocab", "bos", "max_len"):
            setattr(chosen, name, getattr(self, name))
        if self.scheme == "t5":
            chosen._buckets = self._buckets
        return chosen

    def _linear(self, x, name):
        """``x W_eᵀ + b_e`` for each member: ``x`` ``(E, ..., d_in)`` -> ``(E, ..., d_out)``."""
        weight, bias = self._p(name + ".weight"), self._p(name + ".bias")  # (E, d_out, d_in), (E, d_out)
        e, d_in = x.shape[0], x.shape[-1]
        out = torch.baddbmm(bias.unsqueeze(1), x.reshape(e, -1, d_in), weight.transpose(1, 2))  # (E, N, d_out)
        return out.view(*x.shape[:-1], weight.shape[1])

    def _norm(self, x, name):
        """LayerNorm with each member's own scale and shift: ``(E, B, T, d)``."""
        y = nn.functional.layer_norm(x, x.shape[-1:])
        return y * self._p(name + ".weight")[:, None, None] + self._p(name + ".bias")[:, None, None]

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if not isinstance(tokens, torch.Tensor) or tokens.dtype != torch.int64 or tokens.dim() != 3:
            raise TypeError(f"tokens must be an int64 tensor of shape (E, B, T), got {tokens!r:.60}")
        if tokens.shape[0] != self.members:
            raise ValueError(
                f"tokens must have {self.members} rows in dim 0 (one per member), got {tuple(tokens.shape)}"
            )
        if self.bos:
            start = torch.full_like(tokens[..., :1], self.vocab)  # (E, B, 1) the BOS id
            tokens = torch.cat([start, tokens], dim=-1)  # (E, B, T + 1)
        n, b, t = tokens.shape
        d, h = self.d_model, self.n_heads
        table = self._p("embed.weight")  # (E, V', d)
        offsets = torch.arange(n, device=tokens.device)[:, None, None] * table.shape[1]  # (E, 1, 1)
        x = nn.functional.embedding(tokens + offsets, table.reshape(-1, d)) * math.sqrt(d)  # (E, B, T, d)
        rope, bias = None, None
        if self.scheme == "learned":
            if t > self.max_len:
                raise ValueError(f"the learned table has {self.max_len} rows, got a sequence of length {t}")
            x = x + self._p("pos_table")[:, None, :t]  # (E, 1, T, d)
        elif self.scheme == "sinusoidal":
            x = x + sinusoidal_pe(t, d, self.arguments["rope_base"], device=x.device, dtype=x.dtype)  # (T, d)
        elif self.scheme == "rope":
            scaling = _scaling_at(self.rope_scaling, t)
            rope = rope_cos_sin(t, d // h, self.arguments["rope_base"], scaling=scaling, device=x.device, dtype=x.dtype)
        elif self.scheme == "alibi":
            bias = alibi_bias(h, t, device=x.device, dtype=x.dtype)  # (H, T, T), -inf above the diagonal
            if self.arguments["alibi_scale"] != 1.0:
                bias = bias * self.arguments["alibi_scale"]
        elif self.scheme == "t5":
            rel = relative_positions(t, device=x.device)  # (T, T)
            buckets = relative_position_bucket(rel, *self._buckets)  # (T, T)
            weight = self._p("t5_bias.embedding.weight")  # (E, buckets, H)
            bias = weight[:, buckets].permute(0, 3, 1, 2).unsqueeze(1).to(x.dtype)  # (E, 1, H, T, T)
        for layer in range(self.n_layers):
            name = f"blocks.{layer}"
            q, k, v = self._linear(self._norm(x, name + ".ln1"), name + ".qkv").split(d, dim=-1)  # (E, B, T, d)
            q, k, v = (z.view(n, b, t, h, d // h).transpose(2, 3) for z in (q, k, v))  # (E, B, H, T, dh)
            if rope is not None:
                q, k = apply_rope(q, *rope, layout="interleaved"), apply_rope(k, *rope, layout="interleaved")
            if bias is None or bias.dim() == 3:  # fold members into the batch: torch's fused kernels take 4-D
                out, _ = attention(
                    *(z.reshape(n * b, h, t, d // h) for z in (q, k, v)), bias=bias, causal=True, need_weights=False
                )  # (E B, H, T, dh)
                out = out.view(n, b, h, t, d // h)
            else:
                out, _ = attention(q, k, v, bias=bias, causal=True, need_weights=False)  # (E, B, H, T, dh)
            x = x + self._linear(out.transpose(2, 3).reshape(n, b, t, d), name + ".proj")
            hidden = nn.functional.gelu(self._linear(self._norm(x, name + ".ln2"), name + ".mlp.0"))  # (E, B, T, d_ff)
            x = x + self._linear(hidden, name + ".mlp.2")
        if self.bos:
            x = x[:, :, 1:]  # drop the BOS position: (E, B, T, d)
        return self._linear(self._norm(x, "ln_f"), "head")  # (E, B, T, V)
