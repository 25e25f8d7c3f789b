"""Notebook 09's exercises: the right answers, computed here independently from the published
configs, pass; the recorded wrong ideas fail with their own messages; the function exercise
accepts a correct implementation written here and names the wrong ones."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import helpers

verdict = helpers.exercises.verdict
MODELS = helpers.rope_models()


def _says(name, answer, *phrases):
    found = verdict(name, answer)
    assert not found.correct, f"{answer!r} was accepted"
    for phrase in phrases:
        assert phrase in found.message, f"{phrase!r} not in {found.message!r}"


# ----- 09.1 · predict: the offset forgotten after a correct prefill ----------------------------------


def test_09_1_only_the_scores_with_the_cache_change():
    assert verdict("09.1", "its scores with the cached keys, not with itself").correct
    assert verdict("09.1", " Its scores with the cached keys, not with itself ").correct
    _says("09.1", "none", "0 − j instead of P − j")
    _says("09.1", "only its score with itself", "the one that stays right")
    _says("09.1", "every score", "its own key")


def test_09_1_the_reveal_agrees_with_a_computation_by_hand():
    # One pair (d = 2) at speed 1 rad per token: a score is |q||k| cos(angle between them).
    q, k = torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([0.6, 0.8], dtype=torch.float64)

    def turn(v, a):
        return torch.stack((v[0] * math.cos(a) - v[1] * math.sin(a), v[0] * math.sin(a) + v[1] * math.cos(a)))

    def score(m, n):
        return float(turn(q, m) @ turn(k, n))

    prompt = helpers.exercises.get("09.1").params["P"]
    assert prompt == 6  # the same P as the notebook's decoding demo
    assert score(0, 0) == pytest.approx(score(prompt, prompt), abs=1e-12)  # with itself: offset 0 either way
    assert all(abs(score(0, j) - score(prompt, j)) > 1e-3 for j in range(prompt))  # with the cache: all differ


# ----- 09.2 · Gemma 3's local layers ------------------------------------------------------------------


def _gemma_local_never(base_key="rope_local_base_freq", span_key="sliding_window"):
    config = MODELS["gemma3_4b"]["config"]
    r, base, span = config["head_dim"], config[base_key], config[span_key]
    return sum(2 * math.pi * base ** (2 * i / r) > span for i in range(r // 2))


def test_09_2_counted_by_hand():
    right = _gemma_local_never()
    assert right == 57  # base 10,000, head 256, window 1,024: pairs 71 .. 127
    assert verdict("09.2", right).correct and verdict("09.2", float(right)).correct


def test_09_2_recorded_mistakes():
    config = MODELS["gemma3_4b"]["config"]
    _says("09.2", _gemma_local_never(span_key="max_position_embeddings"), "sliding window")
    _says("09.2", _gemma_local_never(base_key="rope_theta"), "rope_local_base_freq")
    _says("09.2", config["head_dim"] // 2 - _gemma_local_never(), "do complete a turn")
    r, window, s = config["head_dim"], config["sliding_window"], config["rope_scaling"]["factor"]
    global_scaled = sum(s * 2 * math.pi * config["rope_theta"] ** (2 * i / r) > window for i in range(r // 2))
    _says("09.2", global_scaled, "linear scaling")
    without_2pi = sum(config["rope_local_base_freq"] ** (2 * i / r) > window for i in range(r // 2))
    _says("09.2", without_2pi, "1/θ_i")
    assert "not right" in verdict("09.2", 58).message


def test_09_2_a_head_width_from_the_model_width_is_named():
    # hidden_size / num_attention_heads = 2560 / 8 = 320 for Gemma 3 4B, not its head_dim 256 (notebook 09,
    # section 1); with that width the count happens to equal the count of the pairs that do turn.
    config = MODELS["gemma3_4b"]["config"]
    wrong_width = config["hidden_size"] // config["num_attention_heads"]
    assert (wrong_width, config["head_dim"]) == (320, 256)
    base, window = config["rope_local_base_freq"], config["sliding_window"]
    never = sum(2 * math.pi * base ** (2 * i / wrong_width) > window for i in range(wrong_width // 2))
    assert never == 71 == config["head_dim"] // 2 - _gemma_local_never()
    _says("09.2", never, "hidden_size / num_attention_heads", "do complete a turn")


# ----- 09.3 · DeepSeek-V3's softmax temperature -------------------------------------------------------


def test_09_3_the_temperature_is_one_over_the_square_of_yarns_factor():
    scaling = MODELS["deepseek_v3"]["config"]["rope_scaling"]
    factor = (0.1 * scaling["mscale_all_dim"] * math.log(scaling["factor"]) + 1.0) ** 2  # on every score
    right = 1 / factor
    assert round(factor, 3) == 1.874 and round(right, 3) == 0.534
    assert verdict("09.3", right).correct and verdict("09.3", 0.534).correct
    assert not verdict("09.3", 0.535).correct and not verdict("09.3", 0.533).correct


@pytest.mark.parametrize(
    "wrong, says",
    [
        (1.874, "temperature T = 1/c"),  # the factor on the scores, not inverted
        (0.7306, "one side only"),  # 1 / (0.1 ln 40 + 1)
        (1.369, "YaRN's factor itself"),  # 0.1 ln 40 + 1: neither squared nor turned into a temperature
        (1.0, "the cos and sin tables carry"),
        (1 / 1.346, "log10"),
        (1 / 2.348, "log2"),
        (1 / 0.1361, "without the + 1"),
    ],
)
def test_09_3_recorded_mistakes(wrong, says):
    _says("09.3", wrong, says)


# ----- 09.4 · Llama 3.1's scaling, from scratch --------------------------------------------------------


def right_llama3(d, base, factor, low_freq_factor, high_freq_factor, original_max_len):
    out = []
    for i in range(d // 2):
        theta = base ** (-2 * i / d)
        wavelength = 2 * math.pi / theta
        if wavelength < original_max_len / high_freq_factor:
            out.append(theta)
        elif wavelength > original_max_len / low_freq_factor:
            out.append(theta / factor)
        else:
            w = (original_max_len / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)
            out.append(w * theta + (1 - w) * theta / factor)
    return torch.tensor(out, dtype=torch.float64)


def test_09_4_a_loop_over_the_pairs_passes():
    assert verdict("09.4", right_llama3).correct


def test_09_4_the_folded_answer_passes():
    def llama3_speeds(d, base, factor, low_freq_factor, high_freq_factor, original_max_len):
        theta = base ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d)
        wavelength = 2 * math.pi / theta
        short, long = original_max_len / high_freq_factor, original_max_len / low_freq_factor
        w = (original_max_len / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)
        blended = w * theta + (1 - w) * theta / factor
        out = torch.where(wavelength < short, theta, theta / factor)
        return torch.where((wavelength >= short) & (wavelength <= long), blended, out)

    assert verdict("09.4", llama3_speeds).correct


def test_09_4_wrong_ideas_are_named():
    def everything_slowed(d, base, factor, low_freq_factor, high_freq_factor, original_max_len):
        return base ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d) / factor

    def blend_the_other_way(d, base, factor, low_freq_factor, high_freq_factor, original_max_len):
        right = right_llama3(d, base, factor, low_freq_factor, high_freq_factor, original_max_len)
        plain = base ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d)
        middle = (right != plain) & ((right - plain / factor).abs() > 1e-15 * plain)
        w = (right[middle] - plain[middle] / factor) / (plain[middle] - plain[middle] / factor)
        right[middle] = (1 - w) * plain[middle] + w * plain[middle] / factor
        return right

    def float32(d, base, factor, low_freq_factor, high_freq_factor, original_max_len):
        return right_llama3(d, base, factor, low_freq_factor, high_freq_factor, original_max_len).float()

    def calls_helpers(d, base, factor, low_freq_factor, high_freq_factor, original_max_len):
        scaling = {"type": "llama3", "factor": factor, "low_freq_factor": low_freq_factor}
        scaling |= {"high_freq_factor": high_freq_factor, "original_max_len": original_max_len}
        return helpers.rope_frequencies(d, base, scaling=scaling)[0]

    _says("09.4", everything_slowed, "Position Interpolation")
    _says("09.4", blend_the_other_way, "wrong way")
    _says("09.4", float32, "float32 precision")
    _says("09.4", calls_helpers, "calls helpers.rope_frequencies")


def test_09_4_the_checked_inputs_include_llama_4_without_a_blend_band():
    cases = helpers.exercises.get("09.4").inputs(np.random.default_rng(9))
    scout = MODELS["llama4_scout"]["config"]["rope_scaling"]
    assert any(c["low_freq_factor"] == c["high_freq_factor"] == scout["low_freq_factor"] for c in cases)
    assert len(cases) >= 6
