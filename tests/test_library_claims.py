"""What the notebooks say about other libraries, checked against the installed libraries themselves.

The notebooks state facts about transformers and torch: which pairs of dimensions a model's RoPE
code rotates, that T5 does not divide its scores by ``sqrt(d)``, which ALiBi slopes BLOOM and MPT
build and in which dtype, how ``scaled_dot_product_attention(is_causal=True)`` aligns fewer queries
than keys, what transformers' rotary forward does under autocast, where YaRN's attention factor
goes. Each test here runs the installed library's own code (tiny models built from configs, module
functions called on random tensors; no weights, no network) and compares what it does with
``helpers``, so that a notebook sentence that disagrees with the library is caught when the library
changes. transformers is a test dependency (``>=5.13,<6``; CI runs the oldest and the newest): the
tests use module-level functions and classes present across that range, and skip only where a
model's file is missing from the installed version.

Each test's docstring states its claim in one sentence; each was seen to fail once with its
expectation flipped to the plausible wrong claim.
"""

from __future__ import annotations

import importlib
import inspect
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import helpers

transformers = pytest.importorskip("transformers", minversion="5.13")

ROOT = Path(__file__).resolve().parents[1]
BASE = 10000.0
POSITIONS = torch.arange(3, 12)  # (T,) = 9 positions, not starting at 0
ATOL = 1e-5  # float32 rotations of float32 tables at positions below 12


def _modeling(name: str):
    """``transformers.models.<name>.modeling_<name>``, or a skip when the installed version lacks it."""
    try:
        return importlib.import_module(f"transformers.models.{name}.modeling_{name}")
    except ModuleNotFoundError as error:  # only where a version has dropped the model
        pytest.skip(f"the installed transformers has no {name} model: {error}")


def _randn(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


# ---------------------------------------------------------------------------------------------
# 1. RoPE pair layouts. Each builder returns (rotate, d, r): ``rotate(x, positions)`` rotates
# ``x`` (1, H, T, d) with the model's own tables and the model's own apply function; ``r`` is the
# rotated width. Bases are 10000 throughout (GPT-J, CodeGen and RoFormer hard-code it).


def _half_family(name, config_cls, rotary_cls, config_kwargs, *, layer_type=None, apply="apply_rotary_pos_emb"):
    """A model whose rotary module returns full-width ``(cos, sin)`` and whose apply function takes them."""
    mod = _modeling(name)
    config = getattr(transformers, config_cls)(**config_kwargs)
    rotary = getattr(mod, rotary_cls)(config)
    apply_fn = getattr(mod, apply)

    def rotate(x, positions):
        kwargs = {} if layer_type is None else {"layer_type": layer_type}
        cos, sin = rotary(x, positions[None], **kwargs)  # (1, T, r) each
        q, _ = apply_fn(x, x, cos, sin)
        return q

    return rotate, config


# The models whose transformers code rotates halves with a plain rotary module: module, config,
# rotary class, config arguments, head width d and rotated width r. GPT-NeoX and Phi-3 rotate a
# part of each head by default; half here, so that both parts are wide.
HALF_FAMILY = {
    "Llama": ("llama", "LlamaConfig", "LlamaRotaryEmbedding", {"rope_theta": BASE}, 16),
    "Mistral": (
        "mistral",
        "MistralConfig",
        "MistralRotaryEmbedding",
        {"num_key_value_heads": 2, "rope_theta": BASE},
        16,
    ),
    "Qwen2": ("qwen2", "Qwen2Config", "Qwen2RotaryEmbedding", {"rope_theta": BASE}, 16),
    "GPT-NeoX": (
        "gpt_neox",
        "GPTNeoXConfig",
        "GPTNeoXRotaryEmbedding",
        {"rotary_pct": 0.5, "rotary_emb_base": BASE},
        8,
    ),
    "Phi-3": ("phi3", "Phi3Config", "Phi3RotaryEmbedding", {"partial_rotary_factor": 0.5, "rope_theta": BASE}, 8),
}


def _build_half(model):
    name, config_cls, rotary_cls, kwargs, rotated = HALF_FAMILY[model]
    rotate, _ = _half_family(name, config_cls, rotary_cls, {"hidden_size": 32, "num_attention_heads": 2, **kwargs})
    return rotate, 16, rotated


def _build_gemma3():
    # Both of Gemma 3's layer kinds (global and sliding-window RoPE) share one rotation; the
    # sliding-window layers' base (rope_local_base_freq) is set to 10000 here, as in the published model.
    rotate, _ = _half_family(
        "gemma3",
        "Gemma3TextConfig",
        "Gemma3RotaryEmbedding",
        {
            "hidden_size": 32,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "num_hidden_layers": 2,
            "layer_types": ["sliding_attention", "full_attention"],
            "rope_theta": 1e6,
            "rope_local_base_freq": BASE,
        },
        layer_type="sliding_attention",
    )
    return rotate, 16, 16


def _build_deepseek_v3(interleave: bool):
    mod = _modeling("deepseek_v3")
    config = transformers.DeepseekV3Config(
        hidden_size=32,
        num_attention_heads=2,
        qk_rope_head_dim=16,
        qk_nope_head_dim=8,
        v_head_dim=8,
        kv_lora_rank=16,
        q_lora_rank=16,
        rope_theta=BASE,
    )
    rotary = mod.DeepseekV3RotaryEmbedding(config)
    apply_fn = mod.apply_rotary_pos_emb_interleave if interleave else mod.apply_rotary_pos_emb

    def rotate(x, positions):
        cos, sin = rotary(x, positions[None])
        q, _ = apply_fn(x, x, cos, sin)
        return q

    return rotate, 16, 16


def _build_llama4():
    mod = _modeling("llama4")
    config = transformers.Llama4TextConfig(hidden_size=32, num_attention_heads=2, head_dim=16, rope_theta=BASE)
    rotary = mod.Llama4TextRotaryEmbedding(config)

    def rotate(x, positions):
        freqs_cis = rotary(x, positions[None])  # (1, T, d/2) complex
        q, _ = mod.apply_rotary_emb(x.transpose(1, 2), x.transpose(1, 2), freqs_cis)  # takes (B, T, H, d)
        return q.transpose(1, 2)

    return rotate, 16, 16


def _build_sinusoid_table_family(name):
    """GPT-J and CodeGen: a (positions, d) table [sin | cos] and ``apply_rotary_pos_emb(x, sin, cos)``."""
    mod = _modeling(name)
    d = 16
    table = mod.create_sinusoidal_positions(64, d)  # (64, d): sin of the d/2 angles, then cos

    def rotate(x, positions):
        sin, cos = torch.split(table[positions][None], d // 2, dim=-1)  # (1, T, d/2) each
        return mod.apply_rotary_pos_emb(x.transpose(1, 2), sin, cos).transpose(1, 2)  # it takes (B, T, H, d)

    return rotate, d, d


def _build_roformer():
    mod = _modeling("roformer")
    d = 16
    table = mod.RoFormerSinusoidalPositionalEmbedding(64, d).create_weight()  # (64, d): sin half, cos half

    def rotate(x, positions):
        q, _ = mod.RoFormerSelfAttention.apply_rotary_position_embeddings(table[positions][None, None], x, x)
        return q

    return rotate, d, d


BUILDERS = {
    "Llama": lambda: _build_half("Llama"),
    "Mistral": lambda: _build_half("Mistral"),
    "Qwen2": lambda: _build_half("Qwen2"),
    "GPT-NeoX": lambda: _build_half("GPT-NeoX"),
    "Gemma 3": _build_gemma3,
    "Phi-3": lambda: _build_half("Phi-3"),
    "GPT-J": lambda: _build_sinusoid_table_family("gptj"),
    "CodeGen": lambda: _build_sinusoid_table_family("codegen"),
    "RoFormer": _build_roformer,
    "Llama 4": _build_llama4,
    "DeepSeek-V3 (rope_interleave=True)": lambda: _build_deepseek_v3(True),
    "DeepSeek-V3 (rope_interleave=False)": lambda: _build_deepseek_v3(False),
}

#: What each model's transformers code does, as the notebooks say (notebook 06 §5, notebook 09 §1,
#: notebook 10 §1). "interleaved, output de-interleaved": pairs (x_2i, x_2i+1) rotated, the result
#: written back in the half layout (first members, then second members).
EXPECTED_LAYOUT = {
    "Llama": "half",
    "Mistral": "half",
    "Qwen2": "half",
    "GPT-NeoX": "half",
    "Gemma 3": "half",
    "Phi-3": "half",
    "GPT-J": "interleaved",
    "CodeGen": "interleaved",
    "RoFormer": "interleaved",
    "Llama 4": "interleaved",
    "DeepSeek-V3 (rope_interleave=True)": "interleaved, output de-interleaved",
    "DeepSeek-V3 (rope_interleave=False)": "half",
}


def _deinterleave(x, r):
    """``[x_0, x_2, ..., x_(r-2), x_1, x_3, ..., x_(r-1), x_r, ...]``: first members of the pairs, then seconds."""
    return torch.cat((x[..., 0:r:2], x[..., 1:r:2], x[..., r:]), dim=-1)


def _layouts_matching(rotate, d, r):
    """The helpers layouts whose rotation equals ``rotate`` on random vectors, as a list."""
    x = _randn(1, 2, POSITIONS.numel(), d, seed=1)  # (1, H, T, d)
    got = rotate(x, POSITIONS)
    cos, sin = helpers.rope_cos_sin(POSITIONS, r, BASE)  # (T, r/2), float32
    candidates = {
        "half": helpers.apply_rope(x, cos, sin, layout="half", rotary_dim=r),
        "interleaved": helpers.apply_rope(x, cos, sin, layout="interleaved", rotary_dim=r),
        "interleaved, output de-interleaved": _deinterleave(
            helpers.apply_rope(x, cos, sin, layout="interleaved", rotary_dim=r), r
        ),
    }
    assert got.shape == x.shape
    return [name for name, want in candidates.items() if torch.allclose(got, want, rtol=0, atol=ATOL)]


@pytest.mark.parametrize("model", list(BUILDERS))
def test_rope_pair_layout_of_each_model_in_transformers(model):
    """transformers rotates (x_j, x_(j+r/2)) with rotate_half in Llama, Mistral, Qwen2, GPT-NeoX,
    Gemma 3 and Phi-3, neighbours (x_2j, x_2j+1) in GPT-J and CodeGen (rotate_every_two), RoFormer and
    Llama 4 (complex multiplication), and in DeepSeek-V3 with rope_interleave neighbours whose result
    it writes back in the half layout.

    The model's own tables and apply function are compared with ``helpers.apply_rope`` in each
    layout on random vectors at positions 3..11; exactly one layout must match (partial rotation
    included: GPT-NeoX and Phi-3 rotate half of each head here, and the rest must pass through).
    """
    rotate, d, r = BUILDERS[model]()
    assert _layouts_matching(rotate, d, r) == [EXPECTED_LAYOUT[model]]


def test_deepseek_v3_reads_interleaved_checkpoints_by_default():
    """DeepSeek-V3's config defaults to rope_interleave=True, so its attention takes the interleaved
    branch; the pairs it rotates are those of DeepSeek's own interleaved code, so scores q·k are
    exactly those of the interleaved layout (the output permutation is the same for q and k)."""
    mod = _modeling("deepseek_v3")
    assert transformers.DeepseekV3Config().rope_interleave is True
    rotate, d, r = _build_deepseek_v3(True)
    q, k = _randn(1, 2, POSITIONS.numel(), d, seed=2), _randn(1, 2, POSITIONS.numel(), d, seed=3)
    cos, sin = helpers.rope_cos_sin(POSITIONS, r, BASE)
    want = helpers.apply_rope(q, cos, sin, layout="interleaved") @ helpers.apply_rope(
        k, cos, sin, layout="interleaved"
    ).transpose(-2, -1)  # (1, H, T, T) scores
    torch.testing.assert_close(rotate(q, POSITIONS) @ rotate(k, POSITIONS).transpose(-2, -1), want, rtol=0, atol=1e-4)
    assert "rope_interleave" in inspect.getsource(mod.DeepseekV3Attention.forward)  # the branch exists


# Data file entries: which transformers code reads the model, and how the maker's layout reaches it.
# "same": transformers' code uses the maker's layout. "permuted weights": the maker's code is
# interleaved, transformers' is rotate_half, and checkpoints are converted by permuting the rows of
# W_q and W_k head by head. "rope_interleave": transformers' DeepSeek-V3 code rotates interleaved pairs.
DATA_FILE_MODELS = {
    "gpt_neox_20b": ("GPT-NeoX", "same"),
    "llama2_7b": ("Llama", "permuted weights"),
    "code_llama_7b": ("Llama", "permuted weights"),
    "llama3_8b": ("Llama", "permuted weights"),
    "llama3_1_8b": ("Llama", "permuted weights"),
    "mistral_7b_v0_1": ("Mistral", "permuted weights"),
    "qwen2_5_7b_instruct": ("Qwen2", "same"),
    "gemma3_4b": ("Gemma 3", "same"),
    "deepseek_v3": ("DeepSeek-V3 (rope_interleave=True)", "rope_interleave"),
    "llama4_scout": ("Llama 4", "same"),
}


def _interleaved_to_half_rows(weight, n_heads):
    """transformers' own permutation of Q/K rows from the interleaved layout to rotate_half's.

    It is the GGUF loader's (GGUF files keep Meta's interleaved rows; transformers permutes them back
    for its Llama code when it loads one): the conversion scripts are not in the installed package,
    this permutation is.
    """
    gguf = importlib.import_module("transformers.modeling_gguf_pytorch_utils")
    processor = gguf.TENSOR_PROCESSORS["llama"](config={"num_attention_heads": n_heads, "num_key_value_heads": n_heads})
    out = processor.process(weight.numpy(), "blk.0.attn_q.weight")
    return torch.from_numpy(out.weights)


@pytest.mark.parametrize("key", sorted(DATA_FILE_MODELS))
def test_data_file_pair_layouts_agree_with_transformers(key):
    """Every pair_layout in helpers/data/rope_models.json (the maker's code) reaches transformers' code of that
    model either unchanged or through the conversion the note says: rows of W_q and W_k permuted for
    the Llama family and Mistral, rope_interleave for DeepSeek-V3.

    For a permuted model, a toy layer (9 random tokens of width 32, 2 heads of width 16) scored with
    the maker's interleaved RoPE on the original rows of W_q and W_k must score the same with the
    model's transformers code on the rows permuted by transformers' own permutation (and differ by
    more than 1 without it).
    """
    entries = helpers.rope_models()
    assert set(DATA_FILE_MODELS) >= {k for k, m in entries.items() if "pair_layout" in m}, (
        "a new entry with a pair_layout: add it to DATA_FILE_MODELS"
    )
    family, relation = DATA_FILE_MODELS[key]
    layout = entries[key]["pair_layout"]
    rotate, d, r = BUILDERS[family]()
    found = _layouts_matching(rotate, d, r)
    if relation == "same":
        assert found == [layout]
        return
    assert layout == "interleaved"
    if relation == "rope_interleave":
        assert found == ["interleaved, output de-interleaved"]
        assert transformers.DeepseekV3Config().rope_interleave is True
        return
    assert found == ["half"]
    n_heads, width = 2, 32
    w_q, w_k = _randn(n_heads * d, width, seed=4), _randn(n_heads * d, width, seed=5)  # Meta's rows
    tokens = _randn(POSITIONS.numel(), width, seed=6)  # (T, width)

    def heads(w):
        return (tokens @ w.T).view(POSITIONS.numel(), n_heads, d).transpose(0, 1)[None]  # (1, H, T, d)

    cos, sin = helpers.rope_cos_sin(POSITIONS, d, BASE)
    meta = helpers.apply_rope(heads(w_q), cos, sin, layout="interleaved") @ helpers.apply_rope(
        heads(w_k), cos, sin, layout="interleaved"
    ).transpose(-2, -1)
    permuted = [_interleaved_to_half_rows(w, n_heads) for w in (w_q, w_k)]
    converted = rotate(heads(permuted[0]), POSITIONS) @ rotate(heads(permuted[1]), POSITIONS).transpose(-2, -1)
    unconverted = rotate(heads(w_q), POSITIONS) @ rotate(heads(w_k), POSITIONS).transpose(-2, -1)
    torch.testing.assert_close(converted, meta, rtol=0, atol=1e-3)
    assert (unconverted - meta).abs().max() > 1.0


# ---------------------------------------------------------------------------------------------
# 2. T5: no 1/sqrt(d).


def _tiny_t5_config(**extra):
    return transformers.T5Config(
        vocab_size=32, d_model=32, d_kv=16, d_ff=32, num_heads=2, num_layers=1, dropout_rate=0.0, **extra
    )


def test_t5_attention_does_not_divide_scores_by_sqrt_d():
    """T5Attention computes softmax(q kᵀ + b) v, with its relative bias b and no 1/sqrt(d_kv).

    A tiny T5 self-attention layer with relative buckets is run; its output is rebuilt from its own
    projections and the bias it returns, once without the scale and once with ``1/sqrt(d_kv)``.
    """
    mod = _modeling("t5")
    config = _tiny_t5_config()
    layer = mod.T5Attention(config, has_relative_attention_bias=True).eval()
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)  # scores of order 10, far from a uniform softmax
        x = torch.randn(1, 6, config.d_model, generator=g)  # (B, T, d_model)
        out = layer(x)
        got, bias = out[0], out[1]  # (B, T, d_model), (1, H, T, T)

        def split(t):
            return t.view(1, 6, config.num_heads, config.d_kv).transpose(1, 2)  # (B, H, T, d_kv)

        q, k, v = split(layer.q(x)), split(layer.k(x)), split(layer.v(x))

        def rebuilt(scale):
            weights = torch.softmax(q @ k.transpose(-2, -1) * scale + bias, dim=-1)
            return layer.o((weights @ v).transpose(1, 2).reshape(1, 6, -1))

        unscaled, scaled = rebuilt(1.0), rebuilt(config.d_kv**-0.5)
    assert bias.abs().max() > 0  # the relative bias is there and was added
    torch.testing.assert_close(got, unscaled, rtol=1e-4, atol=1e-5)
    assert (got - scaled).abs().max() > 1e-2


def test_t5_puts_the_missing_scale_into_the_initialisation_of_w_q():
    """transformers initialises T5's W_Q with standard deviation factor·(d_model·d_kv)^(-1/2) and W_K with
    factor·d_model^(-1/2): the ratio of the two is the 1/sqrt(d_kv) its attention leaves out (notebook 07).

    Measured on a freshly initialised tiny encoder (d_model = 64, d_kv = 64, 4 heads: 16,384 weights
    each), the ratio of the empirical standard deviations lies within 5% of 1/sqrt(d_kv) = 0.125.
    """
    torch.manual_seed(8)
    config = transformers.T5Config(vocab_size=32, d_model=64, d_kv=64, d_ff=32, num_heads=4, num_layers=1)
    model = transformers.T5EncoderModel(config)
    attention = model.encoder.block[0].layer[0].SelfAttention
    ratio = attention.q.weight.std().item() / attention.k.weight.std().item()
    assert ratio == pytest.approx(config.d_kv**-0.5, rel=0.05)
    assert attention.k.weight.std().item() == pytest.approx(config.initializer_factor * config.d_model**-0.5, rel=0.05)


# ---------------------------------------------------------------------------------------------
# 3. ALiBi in BLOOM and MPT.

HEAD_COUNTS = [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 56, 64, 71, 112]


@pytest.mark.parametrize("n_heads", HEAD_COUNTS)
def test_bloom_builds_the_reference_slopes_as_a_key_row(n_heads):
    """BLOOM's build_alibi_tensor is the row m_h·j of the reference code, with helpers' slopes for every
    head count, power of two or not (checked for the counts listed, 1 to 112; BLOOM-176B has 112)."""
    mod = _modeling("bloom")
    n_keys = 9
    mask = torch.ones(2, n_keys, dtype=torch.long)  # (batch, keys): no padding
    got = mod.build_alibi_tensor(mask, n_heads, torch.float32)  # (batch * H, 1, Tk)
    want = helpers.alibi_key_bias(n_heads, n_keys)  # (H, 1, Tk), float32
    torch.testing.assert_close(got.view(2, n_heads, 1, n_keys), want.expand(2, -1, -1, -1), rtol=1e-6, atol=0)


@pytest.mark.parametrize("n_heads", HEAD_COUNTS)
def test_mpt_builds_the_reference_slopes_anchored_at_the_newest_key(n_heads):
    """MPT's build_mpt_alibi_tensor (MosaicML's gen_slopes and build_alibi_bias) is m_h·(j − (Tk − 1)),
    helpers.alibi_bias's last row, with helpers' slopes for every head count listed, power of two or not."""
    mod = _modeling("mpt")
    n_keys = 9
    got = mod.build_mpt_alibi_tensor(n_heads, n_keys)  # (H, 1, Tk)
    want = helpers.alibi_bias(n_heads, 1, n_keys)  # (H, 1, Tk): -m_h (Tk - 1 - j)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=0)


def _bias_seen_by_attention(model, attention_modules, name):
    """Run ``model`` on 5 tokens and return the ALiBi tensor its first attention layer received."""
    seen = []

    def hook(_module, args, kwargs):
        # By keyword, else by position: BloomAttention(hidden_states, residual, alibi, ...),
        # MptAttention(hidden_states, position_bias, ...).
        seen.append(kwargs[name] if name in kwargs else args[2 if name == "alibi" else 1])

    handle = attention_modules[0].register_forward_pre_hook(hook, with_kwargs=True)
    try:
        with torch.no_grad():
            model(input_ids=torch.arange(5)[None])
    finally:
        handle.remove()
    return seen[0]


def test_alibi_dtype_in_a_bfloat16_model_bloom_casts_mpt_keeps_float32():
    """Run in bfloat16, BLOOM hands its attention the ALiBi row cast to bfloat16, while MPT's bias stays
    float32 (the bias is built in float32 and added to the bfloat16 scores, which type promotion
    turns into float32 scores)."""
    bloom_mod, mpt_mod = _modeling("bloom"), _modeling("mpt")
    torch.manual_seed(9)
    bloom = transformers.BloomModel(transformers.BloomConfig(vocab_size=16, hidden_size=16, n_layer=1, n_head=4)).to(
        torch.bfloat16
    )
    mpt = transformers.MptModel(
        transformers.MptConfig(vocab_size=16, d_model=16, n_heads=4, n_layers=1, max_seq_len=16)
    ).to(torch.bfloat16)
    bloom_attention = [m for m in bloom.modules() if isinstance(m, bloom_mod.BloomAttention)]
    mpt_attention = [m for m in mpt.modules() if isinstance(m, mpt_mod.MptAttention)]
    bloom_bias = _bias_seen_by_attention(bloom, bloom_attention, "alibi")
    mpt_bias = _bias_seen_by_attention(mpt, mpt_attention, "position_bias")
    assert bloom_bias.dtype == torch.bfloat16
    assert mpt_bias.dtype == torch.float32
    # What promotion makes of a bfloat16 score plus MPT's float32 bias.
    assert (torch.zeros(2, dtype=torch.bfloat16) + mpt_bias.flatten()[:2]).dtype == torch.float32


# ---------------------------------------------------------------------------------------------
# 4. torch's SDPA: is_causal aligns top-left.


def test_sdpa_is_causal_aligns_top_left_and_helpers_aligns_bottom_right():
    """With fewer queries than keys, scaled_dot_product_attention(is_causal=True) lets query i see keys
    0..i (top-left), so a decode step against a cache needs an explicit mask; helpers.attention aligns
    bottom-right (query i sees keys 0..i + Tk − Tq), as flash_attn_func does.

    Checked for Tq = 1 (one decode step: is_causal lets the new token see only key 0) and Tq = 3,
    against 7 keys; with Tq = Tk the two agree.
    """
    g = torch.Generator().manual_seed(10)
    n_keys = 7
    k, v = torch.randn(1, 2, n_keys, 8, generator=g), torch.randn(1, 2, n_keys, 8, generator=g)  # (B, H, Tk, 8)
    for n_queries in (1, 3):
        q = torch.randn(1, 2, n_queries, 8, generator=g)  # (B, H, Tq, 8)
        top_left = torch.ones(n_queries, n_keys, dtype=torch.bool).tril()  # query i sees keys 0..i
        sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        torch.testing.assert_close(sdpa, F.scaled_dot_product_attention(q, k, v, attn_mask=top_left))
        ours, _ = helpers.attention(q, k, v, causal=True)
        bottom_right = helpers.causal_mask(n_queries, n_keys)
        torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, attn_mask=bottom_right))
        assert (ours - sdpa).abs().max() > 1e-2
        if n_queries == 1:  # one decode step: is_causal shows the new token key 0 alone
            torch.testing.assert_close(sdpa[..., 0, :], v[..., 0, :])
    q = torch.randn(1, 2, n_keys, 8, generator=g)
    torch.testing.assert_close(
        helpers.attention(q, k, v, causal=True)[0], F.scaled_dot_product_attention(q, k, v, is_causal=True)
    )


def test_torch_ships_a_bottom_right_causal_mask_that_matches_helpers():
    """torch.nn.attention.bias.causal_lower_right (notebook 00) aligns bottom-right: passed to
    scaled_dot_product_attention with fewer queries than keys, it gives helpers.attention's output."""
    from torch.nn.attention.bias import causal_lower_right

    g = torch.Generator().manual_seed(11)
    q, k, v = (
        torch.randn(1, 2, 3, 8, generator=g),
        torch.randn(1, 2, 7, 8, generator=g),
        torch.randn(1, 2, 7, 8, generator=g),
    )
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(3, 7))
    torch.testing.assert_close(sdpa, helpers.attention(q, k, v, causal=True)[0])
    assert (sdpa - F.scaled_dot_product_attention(q, k, v, is_causal=True)).abs().max() > 1e-2


def test_whisper_sinusoids_put_every_sine_before_every_cosine():
    """transformers' Whisper builds tensor2tensor's table (notebook 00): speeds 10000^(-i/(d/2 - 1)),
    every sine first, then every cosine, not the interleaved sin/cos of helpers.sinusoidal_pe."""
    whisper = _modeling("whisper")
    length, channels = 50, 16
    table = whisper.sinusoids(length, channels).double()  # (T, d)
    speeds = torch.exp(-math.log(10000.0) * torch.arange(channels // 2, dtype=torch.float64) / (channels // 2 - 1))
    angles = torch.arange(length, dtype=torch.float64)[:, None] * speeds[None, :]
    torch.testing.assert_close(table, torch.cat([angles.sin(), angles.cos()], dim=1), atol=1e-5, rtol=0)
    interleaved = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)
    assert (table - interleaved).abs().max() > 0.5


# ---------------------------------------------------------------------------------------------
# 5. The rotary forward under autocast.


def test_llama_rotary_forward_under_bfloat16_autocast_keeps_float32_angles():
    """In the installed version, LlamaRotaryEmbedding's forward under torch.autocast("cpu", bfloat16)
    forms its angles position × inv_freq in float32 (autocast does not reach them) and returns cos and
    sin in the dtype of its input x, not autocast's: float32 for a float32 x, bfloat16 for a bfloat16 x.

    How it keeps autocast out differs between versions of the range: some wrap a matmul
    ``inv_freq @ position_ids`` in ``autocast(enabled=False)`` ("Force float32"), others form the
    product elementwise, which autocast does not lower; the behaviour checked here is the same.
    At positions 4000..4063 (head width 64, base 10000) the tables equal, bit for bit, those computed
    without autocast, and lie within 1e-3 of the float64 tables; angles formed by a plain matmul
    under the same autocast come out in bfloat16 and off by radians.
    """
    mod = _modeling("llama")
    config = transformers.LlamaConfig(hidden_size=64, num_attention_heads=1, rope_theta=BASE)
    rotary = mod.LlamaRotaryEmbedding(config)
    positions = torch.arange(4000, 4064)[None]  # (1, T)
    x32 = torch.zeros(1, dtype=torch.float32)
    ref_cos, ref_sin = rotary(x32, positions)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cos32, sin32 = rotary(x32, positions)
        cos16, sin16 = rotary(x32.to(torch.bfloat16), positions)
        matmul_angles = rotary.inv_freq.float()[:, None] @ positions.float()  # (d/2, T), what autocast does to a matmul
    assert (cos32.dtype, sin32.dtype) == (torch.float32, torch.float32)
    assert (cos16.dtype, sin16.dtype) == (torch.bfloat16, torch.bfloat16)
    assert torch.equal(cos32, ref_cos) and torch.equal(sin32, ref_sin)
    assert torch.equal(cos16, ref_cos.to(torch.bfloat16)) and torch.equal(sin16, ref_sin.to(torch.bfloat16))
    exact_cos, exact_sin = helpers.rope_cos_sin(positions[0], 64, BASE, dtype=torch.float64)  # (T, 32)
    half = ref_cos.shape[-1] // 2
    assert (ref_cos[0, :, :half].double() - exact_cos).abs().max() < 1e-3
    assert (ref_sin[0, :, :half].double() - exact_sin).abs().max() < 1e-3
    assert matmul_angles.dtype == torch.bfloat16
    assert (matmul_angles.T.double().cos() - exact_cos).abs().max() > 0.5


# ---------------------------------------------------------------------------------------------
# 6. YaRN's attention factor.


def _yarn_config(cls="LlamaConfig", **rope):
    rope = {"rope_type": "yarn", "rope_theta": BASE, "original_max_position_embeddings": 256, **rope}
    return getattr(transformers, cls)(
        hidden_size=32,
        num_attention_heads=2,
        max_position_embeddings=int(256 * rope.get("factor", 1)),
        rope_parameters=rope,
    )


def test_yarn_attention_factor_multiplies_cos_and_sin():
    """transformers' YaRN init function returns (inv_freq, attention_factor), with helpers' speeds and
    factor, and the rotary module multiplies cos and sin by that factor (cos² + sin² = a² at every
    position), so a score q·k with both rotated carries a²."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    mod = _modeling("llama")
    config = _yarn_config(factor=8.0)
    inv_freq, factor = ROPE_INIT_FUNCTIONS["yarn"](config)
    want_freq, want_factor = helpers.rope_frequencies(
        16, BASE, scaling={"type": "yarn", "factor": 8.0, "original_max_len": 256}
    )
    torch.testing.assert_close(inv_freq.double(), want_freq, rtol=1e-6, atol=0)
    assert factor == pytest.approx(want_factor, rel=1e-12) and factor > 1.2
    rotary = mod.LlamaRotaryEmbedding(config)
    assert rotary.attention_scaling == pytest.approx(factor, rel=1e-12)
    cos, sin = rotary(torch.zeros(1), torch.arange(0, 300)[None])  # (1, T, d)
    torch.testing.assert_close(cos[0, 0], torch.full((16,), factor))  # position 0: a cos 0 = a
    torch.testing.assert_close(cos**2 + sin**2, torch.full_like(cos, factor**2), rtol=1e-5, atol=0)


def test_yarn_with_partial_rotary_scales_only_the_rotated_part():
    """With partial rotary (GPT-NeoX's code, YaRN, half of each head rotated), the attention factor
    scales only the rotated dimensions of q and k: the pass-through part is left exactly as it was,
    so only the rotated part of q·k is multiplied by a²."""
    mod = _modeling("gpt_neox")
    config = _yarn_config("GPTNeoXConfig", factor=8.0, partial_rotary_factor=0.5)
    rotary = mod.GPTNeoXRotaryEmbedding(config)
    factor = rotary.attention_scaling
    assert factor == pytest.approx(
        helpers.rope_frequencies(8, BASE, scaling={"type": "yarn", "factor": 8.0, "original_max_len": 256})[1]
    )
    x = _randn(1, 2, POSITIONS.numel(), 16, seed=11)  # (1, H, T, d = 16), r = 8
    cos, sin = rotary(x, POSITIONS[None])
    assert cos.shape[-1] == 8
    q, _ = mod.apply_rotary_pos_emb(x, x, cos, sin)
    assert torch.equal(q[..., 8:], x[..., 8:])  # the pass-through part: not scaled
    torch.testing.assert_close(q[..., :8].norm(dim=-1), factor * x[..., :8].norm(dim=-1))  # the rotated part: a times


YARN_MSCALES = [
    # (factor s, mscale, mscale_all_dim)
    (8.0, None, None),
    (40.0, 1.0, 1.0),  # DeepSeek-V3's published values: a = 1
    (16.0, 0.707, 1.0),
    (16.0, 1.0, 0.707),
    (8.0, 0.8, None),  # mscale alone is ignored: 0.1 ln s + 1
    (8.0, None, 1.0),
    (8.0, 1.0, 0.0),  # mscale_all_dim 0 counts as not given
    (1.0, 1.0, 2.0),  # s = 1: no factor
]


@pytest.mark.parametrize("s, mscale, mscale_all_dim", YARN_MSCALES)
def test_yarn_mscale_options_as_helpers_computes_them(s, mscale, mscale_all_dim):
    """transformers' YaRN attention factor is 0.1 ln s + 1, or, with mscale and mscale_all_dim both given
    and non-zero, the ratio (0.1·mscale·ln s + 1)/(0.1·mscale_all_dim·ln s + 1), as helpers computes it
    (checked for the combinations listed, s from 1 to 40)."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    extra = {key: value for key, value in (("mscale", mscale), ("mscale_all_dim", mscale_all_dim)) if value is not None}
    config = _yarn_config(factor=s, **extra)
    _, factor = ROPE_INIT_FUNCTIONS["yarn"](config)
    _, want = helpers.rope_frequencies(
        16, BASE, scaling={"type": "yarn", "factor": s, "original_max_len": 256, **extra}
    )
    assert factor == pytest.approx(want, rel=1e-12)


def test_deepseek_v3_moves_the_yarn_factor_into_the_softmax_scale():
    """With DeepSeek-V3's published YaRN settings (s = 40, mscale = mscale_all_dim = 1) transformers keeps
    its tables at factor 1 and multiplies the softmax scale 1/sqrt(d_qk) by the square of YaRN's factor
    0.1 ln s + 1, on every score, the part without position included."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    mod = _modeling("deepseek_v3")
    entry = helpers.rope_models()["deepseek_v3"]
    published = entry["config"]["rope_scaling"]
    assert (published["factor"], published["mscale"], published["mscale_all_dim"]) == (40, 1.0, 1.0)
    rope = {
        "rope_type": "yarn",
        "rope_theta": BASE,
        **{k: published[k] for k in ("factor", "original_max_position_embeddings", "mscale", "mscale_all_dim")},
    }
    config = transformers.DeepseekV3Config(
        hidden_size=32,
        num_attention_heads=2,
        qk_rope_head_dim=16,
        qk_nope_head_dim=8,
        v_head_dim=8,
        kv_lora_rank=16,
        q_lora_rank=16,
        max_position_embeddings=int(published["factor"] * published["original_max_position_embeddings"]),
        rope_parameters=rope,
    )
    _, table_factor = ROPE_INIT_FUNCTIONS["yarn"](config)
    assert table_factor == pytest.approx(1.0)
    plain_yarn = helpers.rope_frequencies(
        16,
        BASE,
        scaling={
            "type": "yarn",
            "factor": published["factor"],
            "original_max_len": published["original_max_position_embeddings"],
        },
    )[1]  # 0.1 ln s + 1
    attention = mod.DeepseekV3Attention(config, layer_idx=0)
    assert attention.scaling == pytest.approx((16 + 8) ** -0.5 * plain_yarn**2, rel=1e-12)


def test_llama4_config_switches_the_nope_temperature_on_by_default():
    """transformers' Llama 4 config turns on the NoPE layers' position temperature by default (Meta's own
    ``ModelArgs`` leaves it off), as notebook 09, section 4, says; the wrong claim: off in both."""
    config = transformers.Llama4TextConfig()
    assert config.attn_temperature_tuning
    assert config.floor_scale == 8192 and math.isclose(config.attn_scale, 0.1)
