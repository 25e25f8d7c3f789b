"""RoPE at the settings where plausible bugs hide: every kernel of apply_rope on the CPU, dynamic
NTK below the original length, YaRN where its correction range is clipped, short-dtype tables.

Each test names the bug it is there to catch.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode

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


@pytest.mark.parametrize(
    "x, path",
    [
        (torch.zeros(2, 3, 8), "complex"),  # any number of leading dimensions
        (torch.zeros(3, 10)[:, 2:], "complex"),  # an even storage offset
        (torch.zeros(1, 9)[:, :8], "complex"),  # one row: its odd stride is never stepped over
        (torch.zeros(2, 9)[:, :8], "complex_copy"),  # two rows at an odd stride
        (torch.zeros(3, 10)[:, 3:9], "complex_copy"),  # an odd storage offset, even strides
        (torch.zeros(8, 3).t(), "complex_copy"),  # pairs not adjacent in memory
        (torch.zeros(3, 8, device="meta"), "complex"),
        (torch.zeros(3, 9, device="meta")[:, 1:], "strided"),  # off the CPU: the strided kernel
        (torch.zeros(3, 8, device="meta", dtype=torch.bfloat16), "strided"),
    ],
    ids=["B,T,d", "even-offset", "one-row", "two-odd-rows", "odd-offset", "transposed"]
    + ["meta", "meta-odd", "meta-bf16"],
)
def test_the_kernel_choice_follows_the_strides(x, path):
    """Bug: a float32 view whose pairs can be read as complex numbers sent to a slower copy, or one
    whose pairs cannot sent to ``view_as_complex`` (which then raises); the CPU's float32 copy
    taken on a GPU, where the strided kernel is the fast one."""
    assert rope_module._interleaved_path(x, torch.promote_types(x.dtype, torch.float32)) == path


class _Calls(TorchFunctionMode):
    """The names of the torch functions and tensor methods called inside the block."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.names.append(getattr(func, "__name__", repr(func)))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_float_interleaved_pairs_take_one_complex_multiplication(dtype):
    """Bug: the one-pass complex kernel skipped (its path name misspelt, the compute dtype lost),
    so float32 / float64 interleaved pairs go through a float copy or strided updates: the same
    numbers at about twice the memory traffic. Under autograd likewise: the complex formula, not
    the real one built from strided halves."""
    x = torch.randn(2, 3, 7, 16, dtype=dtype, generator=torch.Generator().manual_seed(0))
    cos, sin = helpers.rope_cos_sin(7, 16, dtype=dtype)
    with _Calls() as calls:
        got = helpers.apply_rope(x, cos, sin, layout="interleaved")
    assert "view_as_complex" in calls.names and calls.names.count("mul") == 1
    assert not {"addcmul_", "copy_", "mul_"} & set(calls.names), calls.names
    want = _reference_rotation(x, cos, sin, "interleaved")
    torch.testing.assert_close(got.double(), want, rtol=0, atol=1e-6 if dtype == torch.float32 else 1e-14)
    with _Calls() as calls:
        helpers.apply_rope(x.clone().requires_grad_(), cos, sin, layout="interleaved")
    assert "view_as_complex" in calls.names and "stack" not in calls.names, calls.names


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
    """Hugging Face's YaRN frequencies and correction range, written out from its formulas in numpy."""

    def correction_dim(turns):
        return (d * math.log(original / (turns * 2 * math.pi))) / (2 * math.log(base))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), d - 1)
    ramp_end = high + 0.001 if low == high else high  # a ramp of zero width, widened
    ramp = np.clip((np.arange(d // 2) - low) / (ramp_end - low), 0, 1)
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
        (64, 10000.0, 4.0, 128),  # the lower index, -2, clipped to 0
        (8, 100.0, 4.0, 65536),  # the upper index, 9, clipped to d - 1 = 7
        (8, 100.0, 4.0, 1_000_000),  # both indices 7 (the upper clipped): zero width past the last pair
        (8, 10000.0, 4.0, 6),  # both indices 0 (L < 2π): zero width at the first pair, a step
        (64, 10000.0, 2.0, 4096),
        (64, 10000.0, 1.0, 4096),  # no stretch: attention factor 1
        (64, 10000.0, 0.5, 4096),  # a factor below 1: attention factor 1, as transformers
    ],
)
def test_yarn_matches_hugging_face_at_many_settings(d, base, factor, original):
    """Bugs: the upper correction index clipped to ``d//2 - 1`` instead of ``d - 1`` (binds at
    L = 131072), or the lower one to 1; a ramp of zero width widened the wrong way; the attention
    factor ``0.1 ln s + 1`` applied at ``s <= 1`` or withheld at ``1 < s <= 2``."""
    want, (low, high) = _hf_yarn_inv_freq(d, base, factor, original)
    assert helpers.yarn_correction_range(d, base, original) == (low, high)
    got, a = helpers.rope_frequencies(d, base, scaling={"type": "yarn", "factor": factor, "original_max_len": original})
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-13, atol=0)
    assert a == pytest.approx(0.1 * math.log(factor) + 1.0 if factor > 1.0 else 1.0, rel=1e-15)


def test_the_clip_binds_at_131072():
    low, high = helpers.yarn_correction_range(128, 10000.0, 131072)
    assert high == 70 > 128 // 2 - 1


def test_llama3_at_a_wavelength_of_exactly_l():
    """Bug: a comparison at L loosened or tightened (``>=`` for ``>``, ``<`` for ``<=``). A pair
    whose wavelength is exactly L ends Llama 3.1's blend, at θ/s (as transformers); with equal
    factors (Llama 4 Scout's step) only wavelengths above L are divided, so it keeps θ."""
    base = 1699887.3833431678  # (8192 / 2π)^2: pair 1 of d = 4 turns exactly once in 8192 tokens
    theta = helpers.rope_frequencies(4, base)[0]
    assert 2.0 * math.pi / theta[1].item() == 8192.0
    blend = {"type": "llama3", "factor": 8.0, "original_max_len": 8192}
    step = {**blend, "low_freq_factor": 1.0, "high_freq_factor": 1.0}
    assert helpers.rope_frequencies(4, base, scaling=blend)[0].tolist() == [1.0, theta[1].item() / 8.0]
    assert helpers.rope_frequencies(4, base, scaling=step)[0].tolist() == [1.0, theta[1].item()]


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
