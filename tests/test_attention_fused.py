"""The fused and FlexAttention paths of ``helpers.attention`` against the teaching path and a slow loop.

Every path must give the same output for every combination of bias, causal mask and ALiBi, for
any leading dimensions, and with fewer queries than keys (decoding), where the causal mask and
the ALiBi distance align bottom-right: query ``i`` sits at position ``i + Tk - Tq``.
"""

from __future__ import annotations

import importlib
import itertools
import math

import pytest
import torch
from _support import device_params
from torch.utils._python_dispatch import TorchDispatchMode

import helpers

attention_module = importlib.import_module("helpers.attention")  # the module; helpers.attention is the function


def slow_attention(q, k, v, *, bias=None, causal=False, slopes=None):
    """One query at a time with Python loops over keys, in float64. Leading dims ``(B, H)``."""
    b_, h_, tq, d = q.shape
    tk = k.shape[-2]
    out = torch.zeros(b_, h_, tq, v.shape[-1], dtype=torch.float64)
    for b, h, i in itertools.product(range(b_), range(h_), range(tq)):
        position = i + tk - tq  # bottom-right alignment
        scores = []
        for j in range(tk):
            if causal and j > position:
                scores.append(-math.inf)
                continue
            s = float(q[b, h, i].double() @ k[b, h, j].double()) / math.sqrt(d)
            if bias is not None:
                s += float(bias.expand(b_, h_, tq, tk)[b, h, i, j])
            if slopes is not None:
                s -= float(slopes[h]) * abs(position - j)
            scores.append(s)
        weights = torch.softmax(torch.tensor(scores, dtype=torch.float64), dim=0)  # (Tk,)
        out[b, h, i] = weights @ v[b, h].double()
    return out


def _qkv(tq, tk, *, lead=(2, 3), d=8, dv=8, device="cpu", dtype=torch.float64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(*lead, tq, d, generator=gen, dtype=torch.float64)
    k = torch.randn(*lead, tk, d, generator=gen, dtype=torch.float64)
    v = torch.randn(*lead, tk, dv, generator=gen, dtype=torch.float64)
    return (t.to(device=device, dtype=dtype) for t in (q, k, v))


CASES = list(itertools.product([False, True], [False, True], [False, True], [(5, 5), (3, 7), (1, 6)]))


@pytest.mark.parametrize("use_bias, causal, use_alibi, lengths", CASES)
def test_fused_equals_eager_equals_slow_loop(use_bias, causal, use_alibi, lengths):
    tq, tk = lengths
    q, k, v = _qkv(tq, tk)
    gen = torch.Generator().manual_seed(1)
    bias = torch.randn(3, tq, tk, generator=gen, dtype=torch.float64) if use_bias else None  # (H, Tq, Tk)
    slopes = helpers.alibi_slopes(3) if use_alibi else None
    eager, weights = helpers.attention(q, k, v, bias=bias, causal=causal, alibi_slopes=slopes)
    fused, none = helpers.attention(
        q, k, v, bias=bias, causal=causal, alibi_slopes=slopes, need_weights=False, flex=False
    )
    reference = slow_attention(q, k, v, bias=bias, causal=causal, slopes=slopes)
    assert none is None and weights.shape == (2, 3, tq, tk)
    torch.testing.assert_close(eager, reference, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(fused, reference, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("q_lead, kv_lead", [((4,), (4,)), ((2, 4), (2, 4)), ((3, 2, 4), (1, 4)), ((2, 1), (2, 4))])
def test_fused_equals_eager_for_leading_dims(device, causal, q_lead, kv_lead):
    gen = torch.Generator().manual_seed(2)
    q = torch.randn(*q_lead, 4, 16, generator=gen).to(device)
    k = torch.randn(*kv_lead, 9, 16, generator=gen).to(device)
    v = torch.randn(*kv_lead, 9, 12, generator=gen).to(device)
    slopes = helpers.alibi_slopes(4).float().to(device)
    eager, _ = helpers.attention(q, k, v, causal=causal, alibi_slopes=slopes)
    fused, _ = helpers.attention(q, k, v, causal=causal, alibi_slopes=slopes, need_weights=False, flex=False)
    plain, _ = helpers.attention(q, k, v, causal=causal, need_weights=False)
    plain_eager, _ = helpers.attention(q, k, v, causal=causal)
    assert fused.shape == eager.shape == (*torch.broadcast_shapes(q_lead, kv_lead, (4,)), 4, 12)
    torch.testing.assert_close(fused, eager, rtol=2e-5, atol=2e-5)
    torch.testing.assert_close(plain, plain_eager, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("need_weights", [True, False])
def test_alibi_slopes_equal_the_alibi_bias_tensor(need_weights):
    q, k, v = _qkv(4, 10, lead=(2, 8))
    for causal in (True, False):
        via_slopes, _ = helpers.attention(
            q, k, v, causal=causal, alibi_slopes=helpers.alibi_slopes(8), need_weights=need_weights, flex=False
        )
        via_bias, _ = helpers.attention(
            q,
            k,
            v,
            causal=causal,
            need_weights=need_weights,
            bias=helpers.alibi_bias(8, 4, 10, causal=causal, dtype=torch.float64),
        )
        torch.testing.assert_close(via_slopes, via_bias, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("use_alibi", [False, True])
@pytest.mark.parametrize("need_weights", [True, False])
def test_decoding_rows_equal_the_last_rows_of_full_attention(use_alibi, need_weights):
    q, k, v = _qkv(12, 12, lead=(1, 4))
    slopes = helpers.alibi_slopes(4) if use_alibi else None
    full, _ = helpers.attention(q, k, v, causal=True, alibi_slopes=slopes, need_weights=need_weights, flex=False)
    for n in (1, 3):
        step, _ = helpers.attention(
            q[..., -n:, :], k, v, causal=True, alibi_slopes=slopes, need_weights=need_weights, flex=False
        )
        torch.testing.assert_close(step, full[..., -n:, :], rtol=1e-12, atol=1e-12)


def test_bottom_right_alignment_differs_from_torch_is_causal():
    """One query against six keys sees all six here; torch's top-left ``is_causal`` would show it one."""
    q, k, v = _qkv(1, 6)
    causal, _ = helpers.attention(q, k, v, causal=True, need_weights=False)
    unmasked, _ = helpers.attention(q, k, v, need_weights=False)
    top_left = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(causal, unmasked, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(top_left, v[..., :1, :])
    assert not torch.allclose(causal, top_left)


def test_gradients_of_fused_equal_eager():
    q, k, v = _qkv(6, 6, lead=(2, 2))
    bias = helpers.alibi_bias(2, 6, dtype=torch.float64)
    grads = []
    for need_weights in (True, False):
        leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
        out, _ = helpers.attention(*leaves, bias=bias, causal=True, need_weights=need_weights)
        (out * torch.linspace(-1, 1, out.numel(), dtype=torch.float64).reshape(out.shape)).sum().backward()
        grads.append([t.grad for t in leaves])
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_bad_alibi_and_flex_arguments_name_the_problem():
    q, k, v = _qkv(4, 4, lead=(2, 3))
    with pytest.raises(ValueError, match=r"alibi_slopes.*\(H,\)"):
        helpers.attention(q, k, v, alibi_slopes=torch.ones(3, 1, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"alibi_slopes has 5 slopes.*head dimension"):
        helpers.attention(q, k, v, alibi_slopes=torch.ones(5, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"alibi_slopes.*floating"):
        helpers.attention(q, k, v, alibi_slopes=torch.ones(3, dtype=torch.int64))
    with pytest.raises(TypeError, match=r"flex must be None, True or False, got 'yes'"):
        helpers.attention(q, k, v, alibi_slopes=helpers.alibi_slopes(3), need_weights=False, flex="yes")
    with pytest.raises(ValueError, match=r"flex=True applies to ALiBi only.*need_weights=True"):
        helpers.attention(q, k, v, alibi_slopes=helpers.alibi_slopes(3), flex=True)
    # float64 is not sent to FlexAttention on the CPU: asking for it anyway says why.
    with pytest.raises(ValueError, match=r"flex=True.*float32"):
        helpers.attention(q, k, v, alibi_slopes=helpers.alibi_slopes(3), need_weights=False, flex=True)


def _flex_or_skip(q, k, v):
    reason = attention_module._flex_unavailable(q, k, v)
    if reason is not None:
        pytest.skip(f"FlexAttention unavailable: {reason}")


# 300 keys span three blocks of 128; at 129 a block's last query sits just past a block
# boundary, where a block mask that is off by one drops or adds a whole key block.
FLEX_CASES = [(True, 300, 300), (True, 1, 300), (False, 300, 300), (True, 129, 129), (True, 1, 129)]


@pytest.mark.slow
@pytest.mark.parametrize("causal, tq, tk", FLEX_CASES)
def test_flex_alibi_equals_materialised_bias(causal, tq, tk):
    """Compiled FlexAttention (score modifier + block mask) against the materialised ALiBi bias.

    300 keys span three blocks of 128, so the block mask's partial and skipped blocks are used.
    """
    q, k, v = _qkv(tq, tk, lead=(2, 4), d=16, dv=16, dtype=torch.float32)
    _flex_or_skip(q, k, v)
    slopes = helpers.alibi_slopes(4).float()
    flex, _ = helpers.attention(q, k, v, causal=causal, alibi_slopes=slopes, need_weights=False, flex=True)
    materialised, _ = helpers.attention(q, k, v, causal=causal, alibi_slopes=slopes, need_weights=False, flex=False)
    torch.testing.assert_close(flex, materialised, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("causal, tq, tk", FLEX_CASES)
def test_flex_alibi_on_cuda(causal, tq, tk):
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    q, k, v = _qkv(tq, tk, lead=(2, 4), d=64, dv=64, device="cuda", dtype=torch.float32)
    _flex_or_skip(q, k, v)
    slopes = helpers.alibi_slopes(4).float().cuda()
    flex, _ = helpers.attention(q, k, v, causal=causal, alibi_slopes=slopes, need_weights=False, flex=True)
    eager, _ = helpers.attention(q.double(), k.double(), v.double(), causal=causal, alibi_slopes=slopes.double())
    torch.testing.assert_close(flex.double(), eager, rtol=2e-4, atol=2e-4)


class _LargestTensor(TorchDispatchMode):
    """Records the largest number of elements of any tensor an operation produces."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


@pytest.mark.parametrize("need_weights, expect_square", [(False, False), (True, True)])
def test_fused_causal_attention_stores_no_square_tensor(need_weights, expect_square):
    """Causal, Tq == Tk, no bias: the fused path never makes a (T, T) tensor, not even the mask."""
    q, k, v = _qkv(512, 512, lead=(1, 1), d=16, dv=16, dtype=torch.float32)
    with _LargestTensor() as probe:
        helpers.attention(q, k, v, causal=True, need_weights=need_weights)
    assert (probe.largest >= 512 * 512) == expect_square, probe.largest
