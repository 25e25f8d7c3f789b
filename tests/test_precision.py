"""Tables at long range: ``sinusoidal_pe`` and ``rope_cos_sin`` as precise at 5,000,000 as at 5.

The reference is float64 ``sin``/``cos`` of the float64 product ``m θ_i`` (error about 1e-9 at
5,000,000). float32 tables must be within 1e-6 everywhere; float16 and bfloat16 tables within one
unit in the last place of their own format (plus the float32 bound, which matters only near 0).
The common float32 formula of article 001 §8.1 fails
the same check by three orders of magnitude, which shows that the check can fail.
"""

from __future__ import annotations

import math

import pytest
import torch
from _support import MadeOn, device_params
from torch.utils._python_dispatch import TorchDispatchMode

import helpers
import helpers.device

LAST = 5_000_000


def reference(positions, d, base=10000.0):
    """float64 ``(sin, cos)`` of ``m θ_i``, each ``(T, d/2)``."""
    angle = torch.outer(positions.double().cpu(), helpers.frequencies(d, base))  # (T, d/2)
    return torch.sin(angle), torch.cos(angle)


def ulp(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Spacing of ``dtype``'s numbers at ``values`` (float64), subnormals included."""
    info = torch.finfo(dtype)
    mantissa = round(-math.log2(info.eps))
    exponent = torch.floor(torch.log2(values.abs().clamp(min=info.tiny)))
    return torch.exp2(exponent - mantissa)


def sampled_positions():
    """The last 20,000 positions up to 5,000,000, and 20,000 spread over the whole range."""
    gen = torch.Generator().manual_seed(0)
    spread = torch.randint(0, LAST + 1, (20_000,), generator=gen)
    return torch.cat((torch.arange(LAST - 19_999, LAST + 1), spread))


def pe_reference(positions, d):
    sin, cos = reference(positions, d)
    return torch.stack((sin, cos), dim=-1).reshape(len(positions), d)  # (T, d/2, 2) -> (T, d)


@pytest.mark.slow
def test_fastest_hand_in_float32_at_every_position_up_to_five_million():
    """d = 2 is the hand θ_0 = 1 rad/token alone, the one whose angle grows fastest: all 5,000,001 positions."""
    worst = 0.0
    for start in range(0, LAST + 1, 1_000_000):
        positions = torch.arange(start, min(start + 1_000_000, LAST + 1))
        pe = helpers.sinusoidal_pe(positions, 2)
        worst = max(worst, float((pe.double() - pe_reference(positions, 2)).abs().max()))
        cos, sin = helpers.rope_cos_sin(positions, 2)
        ref_sin, ref_cos = reference(positions, 2)
        worst = max(worst, float((cos.double() - ref_cos).abs().max()), float((sin.double() - ref_sin).abs().max()))
    assert worst < 1e-6, worst


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("d", [8, 128])
def test_float32_tables_within_1e_6_at_long_range(device, d):
    positions = sampled_positions()
    pe = helpers.sinusoidal_pe(positions, d, device=device)
    assert pe.dtype == torch.float32 and pe.device.type == device
    assert float((pe.double().cpu() - pe_reference(positions, d)).abs().max()) < 1e-6
    cos, sin = helpers.rope_cos_sin(positions, d, device=device)
    ref_sin, ref_cos = reference(positions, d)
    assert float((cos.double().cpu() - ref_cos).abs().max()) < 1e-6
    assert float((sin.double().cpu() - ref_sin).abs().max()) < 1e-6


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_tables_within_one_ulp_of_their_own_format(device, dtype):
    positions = sampled_positions()
    pe = helpers.sinusoidal_pe(positions, 64, device=device, dtype=dtype)
    ref = pe_reference(positions, 64)
    assert pe.dtype == dtype
    assert bool(((pe.double().cpu() - ref).abs() <= ulp(ref, dtype) + 1e-6).all())
    cos, sin = helpers.rope_cos_sin(positions, 64, device=device, dtype=dtype)
    ref_sin, ref_cos = reference(positions, 64)
    assert bool(((cos.double().cpu() - ref_cos).abs() <= ulp(ref_cos, dtype) + 1e-6).all())
    assert bool(((sin.double().cpu() - ref_sin).abs() <= ulp(ref_sin, dtype) + 1e-6).all())


@pytest.mark.parametrize("device", device_params())
def test_bfloat16_rope_tables_are_rounded_to_nearest(device):
    """Notebook 06 §10: every bf16 entry within half a bf16 step of the true value (2^-9 for values
    in [0.5, 1), so below 2e-3 everywhere), plus the float32 bound; at any position. A table
    truncated to bf16 instead of rounded is off by up to a whole step and fails."""
    positions = torch.cat((torch.tensor([10, 257, 1857, 10_000, 100_000, 1_000_000]), sampled_positions()[::40]))
    cos, sin = helpers.rope_cos_sin(positions, 128, device=device, dtype=torch.bfloat16)
    ref_sin, ref_cos = reference(positions, 128)
    for got, want in ((cos, ref_cos), (sin, ref_sin)):
        error = (got.double().cpu() - want).abs()
        assert bool((error <= ulp(want, torch.bfloat16) / 2 + 4e-7).all())
        assert float(error.max()) < 2e-3


def test_the_common_float32_formula_fails_the_same_check():
    """Article 001 §8.1's formula: float32 ``position * div_term``. Off by more than 1e-3 at 5,000,000."""
    positions = torch.arange(LAST - 999, LAST + 1)
    d = 8
    div_term = torch.exp(torch.arange(0, d, 2, dtype=torch.float) * -(math.log(10000.0) / d))
    naive = torch.sin(positions.float()[:, None] * div_term)  # (T, d/2)
    error = float((naive.double() - reference(positions, d)[0]).abs().max())
    assert error > 1e-3, error


def test_float64_tables_match_math_sin():
    positions = torch.tensor([0, 7, 123_456, LAST])
    pe = helpers.sinusoidal_pe(positions, 8, dtype=torch.float64)
    for row, m in enumerate(positions.tolist()):
        for i, theta in enumerate([1.0, 0.1, 0.01, 0.001]):
            assert abs(float(pe[row, 2 * i]) - math.sin(m * theta)) < 1e-9
            assert abs(float(pe[row, 2 * i + 1]) - math.cos(m * theta)) < 1e-9


def test_real_and_negative_positions_are_reduced_correctly():
    positions = torch.tensor([-LAST - 0.25, -3.5, 0.5, 2_500_000.75], dtype=torch.float64)
    cos, sin = helpers.rope_cos_sin(positions, 16)
    ref_sin, ref_cos = reference(positions, 16)
    assert float((cos.double() - ref_cos).abs().max()) < 1e-6
    assert float((sin.double() - ref_sin).abs().max()) < 1e-6


@pytest.mark.parametrize(
    "dtype, float64_here",
    [
        (torch.float64, True),
        (torch.float32, True),
        (torch.bfloat16, True),
        (torch.float32, False),
        (torch.bfloat16, False),
    ],
)
def test_interleaved_table_equals_stacked_sin_cos(monkeypatch, dtype, float64_here):
    from helpers._angles import sin_cos_interleaved, sin_cos_table

    if not float64_here:
        monkeypatch.setattr(helpers.device, "supports_float64", lambda device: False)
    positions = sampled_positions()[-300:]
    speeds = helpers.frequencies(24)
    sin, cos = sin_cos_table(positions, speeds, device="cpu", dtype=dtype)  # (T, 12) each
    table = sin_cos_interleaved(positions, speeds, device="cpu", dtype=dtype)  # (T, 24)
    assert table.dtype == dtype and table.shape == (300, 24)
    assert torch.equal(table, torch.stack((sin, cos), dim=-1).reshape(300, 24))


def test_float32_speeds_are_taken_at_their_exact_value():
    """A float32 speed is an exact float64 number: the tables are sin and cos of ``m`` times that
    number, as precise at 5,000,000 as with float64 speeds (a speed divided by 2π in float32 would
    put the angle off by about 0.2 rad there)."""
    from helpers._angles import sin_cos_interleaved, sin_cos_table

    positions = sampled_positions()[-300:]
    speeds = helpers.frequencies(24).float()
    angle = torch.outer(positions.double(), speeds.double())  # (T, 12), exact speeds in float64
    for dtype, tol in ((torch.float32, 1e-6), (torch.float64, 1e-9)):
        sin, cos = sin_cos_table(positions, speeds, device="cpu", dtype=dtype)
        table = sin_cos_interleaved(positions, speeds, device="cpu", dtype=dtype)  # (T, 24)
        for got, want in ((sin, torch.sin(angle)), (cos, torch.cos(angle)), (table[:, 0::2], torch.sin(angle))):
            assert got.dtype == dtype
            assert float((got.double() - want).abs().max()) < tol
        assert float((table[:, 1::2].double() - torch.cos(angle)).abs().max()) < tol


# --- Devices without float64 (Apple's MPS), simulated on the CPU. ---------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_forced_no_float64_path_is_as_precise(monkeypatch, dtype):
    positions = sampled_positions()
    usual_pe = helpers.sinusoidal_pe(positions, 32, dtype=dtype)
    usual_cos, usual_sin = helpers.rope_cos_sin(positions, 32, dtype=dtype)
    seen = []
    monkeypatch.setattr(helpers.device, "supports_float64", lambda device: seen.append(str(device)) or False)
    pe = helpers.sinusoidal_pe(positions, 32, dtype=dtype)
    cos, sin = helpers.rope_cos_sin(positions, 32, dtype=dtype)
    assert seen, "the tables did not ask whether the device has float64"
    assert torch.equal(pe, usual_pe)
    if dtype == torch.float32:
        assert torch.equal(cos, usual_cos) and torch.equal(sin, usual_sin)
    else:
        # With float64, RoPE's short tables are correctly rounded; without, they come from float32
        # sines (within 2e-7 of the exact value), rounded again: one step off at most (plus those
        # 2e-7 near zero, where a step is smaller), and rarely.
        for got, want in ((cos, usual_cos), (sin, usual_sin)):
            size = torch.maximum(got.double().abs(), want.double().abs()).clamp(min=1e-30)
            step = torch.finfo(dtype).eps * torch.exp2(torch.floor(torch.log2(size)))
            assert bool(((got.double() - want.double()).abs() <= step + 2e-7).all())
            assert float((got != want).double().mean()) < 1e-3
    if dtype == torch.float32:
        assert float((pe.double() - pe_reference(positions, 32)).abs().max()) < 1e-6


class _NoFloat64On(TorchDispatchMode):
    """Fails any operation that produces a float64 tensor on ``device_type``."""

    def __init__(self, device_type):
        super().__init__()
        self.device_type = device_type

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.device.type == self.device_type and t.dtype == torch.float64:
                raise AssertionError(f"{func} made a float64 tensor on {self.device_type}")
        return out


def test_no_float64_ever_reaches_a_device_without_it(monkeypatch):
    """The 'meta' device plays a device without float64: the reduction must stay on the CPU."""
    monkeypatch.setattr(helpers.device, "supports_float64", lambda device: torch.device(device).type != "meta")
    positions = torch.arange(LAST - 9, LAST + 1)
    with _NoFloat64On("meta"):
        pe = helpers.sinusoidal_pe(positions, 16, device="meta")
        cos, sin = helpers.rope_cos_sin(positions, 16, device="meta", dtype=torch.float16)
    assert pe.device.type == "meta" and pe.shape == (10, 16) and pe.dtype == torch.float32
    assert cos.device.type == "meta" and cos.shape == (10, 8) and cos.dtype == torch.float16
    # The guard itself works: without the fallback, a float64 product on 'meta' is caught.
    monkeypatch.setattr(helpers.device, "supports_float64", lambda device: True)
    with pytest.raises(AssertionError, match="float64"), _NoFloat64On("meta"):
        helpers.sinusoidal_pe(positions, 16, device="meta")


def test_float64_table_on_a_device_without_float64_is_refused(monkeypatch):
    monkeypatch.setattr(helpers.device, "supports_float64", lambda device: False)
    with pytest.raises(TypeError, match="float64"):
        helpers.sinusoidal_pe(8, 4, dtype=torch.float64)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_the_float64_product_is_formed_on_a_device_that_has_float64(dtype):
    """The 'meta' device plays a GPU: positions and speeds move there, the CPU does no float64 work."""
    from helpers._angles import sin_cos_interleaved, sin_cos_table

    positions, speeds = torch.arange(LAST - 9, LAST + 1), helpers.frequencies(16)  # on the CPU
    for make in (sin_cos_table, sin_cos_interleaved):
        with MadeOn(torch.float64) as mode:
            out = make(positions, speeds, device="meta", dtype=dtype)
        for table in out if isinstance(out, tuple) else (out,):
            assert table.device.type == "meta" and table.dtype == dtype
        assert mode.devices == {"meta"}, f"{make.__name__} formed float64 tensors on {mode.devices}"


@pytest.fixture
def float64_by_default():
    """torch's default dtype set to float64, as some notebooks do (the test may set others), restored after the test."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


def test_tables_do_not_depend_on_torchs_default_dtype(float64_by_default):
    positions = sampled_positions()[-300:]
    torch.set_default_dtype(torch.float32)
    pe, (cos, sin) = helpers.sinusoidal_pe(positions, 24), helpers.rope_cos_sin(positions, 24)
    # float64, and the short dtypes that some model code makes the default (a float32 table must
    # not pass through one of them).
    for default in (torch.float64, torch.bfloat16, torch.float16):
        torch.set_default_dtype(default)
        pe64, (cos64, sin64) = helpers.sinusoidal_pe(positions, 24), helpers.rope_cos_sin(positions, 24)
        for want, got in ((pe, pe64), (cos, cos64), (sin, sin64)):
            assert got.dtype == torch.float32 and torch.equal(got, want), default
