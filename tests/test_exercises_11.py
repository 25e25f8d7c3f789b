"""Notebook 11's exercises: right answers, worked out here independently, pass; the recorded wrong ones fail
with the message meant for them."""

from __future__ import annotations

import math

import torch
from transformers import PretrainedConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from helpers.exercises import get, verdict


def says(name, answer, *fragments):
    """The verdict on ``answer`` is a failure whose message contains every fragment."""
    found = verdict(name, answer)
    assert not found.correct, f"{name}: {answer!r} was accepted"
    for fragment in fragments:
        assert fragment in found.message, f"{name}: {fragment!r} not in {found.message!r}"
    return found


def _transformers_yarn(d=128, base=10000.0, factor=16.0, length=4096):
    """transformers' own YaRN speeds (not helpers'), by default for Llama 2 7B's head stretched 16 times."""
    config = PretrainedConfig()
    config.hidden_size, config.num_attention_heads, config.head_dim = d * 32, 32, d
    config.max_position_embeddings = int(factor * length)
    config.rope_parameters = {
        "rope_type": "yarn",
        "rope_theta": base,
        "factor": factor,
        "original_max_position_embeddings": length,
    }
    config.rope_theta = base
    inv_freq, attention_factor = ROPE_INIT_FUNCTIONS["yarn"](config, "cpu")
    return inv_freq.double(), attention_factor


# ----- 11.1: YaRN's full-speed pairs in Llama 2's head (integer) ---------------------------------------------


def test_11_1_twenty_one_pairs_keep_their_speed_as_transformers_computes_it():
    inv_freq, _ = _transformers_yarn()
    plain = 10000.0 ** (-torch.arange(0, 128, 2, dtype=torch.float64) / 128)
    kept = int(torch.isclose(inv_freq, plain, rtol=1e-6, atol=0).sum())
    # by hand: 4096 θ_i / 2π >= 32 while i <= 128 ln(4096 / 64π) / (2 ln 10000) = 20.9, so pairs 0..20
    assert kept == 21 == math.floor(128 * math.log(4096 / (64 * math.pi)) / (2 * math.log(10000))) + 1
    assert verdict("11.1", kept).correct
    assert get("11.1").params == {"d": 128, "base": 10000.0, "factor": 16.0, "L": 4096}


def test_11_1_the_wrong_counts_are_named():
    says("11.1", 46, "turn at least once")  # β_slow's end: 4096 θ_i / 2π >= 1 for i <= 45.0
    says("11.1", 43, "slows at all")  # 64 - 21
    says("11.1", 20, "leaving one pair out")
    says("11.1", 0, "position interpolation")


# ----- 11.2: where the lag model looks under interpolation (predict, number) ------------------------------------


def test_11_2_the_trained_angles_of_three_tokens_lie_twelve_back():
    # by hand: Δ θ_i / 4 = 3 θ_i for Δ = 12, for every pair i
    assert verdict("11.2", 12).correct and verdict("11.2", 12.0).correct
    assert get("11.2").predict


def test_11_2_the_wrong_offsets_are_named():
    says("11.2", 0.75, "by dividing")
    says("11.2", 3, "angles were unchanged")
    assert not verdict("11.2", 13).correct


# ----- 11.3: NTK-aware speeds (function) -------------------------------------------------------------------------


def ntk_by_ratio(d, base, factor):
    """Written another way than the notebook's answer: θ_i times s^(−2i/(d−2))."""
    i = torch.arange(d // 2, dtype=torch.float64)
    return base ** (-2 * i / d) * factor ** (-2 * i / (d - 2))


def test_11_3_a_right_function_passes_and_slows_the_slowest_pair_by_s():
    assert verdict("11.3", ntk_by_ratio).correct
    speeds = ntk_by_ratio(16, 10000.0, 4.0)
    plain = 10000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    assert math.isclose(float(plain[-1] / speeds[-1]), 4.0, rel_tol=1e-12) and float(speeds[0]) == 1.0


def test_11_3_the_wrong_functions_are_named():
    def base_times_s(d, base, factor):
        return (base * factor) ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d)

    def interpolation(d, base, factor):
        return base ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d) / factor

    says("11.3", base_times_s, "multiplying the base by s")
    says("11.3", interpolation, "position interpolation")
    says("11.3", lambda d, base, factor: None, "returns None")


def test_11_3_calling_helpers_is_refused():
    import helpers

    def borrowed(d, base, factor):
        return helpers.rope_frequencies(d, base, scaling={"type": "ntk", "factor": factor})[0]

    assert not verdict("11.3", borrowed).correct
