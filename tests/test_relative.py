"""T5 buckets against a transcription of the Hugging Face algorithm and hand-computed cases; the
learned T5 and Shaw biases against slow loops."""

from __future__ import annotations

import math

import pytest
import torch
from _support import MadeOn, raises_naming
from hypothesis import given, settings
from hypothesis import strategies as st

import helpers


def reference_bucket(relative_position: int, bidirectional: bool, num_buckets: int, max_distance: int):
    """Hugging Face T5's bucketing, one Python int at a time in float64.

    Returns ``(bucket, tie)``: ``tie`` is True where the value before truncation lies so close to an
    integer that float32 (which T5 uses) and float64 may truncate it to neighbouring buckets: within
    64 float32 rounding steps of the value (a logarithm, a division and two products in float32 are
    off by a few; seen: 51.99999889 in float64 is 52 in float32, 1.1e-6 from the integer).
    """
    bucket = 0
    if bidirectional:
        num_buckets //= 2
        if relative_position > 0:
            bucket += num_buckets
        n = abs(relative_position)
    else:
        n = max(-relative_position, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return bucket + n, False
    value = math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    tie = abs(value - round(value)) < 64 * 2.0**-24 * max(1.0, abs(value))
    return bucket + min(max_exact + int(value), num_buckets - 1), tie


@pytest.mark.parametrize("bidirectional", [True, False])
def test_default_buckets_match_reference_everywhere(bidirectional):
    rel = torch.arange(-1000, 1001)
    got = helpers.relative_position_bucket(rel, bidirectional)
    expected = [reference_bucket(r, bidirectional, 32, 128)[0] for r in rel.tolist()]
    assert got.tolist() == expected
    assert got.dtype == torch.int64


@settings(max_examples=60, deadline=None)
@given(bidirectional=st.booleans(), num_buckets=st.integers(4, 160), data=st.data())
def test_buckets_match_reference_for_any_setting(bidirectional, num_buckets, data):
    half = num_buckets // 2 if bidirectional else num_buckets
    max_distance = data.draw(st.integers(half // 2 + 1, 1000))
    rel = torch.arange(-1200, 1201)
    got = helpers.relative_position_bucket(rel, bidirectional, num_buckets, max_distance).tolist()
    for r, g in zip(rel.tolist(), got, strict=True):
        want, tie = reference_bucket(r, bidirectional, num_buckets, max_distance)
        assert g == want or (tie and abs(g - want) == 1), (r, g, want)
    assert min(got) >= 0 and max(got) < num_buckets


def test_hand_computed_buckets():
    # Bidirectional, 32 buckets, max distance 128: 16 per side, 8 exact, then 8 log buckets over 8..128.
    past = {0: 0, 1: 1, 7: 7, 8: 8, 11: 8, 12: 9, 16: 10, 22: 10, 23: 11, 32: 12, 64: 14, 90: 14, 91: 15, 5000: 15}
    for distance, bucket in past.items():
        # 16: log(16/8) / log(128/8) * 8 = 8/4 = 2 -> 10; 64: log 8 / log 16 * 8 = 6 -> 14.
        assert helpers.relative_position_bucket(torch.tensor(-distance)).item() == bucket
        if distance:
            assert helpers.relative_position_bucket(torch.tensor(distance)).item() == bucket + 16
    # Unidirectional: 32 buckets, 16 exact; the future folds onto bucket 0.
    uni = {-16: 16, -32: 21, -64: 26, -128: 31, -1000: 31, 0: 0, 5: 0}
    for rel, bucket in uni.items():  # -32: 16 + floor(log 2 / log 8 * 16) = 16 + 5
        assert helpers.relative_position_bucket(torch.tensor(rel), bidirectional=False).item() == bucket


def test_buckets_are_monotone_in_distance():
    distance = torch.arange(0, 2000)
    for bidirectional in (True, False):
        buckets = helpers.relative_position_bucket(-distance, bidirectional)
        assert bool((buckets[1:] >= buckets[:-1]).all())


def test_relative_positions_align_bottom_right():
    rel = helpers.relative_positions(2, 5)
    assert rel.tolist() == [[-3, -2, -1, 0, 1], [-4, -3, -2, -1, 0]]
    assert torch.equal(helpers.relative_positions(6)[-2:], helpers.relative_positions(2, 6))


def test_t5_bias_is_a_table_lookup():
    torch.manual_seed(0)
    module = helpers.T5RelativeBias(3, bidirectional=True, num_buckets=8, max_distance=20)
    bias = module(5, 7)
    assert bias.shape == (3, 5, 7)
    weight = module.embedding.weight.detach()  # (buckets, H)
    for h in range(3):
        for i in range(5):
            for j in range(7):
                rel = j - (i + 2)
                bucket, _ = reference_bucket(rel, True, 8, 20)
                assert bias[h, i, j].item() == weight[bucket, h].item()
    assert torch.equal(module(7)[:, -5:], bias)  # decoding rows are the last rows


def test_t5_bias_with_alibi_values_reproduces_alibi_inside_exact_buckets():
    # Setting bucket b (exact range) to -m * b makes T5's bias ALiBi's for distances below max_exact.
    module = helpers.T5RelativeBias(4, bidirectional=False, num_buckets=32, max_distance=128)
    slopes = helpers.alibi_slopes(4).float()
    with torch.no_grad():
        module.embedding.weight.copy_(-torch.arange(32.0)[:, None] * slopes[None, :])
    t5 = module(16)
    alibi = helpers.alibi_bias(4, 16)
    below = torch.isfinite(alibi)
    assert torch.allclose(t5[below], alibi[below])


def slow_shaw(q, table, k_max):
    n_queries, d = q.shape
    out = torch.empty(n_queries, n_queries, dtype=q.dtype)
    for i in range(n_queries):
        for j in range(n_queries):
            r = max(-k_max, min(k_max, j - i))
            out[i, j] = float(q[i] @ table[r + k_max]) / math.sqrt(d)
    return out


def test_shaw_bias_matches_loop_and_clips():
    torch.manual_seed(0)
    module = helpers.ShawRelativeBias(head_dim=4, max_relative_position=2)
    q = torch.randn(2, 6, 4)  # (H, T, d)
    bias = module(q)
    assert bias.shape == (2, 6, 6)
    table = module.embedding.weight.detach()
    for h in range(2):
        assert torch.allclose(bias[h], slow_shaw(q[h], table, 2), atol=1e-6)
    index = module.index(6)
    assert index[0, 5].item() == index[0, 3].item() == 4  # j - i = 5 and 3 both clip to +2
    assert index[5, 0].item() == 0


def test_shaw_bias_in_attention_is_keys_plus_relative_vectors():
    torch.manual_seed(1)
    module = helpers.ShawRelativeBias(head_dim=4, max_relative_position=3)
    q, k, v = torch.randn(5, 4), torch.randn(5, 4), torch.randn(5, 2)
    _, weights = helpers.attention(q, k, v, bias=module(q))
    a = module.embedding(module.index(5)).detach()  # (T, T, d): a_ij
    scores = torch.einsum("id,ijd->ij", q, k[None, :, :] + a) / 2.0  # e_ij = q_i (k_j + a_ij) / sqrt(4)
    assert torch.allclose(weights, torch.softmax(scores, dim=-1), atol=1e-6)


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: helpers.relative_position_bucket([1, 2]), TypeError, ["relative_position", "list"]),
        (
            lambda: helpers.relative_position_bucket(torch.tensor([1.0])),
            TypeError,
            ["relative_position", "torch.float32"],
        ),
        (
            lambda: helpers.relative_position_bucket(torch.tensor([True])),
            TypeError,
            ["relative_position", "torch.bool"],
        ),
        (
            lambda: helpers.relative_position_bucket(torch.tensor([1j])),
            TypeError,
            ["relative_position", "torch.complex64"],
        ),
        (
            lambda: helpers.relative_position_bucket(torch.tensor([1]), num_buckets=2),
            ValueError,
            ["num_buckets", "2", ">= 4"],
        ),
        (
            lambda: helpers.relative_position_bucket(torch.tensor([1]), num_buckets=3),
            ValueError,
            ["num_buckets", "3", ">= 4"],
        ),
        (
            lambda: helpers.relative_position_bucket(torch.tensor([1]), False, 1, 8),
            ValueError,
            ["num_buckets", "1", ">= 2"],
        ),
        (
            lambda: helpers.relative_position_bucket(torch.tensor([1]), num_buckets=8.0),
            TypeError,
            ["num_buckets", "int"],
        ),
        (
            lambda: helpers.relative_position_bucket(torch.tensor([1]), max_distance=8),
            ValueError,
            ["max_distance", "8", "> 8 (the exact buckets)", "num_buckets=32"],
        ),
        (
            lambda: helpers.relative_position_bucket(torch.tensor([1]), max_distance=0),
            ValueError,
            ["max_distance", "0", ">= 1"],
        ),
        (
            lambda: helpers.relative_position_bucket(torch.tensor([1]), max_distance=9.0),
            TypeError,
            ["max_distance", "int"],
        ),
        # An odd half (6 buckets: 3 a side) has 1 exact bucket; unidirectional, all 8 buckets count (4 exact).
        (
            lambda: helpers.relative_position_bucket(torch.tensor([1]), True, 6, 1),
            ValueError,
            ["max_distance", "1", "> 1 (the exact buckets)", "num_buckets=6"],
        ),
        (
            lambda: helpers.relative_position_bucket(torch.tensor([1]), False, 8, 4),
            ValueError,
            ["max_distance", "4", "> 4 (the exact buckets)", "num_buckets=8"],
        ),
        (
            lambda: helpers.relative_position_bucket(torch.tensor([1]), bidirectional=1),
            TypeError,
            ["bidirectional", "1"],
        ),
        (lambda: helpers.relative_positions(-1), ValueError, ["n_queries", "-1", ">= 0"]),
        (lambda: helpers.relative_positions(2.0), TypeError, ["n_queries", "int"]),
        (lambda: helpers.relative_positions(2, -1), ValueError, ["n_keys", "-1", ">= 0"]),
        (lambda: helpers.relative_positions(2, 3.0), TypeError, ["n_keys", "int"]),
        (lambda: helpers.T5RelativeBias(0), ValueError, ["n_heads", "0", ">= 1"]),
        (lambda: helpers.T5RelativeBias(2.0), TypeError, ["n_heads", "int"]),
        (lambda: helpers.T5RelativeBias(2, num_buckets=3), ValueError, ["num_buckets", "3", ">= 4"]),
        (lambda: helpers.ShawRelativeBias(0, 2), ValueError, ["head_dim", "0", ">= 1"]),
        (lambda: helpers.ShawRelativeBias(4.0, 2), TypeError, ["head_dim", "int"]),
        (lambda: helpers.ShawRelativeBias(4, -1), ValueError, ["max_relative_position", "-1", ">= 0"]),
        (lambda: helpers.ShawRelativeBias(4, 2.0), TypeError, ["max_relative_position", "int"]),
        (lambda: helpers.ShawRelativeBias(4, 2)(torch.randn(3, 5)), ValueError, ["q", "(..., Tq, 4)", "(3, 5)"]),
        (lambda: helpers.ShawRelativeBias(4, 2)(torch.ones(3, 4, dtype=torch.int64)), TypeError, ["q", "torch.int64"]),
    ],
)
def test_bad_input_names_the_argument(call, error, words):
    raises_naming(error, call, *words)


def test_smallest_valid_settings_are_accepted():
    # The other side of each bound above.
    assert helpers.relative_positions(0).shape == (0, 0)
    assert helpers.relative_positions(0, 3).shape == (0, 3)
    assert helpers.relative_positions(2, 0).shape == (2, 0)
    rel = torch.arange(-6, 7)
    # Two buckets, unidirectional: distance 0 (and the future), then everything further back.
    assert helpers.relative_position_bucket(rel, False, 2, 2).tolist() == [1] * 6 + [0] * 7
    assert helpers.relative_position_bucket(rel, True, 4, 2).tolist() == [1] * 6 + [0] + [3] * 6
    for bidirectional, num_buckets, max_distance in ((False, 3, 2), (True, 5, 2), (False, 8, 5)):
        got = helpers.relative_position_bucket(rel, bidirectional, num_buckets, max_distance).tolist()
        assert got == [reference_bucket(r, bidirectional, num_buckets, max_distance)[0] for r in rel.tolist()]
    assert helpers.T5RelativeBias(1)(3).shape == (1, 3, 3)
    assert helpers.ShawRelativeBias(1, 2)(torch.ones(3, 1)).shape == (3, 3)
    zero = helpers.ShawRelativeBias(4, 0)  # K = 0: one vector for every pair
    assert zero.embedding.weight.shape == (1, 4) and zero.index(2, 3).tolist() == [[0, 0, 0], [0, 0, 0]]


def test_t5_defaults_are_t5s_and_every_setting_reaches_the_buckets():
    module = helpers.T5RelativeBias(2)
    assert (module.bidirectional, module.num_buckets, module.max_distance) == (True, 32, 128)
    assert module.embedding.weight.shape == (32, 2)
    for settings_ in (dict(), dict(bidirectional=False, num_buckets=16, max_distance=20)):
        module = helpers.T5RelativeBias(2, **settings_)
        weight = module.embedding.weight.detach()  # (buckets, H)
        rel = helpers.relative_positions(3, 300)
        buckets = helpers.relative_position_bucket(rel, **settings_)
        assert torch.equal(module(3, 300).detach(), weight[buckets].permute(2, 0, 1))
    assert "max_distance=20" in repr(module) and "bidirectional=False" in repr(module)


def test_shaw_table_has_one_vector_per_clipped_position():
    module = helpers.ShawRelativeBias(head_dim=3, max_relative_position=4)
    assert module.embedding.weight.shape == (9, 3)  # 2K + 1 rows
    assert sum(p.numel() for p in module.parameters()) == 27


def test_shaw_bias_with_fewer_queries_than_keys():
    # Decoding: 2 queries, the newest tokens, against 7 keys; query i sits at i + 5.
    torch.manual_seed(2)
    module = helpers.ShawRelativeBias(head_dim=4, max_relative_position=2)
    index = module.index(2, 7)
    assert index.tolist() == [[0, 0, 0, 0, 1, 2, 3], [0, 0, 0, 0, 0, 1, 2]]
    q = torch.randn(3, 2, 4)  # (H, Tq, d)
    bias = module(q, 7)
    assert bias.shape == (3, 2, 7)
    table = module.embedding.weight.detach()
    for h in range(3):
        for i in range(2):
            for j in range(7):
                r = max(-2, min(2, j - (i + 5)))
                assert bias[h, i, j].item() == pytest.approx(float(q[h, i] @ table[r + 2]) / 2.0, abs=1e-6)
    # The last rows of the full bias, as the decoding rows of T5's bias are.
    full_q = torch.cat((torch.randn(3, 5, 4), q), dim=1)
    assert torch.allclose(module(full_q)[:, -2:], bias, atol=1e-6)


def test_relative_biases_follow_the_dtype_of_q_and_the_device_of_the_module():
    module = helpers.ShawRelativeBias(4, 2)
    for dtype in (torch.float64, torch.bfloat16):
        assert module(torch.randn(3, 4, dtype=dtype)).dtype == dtype
    assert helpers.relative_positions(2, 3, device="meta").device.type == "meta"
    meta = helpers.ShawRelativeBias(4, 2).to("meta")
    assert meta.index(3).device.type == "meta"
    assert meta(torch.randn(3, 4, device="meta")).device.type == "meta"
    assert helpers.T5RelativeBias(2).to("meta")(3, 4).device.type == "meta"


def test_relative_biases_do_all_their_work_on_the_module_device():
    # An embedding on 'meta' accepts CPU indices, so the result's device alone cannot show buckets
    # built on the CPU; on a GPU those CPU indices make the lookup fail. The 'meta' device plays the GPU.
    t5, shaw = helpers.T5RelativeBias(2).to("meta"), helpers.ShawRelativeBias(4, 2).to("meta")
    q = torch.randn(3, 4, device="meta")
    with MadeOn() as mode:
        t5(3, 5)
        t5(4)
        shaw(q, 6)
    assert mode.devices == {"meta"}, f"tensors made on {mode.devices}"


def test_relative_family_drawing_steps_follow_the_buckets():
    drawing = helpers.plots.relative_family(num_buckets=32, max_distance=128, slope=0.5, clip=4, span=40)
    k, t5 = drawing.artists["t5"].get_data()
    _, shaw = drawing.artists["shaw"].get_data()
    _, alibi = drawing.artists["alibi"].get_data()
    assert list(t5[:16]) == list(alibi[:16])  # the exact buckets
    assert t5[16] == t5[18] == -0.5 * 16 and t5[19] == -0.5 * 19  # bucket 16 holds 16-18
    assert max(shaw) == 0 and min(shaw) == -2.0 and shaw[10] == -2.0


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=pytest.mark.gpu)])
def test_buckets_and_modules_on_the_gpu(device):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    rel = torch.arange(-3000, 3001)
    for bidirectional in (True, False):
        gpu = helpers.relative_position_bucket(rel.to(device), bidirectional)
        assert gpu.device.type == "cuda"
        assert torch.equal(gpu.cpu(), helpers.relative_position_bucket(rel, bidirectional))
    t5 = helpers.T5RelativeBias(4)
    assert torch.equal(t5.to(device)(6, 9).cpu(), t5.cpu()(6, 9))
    shaw = helpers.ShawRelativeBias(8, 3)
    q = torch.randn(2, 5, 8)
    assert torch.allclose(shaw.to(device)(q.to(device)).cpu(), shaw.cpu()(q), atol=1e-5)


def test_last_bucket_starts_before_max_distance():
    # The log formula reaches one past the last bucket at max_distance = 128, so the last bucket
    # starts earlier: bidirectional bucket 15 at distance 91, unidirectional bucket 31 at 113.
    def first_distance_of_last_bucket(bidirectional):
        past = torch.arange(0, 1000)
        buckets = helpers.relative_position_bucket(-past, bidirectional)
        return int(past[buckets == buckets.max()].min())

    assert first_distance_of_last_bucket(True) == 91 == math.ceil(8 * 16 ** (7 / 8))
    assert first_distance_of_last_bucket(False) == 113 == math.ceil(16 * 8 ** (15 / 16))
    assert helpers.relative_position_bucket(torch.tensor([-112, -113]), bidirectional=False).tolist() == [30, 31]
    assert helpers.relative_position_bucket(torch.tensor([90, 91])).tolist() == [30, 31]  # keys after the query


def test_relative_family_marks_where_the_last_bucket_starts():
    drawing = helpers.plots.relative_family()
    encoder = sorted(line.get_xdata()[0] for line in drawing.artists["encoder_last"])
    assert encoder == [-91, 91] and drawing.artists["decoder_last"].get_xdata()[0] == 113
    labels = drawing.fig.axes[0].get_legend_handles_labels()[1]
    assert any("91" in label for label in labels) and any("113" in label for label in labels)
    assert not any("128" in label for label in labels)
    few = helpers.plots.relative_family(num_buckets=4, max_distance=10, span=20)  # would get ticks at 0.5
    few.render()
    ticks = few.fig.axes[0].get_yticks()  # bucket indices are counts: whole-number ticks
    assert all(float(t).is_integer() for t in ticks)


def test_relative_family_plots_against_the_offset_delta():
    # x is Δ = i - j (query minus key): keys in the past sit at positive Δ.
    drawing = helpers.plots.relative_family(span=40)
    encoder, decoder = drawing.fig.axes[0].get_lines()[:2]
    x, y = encoder.get_data()
    assert y[list(x).index(5)] == 5 and y[list(x).index(-5)] == 16 + 5
    x, y = decoder.get_data()
    assert y[list(x).index(20)] == helpers.relative_position_bucket(torch.tensor(-20), False).item()
    assert y[list(x).index(-20)] == 0


def test_t5_bias_goes_with_unscaled_scores():
    # T5: softmax(q kᵀ + bias), no 1/sqrt(d). helpers.attention divides q kᵀ by sqrt(d) and adds the
    # bias unscaled, so passing q * sqrt(d) reproduces T5 exactly; passing q does not.
    torch.manual_seed(2)
    module = helpers.T5RelativeBias(2, num_buckets=8, max_distance=20)
    q, k, v = (torch.randn(2, 6, 16, dtype=torch.float64) for _ in range(3))
    bias = module(6).detach().double()
    t5 = torch.softmax(q @ k.transpose(-2, -1) + bias, dim=-1)
    _, scaled_q = helpers.attention(q * math.sqrt(16), k, v, bias=bias)
    _, plain_q = helpers.attention(q, k, v, bias=bias)
    assert torch.allclose(scaled_q, t5, atol=1e-12)
    assert not torch.allclose(plain_q, t5, atol=1e-3)


def test_a_float32_tie_found_by_hypothesis_is_accepted():
    # bidirectional=False, 110 buckets, max_distance 818: at distance 706 the value before truncation is
    # 51.99999889 in float64 and 52 in float32; helpers follows float32, as T5 does.
    got = helpers.relative_position_bucket(torch.tensor([-706]), False, 110, 818).item()
    want, tie = reference_bucket(-706, False, 110, 818)
    assert tie and (want, got) == (106, 107)
