"""RoPE: apply_rope against slow loops and the textbook formulas; scaling against reference numbers."""

from __future__ import annotations

import math

import pytest
import torch
from _support import device_params, raises_naming
from hypothesis import given, settings
from hypothesis import strategies as st

import helpers
from helpers.rope import yarn_correction_range

# ---------------------------------------------------------------------------------------------
# Slow, obviously correct references


def slow_rope(x, cos, sin, layout, rows=None, rotary_dim=None):
    """Rotate pair by pair with Python loops, in float64. ``rows[t]``: table row of position t."""
    x = x.detach().cpu().double()
    cos, sin = cos.detach().cpu().double(), sin.detach().cpu().double()
    t_len, d = x.shape[-2], x.shape[-1]
    r = d if rotary_dim is None else rotary_dim
    rows = list(range(t_len)) if rows is None else [int(v) for v in rows]
    out = x.clone()
    for t in range(t_len):
        for i in range(r // 2):
            a, b = (2 * i, 2 * i + 1) if layout == "interleaved" else (i, i + r // 2)
            c, s = float(cos[rows[t], i]), float(sin[rows[t], i])
            out[..., t, a] = x[..., t, a] * c - x[..., t, b] * s
            out[..., t, b] = x[..., t, a] * s + x[..., t, b] * c
    return out


def rotate_half(x):
    """Hugging Face LLaMA's helper: ``[-x2, x1]``."""
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def hf_apply_rotary_pos_emb(q, cos_full, sin_full):
    """The textbook formula of Hugging Face LLaMA with full-width ``(T, d)`` tables."""
    return q * cos_full + rotate_half(q) * sin_full


TOL = {torch.float64: 1e-12, torch.float32: 2e-6, torch.bfloat16: 2e-2, torch.float16: 2e-3}


# ---------------------------------------------------------------------------------------------
# apply_rope


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("layout", helpers.LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(5, 8), (2, 5, 8), (2, 3, 5, 8), (1, 2, 1, 5, 12)])
def test_apply_rope_matches_slow_loop(device, layout, dtype, shape):
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=torch.float64).to(device=device, dtype=dtype)
    cos, sin = helpers.rope_cos_sin(7, shape[-1], device=device, dtype=torch.float32)
    got = helpers.apply_rope(x, cos, sin, layout=layout)
    assert got.dtype == dtype and got.shape == x.shape and got.device == x.device
    want = slow_rope(x, cos, sin, layout)
    scale = 4.0  # |x| < 4 here: tolerance relative to the size of the entries
    assert (got.cpu().double() - want).abs().max().item() <= TOL[dtype] * scale


@pytest.mark.parametrize("layout", helpers.LAYOUTS)
def test_apply_rope_non_contiguous_input(layout):
    torch.manual_seed(1)
    x = torch.randn(2, 6, 3, 16, dtype=torch.float64).transpose(1, 2)  # (B, H, T, d), strides of (B, T, H, d)
    cos, sin = helpers.rope_cos_sin(6, 16, dtype=torch.float64)
    torch.testing.assert_close(helpers.apply_rope(x, cos, sin, layout=layout), slow_rope(x, cos, sin, layout))
    for dtype in (torch.float64, torch.float32):
        for odd in (
            torch.randn(3, 6, 17, dtype=dtype)[..., 1:],  # odd storage offset, odd strides
            torch.randn(6, 20, dtype=dtype)[:, 3:19],  # odd storage offset, even strides
            torch.randn(2, 17, dtype=dtype)[:, :16],  # T = 2 rows at an odd stride
            torch.randn(16, 6, dtype=dtype).t(),  # pairs not adjacent in memory (last stride 6)
        ):
            kept = odd.clone()
            rows = odd.shape[-2]
            torch.testing.assert_close(
                helpers.apply_rope(odd, cos, sin, layout=layout),
                slow_rope(odd, cos[:rows], sin[:rows], layout).to(dtype),
            )
            assert torch.equal(odd, kept)  # the input is never changed


@pytest.mark.parametrize("device", device_params())
def test_half_layout_equals_hugging_face_rotate_half(device):
    torch.manual_seed(2)
    q = torch.randn(2, 4, 9, 64, dtype=torch.float64, device=device)  # (B, H, T, d)
    cos, sin = helpers.rope_cos_sin(9, 64, device=device, dtype=torch.float64)  # (T, d/2)
    cos_full, sin_full = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)  # (T, d), as HF builds them
    torch.testing.assert_close(
        helpers.apply_rope(q, cos, sin, layout="half"),
        hf_apply_rotary_pos_emb(q, cos_full, sin_full),
        rtol=0,
        atol=1e-13,
    )


def test_interleaved_layout_equals_meta_complex_formula():
    torch.manual_seed(3)
    x = torch.randn(2, 9, 4, 32, dtype=torch.float64)  # (B, T, H, d), Meta's order
    inv_freq, _ = helpers.rope_frequencies(32)
    freqs_cis = torch.polar(
        torch.ones(9, 16, dtype=torch.float64), torch.outer(torch.arange(9.0, dtype=torch.float64), inv_freq)
    )  # (T, d/2)
    x_c = torch.view_as_complex(x.reshape(2, 9, 4, 16, 2))  # (B, T, H, d/2)
    meta = torch.view_as_real(x_c * freqs_cis[None, :, None, :]).flatten(3)  # (B, T, H, d)
    cos, sin = helpers.rope_cos_sin(9, 32, dtype=torch.float64)
    mine = helpers.apply_rope(x.transpose(1, 2), cos, sin, layout="interleaved").transpose(1, 2)  # (B, T, H, d)
    torch.testing.assert_close(mine, meta, rtol=0, atol=1e-13)


@pytest.mark.parametrize("layout", helpers.LAYOUTS)
def test_positions_offset_and_index_tensor(layout):
    torch.manual_seed(4)
    cos, sin = helpers.rope_cos_sin(40, 8, dtype=torch.float64)  # tables longer than the sequence
    x = torch.randn(3, 5, 8, dtype=torch.float64)
    got = helpers.apply_rope(x, cos, sin, layout=layout, positions=30)
    torch.testing.assert_close(got, slow_rope(x, cos, sin, layout, rows=range(30, 35)))
    rows = torch.tensor([7, 0, 39, 3, 3])
    got = helpers.apply_rope(x, cos, sin, layout=layout, positions=rows)
    torch.testing.assert_close(got, slow_rope(x, cos, sin, layout, rows=rows))


@pytest.mark.parametrize("device", device_params())
def test_index_positions_on_the_cpu_serve_x_on_any_device(device):
    # Row indices built on the CPU (torch.arange, a batching loop) index tables on x's device: they
    # are checked on the CPU, where that costs no synchronisation, and moved. Indices on another
    # device than x's, other than the CPU, are refused with both devices named.
    torch.manual_seed(4)
    cos, sin = helpers.rope_cos_sin(40, 8, dtype=torch.float64)
    x = torch.randn(3, 5, 8, dtype=torch.float64)
    rows = torch.tensor([7, 0, 39, 3, 3])
    want = slow_rope(x, cos, sin, "interleaved", rows=rows)
    on_device = (x.to(device), cos.to(device), sin.to(device))
    torch.testing.assert_close(helpers.apply_rope(*on_device, positions=rows, layout="interleaved").cpu(), want)
    torch.testing.assert_close(
        helpers.apply_rope(*on_device, positions=rows.to(device), layout="interleaved").cpu(), want
    )
    if device != "cpu":
        raises_naming(
            ValueError,
            lambda: helpers.apply_rope(x, cos, sin, positions=rows.to(device), layout="interleaved"),
            "positions",
            device,
            "cpu",
        )


@pytest.mark.parametrize("rows", [torch.tensor([7, 0, 39, 3, 3]), torch.tensor([[7, 0, 39, 3, 3]] * 3)])
def test_positions_on_the_meta_device_are_refused_by_name(rows):
    # positions on meta (no values) with x on the CPU: a ValueError naming positions and both devices,
    # not torch's RuntimeError about reading a meta tensor. x on meta takes positions on meta or the CPU.
    cos, sin = helpers.rope_cos_sin(40, 8)
    x = torch.randn(3, 5, 8)
    raises_naming(
        ValueError,
        lambda: helpers.apply_rope(x, cos, sin, positions=rows.to("meta"), layout="interleaved"),
        "positions",
        "meta",
        "cpu",
    )
    meta = (x.to("meta"), cos.to("meta"), sin.to("meta"))
    for where in ("meta", "cpu"):
        out = helpers.apply_rope(*meta, positions=rows.to(where), layout="interleaved")
        assert (out.shape, out.device) == (x.shape, torch.device("meta"))


def _per_row_loop(x, cos, sin, positions, **kwargs):
    """``apply_rope`` row by row of the batch: row ``b`` of ``x`` with positions ``positions[b]``."""
    return torch.stack([helpers.apply_rope(x[b], cos, sin, positions=positions[b], **kwargs) for b in range(len(x))])


# Three rows of a batch of T = 6, left-padded: the real tokens of row b take positions 0, 1, ...
LEFT_PADDED = torch.tensor([[0, 0, 0, 0, 1, 2], [0, 1, 2, 3, 4, 5], [0, 0, 0, 1, 2, 3]])


@pytest.mark.parametrize("layout", helpers.LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rotary_dim", [None, 6])
def test_per_row_positions_equal_a_loop_over_rows(layout, dtype, rotary_dim):
    # positions (B, T): each batch row its own positions, the same in every head, to the last bit
    # of a loop over the rows, on every kernel (complex, float32 complex copy, strided).
    x = torch.randn(3, 4, 6, 16, generator=torch.Generator().manual_seed(21)).to(dtype)  # (B, H, T, d)
    cos, sin = helpers.rope_cos_sin(50, rotary_dim or 16)
    kwargs = {"layout": layout, "rotary_dim": rotary_dim}
    got = helpers.apply_rope(x, cos, sin, positions=LEFT_PADDED, **kwargs)
    assert got.shape == x.shape and got.dtype == dtype
    assert torch.equal(got, _per_row_loop(x, cos, sin, LEFT_PADDED, **kwargs))
    want = torch.stack(
        [slow_rope(x[b], cos, sin, layout, rows=LEFT_PADDED[b], rotary_dim=rotary_dim) for b in range(3)]
    )
    assert (got.double() - want).abs().max().item() <= TOL[dtype] * 4


@pytest.mark.parametrize("layout", helpers.LAYOUTS)
def test_per_row_positions_for_every_shape_and_under_autograd(layout):
    cos, sin = helpers.rope_cos_sin(50, 8, dtype=torch.float64)
    gen = torch.Generator().manual_seed(22)
    packed = torch.tensor([[0, 1, 2, 0, 1, 2], [0, 1, 0, 1, 2, 3]])  # packed sequences restart at 0
    for shape in [(2, 6, 8), (2, 3, 6, 8), (2, 2, 3, 6, 8)]:  # (B, T, d), (B, H, T, d), (B, G, H, T, d)
        x = torch.randn(shape, generator=gen, dtype=torch.float64)
        got = helpers.apply_rope(x, cos, sin, layout=layout, positions=packed)
        assert torch.equal(got, _per_row_loop(x, cos, sin, packed, layout=layout))
        leaf = x.clone().requires_grad_()
        y = helpers.apply_rope(leaf, cos, sin, layout=layout, positions=packed)
        torch.testing.assert_close(y.detach(), got, rtol=1e-15, atol=1e-15)
        g = torch.randn(shape, generator=gen, dtype=torch.float64)
        (y * g).sum().backward()  # d(Rx)/dx = R^T, row by row
        torch.testing.assert_close(leaf.grad, _per_row_loop(g, cos, -sin, packed, layout=layout))
    # (1, T) is one row of positions for every batch row: the same as the (T,) tensor.
    x = torch.randn(3, 4, 6, 8, generator=gen, dtype=torch.float64)
    assert torch.equal(
        helpers.apply_rope(x, cos, sin, layout=layout, positions=LEFT_PADDED[:1]),
        helpers.apply_rope(x, cos, sin, layout=layout, positions=LEFT_PADDED[0]),
    )


def test_bad_per_row_positions_name_their_shape_and_the_expected_one():
    cos, sin = helpers.rope_cos_sin(50, 8)
    x = torch.randn(3, 4, 6, 8)  # (B, H, T, d)

    def rope(value, on=x):
        return lambda: helpers.apply_rope(on, cos, sin, positions=value, layout="interleaved")

    raises_naming(ValueError, rope(LEFT_PADDED[:2]), "positions", "(2, 6)", "(3, 6)", "(1, 6)", "(3, 4, 6, 8)")
    raises_naming(ValueError, rope(LEFT_PADDED[:, :5]), "positions", "(3, 5)", "(6,)", "(B, 6)")
    raises_naming(ValueError, rope(LEFT_PADDED[None]), "positions", "(1, 3, 6)", "(T,)", "(B, T)")
    raises_naming(ValueError, rope(torch.tensor(3)), "positions", "()", "(T,)", "(B, T)")
    raises_naming(ValueError, rope(LEFT_PADDED[:1], on=x[0, 0]), "positions", "(1, 6)", "(6, 8)", "(B, ..., T, d)")
    raises_naming(ValueError, rope(LEFT_PADDED + 45), "positions", "0 .. 49", "45 .. 50")
    raises_naming(TypeError, rope(LEFT_PADDED.float()), "positions", "(B, T)")


def test_a_batch_in_b_t_h_d_order_is_caught_where_the_arguments_show_it():
    # x is read as (..., T, d): a (B, T, H, d) tensor (Meta's order) puts the heads where the
    # positions belong. A positions tensor of length T shows it; the message names x's shape, the
    # dimension read as positions and the transpose that fixes it.
    cos, sin = helpers.rope_cos_sin(64, 8)
    x = torch.randn(2, 10, 4, 8)  # (B, T, H, d): T = 10, H = 4
    for positions in (torch.arange(10), torch.arange(10).expand(2, 10)):
        raises_naming(
            ValueError,
            lambda positions=positions: helpers.apply_rope(x, cos, sin, positions=positions, layout="interleaved"),
            "positions",
            "(2, 10, 4, 8)",
            "-2",
            "(size 4)",
            "(B, T, H, d)",
            "(B, H, T, d)",
            "x.transpose(-3, -2)",
        )
    # Tables too short for dimension -2 but long enough for dimension -3: the same hint.
    y = torch.randn(2, 4, 10, 8)  # (B, T, H, d) with T = 4, H = 10, tables for 4 positions
    raises_naming(
        ValueError,
        lambda: helpers.apply_rope(y, *helpers.rope_cos_sin(4, 8), layout="interleaved"),
        "rows",
        "(2, 4, 10, 8)",
        "(B, H, T, d)",
    )
    # What cannot be detected (the docstring says so): no positions and tables of at least H rows;
    # x is then rotated by head index. Transposed, it is rotated by position.
    wrong = helpers.apply_rope(x, cos, sin, layout="interleaved")
    right = helpers.apply_rope(x.transpose(1, 2), cos, sin, layout="interleaved").transpose(1, 2)
    assert wrong.shape == right.shape and not torch.allclose(wrong, right)
    assert torch.equal(
        right,
        helpers.apply_rope(x.transpose(1, 2), cos, sin, positions=torch.arange(10), layout="interleaved").transpose(
            1, 2
        ),
    )


@pytest.mark.parametrize("layout", helpers.LAYOUTS)
def test_decoding_one_token_matches_the_full_sequence(layout):
    torch.manual_seed(5)
    cos, sin = helpers.rope_cos_sin(64, 16)
    x = torch.randn(2, 10, 16)  # (H, T, d)
    full = helpers.apply_rope(x, cos, sin, layout=layout)
    last = helpers.apply_rope(x[:, -1:], cos, sin, layout=layout, positions=9)
    torch.testing.assert_close(last, full[:, -1:], rtol=0, atol=1e-6)


@pytest.mark.parametrize("layout", helpers.LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rotary_dim", [8, 2])
def test_partial_rotation_passes_the_tail_through(layout, dtype, rotary_dim):
    torch.manual_seed(6)
    x = torch.randn(2, 6, 20, dtype=torch.float64).to(dtype)  # d = 20, rotate 8 (or one pair)
    cos, sin = helpers.rope_cos_sin(6, rotary_dim, dtype=torch.float64)
    got = helpers.apply_rope(x, cos, sin, layout=layout, rotary_dim=rotary_dim)
    assert torch.equal(got[..., rotary_dim:], x[..., rotary_dim:])
    want = slow_rope(x, cos, sin, layout, rotary_dim=rotary_dim)
    assert (got.double() - want).abs().max().item() <= TOL[dtype] * 4


@settings(max_examples=40, deadline=None)
@given(
    half_d=st.integers(1, 16),
    t=st.integers(1, 12),
    seed=st.integers(0, 2**16),
    base=st.floats(2.0, 1e6),
    layout=st.sampled_from(helpers.LAYOUTS),
)
def test_rotation_keeps_norms_and_inverts(half_d, t, seed, base, layout):
    d = 2 * half_d
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(3, t, d, generator=gen, dtype=torch.float64)
    cos, sin = helpers.rope_cos_sin(t, d, base, dtype=torch.float64)
    y = helpers.apply_rope(x, cos, sin, layout=layout)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))  # a rotation keeps lengths
    torch.testing.assert_close(helpers.apply_rope(y, cos, -sin, layout=layout), x)  # R_m^T R_m = I


@pytest.mark.parametrize("layout", helpers.LAYOUTS)
def test_gradient_is_the_inverse_rotation(layout):
    torch.manual_seed(7)
    x = torch.randn(2, 5, 8, dtype=torch.float64, requires_grad=True)
    g = torch.randn(2, 5, 8, dtype=torch.float64)
    cos, sin = helpers.rope_cos_sin(5, 8, dtype=torch.float64)
    (helpers.apply_rope(x, cos, sin, layout=layout) * g).sum().backward()
    torch.testing.assert_close(x.grad, helpers.apply_rope(g, cos, -sin, layout=layout))  # d(Rx)/dx = R^T
    with torch.no_grad():  # the fast path gives the same numbers
        torch.testing.assert_close(helpers.apply_rope(x, cos, sin, layout=layout), slow_rope(x, cos, sin, layout))


@pytest.mark.parametrize("layout", helpers.LAYOUTS)
@pytest.mark.parametrize("shape", [(6, 8), (2, 3, 6, 8), (4, 4, 8)], ids=["T,d", "B,H,T,d", "H=T=4,d"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
@pytest.mark.parametrize("rotary_dim", [None, 4])
def test_autograd_path_matches_the_fast_path(layout, shape, dtype, rotary_dim):
    # Under autograd, x that requires a gradient goes through the same kernels as without (its
    # backward is the same rotation turned the other way), so the values are the same bits, of the
    # same dtype and shape, for any number of leading dimensions, a bfloat16 input against float32
    # tables, and a tail that passes through. Only tables that require a gradient take the plain
    # formula (test_gradient_reaches_a_table_that_requires_one).
    x = torch.randn(shape, generator=torch.Generator().manual_seed(3)).to(dtype)
    cos, sin = helpers.rope_cos_sin(6, rotary_dim or 8, dtype=torch.float32)
    with torch.no_grad():
        fast = helpers.apply_rope(x, cos, sin, layout=layout, rotary_dim=rotary_dim)
    slow = helpers.apply_rope(x.clone().requires_grad_(), cos, sin, layout=layout, rotary_dim=rotary_dim)
    assert slow.dtype == fast.dtype == dtype and slow.shape == fast.shape == x.shape
    assert torch.equal(slow.detach(), fast)


@pytest.mark.parametrize("layout", helpers.LAYOUTS)
@pytest.mark.parametrize("rows", ["offset", "per_row"])
@pytest.mark.parametrize("rotary_dim", [None, 4])
def test_gradients_of_the_rotation_pass_gradcheck_twice(layout, rows, rotary_dim):
    # The backward pass is a custom one (the rotation by -angle): torch's numerical gradients check
    # it, and the second derivative (create_graph=True), which must go through autograd again.
    gen = torch.Generator().manual_seed(21)
    x = torch.randn(2, 3, 5, 8, dtype=torch.float64, generator=gen, requires_grad=True)
    cos, sin = helpers.rope_cos_sin(12, rotary_dim or 8, dtype=torch.float64)
    positions = 4 if rows == "offset" else torch.tensor([[0, 3, 4, 9, 11], [5, 1, 1, 2, 7]])

    def rope(t):
        return helpers.apply_rope(t, cos, sin, layout=layout, positions=positions, rotary_dim=rotary_dim)

    assert torch.autograd.gradcheck(rope, (x,))
    assert torch.autograd.gradgradcheck(rope, (x,))


def _strided_copy(x):
    """The values of x in a tensor whose last dimension has stride 2: the general kernels."""
    wide = torch.zeros(*x.shape[:-1], 2 * x.shape[-1], dtype=x.dtype)
    view = wide[..., ::2]
    view.copy_(x)
    return view


@pytest.mark.parametrize("tables", ["float32", "x's dtype"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(1, 4, 1, 16), (3, 2, 7, 16), (1, 2, 33_000, 16)], ids=["decode", "small", "blocks"])
def test_the_short_path_gives_the_bits_of_the_general_one(dtype, shape, tables):
    # A contiguous x in the half layout takes the path with the fewest kernels (what a decoding
    # step costs); any other x takes the general one (bfloat16 / float16 on the CPU: a float32
    # copy, a block of positions at a time, rounded once). They must agree to the last bit, or a
    # cached decode would not be the full pass: a short path that computed in bfloat16 (two
    # roundings) fails here.
    # Tables in x's own short dtype too: the short path computed in bfloat16 there once (a review
    # found 19% of a bfloat16 prefill's elements off by a rounding against its decode steps).
    x = torch.randn(shape, generator=torch.Generator().manual_seed(22)).to(dtype)
    cos, sin = helpers.rope_cos_sin(shape[-2], shape[-1], dtype=torch.float32 if tables == "float32" else dtype)
    strided = _strided_copy(x)
    assert x.is_contiguous() and not strided.is_contiguous()
    fast = helpers.apply_rope(x, cos, sin, layout="half")
    general = helpers.apply_rope(strided, cos, sin, layout="half")
    assert fast.dtype == general.dtype == dtype
    assert torch.equal(fast, general)


@pytest.mark.parametrize("layout", helpers.LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "q_shape, k_shape, positions",
    [
        ((1, 8, 1, 16), (1, 8, 1, 16), 37),  # a decoding step: stacked into one tensor
        ((4, 8, 1, 16), (4, 8, 1, 16), "per_row"),
        ((2, 8, 3, 16), (2, 2, 3, 16), "per_row"),  # fewer key heads (grouped-query attention)
        ((2, 8, 3, 16), (2, 8, 3, 16), "rows"),  # rows gathered once by rope_gather
        ((1, 64, 1100, 16), (1, 64, 1100, 16), None),  # large: one at a time
        ((3, 16), (3, 16), 5),  # (T, d): stacked
        ((8, 1, 16), (2, 1, 16), 37),  # (H, T, d), grouped-query: heads side by side
    ],
    ids=["decode", "per-row", "gqa", "gathered", "large", "two-dims", "gqa-three-dims"],
)
def test_apply_rope_qk_is_two_calls_to_the_bit(layout, dtype, q_shape, k_shape, positions):
    gen = torch.Generator().manual_seed(23)
    q, k = torch.randn(q_shape, generator=gen).to(dtype), torch.randn(k_shape, generator=gen).to(dtype)
    cos, sin = helpers.rope_cos_sin(1200, 16)
    tables, kind = (cos, sin), positions
    if kind in ("per_row", "rows"):
        positions = torch.randint(0, 1200, (q_shape[0], q_shape[2]), generator=gen)
    if kind == "rows":
        tables, positions = helpers.rope_gather(cos, sin, positions), None
    got_q, got_k = helpers.apply_rope_qk(q, k, *tables, layout=layout, positions=positions)
    want_q, want_k = (helpers.apply_rope(t, *tables, layout=layout, positions=positions) for t in (q, k))
    assert torch.equal(got_q, want_q) and torch.equal(got_k, want_k)
    assert got_q.is_contiguous() and got_k.is_contiguous()
    got_q.zero_()  # two results, not one: writing to one leaves the other
    assert torch.equal(got_k, want_k)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize(
    "q_shape, k_shape, tables",
    [
        ((1, 8, 1, 16), (1, 8, 1, 16), "gathered"),
        ((4, 8, 1, 16), (4, 2, 1, 16), "gathered"),  # a batch, fewer key heads
        ((4, 8, 1, 16), (4, 8, 1, 16), "one row"),  # (1, T, r/2) rows for every batch row
        ((2, 8, 3, 16), (2, 2, 3, 16), "gathered"),  # three positions (a short prefill or draft tokens)
        ((1, 8, 1, 16), (1, 2, 1, 16), "offset"),  # the whole tables and an int offset
        ((2, 4, 5, 16), (2, 4, 5, 16), "offset"),
    ],
)
def test_a_decoding_step_takes_the_short_path_with_the_bits_of_the_general_one(
    dtype, q_shape, k_shape, tables, monkeypatch
):
    # A decoding step on the CPU costs its calls, not its arithmetic, so apply_rope_qk takes it
    # through the fewest (helpers.rope._decode_step; benchmarks/bench_rope_vs_hf.py times it against
    # transformers). It must give apply_rope's bits (bfloat16 / float16: float32, rounded once), and
    # results that are contiguous and own their memory; the general path is made to fail here, so
    # this test also fails if a decoding step stops taking the short path.
    gen = torch.Generator().manual_seed(41)
    q, k = torch.randn(q_shape, generator=gen).to(dtype), torch.randn(k_shape, generator=gen).to(dtype)
    cos, sin = helpers.rope_cos_sin(1200, 16)
    batch, length = q_shape[0], q_shape[2]
    positions = torch.randint(0, 1200, (batch, length), generator=gen)
    if tables == "gathered":
        rows, offset, per_row = helpers.rope_gather(cos, sin, positions), None, positions
    elif tables == "one row":
        rows, offset, per_row = helpers.rope_gather(cos, sin, positions[:1]), None, positions[:1].expand(batch, -1)
    else:
        rows, offset, per_row = (cos, sin), 1200 - length, None
    if per_row is None:
        want = [helpers.apply_rope(t, cos, sin, layout="half", positions=offset) for t in (q, k)]
    else:
        want = [helpers.apply_rope(t, cos, sin, layout="half", positions=per_row) for t in (q, k)]

    def general(*args, **kwargs):
        raise AssertionError("a decoding step took the general path")

    monkeypatch.setattr(helpers.rope, "_rotate_pair", general)
    monkeypatch.setattr(helpers.rope, "_rotate", general)
    got = helpers.apply_rope_qk(q, k, *rows, layout="half", positions=offset)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == dtype and torch.equal(g, w)
        assert g.is_contiguous() and g._base is None
        assert g.untyped_storage().nbytes() == g.numel() * g.element_size()


def test_what_the_short_path_does_not_take_is_checked_or_rotated_as_before():
    # The short path takes only what every check accepts; anything else goes on to the checks
    # (the same errors as before) or to the general path (the same numbers).
    cos, sin = helpers.rope_cos_sin(10, 16)
    gen = torch.Generator().manual_seed(42)
    q, k = torch.randn(1, 8, 1, 16, generator=gen), torch.randn(1, 8, 1, 16, generator=gen)
    rows = helpers.rope_gather(cos, sin, torch.tensor([[9]]))
    qk = helpers.apply_rope_qk
    raises_naming(ValueError, lambda: qk(q, k, cos, sin, layout="half", positions=10), "rows", "10")
    raises_naming(ValueError, lambda: qk(q, k, cos, sin, layout="half", positions=-1), "positions", "-1")
    raises_naming(TypeError, lambda: qk(q, k, cos, sin, layout="half", positions=True), "positions")
    raises_naming(TypeError, lambda: qk(q, k, cos, sin, layout=None), "layout")
    raises_naming(ValueError, lambda: qk(q, k, cos, sin, layout="Half"), "layout", "Half")
    raises_naming(ValueError, lambda: qk(q, k, cos[:, :4], sin[:, :4], layout="half"), "cos", "8", "4")
    raises_naming(ValueError, lambda: qk(q, k, *rows, layout="half", positions=0), "positions")
    three = [r.expand(3, 1, 8).contiguous() for r in rows]  # rows for 3 batch rows, x has 2
    raises_naming(ValueError, lambda: qk(q.repeat(2, 1, 1, 1), k.repeat(2, 1, 1, 1), *three, layout="half"), "cos", "3")
    raises_naming(ValueError, lambda: qk(q, k[:, :, :, :8], cos, sin, layout="half"), "q", "k")
    raises_naming(ValueError, lambda: qk(q, k.to("meta"), cos, sin, layout="half"), "q", "k", "meta")
    for args, kwargs in (
        ((q, k, cos.double(), sin.double()), {}),  # float64 tables
        ((q, k, cos[:, :4], sin[:, :4]), {"rotary_dim": 8}),  # partial rotary
        ((q.transpose(-1, -2).contiguous().transpose(-1, -2), k, cos, sin), {}),  # not contiguous
        ((q, k, cos, sin), {"positions": torch.tensor([[3]])}),  # a positions tensor
        ((q, k.double(), cos, sin), {}),  # q and k of two dtypes
    ):
        got = qk(*args, layout="half", **kwargs)
        want = [helpers.apply_rope(t, *args[2:], layout="half", **kwargs) for t in args[:2]]
        assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))
    q_grad = q.clone().requires_grad_(True)  # a gradient to record: the general path
    got_q, _ = qk(q_grad, k, *rows, layout="half")
    got_q.sum().backward()
    torch.testing.assert_close(q_grad.grad, helpers.apply_rope(torch.ones_like(q), rows[0], -rows[1], layout="half"))


@pytest.mark.parametrize("width", [2, 6, 10, 24, 32, 48])
def test_apply_rope_qk_is_two_calls_to_the_bit_at_any_interleaved_width(width):
    # torch's complex multiplication rounds its vectorised loop and its scalar remainder
    # differently; q and k side by side reach a remainder where one head alone does not (one head
    # and per-row tables run as one loop). Rotated side by side, 18 of 384 such float32 calls once
    # differed from two calls by one unit in the last place.
    gen = torch.Generator().manual_seed(45)
    cos, sin = helpers.rope_cos_sin(50, width)
    for batch, heads, length in ((4, 1, 1), (4, 1, 3), (1, 2, 2), (2, 3, 1)):
        q, k = (torch.randn(batch, heads, length, width, generator=gen) for _ in range(2))
        rows = helpers.rope_gather(cos, sin, torch.randint(0, 50, (batch, length), generator=gen))
        got = helpers.apply_rope_qk(q, k, *rows, layout="interleaved")
        want = [helpers.apply_rope(t, *rows, layout="interleaved") for t in (q, k)]
        assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize(
    "layout, width", [("half", 2), ("half", 14), ("half", 24), ("interleaved", 32), ("interleaved", 64)]
)
def test_a_decode_step_is_the_full_pass_to_the_bit(dtype, layout, width):
    # What apply_rope's docstring promises: each position rotated alone (a decoding step with an
    # int offset) gives the bits of the same position in the full pass, in the half layout at any
    # width and in the interleaved layout where r is a multiple of 32 (at other interleaved widths
    # torch's complex multiplication rounds a row's last pairs differently: not promised).
    gen = torch.Generator().manual_seed(46)
    cos, sin = helpers.rope_cos_sin(37, width)
    for batch, heads in ((1, 1), (4, 1), (2, 5)):
        x = torch.randn(batch, heads, 37, width, generator=gen).to(dtype)
        full = helpers.apply_rope(x, cos, sin, layout=layout)
        for p in range(37):
            step = helpers.apply_rope(x[..., p : p + 1, :], cos, sin, layout=layout, positions=p)
            assert torch.equal(step, full[..., p : p + 1, :]), (batch, heads, p)


def test_rope_gather_reads_the_rows_at_the_positions():
    cos, sin = helpers.rope_cos_sin(50, 8, dtype=torch.float64)
    positions = torch.tensor([[3, 49, 0], [7, 7, 12]])
    x = torch.randn(2, 4, 3, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(24))
    cos_rows, sin_rows = helpers.rope_gather(cos, sin, positions)
    assert cos_rows.shape == sin_rows.shape == (2, 3, 4)
    for layout in helpers.LAYOUTS:
        want = helpers.apply_rope(x, cos, sin, layout=layout, positions=positions)
        assert torch.equal(helpers.apply_rope(x, cos_rows, sin_rows, layout=layout), want)
        assert torch.equal(helpers.apply_rope(x, cos_rows[:1], sin_rows[:1], layout=layout)[0], want[0])
    one_row = helpers.rope_gather(cos, sin, torch.tensor([3, 49, 0]))  # (T,) positions: a (T, r/2) table
    assert torch.equal(one_row[0], cos[[3, 49, 0]]) and torch.equal(one_row[1], sin[[3, 49, 0]])


def test_bad_gathers_and_gathered_tables_are_named():
    cos, sin = helpers.rope_cos_sin(50, 8)
    x = torch.randn(2, 4, 3, 8)
    rows = helpers.rope_gather(cos, sin, torch.tensor([[1, 2, 3], [4, 5, 6]]))
    raises_naming(ValueError, lambda: helpers.rope_gather(cos, sin, torch.tensor([[1, -1, 3]])), "positions", "-1")
    raises_naming(ValueError, lambda: helpers.rope_gather(cos, sin, torch.tensor([[1, 50]])), "positions", "49", "50")
    raises_naming(TypeError, lambda: helpers.rope_gather(cos, sin, torch.tensor([[1.0, 2.0]])), "positions")
    raises_naming(TypeError, lambda: helpers.rope_gather(cos, sin, [1, 2]), "positions")
    raises_naming(ValueError, lambda: helpers.rope_gather(cos, sin[:, :2], torch.tensor([1])), "cos", "sin")
    raises_naming(
        ValueError, lambda: helpers.apply_rope(x, *rows, layout="half", positions=torch.tensor([0, 1, 2])), "positions"
    )
    raises_naming(ValueError, lambda: helpers.apply_rope(x[..., :2, :], *rows, layout="half"), "cos", "sin", "T", "2")
    raises_naming(ValueError, lambda: helpers.apply_rope(x[:1].expand(3, 4, 3, 8), *rows, layout="half"), "cos", "3")
    raises_naming(ValueError, lambda: helpers.apply_rope(x[0, 0], *rows, layout="half"), "cos", "(3, 8)")
    raises_naming(ValueError, lambda: helpers.apply_rope_qk(x, x[..., :2, :], cos, sin, layout="half"), "q", "k")
    raises_naming(
        ValueError,
        lambda: helpers.apply_rope_qk(x, x[:1], *rows, layout="half"),
        "q",
        "k",
        "(2, 4, 3, 8)",
        "(1, 4, 3, 8)",
    )
    raises_naming(TypeError, lambda: helpers.apply_rope_qk(x, x, cos, sin), "layout")
    raises_naming(TypeError, lambda: helpers.apply_rope_qk(x, x.long(), cos, sin, layout="half"), "k")


@pytest.mark.parametrize("layout", helpers.LAYOUTS)
def test_autograd_complex_and_real_formulas_agree_with_their_gradients(layout):
    # Under autograd, interleaved pairs that can be read as complex numbers are rotated by one
    # complex multiplication; a view whose pairs straddle an odd offset takes the real formula.
    # Both must give the fast path's values and the inverse rotation as gradient.
    cos, sin = helpers.rope_cos_sin(5, 8, dtype=torch.float64)
    base = torch.randn(2, 5, 9, dtype=torch.float64, generator=torch.Generator().manual_seed(11))
    g = torch.randn(2, 5, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(12))
    for x in (base[..., :8].contiguous(), base[..., 1:]):  # even offset (complex), odd offset (real)
        leaf = x.detach().clone().requires_grad_()
        view = leaf if x.storage_offset() == 0 else torch.cat([leaf[..., :1], leaf], dim=-1)[..., 1:]
        y = helpers.apply_rope(view, cos, sin, layout=layout)
        (y * g).sum().backward()
        torch.testing.assert_close(y.detach(), slow_rope(x, cos, sin, layout), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(leaf.grad, helpers.apply_rope(g, cos, -sin, layout=layout), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("layout", helpers.LAYOUTS)
@pytest.mark.parametrize("trained", ["cos", "sin"])
def test_gradient_reaches_a_table_that_requires_one(layout, trained):
    # Learned tables: the gradient reaches whichever table requires one, even when x does not.
    gen = torch.Generator().manual_seed(8)
    x = torch.randn(2, 5, 8, dtype=torch.float64, generator=gen)
    g = torch.randn(2, 5, 8, dtype=torch.float64, generator=gen)
    tables = dict(zip(("cos", "sin"), helpers.rope_cos_sin(5, 8, dtype=torch.float64), strict=True))
    leaf = tables[trained] = tables[trained].clone().requires_grad_()
    (helpers.apply_rope(x, tables["cos"], tables["sin"], layout=layout) * g).sum().backward()

    def pairs(t):  # (first, second) members of each pair, (..., T, d/2) each
        return (t[..., 0::2], t[..., 1::2]) if layout == "interleaved" else (t[..., :4], t[..., 4:])

    (x1, x2), (g1, g2) = pairs(x), pairs(g)  # y1 = x1 cos - x2 sin, y2 = x2 cos + x1 sin
    want = (g1 * x1 + g2 * x2) if trained == "cos" else (g2 * x1 - g1 * x2)
    torch.testing.assert_close(leaf.grad, want.sum(0))


@pytest.mark.parametrize("layout", helpers.LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_grad_mode_alone_does_not_change_the_result(layout, dtype):
    # Inference without torch.no_grad(): nothing requires a gradient, so the fast kernels run,
    # with the same numbers (to the last bit) as under no_grad, and no graph is recorded.
    x = torch.randn(2, 7, 16, generator=torch.Generator().manual_seed(9)).to(dtype)
    cos, sin = helpers.rope_cos_sin(7, 16)
    with torch.no_grad():
        want = helpers.apply_rope(x, cos, sin, layout=layout)
    got = helpers.apply_rope(x, cos, sin, layout=layout)
    assert not got.requires_grad and torch.equal(got, want)


@pytest.mark.parametrize("layout", helpers.LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_tables_in_the_short_dtype_of_x(layout, dtype):
    # Tables built in x's own short dtype (as a half-precision model keeps them) work on every
    # kernel, the float32 complex copy that bfloat16 / float16 take on the CPU included.
    torch.manual_seed(10)
    x = torch.randn(2, 7, 16, dtype=torch.float64).to(dtype)
    cos, sin = helpers.rope_cos_sin(7, 16, dtype=dtype)
    got = helpers.apply_rope(x, cos, sin, layout=layout)
    assert got.dtype == dtype
    assert (got.double() - slow_rope(x, cos, sin, layout)).abs().max().item() <= TOL[dtype] * 4


def test_apply_rope_rejects_bad_input():
    cos, sin = helpers.rope_cos_sin(4, 8)
    x = torch.randn(4, 8)
    with pytest.raises(ValueError, match="layout"):
        helpers.apply_rope(x, cos, sin, layout="neox")
    with pytest.raises(TypeError, match="x must be a floating-point"):
        helpers.apply_rope(torch.ones(4, 8, dtype=torch.int64), cos, sin, layout="interleaved")
    with pytest.raises(ValueError, match="rows"):
        helpers.apply_rope(torch.randn(5, 8), cos, sin, layout="interleaved")
    with pytest.raises(ValueError, match="rows 2 .. 5"):
        helpers.apply_rope(x, cos, sin, positions=2, layout="interleaved")
    with pytest.raises(ValueError, match="columns"):
        helpers.apply_rope(torch.randn(4, 6), cos, sin, layout="interleaved")
    with pytest.raises(ValueError, match="rotary_dim"):
        helpers.apply_rope(x, cos, sin, rotary_dim=3, layout="interleaved")
    with pytest.raises(ValueError, match="rotary_dim"):
        helpers.apply_rope(x, cos, sin, rotary_dim=10, layout="interleaved")
    with pytest.raises(TypeError, match="positions"):
        helpers.apply_rope(x, cos, sin, positions=torch.tensor([0.0, 1.0, 2.0, 3.0]), layout="interleaved")
    with pytest.raises(ValueError, match="positions must lie"):
        helpers.apply_rope(x, cos, sin, positions=torch.tensor([0, 1, 2, 4]), layout="interleaved")
    with pytest.raises(ValueError, match="one row index per position"):
        helpers.apply_rope(x, cos, sin, positions=torch.tensor([0, 1]), layout="interleaved")


def test_apply_rope_messages_name_the_argument_and_the_value():
    cos, sin = helpers.rope_cos_sin(6, 8)  # (6, 4): six rows, four columns
    x = torch.randn(4, 8)

    def rope(*args, **kwargs):
        kwargs.setdefault("layout", "interleaved")
        return lambda: helpers.apply_rope(*args, **kwargs)

    raises_naming(ValueError, rope(torch.randn(8), cos, sin), "x", "(8,)", "(..., T, d)")
    raises_naming(ValueError, rope(torch.randn(4, 7), cos, sin), "d", "even", "7")
    raises_naming(TypeError, rope(x, cos.long(), sin), "cos", "torch.int64")
    raises_naming(TypeError, rope(x, cos, sin.long()), "sin", "torch.int64")
    raises_naming(TypeError, rope(x, cos, [0.0]), "sin", "list")
    raises_naming(TypeError, rope(x, cos, sin, rotary_dim=4.0), "rotary_dim", "4.0")
    raises_naming(ValueError, rope(x, cos, sin, rotary_dim=0), "rotary_dim", "0", ">= 2")
    raises_naming(ValueError, rope(x, cos, sin, rotary_dim=-2), "rotary_dim", "-2")
    raises_naming(ValueError, rope(x, cos, sin[:5]), "cos", "sin", "(6, 4)", "(5, 4)")
    raises_naming(ValueError, rope(x, cos[None], sin[None]), "cos", "sin", "(1, 6, 4)")
    raises_naming(ValueError, rope(torch.randn(4, 6), cos, sin), "cos", "3 columns", "6", "4")
    raises_naming(ValueError, rope(x, cos, sin.to("meta")), "device", "cpu", "meta")
    raises_naming(ValueError, rope(x, cos.to("meta"), sin), "device", "cpu", "meta")
    raises_naming(ValueError, rope(x, cos, sin, positions=-1), "positions", "-1")
    raises_naming(ValueError, rope(x, cos, sin, positions=3), "rows", "3 .. 6", "6")
    raises_naming(TypeError, rope(x, cos, sin, positions=[0, 1, 2, 3]), "positions", "[0, 1, 2, 3]")
    raises_naming(
        ValueError, rope(x, cos, sin, positions=torch.tensor([[0, 1, 2, 3]])), "positions", "(1, 4)", "(4, 8)"
    )
    raises_naming(ValueError, rope(x, cos, sin, positions=torch.tensor([0, 1, 2, 6])), "positions", "0 .. 5", "6")


def test_rope_cos_sin_messages_name_the_argument():
    raises_naming(TypeError, lambda: helpers.rope_cos_sin(4, 8, dtype=torch.int64), "dtype", "torch.int64")
    raises_naming(ValueError, lambda: helpers.rope_cos_sin(torch.zeros(2, 2), 8), "positions", "(2, 2)")
    raises_naming(ValueError, lambda: helpers.rope_cos_sin(-1, 8), "positions", "-1")


# ---------------------------------------------------------------------------------------------
# Scaling: reference numbers and independent per-pair references


def plain_theta(d, base):
    return [base ** (-2.0 * i / d) for i in range(d // 2)]


def test_plain_rope_is_the_geometric_schedule():
    inv_freq, factor = helpers.rope_frequencies(8)
    assert factor == 1.0
    torch.testing.assert_close(inv_freq, torch.tensor([1.0, 0.1, 0.01, 0.001], dtype=torch.float64))


def test_linear_scaling_divides_every_speed():
    inv_freq, factor = helpers.rope_frequencies(64, 10000.0, scaling={"type": "linear", "factor": 4.0})
    torch.testing.assert_close(inv_freq, torch.tensor(plain_theta(64, 1e4), dtype=torch.float64) / 4.0)
    assert factor == 1.0
    # Position interpolation: the table at position m equals the plain table at m / s.
    cos, sin = helpers.rope_cos_sin(
        torch.arange(0, 400, 4), 64, scaling={"type": "linear", "factor": 4.0}, dtype=torch.float64
    )
    cos0, sin0 = helpers.rope_cos_sin(100, 64, dtype=torch.float64)
    torch.testing.assert_close(cos, cos0)
    torch.testing.assert_close(sin, sin0)


def test_ntk_base_reference_number():
    inv_freq, factor = helpers.rope_frequencies(128, 10000.0, scaling={"type": "ntk", "factor": 8.0})
    new_base = inv_freq[1].item() ** (-128 / 2)  # θ_1 = b'^(-2/d)
    assert round(new_base, 2) == 82684.62
    assert factor == 1.0
    torch.testing.assert_close(inv_freq, torch.tensor(plain_theta(128, 82684.62264056221), dtype=torch.float64))
    assert inv_freq[0].item() == 1.0  # the fastest pair is untouched ...
    assert inv_freq[-1].item() == pytest.approx(
        plain_theta(128, 1e4)[-1] / 8.0 ** (126 / 126), rel=1e-12
    )  # ... the slowest / s


def test_yarn_reference_numbers():
    assert yarn_correction_range(128, 10000.0, 2048) == (16, 41)
    d, s, length = 128, 8.0, 2048
    inv_freq, factor = helpers.rope_frequencies(
        d, 10000.0, scaling={"type": "yarn", "factor": s, "original_max_len": length}
    )
    assert factor == pytest.approx(0.1 * math.log(8.0) + 1.0) and round(factor, 4) == 1.2079
    theta = plain_theta(d, 1e4)
    for i in range(d // 2):
        ramp = min(max((i - 16) / (41 - 16), 0.0), 1.0)  # 0 below pair 16, 1 above pair 41
        want = theta[i] * (1 - ramp) + theta[i] / s * ramp
        assert inv_freq[i].item() == pytest.approx(want, rel=1e-12), i
    # Pairs below the range turn more than 32 times in L tokens, pairs above it less than once.
    assert length * theta[15] / (2 * math.pi) > 32 and length * theta[42] / (2 * math.pi) < 1


def test_yarn_options_and_tables_carry_the_attention_factor():
    for a in (1.5, 2.0):
        scaling = {"type": "yarn", "factor": 4.0, "original_max_len": 1024, "attention_factor": a}
        _, factor = helpers.rope_frequencies(32, scaling=scaling)
        assert factor == a
        for dtype in (torch.float64, torch.float32, torch.bfloat16):
            cos, sin = helpers.rope_cos_sin(50, 32, scaling=scaling, dtype=dtype)
            torch.testing.assert_close(
                (cos.double() ** 2 + sin.double() ** 2),
                torch.full((50, 16), a * a, dtype=torch.float64),
                rtol=2e-2 if dtype == torch.bfloat16 else 1e-6,
                atol=0,
            )
    # Hugging Face's spellings are accepted.
    hf = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}
    torch.testing.assert_close(
        helpers.rope_frequencies(32, scaling=hf)[0],
        helpers.rope_frequencies(32, scaling={"type": "yarn", "factor": 4.0, "original_max_len": 1024})[0],
    )


def test_llama3_against_a_per_pair_reference():
    d, base, s, length = 128, 500000.0, 8.0, 8192
    inv_freq, factor = helpers.rope_frequencies(
        d, base, scaling={"type": "llama3", "factor": s, "original_max_len": length}
    )
    assert factor == 1.0
    for i, theta in enumerate(plain_theta(d, base)):
        wavelength = 2 * math.pi / theta
        if wavelength < length / 4:
            want = theta
        elif wavelength > length:
            want = theta / s
        else:
            smooth = (length / wavelength - 1) / (4 - 1)
            want = (1 - smooth) * theta / s + smooth * theta
        assert inv_freq[i].item() == pytest.approx(want, rel=1e-12), i
    assert inv_freq[0].item() == 1.0 and inv_freq[-1].item() == pytest.approx(plain_theta(d, base)[-1] / 8)


def test_dynamic_ntk_grows_with_the_sequence():
    scaling = {"type": "dynamic", "factor": 4.0, "original_max_len": 2048}
    plain, _ = helpers.rope_frequencies(64)
    torch.testing.assert_close(helpers.rope_frequencies(64, scaling=scaling)[0], plain)  # within L: unchanged
    grown, _ = helpers.rope_frequencies(64, scaling={**scaling, "seq_len": 4096})
    new_base = 10000.0 * (4.0 * 4096 / 2048 - 3.0) ** (64 / 62)
    torch.testing.assert_close(grown, torch.tensor(plain_theta(64, new_base), dtype=torch.float64))


def test_dynamic_ntk_equals_hugging_face_at_the_target_length():
    """Hugging Face's "dynamic" grows the factor as g(T) = s T/L - (s - 1): at T = sL that is
    s^2 - s + 1 (57 for s = 8), far more than the static "ntk" factor s; g reaches s at T = (2 - 1/s) L."""
    d, base, s, length = 128, 10000.0, 8.0, 2048

    def new_base(scaling):
        return helpers.rope_frequencies(d, base, scaling=scaling)[0][1].item() ** (-d / 2)  # θ_1 = b'^(-2/d)

    dynamic = {"type": "dynamic", "factor": s, "original_max_len": length}
    hf = base * ((s * (s * length) / length) - (s - 1)) ** (d / (d - 2))  # transformers' formula at T = sL
    assert new_base({**dynamic, "seq_len": int(s * length)}) == pytest.approx(hf, rel=1e-12)
    assert round(hf) == 607779 and hf == pytest.approx(base * (s * s - s + 1) ** (d / (d - 2)), rel=1e-12)
    static = new_base({"type": "ntk", "factor": s})
    assert round(static, 2) == 82684.62
    assert new_base({**dynamic, "seq_len": int((2 - 1 / s) * length)}) == pytest.approx(static, rel=1e-12)
    assert new_base({**dynamic, "seq_len": length // 2}) == pytest.approx(base, rel=1e-12)  # never below b


@pytest.mark.parametrize(
    "scaling, match",
    [
        ({"type": "longrope", "factor": 2.0}, "must be one of"),
        ({"factor": 2.0}, "must be one of"),
        ({"type": "linear", "factor": 0.0}, "factor"),
        ({"type": "ntk", "factor": -2.0}, "factor"),
        ({"type": "linear"}, "missing"),
        ({"type": "yarn", "factor": 2.0}, "original_max_len"),
        ({"type": "yarn", "factor": 2.0, "original_max_len": 64, "beta_fast": 1.0, "beta_slow": 2.0}, "beta_fast"),
        ({"type": "yarn", "factor": 2.0, "original_max_len": 0}, "original_max_len"),
    ],
)
def test_bad_scaling_is_rejected(scaling, match):
    with pytest.raises(ValueError, match=match):
        helpers.rope_frequencies(64, scaling=scaling)


def test_a_key_the_type_does_not_use_is_ignored_unless_asked_to_refuse():
    # As transformers does: a config's rope_scaling often carries keys of other types.
    plain = helpers.rope_frequencies(64, scaling={"type": "linear", "factor": 2.0})
    extra = helpers.rope_frequencies(64, scaling={"type": "linear", "factor": 2.0, "beta_fast": 3})
    assert torch.equal(plain[0], extra[0]) and plain[1] == extra[1]
    with pytest.raises(ValueError, match="beta_fast"):
        helpers.rope_frequencies(64, scaling={"type": "linear", "factor": 2.0, "beta_fast": 3}, unused_keys="error")
    with pytest.raises(ValueError, match="beta_fast"):
        helpers.rope_cos_sin(4, 64, scaling={"type": "linear", "factor": 2.0, "beta_fast": 3}, unused_keys="error")
    with pytest.raises(ValueError, match="did you mean 'factor'"):
        helpers.rope_frequencies(64, scaling={"type": "linear", "facotr": 2.0})


def test_scaling_must_be_a_dict():
    with pytest.raises(TypeError, match="scaling"):
        helpers.rope_frequencies(64, scaling="linear")


# ---------------------------------------------------------------------------------------------
# Precision of low-precision tables


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_tables_are_correctly_rounded_at_long_positions(device, dtype):
    positions = torch.tensor([0, 256, 257, 1857, 65_537, 1_000_003, 5_000_000])
    cos, sin = helpers.rope_cos_sin(positions, 128, 500000.0, device=device, dtype=dtype)
    inv_freq, _ = helpers.rope_frequencies(128, 500000.0)
    angle = torch.outer(positions.double(), inv_freq)  # exact enough in float64 at these positions
    # bf16 / fp16: within one unit in the last place at 1.0; float32: within 4e-7 (the float32 sine
    # of an angle reduced to less than one turn, helpers/_angles.py), whatever the position.
    eps = max(torch.finfo(dtype).eps, 4e-7)
    assert (cos.cpu().double() - torch.cos(angle)).abs().max().item() <= eps
    assert (sin.cpu().double() - torch.sin(angle)).abs().max().item() <= eps
    # bf16 positions, by contrast, merge 256 and 257, and turn 1857 into 1856.
    assert torch.tensor([256.0, 257.0, 1857.0]).bfloat16().tolist() == [256.0, 256.0, 1856.0]


# ---------------------------------------------------------------------------------------------
# Figures and the explorer (no browser: update, then read the artists back)


def test_rotation_drawing_shows_the_article_example():
    drawing = helpers.plots.rope_rotation(theta_deg=30.0, m=2)
    x, y = drawing.artists["hand"].get_data()
    assert (round(x[1], 3), round(y[1], 3)) == (0.5, 0.866)  # article 003, section 7.5
    drawing.update(m=5)
    x, y = drawing.artists["hand"].get_data()
    assert x[1] == pytest.approx(math.cos(math.radians(150))) and y[1] == pytest.approx(0.5)
    assert len(drawing.artists["steps"].get_offsets()) == 6


def test_cosine_sum_equals_the_direct_sum():
    import numpy as np

    from helpers.plots.rope import _cosine_sum, _upper_bound

    rng = np.random.default_rng(0)
    theta, weight = rng.random(16) * 2, rng.random(16)
    direct = np.cos(np.outer(np.arange(300), theta)) @ weight
    np.testing.assert_allclose(_cosine_sum(300, theta, weight, block=7), direct, atol=1e-12)
    # RoFormer's bound at distance 0: all phases 1, partial sums 1, 2, ..., d/2.
    assert _upper_bound(np.array([0.0]), theta)[0] == pytest.approx(8.5)


def test_scaling_drawing_follows_the_frequencies():
    import numpy as np

    drawing = helpers.plots.rope_scaling(base=10000.0, factor=4.0, method="linear")
    curves = drawing.artists["curves"]
    np.testing.assert_allclose(curves["linear"].get_ydata(), 0.25)
    drawing.update(factor=8.0, method="yarn", base=500000.0)
    plain = helpers.rope_frequencies(128, 500000.0)[0].numpy()
    yarn, a = helpers.rope_frequencies(128, 500000.0, scaling={"type": "yarn", "factor": 8.0, "original_max_len": 2048})
    np.testing.assert_allclose(curves["yarn"].get_ydata(), yarn.numpy() / plain)
    assert curves["yarn"].get_linewidth() > curves["ntk"].get_linewidth()
    _, scaled = drawing.artists["scaled"].get_data()
    assert scaled[0] == pytest.approx(a * a * _weighted_cos_at_1(yarn.numpy()), rel=1e-9)
    drawing.update(method="none")
    np.testing.assert_allclose(drawing.artists["scaled"].get_ydata(), drawing.artists["plain"].get_ydata())
    with pytest.raises(ValueError, match="method"):
        drawing.update(method="pi")


def _weighted_cos_at_1(theta):
    """The drawing's score at distance 1, from its fixed query (seed 0)."""
    import numpy as np

    weight = (np.random.default_rng(0).standard_normal((theta.size, 2)) ** 2).sum(axis=1)
    return float(np.cos(theta) @ (weight / weight.sum()))


def test_scaling_drawing_offset_axis_follows_the_factor():
    """The right panel reaches the target length sL: out to the power of two times L at or above sL
    (at least 2L), with a mark at sL; only a span not drawn before lays the figure out again (the
    background of each span drawn is kept)."""
    length = 2048
    drawing = helpers.plots.rope_scaling(base=10000.0, factor=4.0, method="yarn", original_len=length)
    score_ax = drawing.fig.axes[1]
    for factor, span in ((4.0, 4), (16.0, 16), (1.0, 2), (2.0, 2), (2.5, 4), (8.0, 8), (8.5, 16), (5.5, 8)):
        drawing.update(factor=factor)
        assert score_ax.get_xlim()[1] == pytest.approx(span * length), factor
        for line in (drawing.artists["scaled"], drawing.artists["plain"]):
            assert line.get_xdata().max() == span * length
        assert drawing.artists["target"].get_xdata()[0] == factor * length
        assert f"out to {span}L" in score_ax.get_title()
        drawing.render()  # the new layout draws
    drawing.update(factor=7.0)  # the same span as 5.5: no new layout, the cached background is kept
    assert drawing._background is not None
    drawing.update(factor=9.0)  # into the next span, drawn before (16L): its kept background
    assert drawing._background is not None
    drawing.update(factor=40.0)  # a span never drawn (64L): laid out again
    assert drawing._background is None


def test_scaling_explorer_updates_its_drawing():
    explorer = helpers.widgets.rope_scaling_explorer()
    before = explorer.drawing.artists["scaled"].get_ydata().copy()
    explorer.controls["factor"].value = 8.0
    assert explorer.drawing.params["factor"] == 8.0 and explorer.last_update_s is not None
    assert not (explorer.drawing.artists["scaled"].get_ydata() == before).all()
    explorer.controls["method"].value = "ntk"
    assert explorer.drawing.params["method"] == "ntk"


@pytest.mark.parametrize("layout", helpers.LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_copy_paths_give_the_same_bits_block_by_block(layout, dtype, monkeypatch):
    # bfloat16 / float16 on the CPU rotate a float32 copy a block of positions at a time; blocks of
    # 3 positions (T = 10: a short last block) must give the bits of one block, per-row positions too.
    x = torch.randn(2, 3, 10, 8, generator=torch.Generator().manual_seed(5)).to(dtype)  # (B, H, T, d)
    cos, sin = helpers.rope_cos_sin(20, 8)
    rows = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [4, 5, 6, 7, 8, 9, 10, 11, 12, 13]])
    whole = [helpers.apply_rope(x, cos, sin, layout=layout, positions=p) for p in (None, 7, rows)]
    monkeypatch.setattr(helpers.rope, "_COPY_BLOCK", 3 * 2 * 3 * 8)  # 3 positions of x's 2 x 3 heads of width 8
    blocks = [helpers.apply_rope(x, cos, sin, layout=layout, positions=p) for p in (None, 7, rows)]
    for one, many in zip(whole, blocks, strict=True):
        assert torch.equal(one, many)
    want = slow_rope(x.double(), cos, sin, layout, rows=torch.arange(7, 17))
    assert (blocks[1].double() - want).abs().max().item() <= TOL[dtype] * 4


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", helpers.LAYOUTS)
def test_decoding_step_by_step_is_the_prefill_to_the_bit_in_a_short_dtype(dtype, layout):
    # Hugging Face's order: q is (B, T, H, d) transposed to (B, H, T, d), not contiguous for T > 1;
    # a one-token slice of it is. Tables in x's dtype, as a half-precision model keeps them.
    cos, sin = helpers.rope_cos_sin(64, 32, dtype=dtype)
    q = torch.randn(1, 40, 4, 32, generator=torch.Generator().manual_seed(25)).to(dtype).transpose(1, 2)
    prefill = helpers.apply_rope(q, cos, sin, layout=layout)
    steps = [helpers.apply_rope(q[:, :, t : t + 1], cos, sin, layout=layout, positions=t) for t in range(40)]
    assert torch.equal(prefill, torch.cat(steps, dim=2))


@pytest.mark.parametrize("layout", helpers.LAYOUTS)
@pytest.mark.parametrize("shape", [(1, 8, 300, 64), (1, 8, 1, 64)], ids=["prefill", "decode"])
def test_bfloat16_is_the_exact_rotation_rounded_once(layout, shape):
    # The README's claim against transformers: rounding once, a bfloat16 result is the float64
    # rotation rounded to bfloat16 in all but a few elements (float32 tables are off by up to 1e-7);
    # a path that rounds after the first product (as the bfloat16 formula does) misses 30-40%.
    gen = torch.Generator().manual_seed(31)
    q, k = (torch.randn(shape, generator=gen).bfloat16() for _ in range(2))
    cos, sin = helpers.rope_cos_sin(700, 64)
    exact = helpers.rope_cos_sin(700, 64, dtype=torch.float64)
    offset = 699 - shape[2]
    for got, x in zip(helpers.apply_rope_qk(q, k, cos, sin, layout=layout, positions=offset), (q, k), strict=True):
        want = helpers.apply_rope(x.double(), *exact, layout=layout, positions=offset).bfloat16()
        assert (got != want).float().mean().item() < 1e-3


@pytest.mark.parametrize("dtype", [torch.uint8, torch.uint16, torch.bool, torch.float32])
def test_positions_of_a_dtype_torch_does_not_read_as_row_numbers_are_refused(dtype):
    # torch indexes with a uint8 tensor as a mask: [3, 3, 3, 3] would silently be rows 0 .. 3.
    cos, sin = helpers.rope_cos_sin(8, 8)
    x = torch.randn(1, 2, 4, 8)
    positions = torch.tensor([3, 3, 3, 3]).to(dtype)
    raises_naming(TypeError, lambda: helpers.apply_rope(x, cos, sin, layout="half", positions=positions), "positions")
    raises_naming(TypeError, lambda: helpers.rope_gather(cos, sin, positions), "positions")
    for signed in (torch.int8, torch.int16, torch.int32):
        got = helpers.apply_rope(x, cos, sin, layout="half", positions=torch.tensor([3, 3, 3, 3], dtype=signed))
        assert torch.equal(got, helpers.apply_rope(x, cos, sin, layout="half", positions=torch.tensor([3, 3, 3, 3])))


def test_tables_of_two_dtypes_and_dtypes_rope_does_not_compute_in_are_refused():
    cos, sin = helpers.rope_cos_sin(8, 8)
    x = torch.randn(1, 2, 4, 8)
    raises_naming(TypeError, lambda: helpers.apply_rope(x, cos, sin.double(), layout="half"), "cos", "sin")
    if hasattr(torch, "float8_e4m3fn"):
        eight = x.to(torch.float8_e4m3fn)
        raises_naming(TypeError, lambda: helpers.apply_rope(eight, cos, sin, layout="half"), "x")


@pytest.mark.parametrize("layout", helpers.LAYOUTS)
def test_a_result_can_be_changed_in_place_under_autograd(layout):
    # q *= scale after RoPE, in training: the result is a tensor of its own, not a view.
    cos, sin = helpers.rope_cos_sin(4, 16, dtype=torch.float64)
    x = torch.randn(1, 2, 4, 16, dtype=torch.float64, requires_grad=True)
    y = helpers.apply_rope(x, cos, sin, layout=layout)
    y.mul_(0.5)
    y.sum().backward()
    want = helpers.apply_rope(torch.full_like(x, 0.5), cos, -sin, layout=layout)
    torch.testing.assert_close(x.grad, want)


def test_apply_rope_qk_results_own_their_memory():
    # A cache that keeps the rotated key must not keep the query's memory alive with it.
    cos, sin = helpers.rope_cos_sin(64, 32)
    q, k = torch.randn(1, 8, 1, 32), torch.randn(1, 8, 1, 32)
    q_rot, k_rot = helpers.apply_rope_qk(q, k, cos, sin, layout="half", positions=40)
    for t in (q_rot, k_rot):
        assert t._base is None and t.untyped_storage().nbytes() == t.numel() * t.element_size()


@pytest.mark.filterwarnings("ignore:There is a performance drop:UserWarning")  # torch's vmap of addcmul_
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", ["interleaved", "partial", "strided"])
def test_torch_func_transforms_run_through_the_short_dtypes_copy_path(dtype, case):
    # bfloat16 / float16 on the CPU go through a float32 copy, a block at a time (the interleaved
    # layout, partial rotary, a tensor that is not contiguous): vmap and forward-mode AD must run
    # through it as through the other paths (a version that wrote into buffers made once per call,
    # with out=, failed both).
    gen = torch.Generator().manual_seed(43)
    xs, ts = (torch.randn(3, 2, 8, 16, generator=gen).to(dtype) for _ in range(2))
    layout, width, kwargs = {"interleaved": ("interleaved", 16, {}), "partial": ("half", 8, {"rotary_dim": 8})}.get(
        case, ("half", 16, {})
    )
    if case == "strided":
        xs, ts = (t.transpose(-1, -2).contiguous().transpose(-1, -2) for t in (xs, ts))
    cos, sin = helpers.rope_cos_sin(8, width)

    def rope(z):
        return helpers.apply_rope(z, cos, sin, layout=layout, **kwargs)

    assert torch.equal(torch.func.vmap(rope)(xs), torch.stack([rope(x) for x in xs]))
    _, tangent = torch.func.jvp(rope, (xs[0],), (ts[0],))
    # The rotation is linear: its tangent is the rotated tangent (torch hands it back in float32,
    # the dtype it was computed in: rounded, it is the rotation's bits)
    assert torch.equal(tangent.to(dtype), rope(ts[0]))


@pytest.mark.parametrize("layout", helpers.LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_apply_rope_qk_with_learned_tables_is_two_calls(layout, dtype):
    # Tables that require a gradient (learned angles) with a small q and k: the same numbers and the
    # same gradient for the tables (to rounding) as two calls of apply_rope (the path that rotates q and k side by
    # side is for tensors without a gradient: it once took these and raised torch's in-place error).
    gen = torch.Generator().manual_seed(44)
    q, k = torch.randn(1, 4, 1, 16, generator=gen).to(dtype), torch.randn(1, 2, 1, 16, generator=gen).to(dtype)
    results = []
    for both in (True, False):
        cos, sin = (t.clone().requires_grad_(True) for t in helpers.rope_cos_sin(10, 16))
        if both:
            got = helpers.apply_rope_qk(q, k, cos, sin, layout=layout, positions=3)
        else:
            got = tuple(helpers.apply_rope(t, cos, sin, layout=layout, positions=3) for t in (q, k))
        sum(t.float().sum() for t in got).backward()
        results.append((*got, cos.grad, sin.grad))
    (q_1, k_1, *grads_1), (q_2, k_2, *grads_2) = results
    assert torch.equal(q_1, q_2) and torch.equal(k_1, k_2)
    for a, b in zip(grads_1, grads_2, strict=True):  # the same sums, added in another order
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("layout", helpers.LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_no_positions_is_an_empty_result_and_a_sparse_tensor_is_named(layout, dtype):
    # T = 0 (an empty prompt) on every path: bfloat16 in the interleaved layout raised an IndexError
    # once (the copy path read the size of position 0). A sparse x: a TypeError naming it, not
    # torch's message about memory formats.
    cos, sin = helpers.rope_cos_sin(8, 16)
    x = torch.randn(1, 2, 0, 16).to(dtype)
    assert helpers.apply_rope(x, cos, sin, layout=layout).shape == x.shape
    assert all(t.shape == x.shape for t in helpers.apply_rope_qk(x, x, cos, sin, layout=layout))
    sparse = torch.randn(1, 2, 4, 16).to(dtype).to_sparse()
    raises_naming(TypeError, lambda: helpers.apply_rope(sparse, cos, sin, layout=layout), "x", "strided")
    raises_naming(TypeError, lambda: helpers.apply_rope_qk(sparse, sparse, cos, sin, layout=layout), "q", "strided")


def test_torch_func_transforms_run_through_the_rotation():
    cos, sin = helpers.rope_cos_sin(8, 16, dtype=torch.float64)
    x = torch.randn(2, 8, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(26))
    t = torch.randn(2, 8, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(27))
    for layout in helpers.LAYOUTS:  # reverse mode (a custom autograd function with setup_context)
        grad = torch.func.grad(lambda z, layout=layout: (helpers.apply_rope(z, cos, sin, layout=layout) ** 2).sum())(x)
        torch.testing.assert_close(grad, 2 * x)  # a rotation keeps the norm
    _, tangent = torch.func.jvp(lambda z: helpers.apply_rope(z, cos, sin, layout="half"), (x,), (t,))
    torch.testing.assert_close(tangent, helpers.apply_rope(t, cos, sin, layout="half"))
