"""Unit tests of the core functions against slow references and closed forms."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
import torch
from _support import device_params, raises_naming
from scipy.integrate import quad
from torch.utils._python_dispatch import TorchDispatchMode

import helpers


def slow_pe(positions, d, base=10000.0):
    """Vaswani's formula written out with Python floats, one entry at a time."""
    rows = []
    for m in positions:
        row = []
        for i in range(d // 2):
            angle = m / base ** (2 * i / d)
            row += [math.sin(angle), math.cos(angle)]
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("d,base", [(2, 10000.0), (8, 10000.0), (64, 10000.0), (10, 500.0), (128, 1e6)])
def test_sinusoidal_pe_matches_the_formula(device, d, base):
    table = helpers.sinusoidal_pe(50, d, base, device=device, dtype=torch.float64)
    assert table.shape == (50, d) and table.device.type == device
    torch.testing.assert_close(table.cpu(), slow_pe(range(50), d, base), atol=1e-12, rtol=0)


def test_sinusoidal_pe_accepts_positions_and_follows_their_device():
    pos = torch.tensor([5, 0, 123456])
    table = helpers.sinusoidal_pe(pos, 16)
    assert table.dtype == torch.float32 and table.device == pos.device
    torch.testing.assert_close(table.double(), slow_pe([5, 0, 123456], 16), atol=1e-6, rtol=0)
    # Real-valued positions (interpolated) work too.
    half = helpers.sinusoidal_pe(torch.tensor([0.5]), 4, dtype=torch.float64)
    torch.testing.assert_close(half, slow_pe([0.5], 4), atol=1e-12, rtol=0)
    assert helpers.sinusoidal_pe(0, 4).shape == (0, 4)


def test_float32_table_is_precise_at_five_million():
    pos = torch.arange(5_000_000 - 1000, 5_000_001)
    fast = helpers.sinusoidal_pe(pos, 64).double()
    exact = helpers.sinusoidal_pe(pos, 64, dtype=torch.float64)
    assert float((fast - exact).abs().max()) < 1e-6
    # The common float32 formula of article 001 section 8.1 is far off out here.
    angle = pos.float()[:, None] * helpers.frequencies(64, dtype=torch.float32)[None, :]
    assert float((torch.sin(angle).double() - exact[:, 0::2]).abs().max()) > 1e-2


@pytest.mark.parametrize("d", [2, 8, 64, 512])
def test_position_kernel_is_the_normalised_inner_product(d):
    pe = helpers.sinusoidal_pe(40, d, dtype=torch.float64)
    gram = pe @ pe.T  # (40, 40)
    delta = torch.arange(40, dtype=torch.float64)[:, None] - torch.arange(40, dtype=torch.float64)[None, :]
    torch.testing.assert_close(helpers.position_kernel(delta, d) * d / 2, gram, atol=1e-10, rtol=0)


def test_position_kernel_keeps_the_shape_of_its_input():
    assert helpers.position_kernel(3, 8).shape == ()
    assert helpers.position_kernel(np.zeros((2, 3)), 8).shape == (2, 3)
    big = helpers.position_kernel(torch.arange(200_000, dtype=torch.float32), 64)
    assert big.shape == (200_000,) and big.dtype == torch.float32


def test_position_kernel_output_dtype_and_device():
    # Integer distances give float64 (not integers), a float32 array float64 like any array, a
    # tensor's floating dtype is kept, and the result stays on the tensor's device (meta here).
    ints = helpers.position_kernel(torch.tensor([0, 1, 2]), 8)
    assert ints.dtype == torch.float64
    torch.testing.assert_close(ints, helpers.position_kernel(torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64), 8))
    assert 0.5 < float(ints[1]) < 1.0
    array = helpers.position_kernel(np.array([1.0, 2.0], dtype=np.float32), 8)
    assert array.dtype == torch.float64
    assert helpers.position_kernel(torch.zeros(5, device="meta"), 8).device.type == "meta"


class _CosineSizes(TorchDispatchMode):
    """Records how many angles each ``torch.cos`` call takes."""

    def __init__(self):
        super().__init__()
        self.sizes = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.cos.default:
            self.sizes.append(args[0].numel())
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("n_delta, half, rows", [(10, 1 << 20, [4, 4, 2]), (2, (1 << 22) + 1, [1, 1])])
def test_position_kernel_sums_in_chunks_of_at_most_4m_angles(n_delta, half, rows):
    # As many distances per chunk as fit in 2^22 angles (one at a time when one row is larger), every
    # distance in exactly one chunk: memory stays bounded and the values are those of one big product.
    delta = torch.arange(n_delta, dtype=torch.float64)
    with _CosineSizes() as mode:
        kernel = helpers.position_kernel(delta, 2 * half)
    assert mode.sizes == [r * half for r in rows]
    theta = helpers.frequencies(2 * half)
    direct = torch.stack([torch.cos(m * theta).mean() for m in delta.tolist()])
    torch.testing.assert_close(kernel, direct, atol=1e-12, rtol=0)


def test_continuous_kernel_default_base_is_ten_thousand():
    delta = torch.tensor([0.5, 3.0, 250.0, 4000.0])
    torch.testing.assert_close(helpers.continuous_kernel(delta), helpers.continuous_kernel(delta, 10000.0))
    assert not torch.allclose(helpers.continuous_kernel(delta), helpers.continuous_kernel(delta, 10001.0), atol=1e-9)


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: helpers.position_kernel(True, 8), TypeError, ["delta", "bool"]),
        (lambda: helpers.position_kernel("far", 8), TypeError, ["delta", "str"]),
        (lambda: helpers.position_kernel(3, 8, base=1.0), ValueError, ["base", "1.0", "> 1"]),
        (lambda: helpers.position_kernel(3, 8, base="big"), TypeError, ["base", "str"]),
        (lambda: helpers.continuous_kernel(3, base=1.0), ValueError, ["base", "1.0", "> 1"]),
        (lambda: helpers.continuous_kernel(torch.tensor([1j]), base=100.0), TypeError, ["delta", "torch.complex64"]),
    ],
)
def test_kernel_bad_input_names_the_argument(call, error, words):
    raises_naming(error, call, *words)


@pytest.mark.parametrize("base", [100.0, 10000.0])
@pytest.mark.parametrize("delta", [0.0, 0.5, 3.0, 17.0, 250.0, 4000.0])
def test_continuous_kernel_matches_quadrature(base, delta):
    value, _ = quad(lambda t: math.cos(delta * base ** (-t)), 0.0, 1.0, limit=500)
    assert float(helpers.continuous_kernel(delta, base)) == pytest.approx(value, abs=1e-9)


def test_continuous_kernel_is_the_limit_of_many_hands():
    delta = torch.linspace(0, 300, 61, dtype=torch.float64)
    limit = helpers.continuous_kernel(delta)
    gap_64 = (helpers.position_kernel(delta, 64) - limit).abs().max()
    gap_4096 = (helpers.position_kernel(delta, 4096) - limit).abs().max()
    assert gap_4096 < gap_64 and gap_4096 < 0.01


def test_frequencies_follow_the_geometric_schedule():
    theta = helpers.frequencies(16, 10000.0)
    ratios = theta[1:] / theta[:-1]
    torch.testing.assert_close(ratios, torch.full_like(ratios, 10000.0 ** (-2 / 16)))
    assert helpers.frequencies(16, dtype=torch.float32).dtype == torch.float32


def test_frequencies_and_tables_are_built_on_the_device_asked_for():
    # The meta device holds shapes only: a tensor left on the CPU would be seen here.
    assert helpers.frequencies(8, device="meta").device.type == "meta"
    assert helpers.sinusoidal_pe(5, 8, device="meta").device.type == "meta"
    assert helpers.sinusoidal_pe(torch.arange(5, device="meta"), 8).device.type == "meta"
    assert helpers.sinusoidal_pe(5, 8, device="meta", dtype=torch.float64).device.type == "meta"


def test_alibi_bias_forms():
    bias = helpers.alibi_bias(8, 5)
    slopes = helpers.alibi_slopes(8)
    torch.testing.assert_close(slopes, torch.tensor([2.0 ** -(k + 1) for k in range(8)], dtype=torch.float64))
    assert bias.shape == (8, 5, 5)
    assert float(bias[2, 4, 1]) == pytest.approx(-float(slopes[2]) * 3)
    assert torch.isneginf(bias[:, 1, 2]).all()
    sym = helpers.alibi_bias(8, 5, causal=False)
    torch.testing.assert_close(sym, sym.transpose(-1, -2))
    decode = helpers.alibi_bias(2, 1, 6)  # one query, the newest of six positions
    torch.testing.assert_close(decode[:, 0], helpers.alibi_bias(2, 6)[:, -1])


def test_default_device_honours_the_environment(monkeypatch):
    monkeypatch.setenv("HELPERS_DEVICE", "cpu")
    assert helpers.default_device() == torch.device("cpu")
    monkeypatch.setenv("HELPERS_DEVICE", "not-a-device")
    with pytest.raises(ValueError, match="HELPERS_DEVICE"):
        helpers.default_device()
    monkeypatch.delenv("HELPERS_DEVICE")
    expected = "cuda" if torch.cuda.is_available() else None
    assert expected is None or helpers.default_device().type == expected
    assert helpers.supports_float64("cpu") and not helpers.supports_float64("mps")


@pytest.mark.parametrize("turns, expected", [(0.5, 2), (1 / 3, 3), (0.3, 10), (0.1, 10), (0.25, 4), (5 / 12, 12)])
def test_nearest_collision_exact_returns_go_to_the_smallest_shift(turns, expected):
    # θ = 2π p/q in lowest terms: every multiple of q returns home, and round-off alone must not pick
    # which one (argmin over gaps of about 1e-16 once chose k = 58 at θ = π).
    for max_shift in (expected, 100, 1000):
        k, gap = helpers.nearest_collision(2 * math.pi * turns, max_shift)
        assert k == expected and gap < 1e-9
    assert helpers.nearest_collision(0.6 * math.pi, 100)[0] == 10  # period 3.33 tokens, yet back after 10


def test_nearest_collision_tolerance_is_an_argument():
    # θ = 1 within 100 tokens: k = 6 (gap 0.282), 19 (0.150), 44 (0.0177, the smallest). A shift whose gap is
    # within tol of the smallest counts as a tie, and ties go to the smallest k.
    assert helpers.nearest_collision(1.0, 100)[0] == 44
    assert helpers.nearest_collision(1.0, 100, tol=0.1)[0] == 44
    k, gap = helpers.nearest_collision(1.0, 100, tol=0.2)
    assert k == 19 and gap == pytest.approx(2 * abs(math.sin(9.5)))
    assert helpers.nearest_collision(1.0, 100, tol=0.3)[0] == 6
    with pytest.raises(ValueError, match="tol"):
        helpers.nearest_collision(1.0, 100, tol=-1.0)
    with pytest.raises(TypeError, match="tol"):
        helpers.nearest_collision(1.0, 100, tol="small")


def test_causal_mask_is_bottom_right_aligned():
    torch.testing.assert_close(helpers.causal_mask(3), torch.ones(3, 3, dtype=torch.bool).tril())
    # Two queries, the newest of four positions: query 0 sits at position 2, query 1 at 3.
    expected = torch.tensor([[True, True, True, False], [True, True, True, True]])
    torch.testing.assert_close(helpers.causal_mask(2, 4), expected)
    assert helpers.causal_mask(0).shape == (0, 0)
    assert helpers.causal_mask(0, 0).shape == (0, 0)
    assert helpers.causal_mask(0, 3).shape == (0, 3)


def test_causal_mask_and_attention_stay_on_the_device_of_their_inputs():
    # The meta device holds shapes only: a mask left on the CPU would meet a meta tensor and fail.
    mask = helpers.causal_mask(2, 5, device="meta")
    assert mask.device.type == "meta" and mask.shape == (2, 5) and mask.dtype == torch.bool
    q, k = torch.zeros(2, 3, 8, device="meta"), torch.zeros(2, 5, 8, device="meta")
    for need_weights in (True, False):
        out, weights = helpers.attention(q, k, k, causal=True, need_weights=need_weights)
        assert out.device.type == "meta" and out.shape == (2, 3, 8)
        assert weights is None or (weights.device.type == "meta" and weights.shape == (2, 3, 5))


def _qkv32(lead_q, lead_k, lead_v, tq=4, tk=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(*lead, t, 8, generator=gen) for lead, t in ((lead_q, tq), (lead_k, tk), (lead_v, tk)))


@pytest.mark.parametrize("heads_in", ["q", "k", "v", "slopes", "one"])
def test_alibi_heads_broadcast_like_the_bias_tensor(heads_in):
    # The head dimension (-3) may come from any one of q, k, v, or from the slopes alone (q, k, v with
    # one head); with a single head one slope is enough. ALiBi then equals its symmetric bias tensor.
    n_heads = 1 if heads_in == "one" else 3
    leads = {"q": [(3,), (), ()], "k": [(), (3,), ()], "v": [(), (), (3,)]}.get(heads_in, [(1,), (1,), (1,)])
    q, k, v = _qkv32(*leads)
    slopes = helpers.alibi_slopes(n_heads).float()
    out, weights = helpers.attention(q, k, v, alibi_slopes=slopes)
    ref, ref_weights = helpers.attention(q, k, v, bias=helpers.alibi_bias(n_heads, 4, causal=False))
    assert out.shape == (n_heads, 4, 8) and weights.shape == (n_heads, 4, 4)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(weights, ref_weights)


def _never_compile(*args, **kwargs):
    raise AssertionError("torch.compile was called, but FlexAttention does not apply here")


@pytest.mark.parametrize(
    "dtype, tq, tk",
    [(torch.float64, 3, 5), (torch.float32, 0, 5), (torch.float32, 3, 0), (torch.float32, 0, 0)],
)
def test_alibi_without_weights_compiles_nothing_where_flex_does_not_apply(monkeypatch, dtype, tq, tk):
    # float64 on the CPU, and empty queries or keys, take the materialised bias: no compiling (which
    # would take seconds), and the output of the teaching path.
    monkeypatch.setattr(torch, "compile", _never_compile)
    q, k, v = (t.to(dtype) for t in _qkv32((3,), (3,), (3,), tq=tq, tk=tk))
    slopes = helpers.alibi_slopes(3).to(dtype)
    out, none = helpers.attention(q, k, v, alibi_slopes=slopes, need_weights=False)
    teaching, _ = helpers.attention(q, k, v, alibi_slopes=slopes)
    assert none is None and out.shape == (3, tq, 8) and out.dtype == dtype
    torch.testing.assert_close(out, teaching)


def test_causal_alibi_with_more_queries_than_keys_is_refused_before_compiling(monkeypatch):
    monkeypatch.setattr(torch, "compile", _never_compile)
    q, k, v = _qkv32((3,), (3,), (3,), tq=5, tk=3)
    raises_naming(
        ValueError,
        lambda: helpers.attention(
            q, k, v, causal=True, alibi_slopes=helpers.alibi_slopes(3).float(), need_weights=False
        ),
        "n_queries",
        "5",
        "n_keys",
        "3",
    )


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
@pytest.mark.parametrize("tq, tk, flex", [(1, 1, True), (1, 6, True), (4, 4, True), (640, 640, None)])
def test_flex_alibi_is_used_for_one_query_and_one_key_and_broadcast_heads(monkeypatch, tq, tk, flex):
    # flex=True uses FlexAttention wherever it is available, a decoding step (one query) and a single
    # key included; flex=None where it pays (3 heads x 640 x 640 = 1,228,800 scores, over
    # FLEX_MIN_SCORES = 2^20); q, k, v with one head broadcast against the slopes' three. torch.compile
    # is replaced by a recorder that runs FlexAttention uncompiled, so that no compiling slows the test.
    from torch.nn.attention.flex_attention import flex_attention

    q, k, v = _qkv32((1,), (1,), (1,), tq=tq, tk=tk)
    reason = importlib.import_module("helpers.self_attention")._flex_unavailable(q, k, v)
    if reason is not None:
        pytest.skip(f"FlexAttention unavailable: {reason}")
    compiled = []

    def record(fn, *args, **kwargs):
        compiled.append(fn)
        return fn

    monkeypatch.setattr(torch, "compile", record)
    slopes = helpers.alibi_slopes(3).float()
    out, none = helpers.attention(q, k, v, causal=True, alibi_slopes=slopes, need_weights=False, flex=flex)
    assert none is None and flex_attention in compiled
    teaching, _ = helpers.attention(q, k, v, causal=True, alibi_slopes=slopes)
    assert out.shape == (3, tq, 8)
    torch.testing.assert_close(out, teaching)


@pytest.mark.parametrize("device", device_params())
def test_attention_with_bias_and_causal_mask_runs_on_the_device_of_its_inputs(device):
    # The causal mask is built on q's device: one left on the CPU would fail against CUDA tensors.
    q, k, v = _qkv32((2,), (2,), (2,), tq=3, tk=5)
    bias = torch.randn(3, 5, generator=torch.Generator().manual_seed(1))
    on_cpu, _ = helpers.attention(q, k, v, bias=bias, causal=True)
    for need_weights in (True, False):
        out, _ = helpers.attention(
            *(t.to(device) for t in (q, k, v)), bias=bias.to(device), causal=True, need_weights=need_weights
        )
        assert out.device.type == device
        torch.testing.assert_close(out.cpu(), on_cpu, rtol=1e-4, atol=1e-5)


def test_attention_bias_broadcasts_over_queries_and_keys():
    # A bias of shape (Tq, 1) adds one constant per query, which the softmax ignores; one of shape (1, Tk)
    # or (1, 1) acts as its expanded (Tq, Tk) copy.
    q, k, v = _qkv32((2,), (2,), (2,), tq=3, tk=5)
    gen = torch.Generator().manual_seed(2)
    per_query, per_key = torch.randn(3, 1, generator=gen), torch.randn(1, 5, generator=gen)
    plain, plain_weights = helpers.attention(q, k, v)
    out, weights = helpers.attention(q, k, v, bias=per_query)
    torch.testing.assert_close(weights, plain_weights)
    torch.testing.assert_close(out, plain)
    for bias in (per_key, per_key[:, :1]):
        out, weights = helpers.attention(q, k, v, bias=bias)
        expanded, expanded_weights = helpers.attention(q, k, v, bias=bias.expand(3, 5))
        torch.testing.assert_close(weights, expanded_weights)
        torch.testing.assert_close(out, expanded)
