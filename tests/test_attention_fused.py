"""The fused and FlexAttention paths of ``helpers.attention`` against the teaching path and a slow loop.

Every path must give the same output for every combination of bias, causal mask and ALiBi, for
any leading dimensions, and with fewer queries than keys (decoding), where the causal mask and
the ALiBi distance align bottom-right: query ``i`` sits at position ``i + Tk - Tq``.
"""

from __future__ import annotations

import importlib
import itertools
import math
import re
import time
import types
import warnings

import pytest
import torch
import torch.utils._triton
from _support import device_params, raises_naming
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

import helpers

attention_module = importlib.import_module("helpers.self_attention")


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


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("tq, tk", [(4, 4), (1, 6), (3, 7)])
def test_fused_path_gives_q_the_heads_that_only_the_bias_or_the_slopes_have(causal, tq, tk):
    """q, k, v with one head (or none) against three slopes or a three-head bias: torch's fused kernel
    broadcasts q against k and v but not against the mask, which raised a RuntimeError before."""
    q, k, v = _qkv(tq, tk, lead=(1,))  # (1, T, d): one head, broadcast
    slopes = helpers.alibi_slopes(3)
    bias = torch.randn(3, tq, tk, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    for kwargs in ({"alibi_slopes": slopes}, {"bias": bias}, {"alibi_slopes": slopes, "bias": bias}):
        eager, _ = helpers.attention(q, k, v, causal=causal, **kwargs)
        fused, _ = helpers.attention(q, k, v, causal=causal, need_weights=False, flex=False, **kwargs)
        assert eager.shape == fused.shape == (3, tq, 8)
        torch.testing.assert_close(fused, eager, rtol=1e-12, atol=1e-12)
    # With a bias alone, q, k, v may have no head dimension at all: (T, d).
    no_heads, _ = helpers.attention(q[0], k[0], v[0], bias=bias, causal=causal, need_weights=False)
    eager, _ = helpers.attention(q[0], k[0], v[0], bias=bias, causal=causal)
    assert no_heads.shape == eager.shape == (3, tq, 8)
    torch.testing.assert_close(no_heads, eager, rtol=1e-12, atol=1e-12)


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
    slopes = helpers.alibi_slopes(4).cuda()  # float64, as alibi_slopes makes them: the kernel computes in float32
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


def _says(reason, *words):
    """``reason`` holds every one of ``words`` as a whole word (as ``raises_naming`` checks a message)."""
    assert reason is not None
    for word in words:
        assert re.search(rf"(?<![\w.]){re.escape(word)}(?!\w)", reason), f"{word!r} missing from {reason!r}"


def _found_compilers(monkeypatch, *found, platform="linux"):
    """Make ``_flex_unavailable`` see exactly the C++ compilers ``found`` on the PATH, on ``platform``."""
    which = lambda name: f"/usr/bin/{name}" if name in found else None  # noqa: E731
    monkeypatch.setattr(attention_module, "shutil", types.SimpleNamespace(which=which))
    monkeypatch.setattr(attention_module, "sys", types.SimpleNamespace(platform=platform))


def _alibi(q, k, v, flex):
    """Causal ALiBi attention through the fused path, with FlexAttention per ``flex``."""
    slopes = helpers.alibi_slopes(q.shape[-3]).to(q.device)
    return helpers.attention(q, k, v, causal=True, alibi_slopes=slopes, need_weights=False, flex=flex)[0]


@pytest.mark.parametrize("compiler", ["g++", "c++", "clang++"])
def test_flex_runs_on_the_cpu_with_any_one_cpp_compiler_in_grad_mode(monkeypatch, compiler):
    """float32, a compiler, nothing requiring grad: FlexAttention is used, even with grad mode on."""
    _found_compilers(monkeypatch, compiler)
    q, k, v = _qkv(4, 6, dtype=torch.float32)
    assert torch.is_grad_enabled()
    assert attention_module._flex_unavailable(q, k, v) is None


@pytest.mark.parametrize(
    "platform, found, why", [("linux", (), "none was found"), ("win32", ("g++", "c++", "clang++"), "Windows")]
)
def test_flex_without_a_usable_cpp_compiler_says_why_or_falls_back(monkeypatch, platform, found, why):
    """No compiler on the PATH, or Windows: flex=True says why; flex=None uses the materialised bias."""
    _found_compilers(monkeypatch, *found, platform=platform)
    q, k, v = _qkv(4, 6, dtype=torch.float32)
    raises_naming(ValueError, lambda: _alibi(q, k, v, True), "flex=True", "torch.compile", "CPU", "C++", "g++", why)
    torch.testing.assert_close(_alibi(q, k, v, None), _alibi(q, k, v, False), rtol=0, atol=0)


def test_flex_on_the_cpu_refuses_inputs_that_require_grad(monkeypatch):
    """The CPU kernel has no backward pass: inputs requiring grad are refused, unless grad mode is off."""
    _found_compilers(monkeypatch, "g++")
    q, k, v = _qkv(4, 6, dtype=torch.float32)
    q.requires_grad_(True)
    raises_naming(ValueError, lambda: _alibi(q, k, v, True), "flex=True", "FlexAttention", "CPU", "grad")
    with torch.no_grad():
        assert attention_module._flex_unavailable(q, k, v) is None


def test_flex_says_when_torch_compile_does_not_support_this_python(monkeypatch):
    _found_compilers(monkeypatch, "g++")
    monkeypatch.setattr(torch._dynamo, "is_dynamo_supported", lambda: False)
    q, k, v = _qkv(4, 6, dtype=torch.float32)
    raises_naming(ValueError, lambda: _alibi(q, k, v, True), "flex=True", "torch.compile", "FlexAttention", "Python")
    torch.testing.assert_close(_alibi(q, k, v, None), _alibi(q, k, v, False), rtol=0, atol=0)


def test_flex_says_when_the_value_width_differs_from_the_query_width(monkeypatch):
    _found_compilers(monkeypatch, "g++")
    q, k, v = _qkv(5, 7, d=8, dv=12, dtype=torch.float32)  # lead (2, 3): every size differs from d and dv
    raises_naming(ValueError, lambda: _alibi(q, k, v, True), "flex=True", "dv = 12", "d = 8")
    torch.testing.assert_close(_alibi(q, k, v, None), _alibi(q, k, v, False), rtol=0, atol=0)


@pytest.mark.parametrize("triton", [False, True])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_flex_on_cuda_needs_triton_and_a_kernel_dtype(monkeypatch, triton, dtype):
    """CUDA tensors without a GPU: fake tensors carry a real CUDA device and dtype, and no data."""
    monkeypatch.setattr(torch.utils._triton, "has_triton", lambda: triton)
    with FakeTensorMode():
        q = torch.empty(2, 3, 5, 8, device="cuda", dtype=dtype)
    reason = attention_module._flex_unavailable(q, q, q)
    if not triton:
        _says(reason, "FlexAttention", "CUDA", "Triton")
    elif dtype == torch.float64:
        _says(reason, "CUDA", "torch.float64")
    else:
        assert reason is None


def test_flex_is_not_used_on_other_devices(monkeypatch):
    monkeypatch.setattr(torch.utils._triton, "has_triton", lambda: True)
    q = torch.empty(2, 3, 5, 8, device="meta")
    _says(attention_module._flex_unavailable(q, q, q), "meta")


@pytest.mark.parametrize("tq, tk", [(300, 300), (1, 300), (129, 129), (1, 129), (200, 300), (127, 255)])
def test_causal_block_mask_keeps_exactly_the_key_blocks_with_a_visible_key(tq, tk):
    """FlexAttention tiles of 128 x 128: a tile is listed if and only if the causal mask shows a key in it.

    A missing tile drops keys; an extra one (above the diagonal) is computed only to be masked out.
    """
    pytest.importorskip("torch.nn.attention.flex_attention")
    block = 128  # FlexAttention's default tile, the one its kernels are tuned for
    n_q, n_k = -(-tq // block), -(-tk // block)
    padded = torch.zeros(n_q * block, n_k * block, dtype=torch.bool)
    padded[:tq, :tk] = helpers.causal_mask(tq, tk)
    expected = padded.reshape(n_q, block, n_k, block).any(dim=3).any(dim=1)  # (n_q, n_k)
    block_mask = attention_module._causal_block_mask(tq, tk, "cpu")
    assert block_mask.to_dense()[0, 0].bool().equal(expected)
    # The block tables are int32, as create_block_mask makes them and the kernels index them.
    assert block_mask.kv_num_blocks.dtype == block_mask.kv_indices.dtype == torch.int32
    # Inside a listed tile, the mask_mod hides the keys after the query (bottom-right aligned).
    visible = block_mask.mask_mod(0, 0, torch.arange(tq)[:, None], torch.arange(tk)[None, :])
    assert visible.equal(helpers.causal_mask(tq, tk))


def test_alibi_bias_and_block_mask_are_made_on_the_device_of_the_inputs():
    """On the meta device, which refuses to mix with CPU tensors, as a GPU does (no GPU needed)."""
    pytest.importorskip("torch.nn.attention.flex_attention")
    slopes = torch.ones(3, device="meta")
    bias = attention_module._alibi_distance_bias(slopes, 4, 9, dtype=torch.float32)
    assert (bias.shape, bias.device, bias.dtype) == ((3, 4, 9), torch.device("meta"), torch.float32)
    block_mask = attention_module._causal_block_mask(200, 300, torch.device("meta"))
    tables = (block_mask.kv_num_blocks, block_mask.kv_indices, block_mask.q_num_blocks, block_mask.q_indices)
    assert {t.device for t in tables} == {torch.device("meta")}


@pytest.fixture
def eager_flex(monkeypatch):
    """``torch.compile`` made the identity, so that ``_flex_alibi`` runs torch's uncompiled FlexAttention.

    Uncompiled, FlexAttention computes the same attention densely (its reference implementation) in a
    fraction of a second, where compiling takes seconds per shape; the slow tests check the compiled kernel.
    """
    flex_module = pytest.importorskip("torch.nn.attention.flex_attention")
    monkeypatch.setattr(flex_module, "_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG", True)  # no compiling inside either
    monkeypatch.setattr(torch, "compile", lambda fn, **options: fn)
    monkeypatch.setattr(attention_module, "_flex_failures", {})
    _found_compilers(monkeypatch, "g++")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("q_lead, kv_lead", [((4,), (4,)), ((3, 2, 4), (1, 4))])
def test_flex_alibi_for_leading_dims(eager_flex, causal, q_lead, kv_lead):
    """Heads only, or several batch dimensions that broadcast: the same output as the materialised bias."""
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(*q_lead, 4, 16, generator=gen)
    k = torch.randn(*kv_lead, 9, 16, generator=gen)
    v = torch.randn(*kv_lead, 9, 16, generator=gen)
    slopes = helpers.alibi_slopes(4)
    flex, _ = helpers.attention(q, k, v, causal=causal, alibi_slopes=slopes, need_weights=False, flex=True)
    materialised, _ = helpers.attention(q, k, v, causal=causal, alibi_slopes=slopes, need_weights=False, flex=False)
    assert flex.shape == (*torch.broadcast_shapes(q_lead, kv_lead), 4, 16)
    torch.testing.assert_close(flex, materialised, rtol=1e-5, atol=1e-5)


def test_flex_silences_only_the_script_method_deprecation_of_the_compiler(eager_flex, monkeypatch):
    """Compiling imports torch.utils.mkldnn, which warns that ``torch.jit.script_method`` is deprecated.

    That warning, which the user can do nothing about, is hidden; any other warning still reaches the user.
    """

    def compile_that_warns(fn, **options):
        def compiled(*args, **kwargs):
            warnings.warn("`torch.jit.script_method` is deprecated", DeprecationWarning, stacklevel=1)
            warnings.warn("another deprecation", DeprecationWarning, stacklevel=1)
            return fn(*args, **kwargs)

        return compiled

    monkeypatch.setattr(torch, "compile", compile_that_warns)
    q, k, v = _qkv(4, 6, dtype=torch.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _alibi(q, k, v, True)
    assert [str(w.message) for w in caught] == ["another deprecation"]


# ---------------------------------------------------------------------------------------------
# Decoding with ALiBi: default arguments never compile, and FlexAttention that fails to compile
# falls back to the materialised bias.

# One query against 512 keys first: with static shapes, torch 2.14's compiled CPU FlexAttention
# failed there ("InductorError: CppCompileError ... 'full_kv_num_blocks' was not declared in this
# scope"), and 1,024 and 2,048 keys did the same; every new key length compiled for seconds.
DECODE_KEYS = [512, 513, 514, 1024, 2048]


def _decode_step(n_keys, *, seed=0, device="cpu"):
    """One query against ``n_keys`` keys, 4 heads of width 16, float32: the last step of a decode loop."""
    return _qkv(1, n_keys, lead=(1, 4), d=16, dv=16, device=device, dtype=torch.float32, seed=seed)


def test_decode_loop_with_default_arguments_compiles_nothing_and_agrees(monkeypatch):
    """A decode loop of growing length, ``attention(q, k, v, alibi_slopes=..., causal=True, need_weights=False)``.

    Every step completes in well under a second (no compiling: torch.compile is watched), and agrees
    with the materialised bias (``flex=False``) and with the teaching path. Where a C++ compiler is
    missing, the same default call takes the same plain path, so the check holds there too.
    """
    compiled = []
    real_compile = torch.compile

    def watch(fn, **options):
        compiled.append(fn)
        return real_compile(fn, **options)

    monkeypatch.setattr(torch, "compile", watch)
    slopes = helpers.alibi_slopes(4).float()
    seconds = []
    for step, n_keys in enumerate(DECODE_KEYS):
        q, k, v = _decode_step(n_keys, seed=step)
        start = time.perf_counter()
        out, none = helpers.attention(q, k, v, alibi_slopes=slopes, causal=True, need_weights=False)
        seconds.append(time.perf_counter() - start)
        plain, _ = helpers.attention(q, k, v, alibi_slopes=slopes, causal=True, need_weights=False, flex=False)
        teaching, _ = helpers.attention(q, k, v, alibi_slopes=slopes, causal=True)
        assert none is None and out.shape == (1, 4, 1, 16)
        torch.testing.assert_close(out, plain, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(out, teaching, rtol=1e-5, atol=1e-5)
    assert compiled == []
    assert max(seconds) < 1.0, seconds  # compiling takes seconds; a step of plain attention, milliseconds


@pytest.mark.parametrize(
    "tq, tk, heads, used",
    [
        (1, 1 << 18, 4, False),  # one query: never, however many keys (4 x 262,144 = 2^20 scores)
        (511, 512, 4, False),  # 1,046,528 scores: just under FLEX_MIN_SCORES = 2^20
        (512, 512, 4, True),  # 2^20 scores exactly
        (2, 1 << 17, 4, True),  # two queries are enough when the keys are many
    ],
)
def test_flex_none_compiles_only_where_it_pays(eager_flex, monkeypatch, tq, tk, heads, used):
    """flex=None: FlexAttention for two queries or more and at least FLEX_MIN_SCORES scores H·Tq·Tk."""
    assert attention_module.FLEX_MIN_SCORES == 1 << 20
    compiled = []
    monkeypatch.setattr(torch, "compile", lambda fn, **options: compiled.append(options) or fn)
    q, k, v = _qkv(tq, tk, lead=(1, heads), d=8, dv=8, dtype=torch.float32)
    slopes = helpers.alibi_slopes(heads).float()
    out, _ = helpers.attention(q, k, v, causal=True, alibi_slopes=slopes, need_weights=False)
    assert compiled == ([{"dynamic": True}] if used else [])
    plain, _ = helpers.attention(q, k, v, causal=True, alibi_slopes=slopes, need_weights=False, flex=False)
    torch.testing.assert_close(out, plain, rtol=1e-5, atol=1e-5)


def test_flex_is_compiled_once_with_dynamic_shapes(eager_flex, monkeypatch):
    """On the CPU, new lengths reuse one compiled FlexAttention: torch.compile is called once, dynamic=True."""
    compiled = []
    monkeypatch.setattr(torch, "compile", lambda fn, **options: compiled.append(options) or fn)
    slopes = helpers.alibi_slopes(4).float()
    for tq, tk in [(1, 511), (1, 512), (3, 700), (8, 8)]:
        q, k, v = _qkv(tq, tk, lead=(1, 4), d=8, dv=8, dtype=torch.float32)
        helpers.attention(q, k, v, causal=True, alibi_slopes=slopes, need_weights=False, flex=True)
    assert compiled == [{"dynamic": True}]


class _PlantedCompileError(RuntimeError):
    """Stands for torch's InductorError, a RuntimeError like every compiler failure torch raises."""


@pytest.fixture
def failing_flex(monkeypatch):
    """FlexAttention whose compiled kernel raises, as torch 2.14's did for one query and 512 keys.

    Returns the list of calls the compiled kernel received.
    """
    pytest.importorskip("torch.nn.attention.flex_attention")
    calls = []

    def kernel(*args, **kwargs):
        calls.append(args[0].shape)
        raise _PlantedCompileError("CppCompileError: C++ compile error (planted)")

    monkeypatch.setattr(torch, "compile", lambda fn, **options: kernel)
    monkeypatch.setattr(attention_module, "_flex_failures", {})
    _found_compilers(monkeypatch, "g++")
    return calls


def test_flex_true_that_fails_to_compile_warns_and_falls_back(failing_flex):
    """flex=True: a RuntimeWarning naming the error, the materialised bias's output, and no second try."""
    q, k, v = _decode_step(512)
    slopes = helpers.alibi_slopes(4).float()
    plain, _ = helpers.attention(q, k, v, causal=True, alibi_slopes=slopes, need_weights=False, flex=False)
    for _ in range(2):
        with pytest.warns(RuntimeWarning, match=r"flex=True.*_PlantedCompileError.*planted.*materialised"):
            out, _ = helpers.attention(q, k, v, causal=True, alibi_slopes=slopes, need_weights=False, flex=True)
        torch.testing.assert_close(out, plain, rtol=0, atol=0)
    assert len(failing_flex) == 1  # remembered: not compiled again for the same kind of call
    assert list(attention_module._flex_failures.values()) == [
        "_PlantedCompileError: CppCompileError: C++ compile error (planted)"
    ]


def test_flex_none_that_fails_to_compile_falls_back_silently(failing_flex):
    """flex=None at a shape where FlexAttention pays: no warning, the materialised bias's output."""
    q, k, v = _qkv(512, 512, lead=(1, 4), d=8, dv=8, dtype=torch.float32)
    slopes = helpers.alibi_slopes(4).float()
    plain, _ = helpers.attention(q, k, v, causal=True, alibi_slopes=slopes, need_weights=False, flex=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            out, _ = helpers.attention(q, k, v, causal=True, alibi_slopes=slopes, need_weights=False)
            torch.testing.assert_close(out, plain, rtol=0, atol=0)
    assert [str(w.message) for w in caught] == []
    assert len(failing_flex) == 1


def test_flex_failure_is_remembered_only_for_its_kind_of_call(failing_flex):
    """A failure for one query is not held against a prefill (torch specialises size 1), nor the reverse."""
    slopes = helpers.alibi_slopes(4).float()
    for tq in (1, 1, 4, 4):
        q, k, v = _qkv(tq, 600, lead=(1, 4), d=8, dv=8, dtype=torch.float32)
        with pytest.warns(RuntimeWarning, match="flex=True"):
            helpers.attention(q, k, v, causal=True, alibi_slopes=slopes, need_weights=False, flex=True)
    assert [shape[-2] for shape in failing_flex] == [1, 4]


def test_out_of_memory_in_flex_is_raised_not_hidden(monkeypatch):
    """Running out of memory is not a compiler failure: it reaches the caller and is not remembered."""
    pytest.importorskip("torch.nn.attention.flex_attention")

    def kernel(*args, **kwargs):
        raise torch.OutOfMemoryError("out of memory (planted)")

    monkeypatch.setattr(torch, "compile", lambda fn, **options: kernel)
    monkeypatch.setattr(attention_module, "_flex_failures", {})
    _found_compilers(monkeypatch, "g++")
    q, k, v = _decode_step(64)
    with pytest.raises(torch.OutOfMemoryError, match="planted"):
        helpers.attention(
            q, k, v, causal=True, alibi_slopes=helpers.alibi_slopes(4).float(), need_weights=False, flex=True
        )
    assert attention_module._flex_failures == {}


def _compiled_decode_loop(device):
    """flex=True over DECODE_KEYS with the real compiler: seconds per step, and the largest error."""
    slopes = helpers.alibi_slopes(4).float().to(device)
    seconds, errors = [], []
    for step, n_keys in enumerate(DECODE_KEYS):
        q, k, v = _decode_step(n_keys, seed=step, device=device)
        _flex_or_skip(q, k, v)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a compiler failure falls back: still checked below
            out, _ = helpers.attention(q, k, v, alibi_slopes=slopes, causal=True, need_weights=False, flex=True)
        if device == "cuda":
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
        plain, _ = helpers.attention(q, k, v, alibi_slopes=slopes, causal=True, need_weights=False, flex=False)
        errors.append(float((out - plain).abs().max()))
    return seconds, errors


@pytest.mark.slow
def test_compiled_flex_decode_loop_completes_and_stops_compiling():
    """The real compiler, one query against 512 keys first (the crash of static shapes), then longer.

    Compiling happens at most twice (the first step; the block tables' new length at 513 keys makes
    torch mark them dynamic), then every step reuses the kernel.
    """
    seconds, errors = _compiled_decode_loop("cpu")
    assert max(errors) < 1e-5, errors
    assert sum(s > 1.0 for s in seconds) <= 2, seconds
    assert max(seconds[2:]) < 1.0, seconds


@pytest.mark.gpu
def test_compiled_flex_decode_loop_on_cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    seconds, errors = _compiled_decode_loop("cuda")
    assert max(errors) < 1e-5, errors
    assert sum(s > 1.0 for s in seconds) <= 2, seconds
    assert max(seconds[2:]) < 1.0, seconds
