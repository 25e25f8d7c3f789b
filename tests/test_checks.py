"""helpers.checks: each detector passes on helpers' own functions and on right implementations written
the way other libraries write them, and fails, naming the cause, on each wrong variant of notebook 10."""

from __future__ import annotations

import math

import pytest
import torch

import helpers
from helpers.checks import (
    CheckFailed,
    CheckReport,
    Finding,
    check_alibi,
    check_cached_decoding,
    check_position_ids,
    check_rope,
    check_sinusoidal,
    check_t5_bias,
)

LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "original_max_position_embeddings": 8192,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
}


def fails_with(report: CheckReport, finding: str, *phrases: str) -> None:
    """The report failed, on the property ``finding``, and that finding's detail holds every phrase."""
    assert not report.passed, f"accepted:\n{report}"
    found = report.finding(finding)
    assert not found.passed, f"{finding} held:\n{report}"
    for phrase in phrases:
        assert phrase in found.detail, f"{phrase!r} not in {found.detail!r}"


# ----- RoPE implementations, right and wrong ----------------------------------------------------------


def helpers_rope(layout="interleaved", base=10000.0, scaling=None):
    def rope(x, positions):
        cos, sin = helpers.rope_cos_sin(positions, x.shape[-1], base, scaling=scaling, dtype=x.dtype)
        return helpers.apply_rope(x, cos, sin, layout=layout)

    return rope


def hf_rope(x, positions, base=10000.0, inv_freq=None, table_dtype=torch.float32):
    """Hugging Face style: float32 inv_freq, cat(freqs, freqs), rotate_half (the half layout)."""
    d = x.shape[-1]
    if inv_freq is None:
        inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    freqs = positions.to(table_dtype)[:, None] * inv_freq.to(table_dtype)[None, :]  # (T, d/2)
    emb = torch.cat((freqs, freqs), dim=-1).float()  # (T, d)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def meta_rope(x, positions, base=10000.0):
    """Meta style: complex numbers of adjacent pairs (the interleaved layout), float32 angles."""
    d = x.shape[-1]
    freqs = 1.0 / (base ** (torch.arange(0, d, 2)[: d // 2].float() / d))
    turns = torch.polar(torch.ones(len(positions), d // 2), positions.float()[:, None] * freqs[None, :])
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(pairs * turns).flatten(-2).to(x.dtype)


def interleaved_with_half_table(x, positions):
    """The interleaved rotation fed the half layout's full-width table cat(θ, θ)."""
    d = x.shape[-1]
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d, 2).float() / d))
    emb = torch.cat((inv_freq, inv_freq))[None, :] * positions.float()[:, None]  # (T, d)
    cos, sin = emb.cos(), emb.sin()
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x1 * cos[:, 0::2] - x2 * sin[:, 0::2]
    out[..., 1::2] = x2 * cos[:, 1::2] + x1 * sin[:, 1::2]
    return out


def rotate_half_with_interleaved_table(x, positions):
    """rotate_half fed the interleaved layout's full-width table (θ_0, θ_0, θ_1, θ_1, ...)."""
    d = x.shape[-1]
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d, 2).float() / d))
    emb = inv_freq.repeat_interleave(2)[None, :] * positions.float()[:, None]  # (T, d)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * emb.cos() + torch.cat((-x2, x1), dim=-1) * emb.sin()


def test_helpers_rope_passes_in_both_layouts_and_with_scaling():
    for layout in ("interleaved", "half"):
        report = check_rope(helpers_rope(layout), layout=layout)
        assert report.passed, report
        assert layout in report.finding("layout").detail
    report = check_rope(helpers_rope(base=500000.0, scaling=LLAMA3), base=500000.0, scaling=LLAMA3, d=128)
    assert report.passed, report
    yarn = {"type": "yarn", "factor": 4.0, "original_max_len": 4096}
    report = check_rope(helpers_rope(scaling=yarn), scaling=yarn)  # tables times a = 0.1 ln 4 + 1
    assert report.passed, report
    assert "|R_m x| = 1.14 |x|" in report.finding("norm").detail


def test_the_probes_go_to_the_device_asked_for():
    seen = set()

    def where(x, positions):
        seen.add((x.device.type, positions.device.type))
        return hf_rope(x, positions)

    assert check_rope(where, layout="half", device="cpu").passed and seen == {("cpu", "cpu")}
    assert check_cached_decoding(cached_step(), device=torch.device("cpu")).passed


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_an_implementation_on_cuda_is_checked_there():
    def on_cuda(x, positions):
        assert x.is_cuda and positions.is_cuda
        d = x.shape[-1]
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d, 2, device=x.device).float() / d))
        return hf_rope(x, positions, inv_freq=inv_freq)

    assert check_rope(on_cuda, layout="half", device="cuda").passed
    assert not check_rope(on_cuda, layout="interleaved", device="cuda").passed


def test_third_party_style_implementations_pass():
    assert check_rope(hf_rope, layout="half").passed, check_rope(hf_rope, layout="half")
    assert check_rope(meta_rope, layout="interleaved").passed, check_rope(meta_rope, layout="interleaved")
    report = check_rope(hf_rope, layout="half", dtype=torch.bfloat16)  # float32 angles, bfloat16 tables: fine
    assert report.passed, report


def test_a_float32_angle_passes_but_its_error_at_a_million_is_said():
    detail = check_rope(hf_rope).finding("precision").detail
    assert "the rounding of a float32 angle" in detail
    assert "the rounding" not in check_rope(helpers_rope()).finding("precision").detail


def test_the_layout_swapped_is_named():
    fails_with(check_rope(hf_rope, layout="interleaved"), "layout", "(0, 32), (1, 33)", "the half layout")
    fails_with(check_rope(helpers_rope("interleaved"), layout="half"), "layout", "(0, 1), (2, 3)", "interleaved")
    report = check_rope(hf_rope, layout="interleaved")
    assert [f.name for f in report.failures] == ["layout"]  # a valid RoPE otherwise: relative property holds


def test_a_table_of_one_layout_with_the_others_rotation_is_named():
    report = check_rope(interleaved_with_half_table)
    fails_with(report, "rotation", "pair (0, 1) is not one rotation", "table built for the half layout")
    fails_with(report, "norm")
    fails_with(report, "relative", "depends on the absolute position")
    report = check_rope(rotate_half_with_interleaved_table)
    fails_with(report, "rotation", "table built for the interleaved layout used with rotate_half")


def test_bfloat16_angles_are_caught_with_the_first_position_named():
    def bf16_angles(x, positions):
        return hf_rope(x, positions, table_dtype=torch.bfloat16)

    for dtype in (torch.float32, torch.bfloat16):
        report = check_rope(bf16_angles, layout="half", dtype=dtype)
        fails_with(report, "precision", "first exceed the tolerance at the probed position", "too low a precision")
        # one fault, told once: in bfloat16 the relative failure is folded into precision; in float32 the
        # rounded speeds are the fault, and relative and precision are folded into it
        expected = ["relative"] if dtype == torch.bfloat16 else ["relative", "precision"]
        assert [f.name for f in report.folded] == expected, str(report)
    # In float32 the speeds themselves are seen to be rounded (bfloat16 inv_freq), wrong from position 1 on.
    report = check_rope(bf16_angles, layout="half")
    fails_with(report, "speeds", "within 1%", "rounded to a low precision")
    assert [(f.name, f.folded_into) for f in report.folded] == [("relative", "speeds"), ("precision", "speeds")]
    # Against bfloat16 tolerances the speeds pass, and the tables fail a few dozen positions in.
    detail = check_rope(bf16_angles, layout="half", dtype=torch.bfloat16).finding("precision").detail
    position = int(detail.split("at the probed position ")[1].split(" ")[0].replace(",", ""))
    assert 8 <= position <= 100, detail


def test_the_base_ignored_is_named():
    def fixed_base(x, positions):
        return hf_rope(x, positions, base=10000.0)

    fails_with(
        check_rope(fixed_base, base=500000.0, layout="half"),
        "speeds",
        "helpers (base 500,000) says",
        "configured base is ignored and the default 10000 used",
    )


def test_a_base_argument_ignored_is_caught_at_the_default_base():
    """At base 10,000 an implementation that always uses 10,000 is right; given a ``base`` keyword,
    check_rope probes a second base (500,000) and names the fault there."""

    def honours(x, positions, base=10000.0):
        return hf_rope(x, positions, base=base)

    def ignores(x, positions, base=10000.0):
        return hf_rope(x, positions, base=10000.0)

    def no_keyword(x, positions):
        return hf_rope(x, positions, base=10000.0)

    report = check_rope(honours, layout="half")
    assert report.passed and "base=500,000 as well" in report.finding("base").detail, str(report)
    report = check_rope(ignores, layout="half")
    fails_with(report, "base", "called with base=500,000, speeds:", "configured base is ignored")
    assert [f.name for f in report.failures] == ["base"], str(report)
    # Above 100,000 the second base is 50 times smaller; with partial rotary only the first r dims are probed.
    partial = {"rope_type": "default", "partial_rotary_factor": 0.5}

    def partial_ignores(x, positions, base=500000.0):
        r = x.shape[-1] // 2
        return torch.cat((hf_rope(x[:, :r], positions, base=500000.0), x[:, r:]), dim=-1)

    fails_with(check_rope(partial_ignores, base=500000.0, scaling=partial), "base", "called with base=10,000")
    # Without a base keyword nothing can be probed at another base: no base finding, and the report says
    # nothing about it either way.
    report = check_rope(no_keyword, layout="half")
    assert report.passed and "base" not in {f.name for f in report.findings}


def test_the_exponent_without_its_2_is_named():
    def half_exponent(x, positions):
        d = x.shape[-1]
        return hf_rope(x, positions, inv_freq=1.0 / 10000.0 ** (torch.arange(d // 2).float() / d))

    fails_with(check_rope(half_exponent, layout="half"), "speeds", "base 100 ", "its 2 is missing")


def test_linear_scaling_where_llama3_is_meant_is_named():
    def linear(x, positions):
        d = x.shape[-1]
        inv_freq = 1.0 / (500000.0 ** (torch.arange(0, d, 2).float() / d)) / 8.0
        return hf_rope(x, positions, inv_freq=inv_freq)

    report = check_rope(linear, d=128, base=500000.0, scaling=LLAMA3, layout="half")
    fails_with(report, "speeds", "speeds of linear scaling with factor 8, not of llama3", "keeps the fast ones")
    ignored = check_rope(lambda x, p: hf_rope(x, p, base=500000.0), d=128, base=500000.0, scaling=LLAMA3)
    fails_with(ignored, "speeds", "plain RoPE's speeds with base 500000: the scaling")


def test_pairs_turning_backwards_are_named():
    def backwards(x, positions):
        return hf_rope(x, -positions)

    fails_with(check_rope(backwards, layout="half"), "speeds", "turns backwards")


def test_positions_read_from_the_row_index_are_named():
    def by_row(x, positions):
        return hf_rope(x, torch.arange(x.shape[0]))

    fails_with(check_rope(by_row), "positions", "reads the position from the row index")


def test_bad_outputs_are_reported_with_what_was_expected():
    fails_with(check_rope(lambda x, p: x[:, :-1]), "output", "returned shape", "expected (3, 64)")
    fails_with(check_rope(lambda x, p: x.double()), "output", "dtype torch.float64", "expected torch.float32")
    fails_with(check_rope(lambda x, p: x * float("nan")), "output", "NaN")
    fails_with(check_rope(lambda x, p: x.numpy()), "output", "returned ndarray", "tensor")
    fails_with(check_rope(lambda x, p: 1 / 0), "output", "rope_fn raised ZeroDivisionError", "positions [9, 9, 9]")


@pytest.mark.parametrize(
    "call, error, argument",
    [
        (lambda: check_rope(3), TypeError, "rope_fn"),
        (lambda: check_rope(hf_rope, d=5), ValueError, "d must"),
        (lambda: check_rope(hf_rope, d=2), ValueError, "d must"),
        (lambda: check_rope(hf_rope, base=1.0), ValueError, "base"),
        (lambda: check_rope(hf_rope, layout="neox"), ValueError, "layout"),
        (lambda: check_rope(hf_rope, max_position=10), ValueError, "max_position"),
        (lambda: check_rope(hf_rope, dtype=torch.int64), TypeError, "dtype"),
        (lambda: check_rope(hf_rope, scaling={"type": "warp"}), ValueError, "warp"),
        (lambda: check_rope(hf_rope, device="nowhere"), ValueError, "device"),
        (lambda: check_cached_decoding(len, device=3.5), ValueError, "device"),
        (lambda: check_alibi(None), TypeError, "bias_fn"),
        (lambda: check_alibi(helpers.alibi_bias, max_heads=0), ValueError, "max_heads"),
        (lambda: check_alibi(helpers.alibi_bias, n_tokens=2.0), TypeError, "n_tokens"),
        (lambda: check_position_ids("cumsum"), TypeError, "position_ids_fn"),
        (lambda: check_position_ids(len, attention_mask=torch.tensor([[1, 0]])), ValueError, "left-padded"),
        (lambda: check_position_ids(len, attention_mask=torch.tensor([1, 1])), ValueError, "attention_mask"),
        (lambda: check_cached_decoding(1), TypeError, "step_fn"),
        (lambda: check_cached_decoding(len, chunks=(4,)), ValueError, "chunks"),
        (lambda: check_cached_decoding(len, chunks=(4, 0)), ValueError, "chunks"),
        (lambda: check_cached_decoding(len, layout="neox"), ValueError, "layout"),
        (lambda: check_sinusoidal(1.0), TypeError, "pe_fn"),
        (lambda: check_sinusoidal(len, d=7), ValueError, "d must"),
        (lambda: check_sinusoidal(len, n_positions=4), ValueError, "n_positions"),
        (lambda: check_t5_bias(len, bidirectional=1), TypeError, "bidirectional"),
        (lambda: check_t5_bias(len, num_buckets=2), ValueError, "num_buckets"),
    ],
)
def test_bad_arguments_name_the_argument(call, error, argument):
    with pytest.raises(error, match=argument):
        call()


# ----- the report -----------------------------------------------------------------------------------


def test_the_report_reads_as_a_verdict_and_findings_and_raises_on_demand():
    good = check_rope(hf_rope, layout="half")
    assert good.verdict.startswith(
        "check_rope: passed (rotation, norm, relative, layout, positions, speeds, precision, base)"
    )
    assert good.diagnosis == "" and good.raise_if_failed() is good
    assert repr(good) == str(good) and str(good).splitlines()[1].startswith("  ok   rotation:")
    bad = check_rope(hf_rope, layout="interleaved")
    assert bad.verdict == "check_rope: FAILED on layout (6 of 7 held)"
    assert bad.diagnosis == bad.finding("layout").detail
    assert "  FAIL layout: pairs (0, 32)" in str(bad)
    with pytest.raises(CheckFailed, match="FAIL layout"):
        bad.raise_if_failed()
    with pytest.raises(KeyError, match="precision"):
        CheckReport("x", (Finding("a", True, "fine"),)).finding("precision")


# ----- ALiBi ------------------------------------------------------------------------------------------


def slopes_direct(n_heads):
    return torch.tensor([2.0 ** (-8.0 * (k + 1) / n_heads) for k in range(n_heads)], dtype=torch.float64)


def alibi_from(slopes_fn, *, sign=1.0, top_left=False, mask_top_left=False):
    """A distance-form ALiBi bias (H, Tq, Tk) with the given slopes and the causal mask; top_left measures the
    distance from query 0 at position 0, mask_top_left aligns the mask so too."""

    def bias(n_heads, n_queries, n_keys):
        j = torch.arange(n_keys)[None, :]
        i = torch.arange(n_queries)[:, None] + (0 if top_left else n_keys - n_queries)
        distance = (i - j).double()
        b = -sign * slopes_fn(n_heads)[:, None, None] * distance.clamp(min=0)
        i_mask = torch.arange(n_queries)[:, None] + (0 if mask_top_left else n_keys - n_queries)
        return b.masked_fill(j > i_mask, float("-inf")).float()

    return bias


def bloom_style(n_heads, n_queries, n_keys):
    """The reference code's and BLOOM's +m_h j row, with the causal mask added (one row for all queries)."""
    row = helpers.alibi_slopes(n_heads)[:, None, None] * torch.arange(n_keys)[None, None, :]  # (H, 1, Tk)
    return (row + torch.zeros(1, n_queries, 1, dtype=torch.float64)).masked_fill(
        ~helpers.causal_mask(n_queries, n_keys), float("-inf")
    )


def test_right_alibi_biases_pass():
    assert check_alibi(lambda h, q, k: helpers.alibi_bias(h, q, k)).passed
    assert check_alibi(bloom_style).passed, check_alibi(bloom_style)
    assert check_alibi(alibi_from(helpers.alibi_slopes)).passed
    unmasked = check_alibi(lambda h, q, k: -helpers.alibi_slopes(h)[:, None, None] * torch.zeros(h, q, k))
    assert not unmasked.passed  # a bias of zeros is not ALiBi


def test_slopes_for_a_head_count_that_is_not_a_power_of_two_are_named():
    report = check_alibi(alibi_from(slopes_direct))
    fails_with(
        report,
        "slopes",
        "right for every power of two",
        "first at H = 3",
        "2^(-8k/H) with H = 3",
        "appends every other slope of 4 heads",
    )
    assert report.passed is False and [f.name for f in report.failures] == ["slopes"]
    twelve = check_alibi(alibi_from(slopes_direct), max_heads=12).finding("slopes").detail
    assert "wrong for 8 of 12 head counts" in twelve


def test_the_sign_flipped_is_named():
    fails_with(check_alibi(alibi_from(helpers.alibi_slopes, sign=-1.0)), "sign", "far keys are favoured")


def test_zero_bias_at_every_decoding_step_is_named():
    report = check_alibi(alibi_from(helpers.alibi_slopes, top_left=True))
    fails_with(report, "decoding", "the same for every key", "ALiBi does nothing while generating")
    fails_with(report, "alignment", "places it at position 0 (top-left)")
    assert report.finding("slopes").passed  # the full square bias is right
    masked = check_alibi(alibi_from(helpers.alibi_slopes, top_left=True, mask_top_left=True))
    fails_with(masked, "decoding", "own key 15 is masked with -inf")


def test_a_masked_visible_key_and_a_wrong_shape_are_reported():
    def too_much_mask(n_heads, n_queries, n_keys):
        return helpers.alibi_bias(n_heads, n_queries, n_keys).masked_fill(
            torch.eye(n_queries, n_keys).bool(), -math.inf
        )

    fails_with(check_alibi(too_much_mask), "output", "a key the query may see is masked")
    fails_with(check_alibi(lambda h, q, k: helpers.alibi_bias(h, q, k)[0]), "output", "expected (8, 16, 16)")


# ----- position ids -------------------------------------------------------------------------------------


def test_position_ids_from_the_mask_pass_and_left_padding_ignored_fails():
    def from_mask(mask):  # Hugging Face's generate: cumsum - 1, padding set to 1
        return (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 1)

    assert check_position_ids(from_mask).passed
    fails_with(
        check_position_ids(lambda mask: torch.arange(mask.shape[1]).expand_as(mask)),
        "left padding",
        "row 0, column 3: position 3, expected 0",
        "left padding is ignored",
    )
    fails_with(check_position_ids(lambda mask: mask.cumsum(-1)), "left padding", "one too large")
    fails_with(check_position_ids(lambda mask: mask.cumsum(-1).float() - 1), "output", "expected an integer tensor")


# ----- cached decoding ----------------------------------------------------------------------------------


def cached_step(*, offset=True, sdpa_top_left=False, layout="interleaved", shift=0, rotate_v=False, q_shift=0):
    def step(q, k, v, cache):
        keys, values = cache if cache is not None else (q[:0], q[:0])
        start = keys.shape[0] if offset else 0
        if keys.shape[0]:
            start += shift  # the decoding steps' first position off by `shift`
        cos, sin = helpers.rope_cos_sin(start + q.shape[0] + 1, q.shape[-1], dtype=q.dtype)
        q_start = start + (q_shift if keys.shape[0] else 0)  # the queries alone off by `q_shift` when decoding
        q_rot = helpers.apply_rope(q, cos, sin, layout=layout, positions=q_start)
        k_rot = helpers.apply_rope(k, cos, sin, layout=layout, positions=start)
        if rotate_v:
            v = helpers.apply_rope(v, cos, sin, layout=layout, positions=start)
        keys, values = torch.cat((keys, k_rot)), torch.cat((values, v))
        if sdpa_top_left:
            out = torch.nn.functional.scaled_dot_product_attention(q_rot, keys, values, is_causal=True)
        else:
            out, _ = helpers.attention(q_rot, keys, values, causal=True)
        return out, (keys, values)

    return step


def test_cached_decoding_right_passes_and_the_two_known_faults_are_named():
    assert check_cached_decoding(cached_step()).passed
    assert check_cached_decoding(cached_step(layout="half"), layout="half").passed
    fails_with(
        check_cached_decoding(cached_step(offset=False)),
        "cache",
        "step 1 (the prompt is step 0; 3 new tokens at positions 5..7, 5 cached)",
        "rotating every step from position 0",
    )
    fails_with(check_cached_decoding(cached_step(sdpa_top_left=True)), "cache", "causal mask aligned top-left")
    fails_with(check_cached_decoding(cached_step(shift=-1)), "cache", "one position early", "cache length - 1")
    fails_with(check_cached_decoding(cached_step(shift=1)), "cache", "one position late", "cache length + 1")
    fails_with(check_cached_decoding(cached_step(rotate_v=True)), "cache", "rotating the values")
    fails_with(check_cached_decoding(cached_step(shift=2)), "cache", "differs from the full pass")
    fails_with(check_cached_decoding(cached_step(q_shift=-1)), "cache", "queries after the prompt one position early")
    fails_with(check_cached_decoding(cached_step(q_shift=1)), "cache", "queries after the prompt one position late")
    assert "It matches" not in check_cached_decoding(cached_step(shift=2)).diagnosis  # not recognised: said so
    memo = {}

    def memoized(q, k, v, cache):  # tables keyed by the step's length only
        keys, values = cache if cache is not None else (q[:0], q[:0])
        if len(q) not in memo:
            memo[len(q)] = helpers.rope_cos_sin(torch.arange(len(keys), len(keys) + len(q)), q.shape[-1])
        cos, sin = (t.to(q.dtype) for t in memo[len(q)])
        keys = torch.cat((keys, helpers.apply_rope(k, cos, sin, layout="interleaved")))
        values = torch.cat((values, v))
        return helpers.attention(helpers.apply_rope(q, cos, sin, layout="interleaved"), keys, values, causal=True)[0], (
            keys,
            values,
        )

    fails_with(
        check_cached_decoding(memoized), "cache", "step 3 (the prompt is step 0; 1 new token at position 9,", "memoized"
    )
    fails_with(check_cached_decoding(cached_step(layout="half")), "cache", "step 0")
    fails_with(check_cached_decoding(lambda q, k, v, cache: q), "output", "expected a tuple (output, cache)")


# ----- sinusoidal ---------------------------------------------------------------------------------------


def tutorial_pe(T, d, sign=-1.0, step=2, swap=False, concat=False):
    """The classic tutorial's table: div_term = exp(arange(0, d, 2) * (-ln(10000) / d))."""
    position = torch.arange(T, dtype=torch.float32)[:, None]
    div_term = torch.exp(torch.arange(0, d, step)[: d // 2].float() * (sign * math.log(10000.0) / d))
    s, c = torch.sin(position * div_term), torch.cos(position * div_term)
    if concat:
        return torch.cat((s, c), dim=-1)
    pe = torch.zeros(T, d)
    pe[:, 0::2], pe[:, 1::2] = (c, s) if swap else (s, c)
    return pe


def test_sinusoidal_right_passes_and_each_wrong_table_is_named():
    assert check_sinusoidal(tutorial_pe).passed
    assert check_sinusoidal(lambda T, d: helpers.sinusoidal_pe(T, d)).passed
    fails_with(check_sinusoidal(lambda T, d: tutorial_pe(T, d, sign=1.0)), "speeds", "sign is flipped")
    fails_with(check_sinusoidal(lambda T, d: tutorial_pe(T, d, step=1)), "speeds", "its 2 is missing")
    swapped = check_sinusoidal(lambda T, d: tutorial_pe(T, d, swap=True))
    fails_with(swapped, "layout", "sin and cos swapped")
    assert swapped.finding("speeds").passed
    fails_with(check_sinusoidal(lambda T, d: tutorial_pe(T, d, concat=True)), "layout", "concatenated [sin ... | cos")
    fails_with(
        check_sinusoidal(lambda T, d: tutorial_pe(T + 1, d)[1:]),
        "layout",
        "row t holds position t + 1",
        "counted from 1",
    )

    def per_column_exponent(T, d):  # column k uses 10000^(-k/d): the two columns of a pair differ
        angle = torch.arange(T, dtype=torch.float64)[:, None] * 10000.0 ** (-torch.arange(d) / d)
        pe = angle.sin()
        pe[:, 1::2] = angle[:, 1::2].cos()
        return pe

    fails_with(check_sinusoidal(per_column_exponent), "speeds", "sin² + cos² = ", "different speeds")

    def precedence_slip(T, d):  # -log(b) / d // 2 is (-log(b) / d) // 2 = -1
        div_term = torch.exp(torch.arange(0, d, 2).float() * (-math.log(10000.0) / d // 2))
        angle = torch.arange(T).float()[:, None] * div_term
        pe = torch.zeros(T, d)
        pe[:, 0::2], pe[:, 1::2] = angle.sin(), angle.cos()
        return pe

    fails_with(check_sinusoidal(precedence_slip), "speeds", "(-log(b) / d) // 2, which is -1 whenever")


# ----- T5 buckets ---------------------------------------------------------------------------------------


def test_t5_buckets_right_pass_and_the_sign_and_the_flag_are_named():
    assert check_t5_bias(lambda rel: helpers.relative_position_bucket(rel)).passed
    fails_with(check_t5_bias(lambda rel: helpers.relative_position_bucket(-rel)), "buckets", "Past and future")
    fails_with(
        check_t5_bias(lambda rel: helpers.relative_position_bucket(rel, bidirectional=False)),
        "buckets",
        "bidirectional=False",
    )
    fails_with(check_t5_bias(lambda rel: helpers.relative_position_bucket(rel) + 1), "distance 0", "bucket 1")


# ----- right implementations from other code bases that an earlier tolerance rejected ----------------


def meta_rope_computed_in_float32(x, positions, base=10000.0):
    """Meta's llama: complex RoPE computed in float32 whatever x's dtype (x.float() ... type_as(x))."""
    d = x.shape[-1]
    freqs = 1.0 / (base ** (torch.arange(0, d, 2)[: d // 2].float() / d))
    cis = torch.polar(torch.ones(len(positions), d // 2), torch.outer(positions.float(), freqs))
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * cis).flatten(-2).type_as(x)


def test_metas_complex_rope_in_float64_passes_and_says_it_computes_in_float32():
    report = check_rope(meta_rope_computed_in_float32, layout="interleaved", dtype=torch.float64)
    assert report.passed, str(report)
    assert "computed internally in float32" in report.finding("norm").detail
    # a float64 implementation says nothing of the kind, and a real norm fault is still caught
    assert "internally" not in check_rope(helpers_rope(), dtype=torch.float64).finding("norm").detail
    fails_with(
        check_rope(lambda x, p: 1.001 * meta_rope_computed_in_float32(x, p), dtype=torch.float64),
        "norm",
        "differs from 1 by 1.00e-03",
    )


def test_a_table_of_fixed_length_is_told_to_pass_max_position():
    table = helpers.rope_cos_sin(4096, 64, dtype=torch.float32)

    def fixed(x, positions):
        return helpers.apply_rope(x, table[0][positions], table[1][positions], layout="interleaved")

    report = check_rope(fixed)
    fails_with(report, "output", "IndexError", "pass max_position=N")
    assert "not checked: rotation, norm, relative, layout, positions, speeds, precision" in report.verdict
    assert check_rope(fixed, max_position=4096).passed


def pytorch_tutorial_pe(T, d):
    """The PyTorch tutorial's PositionalEncoding table, float32 throughout."""
    position = torch.arange(T).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
    pe = torch.zeros(T, d)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def test_the_tutorials_float32_table_passes_at_realistic_lengths():
    for T, d in ((2048, 512), (512, 512), (1024, 64)):
        report = check_sinusoidal(pytorch_tutorial_pe, d=d, n_positions=T)
        assert report.passed, f"T={T}, d={d}:\n{report}"

    # its tolerance follows the angle: a table off by 1e-3 at position 5 (where float32 is exact to 1e-6) fails
    def nudged(T, d):
        pe = pytorch_tutorial_pe(T, d)
        pe[5, 0], pe[5, 1] = math.sin(5.001), math.cos(5.001)  # pair 0 turned 1e-3 too far at position 5
        return pe

    report = check_sinusoidal(nudged, d=512, n_positions=2048)
    fails_with(report, "speeds", "largest difference at pair 0, position 5", "the configured base 10,000")
    assert "not 10,000" not in report.diagnosis


def allennlp_pe(T, d, max_timescale=1.0e4):
    """AllenNLP's add_positional_features (tensor2tensor's timescales): [sin | cos] halves."""
    inc = math.log(max_timescale) / (d // 2 - 1)
    scaled = torch.arange(T).float()[:, None] * torch.exp(torch.arange(d // 2).float() * -inc)[None, :]
    return torch.cat([torch.sin(scaled), torch.cos(scaled)], 1)


def test_tensor2tensors_timescales_are_named_not_fitted_to_another_base():
    report = check_sinusoidal(allennlp_pe)
    fails_with(report, "layout", "concatenated [sin ... | cos ...]")
    fails_with(report, "speeds", "tensor2tensor's timescales, θ_i = b^(-i/(d/2 - 1))")


def bloom_alibi(n_heads, n_keys, dtype):
    """BLOOM's build_alibi_tensor for one unpadded row: +m_h j, shape (H, 1, Tk), cast to dtype."""
    slopes = helpers.alibi_slopes(n_heads).float()
    return (slopes[:, None, None] * torch.arange(n_keys).float()[None, None, :]).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_blooms_broadcastable_bias_passes_in_every_dtype(dtype):
    report = check_alibi(lambda H, Tq, Tk: bloom_alibi(H, Tk, dtype))
    assert report.passed, str(report)
    low = dtype != torch.float32
    assert ("compared within its rounding" in report.finding("slopes").detail) == low
    # the slack is the rounding's: a slope 2% off in bfloat16 still fails
    wrong = check_alibi(lambda H, Tq, Tk: (1.02 * bloom_alibi(H, Tk, torch.float32)).to(dtype))
    fails_with(wrong, "slopes", "wrong for ", "head counts")


def test_a_bias_constant_along_each_row_is_named_ggml_143():
    def by_query(n_heads, n_queries, n_keys):  # ggml#143: the bias grows with the query's index only
        i = torch.arange(n_queries)[:, None] + (n_keys - n_queries)
        bias = -helpers.alibi_slopes(n_heads)[:, None, None] * (i + 1).double().expand(n_queries, n_keys)
        return bias.masked_fill(torch.arange(n_keys)[None, :] > i, float("-inf"))

    report = check_alibi(by_query)
    fails_with(report, "distance", "depends on the query's index only", "no ALiBi at all")
    assert report.skipped == ("sign", "slopes", "decoding", "alignment")
    assert "an earlier failure makes them meaningless" in str(report)


def test_a_missing_clamp_in_t5_buckets_is_named():
    def no_clamp(rel, num_buckets=16, max_distance=128):  # candle#1312: no min(..., num_buckets - 1)
        out = (rel > 0).long() * num_buckets
        n = rel.abs()
        large = 8 + (torch.log(n.float() / 8) / math.log(max_distance / 8) * 8).long()
        return out + torch.where(n < 8, n, large)

    fails_with(check_t5_bias(no_clamp), "buckets", "the clamp to bucket 15", "bucket 16, the first future bucket")


# ----- A zoo of wrong RoPE implementations, each with the cause it must be given ---------------------


def _table_rope(positions_of, scaling=None, magnitude=None, d_dtype=torch.float64):
    """helpers' tables built for ``positions_of(positions)``, optionally rescaled to ``magnitude``."""

    def rope(x, positions):
        cos, sin = helpers.rope_cos_sin(positions_of(positions), x.shape[-1], scaling=scaling, dtype=d_dtype)
        if magnitude is not None:
            r = (cos**2 + sin**2).sqrt()
            cos, sin = cos / r * magnitude, sin / r * magnitude
        return helpers.apply_rope(x, cos.to(x.dtype), sin.to(x.dtype), layout="interleaved")

    return rope


YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
_YARN_FACTOR = float(helpers.rope_frequencies(64, 10000.0, scaling=YARN)[1])


@pytest.mark.parametrize(
    ("name", "rope", "scaling", "finding", "phrases"),
    [
        ("positions from 1", _table_rope(lambda p: p + 1), None, "positions", ("off by +1", "counted from 1")),
        ("positions from 2", _table_rope(lambda p: p + 2), None, "positions", ("off by +2",)),
        (
            "integer division",
            _table_rope(lambda p: torch.div(p, 4, rounding_mode="floor") * 4),
            {"type": "linear", "factor": 4.0},
            "positions",
            ("blocks of 4", "m // 4"),
        ),
        (
            "clamped table",
            _table_rope(lambda p: p.clamp(max=4095)),
            None,
            "precision",
            ("angles of position 4,095", "cached for 4,096 positions"),
        ),
        (
            "YaRN without its attention factor",
            _table_rope(lambda p: p, scaling=YARN, magnitude=1.0),
            YARN,
            "norm",
            ("not multiplied by the attention factor",),
        ),
        (
            "YaRN's attention factor twice",
            _table_rope(lambda p: p, scaling=YARN, magnitude=_YARN_FACTOR**2),
            YARN,
            "norm",
            ("applied twice",),
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_each_wrong_rope_gets_its_own_cause_once(name, rope, scaling, finding, phrases):
    report = check_rope(rope, scaling=scaling)
    fails_with(report, finding, *phrases)
    assert len(report.failures) == 1, f"{name}: one fault, told once:\n{report}"
    assert "bfloat16" not in report.diagnosis and "linear scaling" not in report.diagnosis, report.diagnosis


def test_an_offset_is_not_read_as_a_scaling_and_a_scaling_is_not_read_as_an_offset():
    linear = {"type": "linear", "factor": 2.0}
    plain_for_linear = check_rope(_table_rope(lambda p: p), scaling=linear)  # the scaling ignored
    fails_with(plain_for_linear, "speeds", "the scaling")
    assert plain_for_linear.finding("positions").passed
    scaled = check_rope(_table_rope(lambda p: p.double() / 2.0))  # positions divided in floating point: a scaling
    fails_with(scaled, "speeds", "linear scaling (position interpolation) by 2")


PARTIAL = {"rope_type": "default", "partial_rotary_factor": 0.25}


def neox_partial_rope(x, positions, r=16, last=False):
    """GPT-NeoX's partial rotary as transformers writes it: rotate_half on x[..., :r], the rest passed
    through (``last=True``: the wrong slice, x[..., -r:])."""
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, r, 2, dtype=torch.int64).float() / r))
    freqs = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    rot, rest = (x[..., -r:], x[..., :-r]) if last else (x[..., :r], x[..., r:])
    half = torch.cat((-rot[..., r // 2 :], rot[..., : r // 2]), dim=-1)
    turned = rot * cos + half * sin
    return torch.cat((rest, turned), -1) if last else torch.cat((turned, rest), -1)


def test_partial_rotary_is_checked_on_its_slice_and_the_wrong_slice_is_named():
    report = check_rope(neox_partial_rope, scaling=PARTIAL, layout="half")
    assert report.passed, str(report)
    assert report.finding("slice").detail.startswith("dimensions 0 to 15 turn and 16 to 63 pass through")
    fails_with(
        check_rope(lambda x, p: neox_partial_rope(x, p, last=True), scaling=PARTIAL),
        "slice",
        "the last 16 dimensions are rotated instead of the first 16",
    )
    fails_with(
        check_rope(lambda x, p: neox_partial_rope(x, p, r=64), scaling=PARTIAL),
        "slice",
        "partial_rotary_factor is ignored",
    )

    # the slice right, the base wrong: found on the slice, with the slice's own speeds
    def wrong_base(x, positions):
        cos, sin = helpers.rope_cos_sin(positions, 16, 500000.0, dtype=x.dtype)
        return helpers.apply_rope(x, cos, sin, layout="half", rotary_dim=16)

    fails_with(check_rope(wrong_base, scaling=PARTIAL), "speeds", "base 500,000")


def test_wrong_slopes_alone_are_one_fault_not_three():
    def slopes_wrong(H, Tq, Tk):  # 2^-(k+1): the right shape of bias, the wrong slopes
        m = torch.tensor([2.0 ** (-(k + 1)) for k in range(H)], dtype=torch.float64)[:, None, None]
        i = torch.arange(Tq)[:, None] + (Tk - Tq)
        j = torch.arange(Tk)[None, :]
        return (-m * (i - j).clamp(min=0)).masked_fill(j > i, float("-inf"))

    report = check_alibi(slopes_wrong)
    fails_with(report, "slopes", "log2 of the slopes is [-1], expected [-8]")
    assert [f.name for f in report.failures] == ["slopes"], str(report)

    def slopes_wrong_and_top_left(H, Tq, Tk):  # two faults: both reported
        m = torch.tensor([2.0 ** (-(k + 1)) for k in range(H)], dtype=torch.float64)[:, None, None]
        i = torch.arange(Tq)[:, None]
        j = torch.arange(Tk)[None, :]
        return (-m * (i - j).clamp(min=0)).masked_fill(j > i, float("-inf"))

    both = check_alibi(slopes_wrong_and_top_left)
    assert {"slopes", "decoding"} <= {f.name for f in both.failures}, str(both)


@pytest.mark.parametrize(
    ("name", "rope", "scaling", "finding", "phrases"),
    [
        ("table wraps at 4,096", _table_rope(lambda p: p % 4096), None, "precision", ("m mod 4,096", "wrap around")),
        ("table wraps at 40", _table_rope(lambda p: p % 40), None, "positions", ("m mod 40",)),
        ("table stops at 16", _table_rope(lambda p: p.clamp(max=15)), None, "positions", ("angles of position 15",)),
        (
            "floor by 2.5",
            _table_rope(lambda p: torch.floor(p / 2.5) * 2.5),
            {"type": "linear", "factor": 2.5},
            "positions",
            ("runs of 2 to 3", "rounded down"),
        ),
        ("YaRN ignored", _table_rope(lambda p: p), YARN, "speeds", ("is ignored",)),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_more_wrong_ropes_get_their_own_cause_once(name, rope, scaling, finding, phrases):
    report = check_rope(rope, scaling=scaling)
    fails_with(report, finding, *phrases)
    assert len(report.failures) == 1, f"{name}: one fault, told once:\n{report}"
    assert "bfloat16" not in report.diagnosis, report.diagnosis


def test_an_unrecognised_table_error_is_said_to_be_unrecognised():
    def scrambled(x, positions):  # exact angles, but position 5000 and beyond get a random fixed turn
        cos, sin = helpers.rope_cos_sin(positions, x.shape[-1], dtype=torch.float64)
        far = (positions >= 5000)[:, None]
        cos, sin = torch.where(far, cos.roll(3, dims=-1), cos), torch.where(far, sin.roll(3, dims=-1), sin)
        return helpers.apply_rope(x, cos.to(x.dtype), sin.to(x.dtype), layout="interleaved")

    report = check_rope(scrambled)
    assert not report.passed
    fails_with(report, "precision", "from the probed position 5,151 on", "the check does not recognise this fault")


def test_partial_rotary_speeds_over_the_whole_head_are_named():
    def over_d(x, positions):
        cos, sin = helpers.rope_cos_sin(positions, 64, dtype=x.dtype)
        return helpers.apply_rope(x, cos[:, :8], sin[:, :8], layout="half", rotary_dim=16)

    fails_with(check_rope(over_d, scaling=PARTIAL), "speeds", "over the whole head, d = 64", "r = 16")


def test_alibi_slopes_rounded_or_negated_are_named_once():
    def bias(slopes):
        def fn(H, Tq, Tk):
            m = slopes(H)[:, None, None]
            i = torch.arange(Tq)[:, None] + (Tk - Tq)
            j = torch.arange(Tk)[None, :]
            return (-m * (i - j).clamp(min=0)).masked_fill(j > i, float("-inf"))

        return fn

    rounded = check_alibi(bias(lambda H: helpers.alibi_slopes(H).to(torch.bfloat16).double()))
    fails_with(rounded, "slopes", "rounded to bfloat16")
    negated = check_alibi(bias(lambda H: -helpers.alibi_slopes(H).double()))
    fails_with(negated, "sign", "The sign is flipped")
    assert [f.name for f in negated.failures] == ["sign"] and [f.name for f in negated.folded] == ["slopes"]


def test_a_step_in_the_other_layout_is_named_and_step_0_is_not_blamed_on_the_cache():
    detail = check_cached_decoding(cached_step(layout="half")).diagnosis
    assert "The prompt alone already differs" in detail and "with the half layout" in detail


def _half_rotation(x, angle):
    d = x.shape[-1]
    x1, x2 = x[:, : d // 2], x[:, d // 2 :]
    return torch.cat((x1 * angle.cos() - x2 * angle.sin(), x1 * angle.sin() + x2 * angle.cos()), dim=-1)


def test_bfloat16_positions_times_float32_speeds_are_blamed_on_low_precision():
    # The float32 product itself is off by about 0.06 rad near a million: the candidate angle must
    # allow for it, or the fault is reported as unrecognised.
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, 64, 2).float() / 64)

    def bf16_positions(x, positions):
        return _half_rotation(x, positions.bfloat16()[:, None].float() * inv_freq)

    fails_with(check_rope(bf16_positions, layout="half"), "precision", "formed in too low a precision")


def test_float16_positions_that_overflow_are_named():
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, 64, 2).float() / 64)

    def f16_positions(x, positions):
        return _half_rotation(x, positions.half()[:, None].float() * inv_freq)

    fails_with(check_rope(f16_positions, layout="half"), "output", "returned NaN", "overflows there to inf")
    fails_with(check_rope(f16_positions, layout="half", max_position=60_000), "precision", "too low a precision")


def test_a_scaling_dict_with_only_a_partial_rotary_factor_needs_no_type():
    assert check_rope(neox_partial_rope, layout="half", scaling={"partial_rotary_factor": 0.25}).passed


def test_right_slopes_on_the_wrong_heads_are_named():
    ascending = alibi_from(lambda h: helpers.alibi_slopes(h).double().flip(0))
    fails_with(
        check_alibi(ascending, max_heads=8), "slopes", "the right slopes given to the wrong heads (in ascending order)"
    )
    sorted_desc = alibi_from(lambda h: helpers.alibi_slopes(h).double().sort(descending=True).values)
    fails_with(check_alibi(sorted_desc, max_heads=8), "slopes", "the right slopes given to the wrong heads:")


def test_a_decoder_bucketer_that_differs_only_at_future_keys_passes():
    def absolute_distance(rel, bidirectional=False, num_buckets=32, max_distance=128):
        return helpers.relative_position_bucket(-rel.abs(), bidirectional=False)  # future keys bucketed as past

    report = check_t5_bias(absolute_distance, bidirectional=False)
    assert report.passed and "future ones differ (from j - i = 1)" in report.finding("buckets").detail, str(report)
    assert not check_t5_bias(absolute_distance, bidirectional=True).passed  # an encoder sees the future keys
