"""The RoPE of real models (``helpers/data/rope_models.json``, ``helpers.rope_models``).

- Every entry is read by ``helpers`` and its speeds and attention factor are transformers' own,
  computed by the model's own configuration class and RoPE code (no weights, no network), for the
  shipped config, the recommended scaling (Qwen2.5) and Gemma 3's local layers.
- The sourced values themselves: spot checks that catch a typo in the data file.
- Bad input: an unknown key, ``local=True`` or ``recommended=True`` where the model has no such
  thing, a broken data file, each refused with a message naming it.

Each test names the bug it is there to catch.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import math
import re

import pytest
import torch

import helpers

# The module (``helpers.rope_models`` is the function, as ``helpers.attention`` is).
rope_models_module = importlib.import_module("helpers.model_catalog")

MODELS = helpers.rope_models()
KEYS = sorted(MODELS)

# (transformers configuration class, its module, the rotary-embedding class in the modelling module)
HF_CLASSES = {
    "gpt_neox_20b": ("GPTNeoXConfig", "gpt_neox", "GPTNeoXRotaryEmbedding"),
    "llama2_7b": ("LlamaConfig", "llama", "LlamaRotaryEmbedding"),
    "code_llama_7b": ("LlamaConfig", "llama", "LlamaRotaryEmbedding"),
    "llama3_8b": ("LlamaConfig", "llama", "LlamaRotaryEmbedding"),
    "llama3_1_8b": ("LlamaConfig", "llama", "LlamaRotaryEmbedding"),
    "mistral_7b_v0_1": ("MistralConfig", "mistral", "MistralRotaryEmbedding"),
    "qwen2_5_7b_instruct": ("Qwen2Config", "qwen2", "Qwen2RotaryEmbedding"),
    "gemma3_4b": ("Gemma3TextConfig", "gemma3", "Gemma3RotaryEmbedding"),
    "deepseek_v3": ("DeepseekV3Config", "deepseek_v3", "DeepseekV3RotaryEmbedding"),
    "llama4_scout": ("Llama4TextConfig", "llama4", "Llama4TextRotaryEmbedding"),
}

# (key, local, recommended): every RoPE the table describes.
VARIANTS = [(key, False, False) for key in KEYS]
VARIANTS += [(key, True, False) for key in KEYS if "rope_local_base_freq" in MODELS[key]["config"]]
VARIANTS += [(key, False, True) for key in KEYS if "recommended_rope_scaling" in MODELS[key]]
VARIANT_IDS = [key + ("-local" if local else "") + ("-recommended" if rec else "") for key, local, rec in VARIANTS]


class _Float64Torch:
    """``torch`` as transformers' RoPE code sees it, except that float32 (``torch.float``) is float64."""

    float = torch.float64
    float32 = torch.float64

    def __getattr__(self, name):
        return getattr(torch, name)


def test_the_table_has_every_wanted_family_in_order():
    """Bug: a model dropped or renamed (notebook 09 refers to these keys)."""
    assert len(MODELS) >= 10
    for key in ("gpt_neox_20b", "llama3_1_8b", "qwen2_5_7b_instruct", "gemma3_4b", "deepseek_v3", "llama4_scout"):
        assert key in MODELS
    for entry in MODELS.values():
        assert entry["sources"] and all(source["where"] for source in entry["sources"])
        assert 2019 <= entry["year"] <= 2026


@pytest.mark.parametrize("key, local, recommended", VARIANTS, ids=VARIANT_IDS)
def test_every_rope_in_the_table_matches_transformers(monkeypatch, key, local, recommended):
    """Bugs: a config spelling misread (GPT-NeoX's rotary_pct / rotary_emb_base, DeepSeek's
    qk_rope_head_dim, Gemma 3's rope_local_base_freq), mscale dropped, Llama 4's equal llama3
    factors refused or blended, the recommended scaling not applied.

    The model's own transformers configuration class reads the same config; its RoPE code, made
    float64, gives the speeds to 1e-12 and the attention factor to 1e-12.
    """
    transformers = pytest.importorskip("transformers", minversion="5.0")
    from transformers import modeling_rope_utils

    cls_name, module_name, rotary_name = HF_CLASSES[key]
    modeling = importlib.import_module(f"transformers.models.{module_name}.modeling_{module_name}")
    monkeypatch.setattr(modeling_rope_utils, "torch", _Float64Torch())
    monkeypatch.setattr(modeling, "torch", _Float64Torch())
    entry = MODELS[key]
    config_dict = copy.deepcopy(entry["config"])
    if recommended:
        config_dict["rope_scaling"] = copy.deepcopy(entry["recommended_rope_scaling"])
    config = getattr(transformers, cls_name)(**config_dict)
    layer_type = None
    if isinstance(config.rope_parameters.get("full_attention"), dict):  # Gemma 3: one RoPE per layer type
        layer_type = "sliding_attention" if local else "full_attention"
    parameters = config.rope_parameters[layer_type] if layer_type else config.rope_parameters
    rope_type = parameters["rope_type"]
    kwargs = {"layer_type": layer_type} if layer_type else {}
    if rope_type == "default":
        want, want_factor = getattr(modeling, rotary_name).compute_default_rope_parameters(
            config, device="cpu", **kwargs
        )
    else:
        want, want_factor = modeling_rope_utils.ROPE_INIT_FUNCTIONS[rope_type](config, "cpu", seq_len=None, **kwargs)

    got = helpers.model_rope(key, local=local, recommended=recommended)
    assert got.inv_freq.dtype == torch.float64 and got.inv_freq.shape == want.shape
    torch.testing.assert_close(got.inv_freq, want.double(), rtol=1e-12, atol=0)
    assert got.attention_factor == pytest.approx(float(want_factor), rel=1e-12, abs=0)
    assert got.rotated_dim == 2 * want.shape[0]


def test_rotated_widths_and_bases_as_the_makers_publish_them():
    """Bugs: GPT-NeoX's rotary_pct ignored (96 rotated instead of 24); DeepSeek rotating
    hidden_size // heads = 56 instead of its 64-wide RoPE part; Gemma's local base taken as global."""
    neox = helpers.model_rope("gpt_neox_20b")
    assert (neox.head_dim, neox.rotated_dim, neox.base) == (96, 24, 10000.0)
    torch.testing.assert_close(neox.inv_freq, helpers.frequencies(24, 10000.0), rtol=0, atol=0)
    deepseek = helpers.model_rope("deepseek_v3")
    assert deepseek.rotated_dim == MODELS["deepseek_v3"]["config"]["qk_rope_head_dim"] == 64
    assert MODELS["deepseek_v3"]["config"]["qk_nope_head_dim"] == 128
    gemma_global, gemma_local = helpers.model_rope("gemma3_4b"), helpers.model_rope("gemma3_4b", local=True)
    assert (gemma_global.base, gemma_local.base) == (1e6, 1e4)
    assert gemma_local.scaling is None and gemma_global.scaling == {"type": "linear", "factor": 8.0}
    torch.testing.assert_close(gemma_global.inv_freq, gemma_global.unscaled_inv_freq / 8.0, rtol=1e-15, atol=0)
    torch.testing.assert_close(gemma_local.inv_freq, helpers.frequencies(256, 10000.0), rtol=0, atol=0)


def test_the_sourced_values_spot_checks():
    """Bugs: a typo in the data file (a factor, a base, a missing llama3 key, a context that no
    longer equals factor * original where the maker says so)."""
    for key in ("llama3_1_8b", "llama4_scout"):
        scaling = MODELS[key]["config"]["rope_scaling"]
        assert set(scaling) == {
            "factor",
            "low_freq_factor",
            "high_freq_factor",
            "original_max_position_embeddings",
            "rope_type",
        }
        assert scaling["rope_type"] == "llama3" and scaling["original_max_position_embeddings"] == 8192
    llama31 = helpers.model_rope("llama3_1_8b")
    assert llama31.original_context == 8192 and llama31.context_length == 131072
    # Meta's 128k is twice factor * original: the llama3 factor is not context / original.
    assert llama31.scaling["factor"] * llama31.original_context == llama31.context_length // 2
    assert llama31.base == helpers.model_rope("llama3_8b").base == 500000.0
    scout = helpers.model_rope("llama4_scout")
    assert scout.scaling["factor"] == 16.0 and scout.scaling.get("high_freq_factor", 4.0) == 1.0
    deepseek = helpers.model_rope("deepseek_v3")
    assert deepseek.scaling["factor"] * deepseek.original_context == deepseek.context_length == 163840
    assert deepseek.scaling["mscale"] == deepseek.scaling["mscale_all_dim"] == 1.0
    qwen = helpers.model_rope("qwen2_5_7b_instruct", recommended=True)
    assert qwen.scaling["factor"] * qwen.original_context == 4 * 32768
    assert helpers.model_rope("qwen2_5_7b_instruct").scaling is None  # shipped: plain RoPE
    assert helpers.model_rope("code_llama_7b").base == 1e6 and helpers.model_rope("llama2_7b").base == 1e4
    assert MODELS["gpt_neox_20b"]["config"]["rotary_pct"] == 0.25


def test_model_rope_fields_hold_together():
    """Bugs: wavelengths without the 2π; unscaled speeds computed with the scaling; the context
    length or original context swapped."""
    for key in KEYS:
        r = helpers.model_rope(key)
        assert r.inv_freq.shape == r.unscaled_inv_freq.shape == (r.rotated_dim // 2,)
        torch.testing.assert_close(r.wavelengths * r.inv_freq, torch.full_like(r.inv_freq, 2 * math.pi))
        assert r.unscaled_wavelengths[0] == pytest.approx(2 * math.pi)  # pair 0 turns once a radian per token
        torch.testing.assert_close(r.unscaled_inv_freq, helpers.frequencies(r.rotated_dim, r.base), rtol=0, atol=0)
        assert r.context_length == MODELS[key]["config"]["max_position_embeddings"]
        assert bool((r.inv_freq <= r.unscaled_inv_freq * (1 + 1e-15)).all())  # scalings only slow clocks down
    scout = helpers.model_rope("llama4_scout")
    slowed = scout.unscaled_wavelengths > 8192
    torch.testing.assert_close(scout.inv_freq[slowed], scout.unscaled_inv_freq[slowed] / 16.0, rtol=1e-15, atol=0)
    torch.testing.assert_close(scout.inv_freq[~slowed], scout.unscaled_inv_freq[~slowed], rtol=0, atol=0)
    # YaRN (DeepSeek): mscale = mscale_all_dim gives a factor 1 on the tables.
    assert helpers.model_rope("deepseek_v3").attention_factor == 1.0
    assert helpers.model_rope("qwen2_5_7b_instruct", recommended=True).attention_factor == pytest.approx(
        0.1 * math.log(4.0) + 1.0, rel=1e-15
    )


def test_seq_len_passes_through():
    """Bug: seq_len dropped on the way to rope_settings_from_config (checked on a dynamic entry)."""
    entry = copy.deepcopy(MODELS["llama2_7b"])
    entry["config"]["rope_scaling"] = {"type": "dynamic", "factor": 2.0}
    at_init, grown = helpers.model_rope(entry), helpers.model_rope(entry, seq_len=3 * 4096)
    want, _ = helpers.rope_from_config(entry["config"], seq_len=3 * 4096)
    torch.testing.assert_close(grown.inv_freq, want, rtol=0, atol=0)
    assert not torch.equal(grown.inv_freq, at_init.inv_freq)


def test_rope_layers():
    """Bugs: Llama 4's NoPE layer put first instead of every 4th; Gemma 3's global layer at the
    wrong place in its 5 local : 1 global pattern."""
    scout = helpers.rope_layers("llama4_scout")
    assert len(scout) == 48 and scout.count("none") == 12
    assert [i for i, kind in enumerate(scout) if kind == "none"] == list(range(3, 48, 4))
    gemma = helpers.rope_layers("gemma3_4b")
    assert len(gemma) == 34 and [i for i, kind in enumerate(gemma) if kind == "global"] == [5, 11, 17, 23, 29]
    with pytest.raises(ValueError, match="'llama3_8b' records no layer_pattern"):
        helpers.rope_layers("llama3_8b")


def test_bad_input_is_refused_with_a_clear_message(tmp_path):
    """Bug: a typo in a key, or an option the model does not have, silently giving another RoPE."""
    with pytest.raises(ValueError, match="unknown key 'llama3_1_8'; did you mean 'llama3_1_8b'\\?"):
        helpers.model_rope("llama3_1_8")
    with pytest.raises(ValueError, match="local=True: 'llama3_8b' has no sliding-window layers"):
        helpers.model_rope("llama3_8b", local=True)
    with pytest.raises(ValueError, match="recommended=True: 'llama3_1_8b' has no recommended_rope_scaling"):
        helpers.model_rope("llama3_1_8b", recommended=True)
    with pytest.raises(TypeError, match="model must be a key"):
        helpers.model_rope(3)
    with pytest.raises(ValueError, match="seq_len"):
        helpers.model_rope("llama3_8b", seq_len=0)
    missing = tmp_path / "none.json"
    with pytest.raises(ValueError, match="none.json"):
        helpers.rope_models(missing)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="broken.json.*not valid JSON"):
        helpers.rope_models(broken)
    data = json.loads(rope_models_module.ROPE_MODELS_PATH.read_text(encoding="utf-8"))
    data["models"][0]["config"]["rotary_pct"] = 1.5  # a rotated fraction above 1
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match="bad.json.*gpt_neox_20b.*partial_rotary_factor"):
        helpers.rope_models(bad)


def test_a_planted_typo_in_a_copy_of_the_table_is_caught(tmp_path, monkeypatch):
    """The parity test fails on a wrong factor and on a dropped mscale in a copy of the table."""
    data = json.loads(rope_models_module.ROPE_MODELS_PATH.read_text(encoding="utf-8"))
    by_key = {entry["key"]: entry for entry in data["models"]}
    by_key["llama3_1_8b"]["config"]["rope_scaling"]["factor"] = 4.0
    del by_key["deepseek_v3"]["config"]["rope_scaling"]["mscale_all_dim"]
    copy_path = tmp_path / "rope_models.json"
    copy_path.write_text(json.dumps(data), encoding="utf-8")
    planted = helpers.rope_models(copy_path)
    good = MODELS
    assert not torch.equal(
        helpers.model_rope(planted["llama3_1_8b"]).inv_freq, helpers.model_rope("llama3_1_8b").inv_freq
    )
    # Without mscale_all_dim the YaRN factor is no longer 1 (0.1 ln 40 + 1 = 1.369).
    assert helpers.model_rope(planted["deepseek_v3"]).attention_factor == pytest.approx(0.1 * math.log(40) + 1)
    assert helpers.model_rope(good["deepseek_v3"]).attention_factor == 1.0


def test_pair_layouts_and_the_latent_width_are_recorded_with_sources(tmp_path):
    """Every entry names its pair layout with a source; DeepSeek's latent width is its published 512;
    a misspelled layout is refused."""
    interleaved = {
        "llama2_7b",
        "code_llama_7b",
        "llama3_8b",
        "llama3_1_8b",
        "mistral_7b_v0_1",
        "deepseek_v3",
        "llama4_scout",
    }
    for key, entry in MODELS.items():
        assert entry["pair_layout"] == ("interleaved" if key in interleaved else "half"), key
        assert any("pair_layout" in source["values"] for source in entry["sources"]), key
    deepseek = MODELS["deepseek_v3"]["config"]
    assert (deepseek["kv_lora_rank"], deepseek["q_lora_rank"]) == (512, 1536)
    assert any("kv_lora_rank" in source["values"] for source in MODELS["deepseek_v3"]["sources"])
    data = json.loads(rope_models_module.ROPE_MODELS_PATH.read_text(encoding="utf-8"))
    data["models"][1]["pair_layout"] = "interleave"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match="bad.json.*llama2_7b.*pair_layout must be one of .*'interleave'"):
        helpers.rope_models(bad)


# The attention class of each transformers module, whose forward applies RoPE to the query and key.
HF_ATTENTION = {
    "gpt_neox": "GPTNeoXAttention",
    "llama": "LlamaAttention",
    "mistral": "MistralAttention",
    "qwen2": "Qwen2Attention",
    "gemma3": "Gemma3Attention",
    "deepseek_v3": "DeepseekV3Attention",
    "llama4": "Llama4TextAttention",
}


def _transformers_scores(key, q, k, positions, base):
    """Scores ``(R_m q_m) · (R_n k_n)`` of one head as transformers' own code for ``key`` rotates it: the function
    its attention class calls (DeepSeek-V3's chosen by ``config.rope_interleave``, read from the entry's config),
    fed tables in the form it expects. ``q``, ``k``: float64 ``(T, d)``."""
    transformers = importlib.import_module("transformers")
    cls_name, module_name, _ = HF_CLASSES[key]
    modeling = importlib.import_module(f"transformers.models.{module_name}.modeling_{module_name}")
    source = inspect.getsource(getattr(modeling, HF_ATTENTION[module_name]).forward)
    called = set(re.findall(r"\b(apply_rotary_\w+)\(", source))
    if "apply_rotary_pos_emb_interleave" in called:  # DeepSeek-V3: one or the other, by the config
        assert "if self.config.rope_interleave" in source
        config = getattr(transformers, cls_name)(**copy.deepcopy(MODELS[key]["config"]))
        called = {"apply_rotary_pos_emb_interleave" if config.rope_interleave else "apply_rotary_pos_emb"}
    assert len(called) == 1, (key, called)
    name = called.pop()
    function = getattr(modeling, name)
    d = q.shape[-1]
    angle = positions.double()[:, None] * helpers.rope_frequencies(d, base)[0].double()[None]  # (T, d/2)
    if name == "apply_rotary_emb":  # Llama 4: complex tables, (batch, T, heads, d) inputs
        freqs_cis = torch.polar(torch.ones_like(angle), angle)[None]  # (1, T, d/2)
        q_rot, k_rot = function(q[None, :, None], k[None, :, None], freqs_cis)
        q_rot, k_rot = q_rot[0, :, 0].double(), k_rot[0, :, 0].double()
    else:  # cos and sin of cat(angle, angle), (batch, heads, T, d) inputs
        full = torch.cat((angle, angle), -1)[None]  # (1, T, d)
        q_rot, k_rot = function(q[None, None], k[None, None], full.cos(), full.sin())
        q_rot, k_rot = q_rot[0, 0], k_rot[0, 0]
    return name, q_rot @ k_rot.T  # (T, T)


@pytest.mark.parametrize("key", KEYS)
def test_the_checkpoint_layout_is_the_one_transformers_rotates(key):
    """Bug: notebook 09's table saying transformers rotates every model with rotate_half (the half layout), when
    its Llama 4 code multiplies neighbouring pairs as complex numbers and its DeepSeek-V3 code, with the default
    rope_interleave, rotates neighbouring pairs too.

    The scores of transformers' own rotation function equal helpers' scores for exactly one layout, the
    entry's ``checkpoint_layout``.
    """
    pytest.importorskip("transformers", minversion="5.0")
    gen = torch.Generator().manual_seed(0)
    d, base = 16, 10000.0
    q, k = torch.randn(2, 12, d, dtype=torch.float64, generator=gen)
    positions = torch.arange(12) * 7
    name, want = _transformers_scores(key, q, k, positions, base)
    cos, sin = helpers.rope_cos_sin(positions, d, base, dtype=torch.float64)
    matching = []
    for layout in helpers.PAIR_LAYOUTS:
        scores = helpers.apply_rope(q, cos, sin, layout=layout) @ helpers.apply_rope(k, cos, sin, layout=layout).T
        if torch.allclose(scores, want, rtol=0, atol=1e-4):
            matching.append(layout)
    assert matching == [MODELS[key]["checkpoint_layout"]], (key, name, matching)
    assert any("checkpoint_layout" in source["values"] for source in MODELS[key]["sources"]), key


def test_the_llama3_type_accepts_equal_band_factors():
    """Bug: helpers refusing Llama 4 Scout's published low_freq_factor = high_freq_factor = 1
    (transformers accepts it with a warning; Meta's code has no blend band then), or dividing by
    zero in the blend. Factors the wrong way round are still refused."""
    scaling = {
        "type": "llama3",
        "factor": 16.0,
        "original_max_len": 8192,
        "low_freq_factor": 1.0,
        "high_freq_factor": 1.0,
    }
    inv_freq, factor = helpers.rope_frequencies(128, 500000.0, scaling=scaling)
    assert bool(torch.isfinite(inv_freq).all()) and factor == 1.0
    with pytest.raises(ValueError, match="high_freq_factor.*must be >= .*low_freq_factor"):
        helpers.rope_frequencies(128, scaling={**scaling, "low_freq_factor": 2.0})


def test_gpt_neox_spellings_in_rope_settings_from_config():
    """Bugs: rotary_emb_base or rotary_pct ignored (the whole head rotated at base 10000), or a
    config giving both spellings of one setting with different values accepted."""
    config = {"hidden_size": 512, "num_attention_heads": 4, "rotary_pct": 0.5, "rotary_emb_base": 5e5}
    d, base, scaling = helpers.rope_settings_from_config(config)
    assert (d, base, scaling) == (128, 5e5, {"type": "default", "partial_rotary_factor": 0.5})
    same = {**config, "rope_theta": 5e5, "partial_rotary_factor": 0.5}
    assert helpers.rope_settings_from_config(same) == (d, base, scaling)
    with pytest.raises(ValueError, match="'rope_theta' = 10000.0.*'rotary_emb_base' = 500000.0"):
        helpers.rope_settings_from_config({**config, "rope_theta": 10000.0})
    with pytest.raises(ValueError, match="'partial_rotary_factor' = 1.0.*'rotary_pct' = 0.5"):
        helpers.rope_settings_from_config({**config, "partial_rotary_factor": 1.0})
    # DeepSeek's rotated part: qk_rope_head_dim is the width, not hidden_size // heads.
    assert (
        helpers.rope_settings_from_config({"hidden_size": 7168, "num_attention_heads": 128, "qk_rope_head_dim": 64})[0]
        == 64
    )
