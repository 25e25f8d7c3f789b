"""RoPE as real models configure it, in Hugging Face's spellings, checked against transformers' own code.

- Reading settings (no transformers needed): spellings old (``rope_scaling``, ``type``) and new
  (``rope_parameters``, ``rope_type``, ``rope_theta`` inside), keys nobody knows refused with their
  nearest known spelling, keys a type does not use ignored as transformers ignores them.
- Parity (needs transformers, a test dependency: configurations built in memory, no weights, no
  network; skipped without it): ``rope_from_config`` against transformers' ``ROPE_INIT_FUNCTIONS``
  for every type over a grid of settings, against its rotary module at run time (dynamic and
  longrope change with the sequence length), and ``apply_rope`` against ``apply_rotary_pos_emb``.
- Decoding with a cache: rotating each new token at its absolute position and attending over the
  cached keys is the full causal pass, step by step.

Each test names the bug it is there to catch.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

import helpers

# ---------------------------------------------------------------------------------------------
# Model configurations as config.json files write them (Llama, Qwen, DeepSeek, Phi-3, Llama 3.1).

LLAMA = {"hidden_size": 512, "num_attention_heads": 4, "max_position_embeddings": 16384}  # head_dim 128


def _factors(n, start, step):
    """A deterministic list of ``n`` longrope rescale factors, all different (Phi-3 style)."""
    return [round(start + step * i + 0.013 * (i % 5), 6) for i in range(n)]


PHI3 = {  # Phi-3-mini-128k: head_dim 96, factors per pair, L written at the top level
    "hidden_size": 3072,
    "num_attention_heads": 32,
    "max_position_embeddings": 131072,
    "original_max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "rope_scaling": {
        "type": "longrope",
        "short_factor": _factors(48, 1.0, 0.02),
        "long_factor": _factors(48, 1.1, 1.3),
    },
}

# (id, configuration class name, model config, seq_len)
CASES = [
    ("default-old", "LlamaConfig", {**LLAMA, "rope_theta": 10000.0}, None),
    (
        "default-new",
        "LlamaConfig",
        {**LLAMA, "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}},
        None,
    ),
    (
        "default-partial-new",
        "LlamaConfig",
        {**LLAMA, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}},
        None,
    ),
    ("default-partial-old", "LlamaConfig", {**LLAMA, "head_dim": 80, "partial_rotary_factor": 0.4}, None),
    ("linear-old", "LlamaConfig", {**LLAMA, "rope_scaling": {"type": "linear", "factor": 4.0}}, None),
    (
        "linear-new-partial",
        "LlamaConfig",
        {
            **LLAMA,
            "rope_parameters": {
                "rope_type": "linear",
                "factor": 2.0,
                "rope_theta": 1e6,
                "partial_rotary_factor": 0.5,
            },
        },
        None,
    ),
    ("dynamic-at-init", "LlamaConfig", {**LLAMA, "rope_scaling": {"type": "dynamic", "factor": 2.0}}, None),
    ("dynamic-at-L", "LlamaConfig", {**LLAMA, "rope_scaling": {"type": "dynamic", "factor": 2.0}}, 16384),
    ("dynamic-grown", "LlamaConfig", {**LLAMA, "rope_scaling": {"type": "dynamic", "factor": 2.0}}, 40000),
    (  # transformers' dynamic takes L from max_position_embeddings, not from the dict
        "dynamic-grown-original-ignored",
        "LlamaConfig",
        {**LLAMA, "rope_scaling": {"type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4096}},
        20000,
    ),
    (
        "dynamic-new-partial",
        "LlamaConfig",
        {
            **LLAMA,
            "rope_parameters": {"rope_type": "dynamic", "factor": 4.0, "rope_theta": 5e5, "partial_rotary_factor": 0.5},
        },
        65536,
    ),
    (
        "yarn-qwen",
        "LlamaConfig",
        {
            **LLAMA,
            "max_position_embeddings": 131072,
            "rope_theta": 1e6,
            "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
        },
        None,
    ),
    (
        "yarn-deepseek-v3",
        "LlamaConfig",
        {
            "hidden_size": 7168,
            "num_attention_heads": 128,
            "head_dim": 64,
            "max_position_embeddings": 163840,
            "rope_theta": 10000.0,
            "rope_scaling": {
                "type": "yarn",
                "factor": 40.0,
                "original_max_position_embeddings": 4096,
                "beta_fast": 32,
                "beta_slow": 1,
                "mscale": 1.0,
                "mscale_all_dim": 1.0,
            },
        },
        None,
    ),
    (
        "yarn-mscale-differs",
        "LlamaConfig",
        {
            **LLAMA,
            "rope_parameters": {
                "rope_type": "yarn",
                "factor": 16.0,
                "original_max_position_embeddings": 4096,
                "rope_theta": 10000.0,
                "mscale": 0.707,
                "mscale_all_dim": 1.0,
            },
        },
        None,
    ),
    (
        "yarn-mscale-alone",
        "LlamaConfig",
        {
            **LLAMA,
            "rope_scaling": {"type": "yarn", "factor": 8.0, "original_max_position_embeddings": 2048, "mscale": 0.8},
        },
        None,
    ),
    (
        "yarn-betas-no-truncate",
        "LlamaConfig",
        {
            **LLAMA,
            "rope_parameters": {
                "rope_type": "yarn",
                "factor": 8.0,
                "original_max_position_embeddings": 2048,
                "rope_theta": 5e5,
                "beta_fast": 16.0,
                "beta_slow": 2.0,
                "truncate": False,
            },
        },
        None,
    ),
    (
        "yarn-factor-derived",
        "LlamaConfig",
        {
            **LLAMA,
            "max_position_embeddings": 32768,
            "rope_parameters": {
                "rope_type": "yarn",
                "factor": None,
                "original_max_position_embeddings": 4096,
                "rope_theta": 10000.0,
            },
        },
        None,
    ),
    (
        "yarn-original-from-max-len",
        "LlamaConfig",
        {**LLAMA, "max_position_embeddings": 8192, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
        None,
    ),
    (
        "yarn-attention-factor-partial",
        "LlamaConfig",
        {
            **LLAMA,
            "partial_rotary_factor": 0.5,
            "rope_scaling": {
                "type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 4096,
                "attention_factor": 1.25,
            },
        },
        None,
    ),
    ("longrope-phi3-init", "Phi3Config", PHI3, None),
    ("longrope-phi3-at-L", "Phi3Config", PHI3, 4096),
    ("longrope-phi3-past-L", "Phi3Config", PHI3, 4097),
    ("longrope-phi3-long", "Phi3Config", PHI3, 131072),
    # The attention factor sqrt(1 + ln s / ln L) applies only for s > 1: s = 1.5, 1 and 0.5.
    ("longrope-factor-1.5", "Phi3Config", {**PHI3, "max_position_embeddings": 6144}, None),
    ("longrope-factor-1", "Phi3Config", {**PHI3, "max_position_embeddings": 4096}, None),
    ("longrope-factor-0.5", "Phi3Config", {**PHI3, "max_position_embeddings": 2048}, None),
    (
        "longrope-new-partial",
        "LlamaConfig",
        {
            **LLAMA,
            "max_position_embeddings": 65536,
            "rope_parameters": {
                "rope_type": "longrope",
                "rope_theta": 10000.0,
                "partial_rotary_factor": 0.5,
                "original_max_position_embeddings": 8192,
                "factor": 8.0,
                "attention_factor": 1.1,
                "short_factor": _factors(32, 1.0, 0.03),
                "long_factor": _factors(32, 1.0, 2.0),
            },
        },
        9000,
    ),
    (
        "llama3.1",
        "LlamaConfig",
        {
            **LLAMA,
            "max_position_embeddings": 131072,
            "rope_theta": 500000.0,
            "rope_scaling": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192,
            },
        },
        None,
    ),
    (
        "llama3-new-partial",
        "LlamaConfig",
        {
            **LLAMA,
            "max_position_embeddings": 131072,
            "rope_parameters": {
                "rope_type": "llama3",
                "factor": 32.0,
                "low_freq_factor": 2.0,
                "high_freq_factor": 8.0,
                "original_max_position_embeddings": 8192,
                "rope_theta": 500000.0,
                "partial_rotary_factor": 0.5,
            },
        },
        None,
    ),
]
CASE_IDS = [case[0] for case in CASES]

# Relative tolerances on inv_freq. transformers computes its speeds in float32 (``torch.float``); with
# that dtype made float64 (``_Float64Torch``) its own formulas agree with helpers' float64 to 1e-14
# (measured: 4e-16), except longrope, one line of which (``.float()``) stays float32. As shipped, in
# float32, within 1e-6 (measured: 3.2e-7, llama3). Attention factors (Python floats): 1e-12.
RTOL_FLOAT64 = {"longrope": 1e-6}
RTOL_FLOAT64_DEFAULT = 1e-14
RTOL_FLOAT32 = 1e-6


@pytest.fixture(scope="module")
def hf():
    """transformers' RoPE code: the init functions by type, the configuration classes, the modules."""
    pytest.importorskip("transformers", minversion="5.0")
    from transformers import LlamaConfig, Phi3Config, modeling_rope_utils
    from transformers.models.gpt_neox import modeling_gpt_neox

    return {
        "LlamaConfig": LlamaConfig,
        "Phi3Config": Phi3Config,
        "rope_utils": modeling_rope_utils,
        "gpt_neox": modeling_gpt_neox,
    }


class _Float64Torch:
    """``torch`` as transformers' RoPE code sees it, except that float32 (``torch.float``) is float64."""

    float = torch.float64
    float32 = torch.float64

    def __getattr__(self, name):
        return getattr(torch, name)


def _hf_init(hf, config, seq_len):
    """transformers' (inv_freq, attention_factor) for ``config``, as its rotary module computes them at init."""
    rope_type = config.rope_parameters["rope_type"]
    if rope_type == "default":  # per model; GPT-NeoX's reads partial_rotary_factor (Llama's ignores it)
        return hf["gpt_neox"].GPTNeoXRotaryEmbedding.compute_default_rope_parameters(config)
    return hf["rope_utils"].ROPE_INIT_FUNCTIONS[rope_type](config, "cpu", seq_len=seq_len)


@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_rope_from_config_matches_transformers(hf, monkeypatch, case, precision):
    """Bugs: mscale ignored; longrope's short and long factors chosen on the wrong side of L;
    partial_rotary_factor ignored; llama3's wavelength bounds swapped; dynamic's L taken from
    original_max_position_embeddings; YaRN's factor not derived when the config leaves it out."""
    _, cls, model, seq_len = case
    if precision == "float64":
        monkeypatch.setattr(hf["rope_utils"], "torch", _Float64Torch())
        monkeypatch.setattr(hf["gpt_neox"], "torch", _Float64Torch())
    config = hf[cls](**copy.deepcopy(model))
    want, want_factor = _hf_init(hf, config, seq_len)
    got, factor = helpers.rope_from_config(model, seq_len=seq_len)
    kind = config.rope_parameters["rope_type"]
    rtol = RTOL_FLOAT64.get(kind, RTOL_FLOAT64_DEFAULT) if precision == "float64" else RTOL_FLOAT32
    assert got.dtype == torch.float64 and got.shape == want.shape
    torch.testing.assert_close(got, want.double(), rtol=rtol, atol=0)
    assert factor == pytest.approx(float(want_factor), rel=1e-12, abs=0)
    # The configuration as transformers writes it back (both spellings of the type, rope_theta
    # inside rope_parameters) reads the same.
    again, again_factor = helpers.rope_from_config(config.to_dict(), seq_len=seq_len)
    torch.testing.assert_close(again, got, rtol=1e-15, atol=0)
    assert again_factor == factor


@pytest.mark.parametrize(
    "cls, model, lengths",
    [
        ("Phi3Config", PHI3, [100, 4096, 4097, 100, 131072]),
        ("LlamaConfig", {**LLAMA, "rope_scaling": {"type": "dynamic", "factor": 2.0}}, [100, 20000, 40000, 100]),
        ("LlamaConfig", CASES[CASE_IDS.index("yarn-deepseek-v3")][2], [10, 5000]),
    ],
    ids=["longrope", "dynamic", "yarn"],
)
def test_the_rotary_module_at_run_time_matches(hf, cls, model, lengths):
    """Bug: longrope's factors switched at the wrong length (transformers switches once the
    sequence, max(position) + 1, passes L); dynamic NTK grown from the wrong length.

    transformers' rotary module updates its speeds as it runs; at each length its speeds and its
    attention factor must be those of ``rope_from_config(config, seq_len=T)``.
    """
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = hf[cls](**copy.deepcopy(model))
    module = LlamaRotaryEmbedding(config)
    x = torch.zeros(1, 1, dtype=torch.float32)
    for length in lengths:
        cos, _ = module(x, torch.tensor([[0, length - 1]]))
        got, factor = helpers.rope_from_config(model, seq_len=length)
        torch.testing.assert_close(module.inv_freq.double(), got, rtol=RTOL_FLOAT32, atol=0, msg=f"T = {length}")
        assert module.attention_scaling == pytest.approx(factor, rel=1e-12)
        assert cos[0, 0, 0].item() == pytest.approx(factor, rel=1e-6)  # position 0: a cos 0 = a


def _random_qk(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype), torch.randn(
        shape, generator=g, dtype=torch.float64
    ).to(dtype)


@pytest.mark.parametrize("rotary_dim", [None, 16], ids=["llama-full", "neox-partial"])
def test_apply_rope_half_matches_apply_rotary_pos_emb(hf, rotary_dim):
    """Bug: the half layout pairing ``x_j`` with ``x_(j+1)`` (interleaved) or with the wrong sign,
    or the pass-through tail of a partial rotation rotated too.

    transformers' rotary modules return full-width tables ``cat(cos, cos)``, ``(batch, T, d)``;
    helpers' are half width. In float64 the two rotations agree to 1e-14.
    """
    from transformers.models.gpt_neox.modeling_gpt_neox import apply_rotary_pos_emb as neox_apply
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb as llama_apply

    d, t = 64, 17
    q, k = _random_qk((2, 3, t, d), torch.float64, seed=1)
    r = rotary_dim or d
    yarn = {"type": "yarn", "factor": 4.0, "original_max_len": 1024}
    cos, sin = helpers.rope_cos_sin(torch.arange(1000, 1000 + t), r, scaling=yarn, dtype=torch.float64)  # (T, r/2)
    full_cos, full_sin = torch.cat((cos, cos), dim=-1)[None], torch.cat((sin, sin), dim=-1)[None]  # (1, T, r)
    want_q, want_k = (neox_apply if rotary_dim else llama_apply)(q, k, full_cos, full_sin)
    for x, want in ((q, want_q), (k, want_k)):
        got = helpers.apply_rope(x, cos, sin, layout="half", rotary_dim=rotary_dim)
        torch.testing.assert_close(got, want, rtol=0, atol=1e-14)


def test_apply_rope_interleaved_matches_cohere(hf):
    """Bug: the interleaved layout pairing ``(x_j, x_(j + d/2))`` (half) instead of ``(x_2i, x_2i+1)``.

    Cohere's transformers code rotates interleaved pairs (tables repeated element-wise); it
    computes in float32, so the comparison is in float32, to 1e-6.
    """
    from transformers.models.cohere.modeling_cohere import apply_rotary_pos_emb as cohere_apply

    d, t = 32, 9
    q, k = _random_qk((2, 2, t, d), torch.float32, seed=2)
    cos, sin = helpers.rope_cos_sin(t, d, dtype=torch.float32)  # (T, d/2)
    rep_cos, rep_sin = cos.repeat_interleave(2, dim=-1)[None], sin.repeat_interleave(2, dim=-1)[None]  # (1, T, d)
    want_q, _ = cohere_apply(q, k, rep_cos, rep_sin)
    torch.testing.assert_close(helpers.apply_rope(q, cos, sin, layout="interleaved"), want_q, rtol=0, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# Reading settings, without transformers


def test_an_unknown_key_is_refused_with_its_nearest_spelling():
    """Bug: a misspelt key silently ignored (transformers only logs a warning), so the model runs
    with the default value."""
    scaling = {"rope_type": "yarn", "facotr": 4.0, "original_max_position_embeddings": 4096}
    with pytest.raises(ValueError, match="unknown key 'facotr'; did you mean 'factor'\\?"):
        helpers.rope_frequencies(64, scaling=scaling)
    with pytest.raises(ValueError, match="unknown key 'facotr'; did you mean 'factor'\\?"):
        helpers.rope_from_config({**LLAMA, "rope_scaling": scaling})
    with pytest.raises(ValueError, match="unknown key 'mscale_alldim'; did you mean 'mscale_all_dim'\\?"):
        helpers.rope_from_config({**LLAMA, "rope_parameters": {"rope_type": "yarn", "factor": 2.0, "mscale_alldim": 1}})
    with pytest.raises(ValueError, match="unknown key 'zzz'"):
        helpers.rope_frequencies(64, scaling={"type": "linear", "factor": 2.0, "zzz": 1})


def test_keys_a_type_does_not_use_are_ignored_as_transformers_does():
    """Bug: a real config refused because it carries a key its type does not read (rope_theta and
    partial_rotary_factor for every type, mrope_section, another type's options)."""
    plain = helpers.rope_frequencies(64, scaling={"type": "linear", "factor": 2.0})[0]
    extra = {"type": "linear", "factor": 2.0, "beta_fast": 32.0, "mrope_section": [8, 12, 12], "short_factor": [1.0]}
    got, factor = helpers.rope_frequencies(64, scaling=extra, unused_keys="ignore")
    torch.testing.assert_close(got, plain, rtol=0, atol=0)
    got, _ = helpers.rope_from_config({**LLAMA, "head_dim": 64, "rope_scaling": extra})
    torch.testing.assert_close(got, plain, rtol=0, atol=0)
    got, _ = helpers.rope_frequencies(64, scaling=extra)  # the default ignores them too
    torch.testing.assert_close(got, plain, rtol=0, atol=0)
    # Asked to, rope_frequencies refuses them (a check that a dict holds nothing unexpected).
    with pytest.raises(ValueError, match="beta_fast"):
        helpers.rope_frequencies(64, scaling=extra, unused_keys="error")
    with pytest.raises(ValueError, match="unused_keys"):
        helpers.rope_frequencies(64, scaling={"type": "linear", "factor": 2.0}, unused_keys="warn")


def test_default_and_rope_theta_inside_the_dict():
    """Bug: rope_theta inside rope_parameters (transformers 5's spelling) ignored for the base."""
    want = helpers.frequencies(64, 500000.0)
    for scaling in ({"rope_type": "default", "rope_theta": 500000.0}, {"type": "default", "rope_theta": 5e5}):
        got, factor = helpers.rope_frequencies(64, scaling=scaling)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        assert factor == 1.0
    torch.testing.assert_close(helpers.rope_frequencies(64, 5e5, scaling=scaling)[0], want, rtol=0, atol=0)
    with pytest.raises(ValueError, match="base.*10000.0.*rope_theta.*500000.0"):
        helpers.rope_frequencies(64, 10000.0, scaling=scaling)
    assert helpers.rope_frequencies(64)[0].equal(helpers.frequencies(64, 10000.0))  # the default base


def test_partial_rotary_factor_shortens_the_rotated_width():
    """Bug: partial_rotary_factor ignored: all d dimensions rotated at speeds base^(-2i/d) instead of
    the first r = int(d p) at base^(-2i/r)."""
    got, _ = helpers.rope_frequencies(80, scaling={"rope_type": "default", "partial_rotary_factor": 0.4})
    torch.testing.assert_close(got, helpers.frequencies(32), rtol=0, atol=0)
    cos, _ = helpers.rope_cos_sin(5, 80, scaling={"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 0.4})
    assert cos.shape == (5, 16)
    with pytest.raises(ValueError, match="partial_rotary_factor.*0.3.*64.*19"):
        helpers.rope_frequencies(64, scaling={"rope_type": "default", "partial_rotary_factor": 0.3})


def test_the_two_spellings_of_one_key_must_agree():
    """transformers writes both ``type`` and ``rope_type`` back; they may repeat, not contradict."""
    both = {"type": "linear", "rope_type": "linear", "factor": 2.0}
    torch.testing.assert_close(helpers.rope_frequencies(64, scaling=both)[0], helpers.frequencies(64) / 2.0)
    with pytest.raises(ValueError, match="'type'.*'rope_type'.*'linear'.*'yarn'"):
        helpers.rope_frequencies(64, scaling={**both, "rope_type": "yarn"})


def test_deepseek_mscale_by_hand():
    """Bug: mscale and mscale_all_dim ignored (attention factor 0.1 ln s + 1 whatever they say).

    transformers: a = (0.1 mscale ln s + 1) / (0.1 mscale_all_dim ln s + 1) when both are given and
    non-zero; otherwise 0.1 ln s + 1."""
    s = 40.0
    yarn = {"type": "yarn", "factor": s, "original_max_len": 4096}

    def factor(**extra):
        return helpers.rope_frequencies(64, scaling={**yarn, **extra})[1]

    assert factor(mscale=0.707, mscale_all_dim=1.0) == pytest.approx(
        (0.1 * 0.707 * math.log(s) + 1) / (0.1 * math.log(s) + 1), rel=1e-14
    )
    assert factor(mscale=1.0, mscale_all_dim=1.0) == 1.0  # DeepSeek-V3: the rest goes into the softmax scale
    assert factor(mscale=0.707) == pytest.approx(0.1 * math.log(s) + 1, rel=1e-14)  # alone: not used
    assert factor(mscale=0.707, mscale_all_dim=1.0, attention_factor=1.5) == 1.5  # given: wins


@pytest.mark.parametrize("seq_len, side", [(None, "short"), (1, "short"), (4096, "short"), (4097, "long")])
def test_longrope_picks_its_factors_by_the_sequence_length(seq_len, side):
    """Bug: long factors used at T = L (transformers uses them only once T > L), or short past L."""
    short, long = _factors(16, 1.0, 0.1), _factors(16, 2.0, 1.0)
    scaling = {"type": "longrope", "short_factor": short, "long_factor": long, "original_max_len": 4096, "factor": 8}
    got, factor = helpers.rope_frequencies(32, scaling={**scaling, "seq_len": seq_len})
    ext = torch.tensor(short if side == "short" else long, dtype=torch.float64)
    torch.testing.assert_close(got, helpers.frequencies(32) / ext, rtol=1e-15, atol=0)
    assert factor == pytest.approx(math.sqrt(1 + math.log(8) / math.log(4096)), rel=1e-15)


def test_llama3_keeps_fast_pairs_and_slows_slow_ones():
    """Bug: llama3's wavelength bounds swapped (L/high_freq_factor and L/low_freq_factor exchanged):
    then the pairs between the bounds are divided by s instead of blended."""
    theta = helpers.frequencies(128, 500000.0)
    got, _ = helpers.rope_frequencies(
        128, 500000.0, scaling={"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}
    )
    wavelength = 2 * math.pi / theta
    fast, slow = wavelength < 8192 / 4, wavelength > 8192
    assert fast.sum() > 0 and slow.sum() > 0
    torch.testing.assert_close(got[fast], theta[fast], rtol=0, atol=0)
    torch.testing.assert_close(got[slow], theta[slow] / 8.0, rtol=0, atol=0)
    middle = ~fast & ~slow  # L/4 <= wavelength <= L: strictly between θ_i / s and θ_i
    assert middle.sum() > 0
    assert bool((got[middle] < theta[middle]).all()) and bool((got[middle] > theta[middle] / 8.0).all())


def test_rope_settings_from_config_spell_out_every_derived_value():
    """What a config means in helpers' own spelling: the head width, the base and an explicit
    scaling dict with every value transformers derives (here L and YaRN's factor)."""
    model = {**LLAMA, "max_position_embeddings": 32768, "rope_theta": 5e5, "partial_rotary_factor": 0.5}
    model["rope_scaling"] = {"type": "yarn", "original_max_position_embeddings": 4096, "factor": None}
    d, base, scaling = helpers.rope_settings_from_config(model)
    assert (d, base) == (128, 5e5)
    assert scaling == {"type": "yarn", "factor": 8.0, "original_max_len": 4096, "partial_rotary_factor": 0.5}
    assert helpers.rope_settings_from_config({**LLAMA, "rope_theta": 1e4}) == (128, 1e4, None)
    assert helpers.rope_settings_from_config({**LLAMA, "rope_theta": 1e4}, head_dim=64)[0] == 64
    dynamic = helpers.rope_settings_from_config(
        {**LLAMA, "rope_scaling": {"type": "dynamic", "factor": 2.0}}, seq_len=9
    )
    assert dynamic[2] == {"type": "dynamic", "factor": 2.0, "original_max_len": 16384, "seq_len": 9}


BAD_CONFIGS = [
    # (call, error type, words the message must contain)
    (lambda: helpers.rope_from_config("llama"), TypeError, ["config", "dict", "str", "to_dict"]),
    (lambda: helpers.rope_from_config({"num_attention_heads": 4}), ValueError, ["hidden_size", "head_dim"]),
    (lambda: helpers.rope_from_config({**LLAMA, "head_dim": 0}), ValueError, ["head_dim", "0"]),
    (lambda: helpers.rope_from_config(LLAMA, head_dim=7), ValueError, ["head_dim", "7", "even"]),
    (lambda: helpers.rope_from_config({**LLAMA, "rope_scaling": "yarn"}), TypeError, ["rope_scaling", "dict", "str"]),
    (lambda: helpers.rope_from_config({**LLAMA, "rope_theta": 0.5}), ValueError, ["rope_theta", "0.5", "> 1"]),
    (
        lambda: helpers.rope_from_config(
            {**LLAMA, "rope_parameters": {"full_attention": {"rope_type": "default"}, "sliding_attention": {}}}
        ),
        ValueError,
        ["rope_parameters", "layer", "full_attention"],
    ),
    (
        lambda: helpers.rope_from_config(
            {**LLAMA, "rope_scaling": {"type": "linear", "factor": 2.0}, "rope_parameters": {"rope_type": "yarn"}}
        ),
        ValueError,
        ["rope_scaling", "rope_parameters", "linear", "yarn"],
    ),
    (
        lambda: helpers.rope_from_config({**LLAMA, "rope_scaling": {"type": "dynamic", "factor": 2.0}}, seq_len=0),
        ValueError,
        ["seq_len", "0"],
    ),
    (
        lambda: helpers.rope_from_config(
            {"hidden_size": 512, "num_attention_heads": 4, "rope_scaling": {"type": "yarn"}}
        ),
        ValueError,
        ["max_position_embeddings", "yarn"],
    ),
    (
        lambda: helpers.rope_frequencies(
            32,
            scaling={
                "type": "longrope",
                "short_factor": [1.0] * 15,
                "long_factor": [1.0] * 16,
                "original_max_len": 8,
                "factor": 2,
            },
        ),
        ValueError,
        ["short_factor", "16", "15"],
    ),
    (
        lambda: helpers.rope_frequencies(
            32,
            scaling={
                "type": "longrope",
                "short_factor": 1.0,
                "long_factor": [1.0] * 16,
                "original_max_len": 8,
                "factor": 2,
            },
        ),
        TypeError,
        ["short_factor", "list", "float"],
    ),
    (
        lambda: helpers.rope_frequencies(
            32,
            scaling={"type": "longrope", "short_factor": [1.0] * 16, "long_factor": [1.0] * 16, "original_max_len": 8},
        ),
        ValueError,
        ["factor", "attention_factor", "longrope"],
    ),
    (
        lambda: helpers.rope_frequencies(
            32, scaling={"type": "yarn", "factor": 2, "original_max_len": 8, "mscale": -1}
        ),
        ValueError,
        ["mscale", "-1", ">= 0"],
    ),
    (
        lambda: helpers.rope_frequencies(
            32, scaling={"type": "yarn", "factor": 2, "original_max_len": 8, "truncate": 1}
        ),
        TypeError,
        ["truncate", "bool", "1"],
    ),
    (
        lambda: helpers.rope_frequencies(32, scaling={"type": "default", "partial_rotary_factor": 1.5}),
        ValueError,
        ["partial_rotary_factor", "1.5", "(0, 1]"],
    ),
    (
        lambda: helpers.rope_frequencies(32, scaling={"type": "linear", "factor": 2.0, 3: 1}),
        TypeError,
        ["scaling", "3"],
    ),
]


@pytest.mark.parametrize("call,error,words", BAD_CONFIGS, ids=[f"case{k}" for k in range(len(BAD_CONFIGS))])
def test_bad_settings_are_named_in_the_message(call, error, words):
    with pytest.raises(error) as caught:
        call()
    message = str(caught.value)
    for word in words:
        assert word in message, f"{word!r} missing from {message!r}"


# ---------------------------------------------------------------------------------------------
# Decoding with a cache

DECODE_MODEL = {
    "hidden_size": 48,
    "num_attention_heads": 3,
    "max_position_embeddings": 64,
    "rope_theta": 100.0,
    "partial_rotary_factor": 0.5,
    "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
}


@pytest.mark.parametrize("layout", helpers.LAYOUTS)
@pytest.mark.parametrize("model", [{**LLAMA, "head_dim": 16, "rope_theta": 100.0}, DECODE_MODEL], ids=["plain", "yarn"])
def test_decoding_with_a_cache_is_the_full_causal_pass(layout, model):
    """Bug: a new token rotated at its index within the step (0) instead of its absolute position
    ``offset``, or apply_rope's int offset ignored.

    Prefill 5 tokens, then decode 7 one at a time: each new query and key is rotated at its absolute
    position (``positions=t``, an int offset into tables built once), its key and value are appended
    to the cache, and the query attends over the whole cache. Each step's output equals the full
    causal pass's row within 1e-12 (float64), and the cached keys are the full pass's rotated keys.
    """
    d, base, scaling = helpers.rope_settings_from_config(model)
    b, h, t, prefill = 2, 3, 12, 5
    cos, sin = helpers.rope_cos_sin(t, d, base, scaling=scaling, dtype=torch.float64)  # (T, r/2), built once
    r = 2 * cos.shape[1]
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(b, h, t, d, generator=g, dtype=torch.float64) for _ in range(3))

    def rotate(x, offset):
        return helpers.apply_rope(x, cos, sin, layout=layout, positions=offset, rotary_dim=r)

    full, _ = helpers.attention(rotate(q, 0), rotate(k, 0), v, causal=True)  # (B, H, T, d)
    k_cache, v_cache = rotate(k[..., :prefill, :], 0), v[..., :prefill, :]
    out, _ = helpers.attention(rotate(q[..., :prefill, :], 0), k_cache, v_cache, causal=True)
    torch.testing.assert_close(out, full[..., :prefill, :], rtol=0, atol=1e-12)
    for step in range(prefill, t):
        new = slice(step, step + 1)
        k_cache = torch.cat((k_cache, rotate(k[..., new, :], step)), dim=-2)  # (B, H, step+1, d)
        v_cache = torch.cat((v_cache, v[..., new, :]), dim=-2)
        out, _ = helpers.attention(rotate(q[..., new, :], step), k_cache, v_cache, causal=True)  # (B, H, 1, d)
        torch.testing.assert_close(out, full[..., new, :], rtol=0, atol=1e-12, msg=f"step {step}")
    torch.testing.assert_close(k_cache, rotate(k, 0), rtol=0, atol=1e-15)
    # The mistake the test guards against is visible: the last token rotated at 0 attends differently.
    wrong_cache = torch.cat((k_cache[..., :-1, :], rotate(k[..., -1:, :], 0)), dim=-2)
    wrong, _ = helpers.attention(rotate(q[..., -1:, :], 0), wrong_cache, v_cache, causal=True)
    assert (wrong - full[..., -1:, :]).abs().max() > 1e-3
