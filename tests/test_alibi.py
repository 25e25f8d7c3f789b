"""ALiBi slopes and biases against the reference recipe, slow loops and softmax invariants."""

from __future__ import annotations

import math

import pytest
import torch
from _support import raises_naming
from hypothesis import given, settings
from hypothesis import strategies as st

import helpers


def reference_get_slopes(n: int) -> list[float]:
    """The ALiBi reference code's ``get_slopes``, transcribed: plain Python floats, recursive."""

    def power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        ratio = start
        return [start * ratio**i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + reference_get_slopes(2 * closest)[0::2][: n - closest]


@pytest.mark.parametrize("n_heads", range(1, 65))
def test_slopes_match_reference_code(n_heads):
    got = helpers.alibi_slopes(n_heads)
    assert got.dtype == torch.float64 and got.shape == (n_heads,)
    assert got.tolist() == pytest.approx(reference_get_slopes(n_heads), rel=1e-15, abs=0)


def test_slopes_eight_heads_are_halves():
    assert helpers.alibi_slopes(8).tolist() == [1 / 2**k for k in range(1, 9)]


def test_slopes_twelve_heads_interleave_half_powers():
    expected = [2.0**-k for k in range(1, 9)] + [2.0**-0.5, 2.0**-1.5, 2.0**-2.5, 2.0**-3.5]
    assert helpers.alibi_slopes(12).tolist() == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize("n_heads", [1, 2, 4, 16, 32, 64])
def test_slopes_power_of_two_closed_form(n_heads):
    h = torch.arange(1, n_heads + 1, dtype=torch.float64)
    assert torch.allclose(helpers.alibi_slopes(n_heads), 2.0 ** (-8.0 * h / n_heads), rtol=1e-14, atol=0)


def slow_bias(n_heads, n_queries, n_keys, causal):
    slopes = reference_get_slopes(n_heads)
    out = torch.empty(n_heads, n_queries, n_keys, dtype=torch.float64)
    for h in range(n_heads):
        for i in range(n_queries):
            position = i + n_keys - n_queries  # bottom-right alignment
            for j in range(n_keys):
                if causal:
                    out[h, i, j] = -slopes[h] * (position - j) if j <= position else -math.inf
                else:
                    out[h, i, j] = -slopes[h] * abs(position - j)
    return out


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("shape", [(8, 6, 6), (12, 3, 7), (3, 1, 5), (5, 4, 4)])
def test_bias_matches_slow_loop(shape, causal):
    n_heads, n_queries, n_keys = shape
    got = helpers.alibi_bias(n_heads, n_queries, n_keys, causal=causal, dtype=torch.float64)
    assert torch.equal(got, slow_bias(n_heads, n_queries, n_keys, causal))


def test_causal_bias_is_minus_inf_exactly_above_diagonal():
    bias = helpers.alibi_bias(4, 9)
    above = torch.triu(torch.ones(9, 9, dtype=torch.bool), diagonal=1)
    assert bool(torch.isneginf(bias[:, above]).all())
    assert bool(torch.isfinite(bias[:, ~above]).all())
    assert bool((bias[:, ~above] <= 0).all())
    assert not bool(torch.signbit(torch.diagonal(bias, dim1=-2, dim2=-1)).any())  # +0.0, not -0.0


def test_symmetric_bias_is_symmetric_and_depends_on_distance_only():
    bias = helpers.alibi_bias(8, 10, causal=False, dtype=torch.float64)
    assert torch.equal(bias, bias.transpose(-2, -1))
    for k in range(10):
        diagonal = torch.diagonal(bias, offset=-k, dim1=-2, dim2=-1)  # (H, 10 - k)
        assert torch.equal(diagonal, diagonal[:, :1].expand_as(diagonal))


def test_decoding_rows_are_the_last_rows_of_the_full_bias():
    full = helpers.alibi_bias(8, 12)
    for n_queries in (1, 3, 12):
        assert torch.equal(helpers.alibi_bias(8, n_queries, 12), full[:, -n_queries:])
    one = helpers.alibi_bias(8, 1, 12, dtype=torch.float64)[:, 0]  # the newest token sees every key
    distance = torch.arange(11, -1, -1, dtype=torch.float64)
    assert torch.equal(one, -helpers.alibi_slopes(8)[:, None] * distance + 0.0)


def test_decoding_attention_equals_last_rows_of_full_attention():
    torch.manual_seed(0)
    q, k, v = (torch.randn(8, 12, 16, dtype=torch.float64) for _ in range(3))  # (H, T, d)
    full, _ = helpers.attention(q, k, v, bias=helpers.alibi_bias(8, 12, dtype=torch.float64), causal=True)
    step, _ = helpers.attention(q[:, -2:], k, v, bias=helpers.alibi_bias(8, 2, 12, dtype=torch.float64), causal=True)
    assert torch.allclose(step, full[:, -2:], atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(n_heads=st.integers(1, 16), n_keys=st.integers(1, 24), data=st.data())
def test_key_bias_gives_identical_causal_attention(n_heads, n_keys, data):
    n_queries = data.draw(st.integers(1, n_keys))
    scale = data.draw(st.floats(0.0, 3.0))
    generator = torch.Generator().manual_seed(n_heads * 1000 + n_keys * 10 + n_queries)
    q = scale * torch.randn(n_heads, n_queries, 8, generator=generator, dtype=torch.float64)  # (H, Tq, d)
    k = scale * torch.randn(n_heads, n_keys, 8, generator=generator, dtype=torch.float64)  # (H, Tk, d)
    v = torch.randn(n_heads, n_keys, 4, generator=generator, dtype=torch.float64)
    distance_form = helpers.alibi_bias(n_heads, n_queries, n_keys, dtype=torch.float64)
    key_form = helpers.alibi_key_bias(n_heads, n_keys, dtype=torch.float64)  # (H, 1, Tk)
    out_a, w_a = helpers.attention(q, k, v, bias=distance_form, causal=True)
    out_b, w_b = helpers.attention(q, k, v, bias=key_form, causal=True)
    assert torch.allclose(w_a, w_b, atol=1e-12) and torch.allclose(out_a, out_b, atol=1e-12)
    # Row by row the two forms differ by a constant, -m_h times the query's position.
    finite = torch.isfinite(distance_form)
    gap = torch.where(finite, distance_form - key_form, torch.nan)
    positions = torch.arange(n_queries, dtype=torch.float64) + n_keys - n_queries  # (Tq,)
    expected = -helpers.alibi_slopes(n_heads)[:, None, None] * positions[None, :, None]  # (H, Tq, 1)
    assert torch.allclose(gap[finite], expected.expand_as(gap)[finite], atol=1e-12)


def test_key_bias_is_not_the_symmetric_form():
    q = torch.zeros(2, 6, 4)
    k, v = torch.zeros(2, 6, 4), torch.eye(6).expand(2, 6, 6)
    _, w_sym = helpers.attention(q, k, v, bias=helpers.alibi_bias(2, 6, causal=False))
    _, w_key = helpers.attention(q, k, v, bias=helpers.alibi_key_bias(2, 6))
    assert not torch.allclose(w_sym, w_key, atol=1e-3)


def test_decay_distance_is_where_the_ratio_reaches_the_fraction():
    slopes = helpers.alibi_slopes(8)
    distance = helpers.alibi_decay_distance(8)
    assert torch.allclose(torch.exp(-slopes * distance), torch.full((8,), 0.01, dtype=torch.float64), rtol=1e-12)
    assert distance[0].item() == pytest.approx(2 * math.log(100))
    assert distance[-1].item() == pytest.approx(256 * math.log(100))
    half = helpers.alibi_decay_distance(4, fraction=0.5)
    assert torch.allclose(half, math.log(2) / helpers.alibi_slopes(4))


def test_dtype_and_device_follow_arguments():
    assert helpers.alibi_bias(2, 3, dtype=torch.float16).dtype == torch.float16
    assert helpers.alibi_key_bias(2, 3, dtype=torch.float64).dtype == torch.float64
    assert helpers.alibi_bias(2, 3, device="cpu").device.type == "cpu"


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: helpers.alibi_slopes(0), ValueError, ["n_heads", "0", ">= 1"]),
        (lambda: helpers.alibi_slopes(2.0), TypeError, ["n_heads", "int"]),
        (lambda: helpers.alibi_bias(2, 5, 3), ValueError, ["n_queries", "5", "n_keys", "3"]),
        (lambda: helpers.alibi_bias(2, -1), ValueError, ["n_queries", "-1", ">= 0"]),
        (lambda: helpers.alibi_bias(2, 3, causal=1), TypeError, ["causal", "1"]),
        (lambda: helpers.alibi_bias(2, 3, dtype=torch.int64), TypeError, ["dtype", "torch.int64"]),
        (lambda: helpers.alibi_key_bias(0, 3), ValueError, ["n_heads", "0", ">= 1"]),
        (lambda: helpers.alibi_decay_distance(4, fraction=1.5), ValueError, ["fraction", "1.5"]),
        # Found by mutation testing: the boundaries and types of alibi_decay_distance's arguments.
        (lambda: helpers.alibi_decay_distance(4, fraction=1.0), ValueError, ["fraction", "1.0"]),
        (lambda: helpers.alibi_decay_distance(4, fraction=0.0), ValueError, ["fraction", "0.0"]),
        (lambda: helpers.alibi_decay_distance(4, fraction=True), ValueError, ["fraction", "True"]),
        (lambda: helpers.alibi_decay_distance(4, fraction="0.5"), ValueError, ["fraction", "'0.5'"]),
        (lambda: helpers.alibi_decay_distance(0), ValueError, ["n_heads", "0", ">= 1"]),
        (lambda: helpers.alibi_decay_distance(4.0), TypeError, ["n_heads", "int"]),
        # Found by mutation testing: every argument of alibi_bias and alibi_key_bias, by name and bound.
        (lambda: helpers.alibi_bias(0, 3), ValueError, ["n_heads", "0", ">= 1"]),
        (lambda: helpers.alibi_bias(2.5, 3), TypeError, ["n_heads", "int", "float"]),
        (lambda: helpers.alibi_bias(2, 3.0), TypeError, ["n_queries", "int", "float"]),
        (lambda: helpers.alibi_bias(2, 0, -1, causal=False), ValueError, ["n_keys", "-1", ">= 0"]),
        (lambda: helpers.alibi_bias(2, 3, 4.0), TypeError, ["n_keys", "int", "float"]),
        (lambda: helpers.alibi_key_bias(2.5, 3), TypeError, ["n_heads", "int", "float"]),
        (lambda: helpers.alibi_key_bias(2, -1), ValueError, ["n_keys", "-1", ">= 0"]),
        (lambda: helpers.alibi_key_bias(2, 3.0), TypeError, ["n_keys", "int", "float"]),
        (lambda: helpers.alibi_key_bias(2, 3, dtype=torch.int32), TypeError, ["dtype", "torch.int32"]),
        # The first bad argument is the one named, before any other check or any work: a bad head
        # count is not reported as a bad length (nor left for alibi_slopes to find).
        (lambda: helpers.alibi_bias(0, 5, 3), ValueError, ["n_heads", "0", ">= 1"]),
        (lambda: helpers.alibi_bias(-1, -1), ValueError, ["n_heads", "-1", ">= 1"]),
        (lambda: helpers.alibi_key_bias(0, -1), ValueError, ["n_heads", "0", ">= 1"]),
        (lambda: helpers.alibi_decay_distance(0, fraction=2.0), ValueError, ["n_heads", "0", ">= 1"]),
    ],
)
def test_bad_input_names_the_argument(call, error, words):
    raises_naming(error, call, *words)


def test_smallest_valid_arguments_are_accepted():
    # The other side of each bound above: one head, no queries, no keys.
    assert helpers.alibi_bias(1, 0).shape == (1, 0, 0)
    assert helpers.alibi_bias(2, 0, 3).shape == (2, 0, 3)
    assert helpers.alibi_bias(2, 0, 0, causal=False).shape == (2, 0, 0)
    assert helpers.alibi_bias(1, 2, 2).tolist() == [[[0.0, -math.inf], [-1 / 256, 0.0]]]
    assert helpers.alibi_key_bias(2, 0).shape == (2, 1, 0)
    assert helpers.alibi_key_bias(1, 3).tolist() == [[[0.0, 1 / 256, 2 / 256]]]
    assert helpers.alibi_decay_distance(1).tolist() == [pytest.approx(256 * math.log(100), rel=1e-15)]


def test_biases_are_built_on_the_device_asked_for():
    # The meta device holds shapes only: a table left on the CPU would be seen here.
    assert helpers.alibi_bias(2, 3, device="meta").device.type == "meta"
    assert helpers.alibi_bias(2, 3, 4, causal=False, device="meta").device.type == "meta"
    assert helpers.alibi_key_bias(2, 3, device="meta").device.type == "meta"


# Drawings: update them and read the artists back.


def test_alibi_heads_drawing_follows_head_and_content():
    drawing = helpers.plots.alibi_heads(n_heads=8, head=0)
    drawing.update(head=3)
    x, y = drawing.artists["prior_line"].get_data()
    assert torch.allclose(torch.as_tensor(y), torch.exp(-torch.as_tensor(x, dtype=torch.float64) / 16))
    cx, cy = drawing.artists["chosen"].get_data()
    assert list(cx) == [3] and cy[0] == pytest.approx(16 * math.log(100))
    assert not drawing.artists["content_line"].get_visible()
    drawing.update(content=2.0)
    assert drawing.artists["content_line"].get_visible()
    assert not torch.allclose(torch.as_tensor(drawing.artists["content_line"].get_ydata()), torch.as_tensor(y))
    drawing.update(n_heads=4, head=7)  # the head is clamped to the last one
    cx, _ = drawing.artists["chosen"].get_data()
    assert list(cx) == [3] and len(drawing.artists["all_heads"].get_xdata()) == 4
    image = drawing.artists["image"].get_array()
    assert image[5, 2] == pytest.approx(-3 * 2.0**-8) and bool(image.mask[2, 5])
    assert drawing.png()[:4] == b"\x89PNG"


def test_alibi_explorer_head_slider_follows_head_count():
    explorer = helpers.widgets.alibi_explorer()
    explorer.controls["head"].value = 7
    explorer.controls["n_heads"].value = 4
    assert explorer.controls["head"].max == 3 and explorer.controls["head"].value == 3
    assert explorer.drawing.params["n_heads"] == 4 and explorer.drawing.params["head"] == 3


def test_bias_maps_switch_to_the_symmetric_form():
    drawing = helpers.plots.alibi_bias_maps(n_heads=4, n_tokens=6)
    assert bool(drawing.artists["images"][0].get_array().mask[0, 5])
    drawing.update(causal=False)
    data = drawing.artists["images"][1].get_array()
    assert not bool(data.mask.any()) and data[0, 5] == pytest.approx(-5 * 2.0**-4)


def test_prior_shapes_marks_the_rebound_of_d8():
    drawing = helpers.plots.prior_shapes(n_heads=8, d=8, n_distances=6)
    assert list(drawing.artists["rebound"].get_xdata()) == [4, 5]


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=pytest.mark.gpu)])
def test_bias_on_the_gpu_equals_the_cpu_bias(device):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    for causal in (True, False):
        gpu = helpers.alibi_bias(12, 5, 9, causal=causal, device=device)
        assert gpu.device.type == "cuda"
        assert torch.equal(gpu.cpu(), helpers.alibi_bias(12, 5, 9, causal=causal))
    q, k, v = (torch.randn(12, 9, 8, device=device, dtype=torch.float64) for _ in range(3))
    _, w_a = helpers.attention(q, k, v, bias=helpers.alibi_bias(12, 9, device=device, dtype=torch.float64), causal=True)
    _, w_b = helpers.attention(
        q, k, v, bias=helpers.alibi_key_bias(12, 9, device=device, dtype=torch.float64), causal=True
    )
    assert torch.allclose(w_a, w_b, atol=1e-12)


def test_alibi_heads_legend_lists_only_the_lines_on_show():
    drawing = helpers.plots.alibi_heads(n_heads=8, head=0, content=0.0)
    weight_ax = drawing.artists["prior_line"].axes

    def legend_labels():
        return [text.get_text() for text in weight_ax.get_legend().get_texts()]

    assert "with content" not in legend_labels() and len(legend_labels()) == 2
    drawing.update(content=1.5)
    assert "with content" in legend_labels() and len(legend_labels()) == 3
    drawing.update(content=0.0)
    assert "with content" not in legend_labels()
    assert drawing.png()[:4] == b"\x89PNG"


def test_alibi_heads_writes_slopes_as_mathtext_and_labels_its_colour_bar():
    drawing = helpers.plots.alibi_heads(n_heads=12, head=9)
    headline = drawing.artists["headline"].get_text()
    assert "$m = 2^{-1.5}$" in headline and "2^-" not in headline
    assert drawing.artists["colorbar"].ax.get_ylabel() != ""
    few = helpers.plots.alibi_heads(n_heads=2, head=1, max_heads=2)  # a short axis would get ticks at 0.5
    few.render()
    dist_ax = few.artists["all_heads"].axes  # head indices are counts: whole-number ticks
    assert all(float(t).is_integer() for t in dist_ax.get_xticks())


def test_alibi_heads_distance_axis_spans_the_heads_on_show():
    drawing = helpers.plots.alibi_heads(n_heads=8, head=0)
    dist_ax = drawing.artists["all_heads"].axes
    assert dist_ax.get_xlim()[1] < 8  # heads 0 .. 7, not up to max_heads
    drawing.update(n_heads=20)
    assert 19 < dist_ax.get_xlim()[1] < 20


def test_prior_shapes_draws_the_raw_dot_product():
    # The right panel is p_i · p_j itself, (d/2) κ_d(Δ): d/2 = 4 at Δ = 0 for d = 8, as its title says.
    drawing = helpers.plots.prior_shapes(n_heads=8, d=8, n_distances=6)
    y = torch.as_tensor(drawing.artists["wave"].get_ydata())
    assert torch.allclose(y, 4 * helpers.position_kernel(torch.arange(6, dtype=torch.float64), d=8))


def test_key_bias_loses_the_step_between_keys_in_bfloat16():
    # +m_h j grows with j: at j ~ 1000 bfloat16's spacing (8 bits of mantissa) swallows m = 1/2, so
    # the two newest keys get the same bias, while the anchored -m_h ((Tk - 1) - j) keeps the step.
    key = helpers.alibi_key_bias(8, 2048, dtype=torch.bfloat16)[0, 0]
    assert key[-1] == key[-2]
    exact = helpers.alibi_bias(8, 1, 2048, dtype=torch.float64)[0, 0]
    assert (torch.softmax(key.double(), -1) - torch.softmax(exact, -1)).abs().max() > 0.1
    anchored = helpers.alibi_bias(8, 1, 2048, dtype=torch.bfloat16)[0, 0]
    assert anchored[-1] - anchored[-2] == 0.5


def test_transformers_mpt_keeps_its_anchored_row_in_float32():
    """Notebook 07, section 4: transformers' MPT builds its ALiBi row as m_h (j - (Tk - 1)) in float32, never casts it
    to the model's dtype, and adds it to the scores, so a bfloat16 model attends with a float32 bias.

    Bugs this catches in the notebook's account: the row said to be cast to the model's dtype (as BLOOM's is), or
    said to be anchored anywhere but at the newest key.
    """
    pytest.importorskip("transformers", minversion="5.0")
    import inspect

    from transformers.models.mpt import modeling_mpt

    for n_heads in (8, 12):
        row = modeling_mpt.build_mpt_alibi_tensor(n_heads, 2048)  # (H, 1, max_seq_len)
        assert row.dtype == torch.float32 and row.shape == (n_heads, 1, 2048)
        torch.testing.assert_close(
            row.double(), helpers.alibi_bias(n_heads, 1, 2048, dtype=torch.float64), rtol=1e-6, atol=0
        )
    model_source = inspect.getsource(modeling_mpt.MptModel.forward)
    assert "alibi = self.build_mpt_alibi_tensor(" in model_source and "alibi.to(" not in model_source
    attention_source = inspect.getsource(modeling_mpt.MptAttention.forward)
    assert "attention_scores = attention_scores + position_bias" in attention_source
    assert "position_bias.to(" not in attention_source
    assert "softmax(attention_scores.float()" in attention_source
    scores = torch.zeros(1, 8, 4, 2048, dtype=torch.bfloat16)  # (batch, H, Tq, Tk) in the model's dtype
    assert (scores + modeling_mpt.build_mpt_alibi_tensor(8, 2048)).dtype == torch.float32  # promoted


def test_transformers_bloom_rounds_its_row_and_the_content_score_in_the_models_dtype():
    """Notebook 07, section 4: transformers' BLOOM casts its +m j row to the model's dtype and adds the content score
    to it in one baddbmm, so in bfloat16 a content score of +1 near key 2,048 is rounded away with the bias.

    Bugs this catches in the notebook's account: the row said to stay in float32 (as MPT's does), the scores said to
    be added in float32, or the softmax said to run in the model's dtype.
    """
    pytest.importorskip("transformers", minversion="5.0")
    import inspect

    from transformers.models.bloom import modeling_bloom

    row = modeling_bloom.build_alibi_tensor(torch.ones(1, 2048), 8, torch.bfloat16)  # (H, 1, T)
    assert row.dtype == torch.bfloat16
    assert torch.equal(row, helpers.alibi_key_bias(8, 2048, dtype=torch.bfloat16))
    source = inspect.getsource(modeling_bloom.BloomAttention.forward)
    assert "attention_scores = alibi.baddbmm(" in source
    assert "softmax(attn_weights, dim=-1, dtype=torch.float32)" in source
    q = torch.tensor([[[2.0, 0.0, 0.0, 0.0]]], dtype=torch.bfloat16)  # with alpha 1/2: +1 on one key
    k = torch.zeros(1, 4, 2048, dtype=torch.bfloat16)
    k[0, 0, 2045] = 1.0
    scores = row[:1].baddbmm(q, k, beta=1.0, alpha=0.5)  # BLOOM's call, head 0
    # exact: 1022, 1023.5, 1023, 1023.5
    assert scores.dtype == torch.bfloat16 and scores[0, 0, -4:].tolist() == [1024.0] * 4


def test_transformers_mpt_refuses_more_keys_than_max_seq_len():
    """Notebook 07, section 4: transformers' MPT builds its ALiBi row for config.max_seq_len keys, so a longer input
    raises instead of extrapolating. Bug this catches in the notebook's account: MPT said to run past max_seq_len."""
    pytest.importorskip("transformers", minversion="5.0")
    from transformers import MptConfig, MptModel

    torch.manual_seed(0)
    config = MptConfig(d_model=16, n_heads=2, n_layers=1, max_seq_len=16, vocab_size=32, expansion_ratio=2)
    model = MptModel(config).eval()
    with torch.no_grad():
        assert model(torch.zeros(1, 16, dtype=torch.long)).last_hidden_state.shape == (1, 16, 16)
        with pytest.raises(RuntimeError):
            model(torch.zeros(1, 20, dtype=torch.long))


@pytest.mark.parametrize("with_mask", [False, True])
def test_transformers_bloom_hands_its_attention_a_row_in_the_models_dtype(with_mask):
    """Notebook 07, section 4: a bfloat16 BLOOM in transformers attends with its +m j row in bfloat16, with an
    attention mask or without one (transformers 5.25 builds the row inline when there is none). Read from what the
    attention layer receives, so it holds whichever code path the installed version takes."""
    pytest.importorskip("transformers", minversion="5.0")
    from transformers import BloomConfig, BloomModel

    torch.manual_seed(0)
    model = BloomModel(BloomConfig(hidden_size=16, n_head=2, n_layer=1, vocab_size=32)).to(torch.bfloat16).eval()
    seen = []
    model.h[0].self_attention.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(kwargs["alibi"] if "alibi" in kwargs else args[2]), with_kwargs=True
    )
    tokens = torch.zeros(1, 300, dtype=torch.long)
    with torch.no_grad():
        model(tokens, attention_mask=torch.ones(1, 300, dtype=torch.long) if with_mask else None)
    (alibi,) = seen  # (batch·H, 1, T)
    assert alibi.dtype == torch.bfloat16
    assert torch.equal(alibi, helpers.alibi_key_bias(2, 300, dtype=torch.bfloat16))
