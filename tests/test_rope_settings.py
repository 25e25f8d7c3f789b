"""RoPE at the settings where plausible bugs hide: every kernel of apply_rope on the CPU, dynamic
NTK below the original length, YaRN where its correction range is clipped, short-dtype tables.

Each test names the bug it is there to catch.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import helpers
from helpers import rope as rope_module


def _reference_rotation(x, cos, sin, layout):
    """The textbook formula in float64: x cos + rotate(x) sin, pairs as the layout says."""
    x, cos, sin = x.double(), cos.double(), sin.double()
    h = x.shape[-1] // 2
    if layout == "interleaved":
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


@pytest.mark.parametrize("path", ["complex_copy", "strided"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_every_interleaved_kernel_runs_and_agrees_on_the_cpu(monkeypatch, path, dtype):
    """Bug: pair members swapped in the kernel that only CUDA takes (bfloat16 on a GPU).

    The kernel choice is forced, so the branches a GPU takes run here too.
    """
    monkeypatch.setattr(rope_module, "_interleaved_path", lambda x_rot, compute: path)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 7, 16, generator=g).to(dtype)
    cos, sin = helpers.rope_cos_sin(7, 16)
    got = helpers.apply_rope(x, cos, sin, layout="interleaved")
    want = _reference_rotation(x, cos, sin, "interleaved")
    step = {torch.float32: 1e-6, torch.bfloat16: 2e-2, torch.float16: 2e-3}[dtype]
    torch.testing.assert_close(got.double(), want, rtol=step, atol=step * 4)
    assert got.dtype == dtype


def test_the_kernel_choice_on_the_cpu():
    x32 = torch.zeros(3, 8)
    assert rope_module._interleaved_path(x32, torch.float32) == "complex"
    assert rope_module._interleaved_path(x32.to(torch.bfloat16), torch.bfloat16) == "complex_copy"
    assert rope_module._interleaved_path(torch.zeros(3, 9)[:, 1:], torch.float32) == "complex_copy"


@pytest.mark.parametrize("seq_len", [1, 100, 4095, 4096])
def test_dynamic_ntk_keeps_the_base_up_to_the_original_length(seq_len):
    """Bug: ``max(seq_len, L)`` dropped, so a sequence shorter than L changes the base.

    Hugging Face's dynamic NTK grows the base only once the sequence is longer than L.
    """
    plain, _ = helpers.rope_frequencies(64, 10000.0)
    dynamic, _ = helpers.rope_frequencies(
        64, 10000.0, scaling={"type": "dynamic", "factor": 4.0, "original_max_len": 4096, "seq_len": seq_len}
    )
    torch.testing.assert_close(dynamic, plain, rtol=0, atol=0)


def _hf_yarn_inv_freq(d, base, factor, original, beta_fast=32.0, beta_slow=1.0):
    """Hugging Face's YaRN frequencies, written out from its formulas in numpy."""

    def correction_dim(turns):
        return (d * math.log(original / (turns * 2 * math.pi))) / (2 * math.log(base))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), d - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(d // 2) - low) / (high - low), 0, 1)
    extrapolation = 1.0 - ramp
    pos_freqs = base ** (np.arange(0, d, 2) / d)
    inv_extrapolation, inv_interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    return inv_interpolation * (1 - extrapolation) + inv_extrapolation * extrapolation, (low, high)


@pytest.mark.parametrize(
    "d, base, factor, original",
    [
        (128, 10000.0, 8.0, 2048),  # the notebook's setting: (16, 41)
        (128, 10000.0, 4.0, 131072),  # the upper index 70 lies past the last pair (63): the ramp never ends
        (128, 500000.0, 8.0, 8192),
        (64, 10000.0, 16.0, 4096),
        (128, 1000000.0, 4.0, 32768),
    ],
)
def test_yarn_matches_hugging_face_at_many_settings(d, base, factor, original):
    """Bug: the upper correction index clipped to ``d//2 - 1`` instead of ``d - 1`` (binds at L = 131072)."""
    want, (low, high) = _hf_yarn_inv_freq(d, base, factor, original)
    assert helpers.yarn_correction_range(d, base, original) == (low, high)
    got, a = helpers.rope_frequencies(d, base, scaling={"type": "yarn", "factor": factor, "original_max_len": original})
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-13, atol=0)
    assert a == pytest.approx(0.1 * math.log(factor) + 1.0, rel=1e-15)


def test_the_clip_binds_at_131072():
    low, high = helpers.yarn_correction_range(128, 10000.0, 131072)
    assert high == 70 > 128 // 2 - 1


YARN = {"type": "yarn", "factor": 16.0, "original_max_len": 4096}


def _nearest_in_dtype(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Reference: of the short-dtype numbers next to ``x`` (float64), the nearest one."""
    guess = x.to(dtype)  # torch's cast: right or one step off
    bits = guess.view(torch.int16)
    candidates = torch.stack([(bits + k).view(dtype) for k in (-1, 0, 1)])  # (3, ...) neighbours
    error = (candidates.double() - x).abs()
    error[~torch.isfinite(error)] = math.inf
    return candidates.gather(0, error.argmin(dim=0, keepdim=True))[0]


@pytest.mark.parametrize(
    "dtype, value",
    [
        (torch.bfloat16, 1 + 2**-8 + 2**-30),
        (torch.float16, 1 + 2**-11 + 2**-30),
        (torch.bfloat16, -(1 + 2**-8 + 2**-30)),
    ],
)
def test_rounding_from_float64_is_correct_where_torch_rounds_twice(dtype, value):
    """Bug: float64 -> short dtype through torch's cast, which rounds twice (via float32)."""
    x = torch.tensor([value], dtype=torch.float64)
    assert x.to(dtype) != _nearest_in_dtype(x, dtype), "the example must be one where torch's cast is wrong"
    assert rope_module._round_from_float64(x, dtype) == _nearest_in_dtype(x, dtype)


@pytest.mark.parametrize("scaling", [None, YARN], ids=["plain", "yarn"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_short_dtype_tables_are_correctly_rounded(scaling, dtype):
    """Bug: tables (and YaRN's factor) computed in the short dtype, or rounded twice through float32.

    Every entry must be the float64 value (factor included) correctly rounded to the dtype.
    """
    positions = torch.arange(0, 3_000_000, 997)
    exact = helpers.rope_cos_sin(positions, 128, scaling=scaling, dtype=torch.float64)
    short = helpers.rope_cos_sin(positions, 128, scaling=scaling, dtype=dtype)
    for e, s in zip(exact, short, strict=True):
        wrong = int((s != _nearest_in_dtype(e, dtype)).sum())
        assert wrong == 0, f"{wrong} of {s.numel()} {dtype} entries are not the correctly rounded value"


@pytest.mark.parametrize("scaling", [None, YARN], ids=["plain", "yarn"])
def test_float32_tables_are_within_2e_7_at_any_position(scaling):
    positions = torch.arange(0, 5_000_000, 4999)
    exact = helpers.rope_cos_sin(positions, 128, scaling=scaling, dtype=torch.float64)
    single = helpers.rope_cos_sin(positions, 128, scaling=scaling)
    for e, s in zip(exact, single, strict=True):
        assert (s.double() - e).abs().max() < 2e-7 * (1.0 if scaling is None else 1.28)
