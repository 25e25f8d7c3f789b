"""Property tests (hypothesis) of the invariants the notebooks teach."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import helpers

widths = st.integers(1, 32).map(lambda k: 2 * k)  # even d in 2..64
bases = st.floats(1.5, 1e6)
positions = st.integers(-10_000, 10_000)
settings.register_profile("project", max_examples=60, deadline=None)
settings.load_profile("project")


def pe_at(ms, d, base):
    return helpers.sinusoidal_pe(torch.tensor(ms), d, base, dtype=torch.float64)  # (len(ms), d)


@given(d=widths, base=bases, m=positions, n=positions, shift=positions)
def test_inner_product_depends_only_on_distance(d, base, m, n, shift):
    p = pe_at([m, n, m + shift, n + shift], d, base)
    assert abs(float(p[0] @ p[1] - p[2] @ p[3])) < 1e-9 * d
    expected = sum(math.cos((m - n) * base ** (-2 * i / d)) for i in range(d // 2))
    assert abs(float(p[0] @ p[1]) - expected) < 1e-9 * d


@given(d=widths, base=bases, m=st.integers(0, 5_000_000))
def test_norm_is_sqrt_half_width(d, base, m):
    p = pe_at([m], d, base)[0]
    assert abs(float(p.norm()) - math.sqrt(d / 2)) < 1e-12 * d


def _shift_map(k, d, base):
    """Slow reference M_k: block-diagonal 2x2 maps with PE(m + k) = M_k PE(m) for [sin, cos] pairs."""
    theta = helpers.frequencies(d, base)
    blocks = []
    for t in theta.tolist():
        c, s = math.cos(k * t), math.sin(k * t)
        # [sin(a + b), cos(a + b)] = [[cos b, sin b], [-sin b, cos b]] @ [sin a, cos a]
        blocks.append(torch.tensor([[c, s], [-s, c]], dtype=torch.float64))
    return torch.block_diag(*blocks)


@given(d=widths, base=bases, k=st.integers(-1000, 1000), ms=st.lists(positions, min_size=1, max_size=6))
def test_shift_is_one_linear_map_for_every_position(d, base, k, ms):
    shift = _shift_map(k, d, base)  # (d, d), built without knowing m
    before = pe_at(ms, d, base)
    after = pe_at([m + k for m in ms], d, base)
    torch.testing.assert_close(before @ shift.T, after, atol=1e-9, rtol=0)


@given(t=st.integers(2, 12), d=st.integers(1, 16), seed=st.integers(0, 2**31 - 1))
def test_attention_without_positions_is_permutation_equivariant(t, d, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(t, d, generator=g, dtype=torch.float64)
    w_q, w_k, w_v = (torch.randn(d, d, generator=g, dtype=torch.float64) for _ in range(3))
    perm = torch.randperm(t, generator=g)
    P = torch.eye(t, dtype=torch.float64)[perm]  # (T, T) permutation matrix

    def attn(inp):
        return helpers.attention(inp @ w_q.T, inp @ w_k.T, inp @ w_v.T)[0]

    torch.testing.assert_close(attn(P @ x), P @ attn(x), atol=1e-10, rtol=1e-10)


@given(
    d=widths,
    base=st.floats(2.0, 1e6),
    layout=st.sampled_from(helpers.LAYOUTS),
    seed=st.integers(0, 2**31 - 1),
    shift=st.integers(-100_000, 100_000),
)
def test_rope_scores_depend_only_on_distance(d, base, layout, seed, shift):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(5, d, generator=g, dtype=torch.float64)
    k = torch.randn(5, d, generator=g, dtype=torch.float64)
    pos = torch.tensor([0, 3, 7, 20, 1000])

    def scores(offset):
        cos, sin = helpers.rope_cos_sin(pos + offset, d, base, dtype=torch.float64)
        return helpers.apply_rope(q, cos, sin, layout=layout) @ helpers.apply_rope(k, cos, sin, layout=layout).T

    torch.testing.assert_close(scores(shift), scores(0), atol=1e-8, rtol=1e-8)


@given(t=st.integers(1, 10), d_model=st.integers(1, 12), d_k=st.integers(1, 8), seed=st.integers(0, 2**31 - 1))
def test_four_score_terms_sum_to_the_score(t, d_model, d_k, seed):
    g = torch.Generator().manual_seed(seed)
    x, p = (torch.randn(t, d_model, generator=g, dtype=torch.float64) for _ in range(2))
    w_q, w_k = (torch.randn(d_k, d_model, generator=g, dtype=torch.float64) for _ in range(2))
    terms = helpers.score_terms(x, p, w_q, w_k)
    full = ((x + p) @ w_q.T) @ ((x + p) @ w_k.T).T
    torch.testing.assert_close(sum(terms.values()), full, atol=1e-9, rtol=1e-9)


@given(
    tq=st.integers(1, 9),
    extra=st.integers(0, 6),
    d=st.integers(1, 8),
    heads=st.integers(1, 3),
    causal=st.booleans(),
    use_bias=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_attention_matches_torch_sdpa(tq, extra, d, heads, causal, use_bias, seed):
    tk = tq + extra
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, heads, tq, d, generator=g, dtype=torch.float64)
    k = torch.randn(2, heads, tk, d, generator=g, dtype=torch.float64)
    v = torch.randn(2, heads, tk, 3, generator=g, dtype=torch.float64)
    bias = torch.randn(heads, tq, tk, generator=g, dtype=torch.float64) if use_bias else None
    out, weights = helpers.attention(q, k, v, bias=bias, causal=causal)
    mask = torch.zeros(tq, tk, dtype=torch.float64)
    if causal:  # bottom-right: query i sits at position i + tk - tq
        allowed = torch.arange(tk)[None, :] <= torch.arange(tq)[:, None] + (tk - tq)
        mask = mask.masked_fill(~allowed, float("-inf"))
    if bias is not None:
        mask = mask + bias
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, ref, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, heads, tq, dtype=torch.float64))
    fused, none = helpers.attention(q, k, v, bias=bias, causal=causal, need_weights=False)
    assert none is None
    torch.testing.assert_close(fused, ref, atol=1e-10, rtol=1e-10)


@given(d=widths, seed=st.integers(0, 2**31 - 1), t=st.integers(1, 9))
def test_rope_layouts_agree_up_to_a_fixed_permutation(d, seed, t):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(t, d, generator=g, dtype=torch.float64)
    cos, sin = helpers.rope_cos_sin(t, d, dtype=torch.float64)
    # interleaved pair i is (2i, 2i+1); half pair i is (i, i + d/2): move dims 2i -> i, 2i+1 -> i + d/2.
    perm = torch.cat((torch.arange(0, d, 2), torch.arange(1, d, 2)))
    torch.testing.assert_close(
        helpers.apply_rope(x, cos, sin, layout="interleaved")[:, perm],
        helpers.apply_rope(x[:, perm], cos, sin, layout="half"),
        atol=1e-12,
        rtol=0,
    )


@given(d=widths, seed=st.integers(0, 2**31 - 1), t=st.integers(1, 9))
def test_half_layout_matches_the_hugging_face_llama_formula(d, seed, t):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, t, d, generator=g, dtype=torch.float64)
    cos, sin = helpers.rope_cos_sin(t, d, dtype=torch.float64)  # (T, d/2)
    # transformers' LLaMA: emb = cat(freqs, freqs); x * cos + rotate_half(x) * sin.
    cos_full, sin_full = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)
    rotate_half = torch.cat((-x[..., d // 2 :], x[..., : d // 2]), dim=-1)
    torch.testing.assert_close(
        helpers.apply_rope(x, cos, sin, layout="half"), x * cos_full + rotate_half * sin_full, atol=1e-12, rtol=0
    )


@given(d=widths, base=bases)
def test_kernel_is_one_at_zero_and_symmetric(d, base):
    delta = torch.tensor([0.0, 1.0, -1.0, 37.0, -37.0], dtype=torch.float64)
    kappa = helpers.position_kernel(delta, d, base)
    assert float(kappa[0]) == 1.0
    assert float(kappa[1]) == float(kappa[2]) and float(kappa[3]) == float(kappa[4])
    assert bool((kappa.abs() <= 1 + 1e-12).all())


@given(d=widths, base=bases, k=st.integers(0, 100_000), m=positions)
def test_shift_gap_is_the_root_sum_of_chords(d, base, k, m):
    # ‖p_(m+k) - p_m‖ = sqrt(Σ_i 4 sin²(kθ_i / 2)): each pair is a chord of the unit circle.
    p = pe_at([m, m + k], d, base)
    expected = math.sqrt(sum(4 * math.sin(k * t / 2) ** 2 for t in helpers.frequencies(d, base).tolist()))
    assert abs(float((p[1] - p[0]).norm()) - expected) < 1e-9 * d
    gap = float(helpers.shift_distance(torch.tensor([k]), helpers.frequencies(d, base))[0])
    assert abs(gap - expected) < 1e-9 * d
    # and the gap and the kernel are one quantity: ‖p_(m+k) - p_m‖² = d (1 - κ_d(k))
    assert abs(gap**2 - d * (1 - float(helpers.position_kernel(k, d, base)))) < 1e-8 * d


@given(delta=st.floats(0.5, 1e6), base=st.floats(2.0, 1e6))
def test_continuous_kernel_slope_is_cos_minus_cos_over_delta_ln_b(delta, base):
    # d/dΔ (Ci(Δ) - Ci(Δ/b)) / ln b = (cos Δ - cos(Δ/b)) / (Δ ln b)
    h = 1e-4
    ends = helpers.continuous_kernel(torch.tensor([delta - h, delta + h], dtype=torch.float64), base)
    slope = float(ends[1] - ends[0]) / (2 * h)
    formula = (math.cos(delta) - math.cos(delta / base)) / (delta * math.log(base))
    assert abs(slope - formula) < 1e-6 / (delta * math.log(base)) + 1e-9


def test_kernel_comes_back_near_one_yet_averages_to_zero():
    # d = 8: at Δ = 69,115 every hand is back near twelve (notebook 03, section 7), κ_8 = 0.9998
    assert round(float(helpers.position_kernel(69_115, 8)), 4) == 0.9998
    delta = torch.arange(1, 100_001, dtype=torch.float64)
    for d in (8, 64):
        assert abs(float(helpers.position_kernel(delta, d).mean())) < 0.01
    # The continuous curve, unlike κ_d, tends to 0.
    far = helpers.continuous_kernel(torch.arange(500_000, 1_000_001, 7, dtype=torch.float64))
    assert float(far.abs().max()) < 0.003
