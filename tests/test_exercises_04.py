"""The exercises of notebook 04: the right answers, computed here independently, pass; the recorded
wrong ideas fail with their own messages."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.integrate import quad
from scipy.special import sici

import helpers
from helpers.exercises import verdict


def _kappa(delta: float, d: int, base: float) -> float:
    """κ_d(Δ) one hand at a time, in plain Python."""
    return sum(math.cos(delta * base ** (-2 * i / d)) for i in range(d // 2)) / (d // 2)


def test_04_1_a_larger_base_makes_the_kernel_fall_more_slowly():
    # Independently: the first offset below 0.5 moves out as the base grows.
    first = [next(k for k in range(1, 1000) if _kappa(k, 64, b) < 0.5) for b in (10000.0, 1_000_000.0)]
    assert first[0] < first[1]
    assert verdict("04.1", "more slowly").correct
    assert verdict("04.1", " More Slowly ").correct
    assert "which way each θ_i" in verdict("04.1", "more quickly").message
    assert "fastest hand, θ_0 = 1, is indeed the same" in verdict("04.1", "the same").message
    assert "not an option" in verdict("04.1", "slower").message
    assert helpers.exercises.get("04.1").predict


def test_04_2_the_offset_with_the_largest_inner_product():
    scores = {k: 4 * _kappa(k, 8, 10000.0) for k in range(1, 101)}
    best = max(scores, key=scores.get)
    assert best == 63  # the fast hand's tenth turn and the second hand's first
    assert scores[63] > scores[6]
    assert verdict("04.2", 63).correct and verdict("04.2", 63.0).correct
    assert "fast hand's first return alone" in verdict("04.2", 6).message
    assert "index of the largest entry" in verdict("04.2", 62).message
    assert "comparing a position with itself" in verdict("04.2", 0).message
    assert "is not right" in verdict("04.2", 64).message


def _right_kernel(delta, d, base):
    """Written out here, without helpers: one angle per offset and hand, the mean of the cosines."""
    i = np.arange(d // 2, dtype=np.float64)
    theta = float(base) ** (-2.0 * i / d)
    return torch.as_tensor(np.asarray(np.cos(delta.numpy()[..., None] * theta).mean(axis=-1)))


def _loop_kernel(delta, d, base):
    """The same in a plain loop, returning float32: a slower, less precise, still right answer."""
    flat = [_kappa(x, d, base) for x in delta.reshape(-1).tolist()]
    return torch.tensor(flat, dtype=torch.float32).reshape(delta.shape)


def test_04_3_a_right_kernel_passes_in_more_than_one_form():
    assert verdict("04.3", _right_kernel).correct
    assert "correct on all" in verdict("04.3", _loop_kernel).message


def test_04_3_recorded_wrong_kernels_are_named():
    def raw_sum(delta, d, base):
        return _right_kernel(delta, d, base) * (d // 2)

    def over_d(delta, d, base):
        return _right_kernel(delta, d, base) / 2

    def no_two(delta, d, base):
        theta = float(base) ** (-np.arange(d // 2) / d)
        return torch.as_tensor(np.asarray(np.cos(delta.numpy()[..., None] * theta).mean(axis=-1)))

    def from_one(delta, d, base):
        theta = float(base) ** (-2.0 * np.arange(1, d // 2 + 1) / d)
        return torch.as_tensor(np.asarray(np.cos(delta.numpy()[..., None] * theta).mean(axis=-1)))

    assert "raw inner product" in verdict("04.3", raw_sum).message
    assert "dividing by d gives" in verdict("04.3", over_d).message
    assert "lost its factor 2" in verdict("04.3", no_two).message
    assert "numbered from 1" in verdict("04.3", from_one).message

    def flattened(delta, d, base):  # right values, wrong shape
        return _right_kernel(delta, d, base).reshape(-1)

    assert "shape" in verdict("04.3", flattened).message and not verdict("04.3", flattened).correct


def test_04_3_a_float32_kernel_is_right_too():
    def float32_speeds(delta, d, base):  # torch.arange(d // 2) gives float32 speeds
        theta = base ** (-2 * torch.arange(d // 2) / d)
        return torch.cos(delta[..., None] * theta).mean(dim=-1)

    def torch_float32(delta, d, base):  # everything in float32
        theta = base ** (-2 * torch.arange(d // 2) / d)
        return torch.cos(delta.float()[..., None] * theta).mean(dim=-1)

    def numpy_float32(delta, d, base):  # numpy, float32, the speeds through exp and log
        i = np.arange(d // 2, dtype=np.float32)
        theta = np.exp(-2 * i / d * np.float32(math.log(base))).astype(np.float32)
        return torch.as_tensor(np.asarray(np.cos(delta.numpy().astype(np.float32)[..., None] * theta).mean(axis=-1)))

    for right in (float32_speeds, torch_float32, numpy_float32):
        assert verdict("04.3", right).correct, right.__name__

    def float16(delta, d, base):  # half precision is not enough
        return torch_float32(delta, d, base).half()

    assert not verdict("04.3", float16).correct


def test_04_3_may_not_call_the_helper_it_rebuilds():
    said = verdict("04.3", lambda delta, d, base: helpers.position_kernel(delta, d, base)).message
    assert "calls helpers.position_kernel" in said
    said = verdict("04.3", lambda delta, d, base: helpers.kernels.position_kernel(delta, d, base)).message
    assert "calls helpers" in said and "position_kernel" in said
    from helpers.kernels import position_kernel as bound_earlier  # a name bound before the check

    said = verdict("04.3", lambda delta, d, base: bound_earlier(delta, d, base)).message
    assert "calls helpers" in said and "position_kernel" in said
    assert float(helpers.position_kernel(0.0, 8)) == 1.0  # restored after the check
    assert "not answered yet" in verdict("04.3", lambda delta, d, base: None).message


def test_04_4_the_first_rise():
    values = [_kappa(k, 256, 10000.0) for k in range(0, 60)]
    first = next(k for k in range(1, 60) if values[k] > values[k - 1])
    assert first == 25 and values[25] - values[24] > 1e-4
    assert verdict("04.4", 25).correct
    assert "one offset too early" in verdict("04.4", 24).message
    assert "fast hand's first return" in verdict("04.4", 6).message
    assert "6-token table at d = 8" in verdict("04.4", 4).message
    assert "is not right" in verdict("04.4", 26).message


def test_04_5_the_lowest_point_of_the_continuous_curve_at_base_100():
    # Independently: the integral by quadrature near πb/2, at every whole offset from 140 to 175.
    near = {k: quad(lambda t, k=k: math.cos(k * 100.0 ** (-t)), 0.0, 1.0, limit=400)[0] for k in range(140, 176)}
    lowest = min(near, key=near.get)
    assert lowest == 156 and round(near[lowest], 4) == -0.1037
    assert verdict("04.5", -0.1037).correct and verdict("04.5", near[lowest]).correct
    assert not verdict("04.5", -0.104).correct  # 3 figures are not the 4 asked
    assert "slow trend alone" in verdict("04.5", -0.1025).message
    assert round(-sici(math.pi / 2)[1] / math.log(100), 4) == -0.1025
    assert "nearest πb/2" in verdict("04.5", -0.1026).message
    assert "over all real offsets" in verdict("04.5", -0.1039).message
    # The finite sum in place of the integral: at d = 2048 it agrees with the real-offset minimum to 4 figures,
    # so that message names both; at other widths its own message.
    finite = helpers.position_kernel(torch.arange(1, 2001, dtype=torch.float64), 2048, 100.0).min()
    assert "finite sum κ_d with d = 2048" in verdict("04.5", float(finite)).message
    assert "d = 512 hands" in verdict("04.5", -0.1044).message
    assert "to 3 significant figures" in verdict("04.5", -0.104).message  # not taken for the d = 1024 sum
    assert "d = 4096 hands" in verdict("04.5", -0.1038).message
    hint = helpers.exercises.get("04.5").hint  # a nudge, not the method
    assert "every whole offset" not in hint and "smallest" not in hint
    assert "log10 in place of ln" in verdict("04.5", -0.2388).message
    assert "to 4 significant figures" in verdict("04.5", -0.1030).message


@pytest.mark.parametrize("name", ["04.1", "04.2", "04.3", "04.4", "04.5"])
def test_04_every_exercise_has_at_least_two_recorded_mistakes(name):
    assert len(helpers.exercises.get(name).mistakes) >= 2


def test_04_t5_leaves_its_scores_unscaled_and_draws_w_q_smaller_instead():
    """Notebook 04, section 3 says not every model divides its scores by sqrt(d_k): T5 does not, and
    initialises W_Q smaller by sqrt(d_kv) instead. Checked here against the installed transformers (a test
    dependency the notebooks may not import), on configurations built in memory: no weights, no network."""
    pytest.importorskip("transformers")
    from transformers import T5Config, T5Model
    from transformers.models.t5.modeling_t5 import T5Attention

    torch.manual_seed(0)
    small = T5Config(
        vocab_size=32,
        d_model=16,
        d_kv=8,
        num_heads=2,
        d_ff=32,
        num_layers=1,
        num_decoder_layers=1,
        dropout_rate=0.0,
        attn_implementation="eager",
    )
    attention = T5Attention(small, has_relative_attention_bias=False).eval()
    x = torch.randn(1, 5, 16)  # (batch, T, d_model)
    with torch.no_grad():
        out = attention(x)[0]  # (1, 5, 16)

        def heads(linear):  # (1, heads, T, d_kv)
            return linear(x).view(1, 5, 2, 8).transpose(1, 2)

        q, k, v = heads(attention.q), heads(attention.k), heads(attention.v)

        def by_hand(scale):
            weights = torch.softmax(q @ k.transpose(-1, -2) * scale, dim=-1)  # (1, heads, T, T)
            return attention.o((weights @ v).transpose(1, 2).reshape(1, 5, 16))

        assert torch.allclose(out, by_hand(1.0), atol=1e-6)  # no 1/sqrt(d_kv)
        assert not torch.allclose(out, by_hand(8**-0.5), atol=1e-3)  # the scaled version differs
    # The scale lives in the initialisation: W_Q is drawn with std (d_model d_kv)^(-1/2), W_K with d_model^(-1/2).
    big = T5Config(vocab_size=32, d_model=256, d_kv=64, num_heads=4, d_ff=32, num_layers=1, num_decoder_layers=1)
    layer = T5Model(big).encoder.block[0].layer[0].SelfAttention
    ratio = float(layer.q.weight.detach().std() / layer.k.weight.detach().std())
    assert abs(ratio - 64**-0.5) < 0.05 * 64**-0.5
