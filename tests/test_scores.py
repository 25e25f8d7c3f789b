"""The four-term score (notebook 05): Toeplitz spread, block rotations, rotation-commuting A, pictures.

References: a double loop over the diagonals, rotation by a 2x2 matrix written out by hand,
``helpers.score_terms`` and the position kernel; properties with hypothesis.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from _support import raises_naming
from hypothesis import given, settings
from hypothesis import strategies as st

import helpers


def slow_projection(matrix: torch.Tensor) -> torch.Tensor:
    """Each entry replaced by the mean of its diagonal, by a loop over the diagonals."""
    t = matrix.shape[0]
    out = torch.empty_like(matrix)
    for offset in range(-(t - 1), t):
        cells = [(m, m - offset) for m in range(t) if 0 <= m - offset < t]
        mean = sum(float(matrix[m, n]) for m, n in cells) / len(cells)
        for m, n in cells:
            out[m, n] = mean
    return out


def toeplitz_from(values: torch.Tensor) -> torch.Tensor:
    """The (T, T) matrix with entry g(m - n) = values[m - n + T - 1]."""
    t = (values.numel() + 1) // 2
    idx = torch.arange(t)
    return values[idx[:, None] - idx[None, :] + t - 1]


def test_toeplitz_projection_matches_a_loop():
    matrix = torch.randn(7, 7, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    torch.testing.assert_close(helpers.toeplitz_projection(matrix), slow_projection(matrix), rtol=0, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(t=st.integers(1, 12), seed=st.integers(0, 10_000), scale=st.floats(0.01, 100.0))
def test_toeplitz_spread_properties(t, seed, scale):
    generator = torch.Generator().manual_seed(seed)
    matrix = torch.randn(t, t, generator=generator, dtype=torch.float64)
    spread = float(helpers.toeplitz_spread(matrix))
    assert 0.0 <= spread <= 1.0 + 1e-12  # an orthogonal projection never lengthens
    assert float(helpers.toeplitz_spread(scale * matrix)) == pytest.approx(spread, abs=1e-12)
    projected = helpers.toeplitz_projection(matrix)
    torch.testing.assert_close(helpers.toeplitz_projection(projected), projected)  # idempotent
    assert float(helpers.toeplitz_spread(projected)) < 1e-12
    g = torch.randn(2 * t - 1, generator=generator, dtype=torch.float64)
    assert float(helpers.toeplitz_spread(toeplitz_from(g))) < 1e-12


def test_toeplitz_spread_values_and_bad_input():
    assert float(helpers.toeplitz_spread(torch.zeros(4, 4))) == 0.0
    # [[0, 1], [0, 0]] has diagonals {0, 0}, {1}, {0}: Toeplitz; [[1, 0], [0, 0]] is not
    assert float(helpers.toeplitz_spread(torch.tensor([[0.0, 1.0], [0.0, 0.0]]))) == 0.0
    assert float(helpers.toeplitz_spread(torch.tensor([[1.0, 0.0], [0.0, 0.0]]))) == pytest.approx(1 / math.sqrt(2))
    with pytest.raises(ValueError, match="square"):
        helpers.toeplitz_spread(torch.zeros(2, 3))
    with pytest.raises(TypeError, match="floating"):
        helpers.toeplitz_spread(torch.zeros(3, 3, dtype=torch.int64))
    with pytest.raises(TypeError, match="torch.Tensor"):
        helpers.toeplitz_projection(np.zeros((3, 3)))


def test_sinusoidal_gram_matrix_is_toeplitz_and_equals_the_kernel():
    pe = helpers.sinusoidal_pe(40, 64, dtype=torch.float64)  # (40, 64)
    gram = pe @ pe.T  # (40, 40)
    assert float(helpers.toeplitz_spread(gram)) < 1e-12
    delta = torch.arange(40, dtype=torch.float64)
    torch.testing.assert_close(gram[:, 0], 32 * helpers.position_kernel(delta, 64))


def test_block_rotation_is_written_out_rotations():
    angles = torch.tensor([0.3, -1.2, 2.5], dtype=torch.float64)
    rotation = helpers.block_rotation(angles)
    assert rotation.shape == (6, 6)
    for i, a in enumerate(angles.tolist()):
        block = rotation[2 * i : 2 * i + 2, 2 * i : 2 * i + 2]
        torch.testing.assert_close(
            block, torch.tensor([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]], dtype=torch.float64)
        )
    off = rotation.clone()
    for i in range(3):
        off[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = 0
    assert float(off.abs().max()) == 0.0
    torch.testing.assert_close(rotation.T @ rotation, torch.eye(6, dtype=torch.float64))


@settings(max_examples=30, deadline=None)
@given(m=st.integers(0, 5000), delta=st.integers(-3000, 3000), half=st.integers(1, 8))
def test_block_rotation_shifts_the_sinusoidal_table(m, delta, half):
    d = 2 * half
    theta = helpers.frequencies(d)
    pe = helpers.sinusoidal_pe(torch.tensor([m, m + delta]), d, dtype=torch.float64)  # (2, d)
    torch.testing.assert_close(helpers.block_rotation(-delta * theta) @ pe[0], pe[1], rtol=0, atol=1e-9)


def test_block_rotation_agrees_with_the_shift_matrix():
    theta = helpers.frequencies(8)
    for k in (1, 3, 17):
        torch.testing.assert_close(helpers.block_rotation(-k * theta), helpers.shift_matrix(k, 8))


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), half=st.integers(1, 8))
def test_rotation_commuting_matrix_commutes_and_keeps_the_position_term_relative(seed, half):
    d = 2 * half
    generator = torch.Generator().manual_seed(seed)
    scales = torch.randn(half, generator=generator, dtype=torch.float64)
    angles = torch.randn(half, generator=generator, dtype=torch.float64) * 3
    a = helpers.rotation_commuting_matrix(scales, angles)  # (d, d)
    rotation = helpers.block_rotation(torch.randn(half, generator=generator, dtype=torch.float64) * 5)
    torch.testing.assert_close(a @ rotation, rotation @ a, rtol=0, atol=1e-12)
    pe = helpers.sinusoidal_pe(30, d, dtype=torch.float64)  # (30, d)
    assert float(helpers.toeplitz_spread(pe @ a @ pe.T)) < 1e-10


def test_rotation_commuting_matrix_blocks_and_a_general_matrix_for_contrast():
    a = helpers.rotation_commuting_matrix(torch.tensor([2.0, 0.5]), torch.tensor([math.pi / 2, 0.0]))
    expected = torch.tensor([[0.0, -2.0, 0.0, 0.0], [2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.5, 0.0], [0.0, 0.0, 0.0, 0.5]])
    torch.testing.assert_close(a, expected, rtol=0, atol=1e-6)
    general = torch.randn(16, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    pe = helpers.sinusoidal_pe(30, 16, dtype=torch.float64)
    assert float(helpers.toeplitz_spread(pe @ general @ pe.T)) > 0.1
    with pytest.raises(ValueError, match="same shape"):
        helpers.rotation_commuting_matrix(torch.ones(2), torch.ones(3))
    with pytest.raises(ValueError, match="1-D"):
        helpers.block_rotation(torch.ones(2, 2))
    with pytest.raises(TypeError, match="floating"):
        helpers.block_rotation(torch.ones(2, dtype=torch.int64))


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: helpers.toeplitz_projection(torch.zeros(2, 3)), ValueError, ["matrix", "square", "(2, 3)"]),
        (lambda: helpers.toeplitz_projection(torch.zeros(0, 0)), ValueError, ["matrix", "non-empty", "(0, 0)"]),
        (lambda: helpers.toeplitz_projection(torch.zeros(3)), ValueError, ["matrix", "(3,)"]),
        (
            lambda: helpers.toeplitz_projection(torch.zeros(3, 3, dtype=torch.int64)),
            TypeError,
            ["matrix", "torch.int64"],
        ),
        (lambda: helpers.toeplitz_spread(torch.zeros(2, 3)), ValueError, ["matrix", "square", "(2, 3)"]),
        (lambda: helpers.toeplitz_spread(torch.zeros(3, 3, dtype=torch.int64)), TypeError, ["matrix", "torch.int64"]),
        (lambda: helpers.block_rotation(torch.ones(2, 2)), ValueError, ["angles", "1-D", "(2, 2)"]),
        (lambda: helpers.block_rotation(torch.ones(0)), ValueError, ["angles", "non-empty", "(0,)"]),
        (lambda: helpers.block_rotation(torch.ones(2, dtype=torch.int64)), TypeError, ["angles", "torch.int64"]),
        (lambda: helpers.rotation_commuting_matrix(torch.ones(2, 2), torch.ones(2)), ValueError, ["scales", "(2, 2)"]),
        (lambda: helpers.rotation_commuting_matrix(torch.ones(2), torch.ones(2, 2)), ValueError, ["angles", "(2, 2)"]),
        (
            lambda: helpers.rotation_commuting_matrix(torch.ones(2, dtype=torch.int64), torch.ones(2)),
            TypeError,
            ["scales", "torch.int64"],
        ),
        (
            lambda: helpers.rotation_commuting_matrix(torch.ones(2), torch.ones(2, dtype=torch.int64)),
            TypeError,
            ["angles", "torch.int64"],
        ),
        (
            lambda: helpers.rotation_commuting_matrix(torch.ones(2), torch.ones(3)),
            ValueError,
            ["scales", "angles", "(2,)", "(3,)"],
        ),
    ],
)
def test_bad_matrices_and_angles_are_named(call, error, words):
    raises_naming(error, call, *words)


def test_zero_matrix_spread_keeps_the_dtype():
    for dtype in (torch.float64, torch.float16):
        spread = helpers.toeplitz_spread(torch.zeros(3, 3, dtype=dtype))
        assert spread.dtype == dtype and float(spread) == 0.0


def test_rotation_commuting_matrix_takes_dtype_and_device_of_the_scales():
    angles = torch.tensor([0.1, 1.0, 2.5]).float()
    scales = torch.tensor([2.0, 0.5, 1.0], dtype=torch.float64)
    # float32 angles with float64 scales: turned in float64 (a float32 cosine is off by about 1e-8).
    got = helpers.rotation_commuting_matrix(scales, angles)
    want = helpers.block_rotation(angles.double()) * scales.repeat_interleave(2)[None, :]  # (6, 6)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, want, atol=1e-15, rtol=0)
    assert helpers.rotation_commuting_matrix(scales.float(), angles.double()).dtype == torch.float32
    on_meta = helpers.rotation_commuting_matrix(scales.to("meta"), angles)
    assert on_meta.device.type == "meta" and on_meta.shape == (6, 6)


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=pytest.mark.gpu)])
def test_toeplitz_projection_and_spread_on_the_gpu(device):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    matrix = torch.randn(6, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    projected = helpers.toeplitz_projection(matrix.to(device))
    assert projected.device.type == "cuda"
    torch.testing.assert_close(projected.cpu(), helpers.toeplitz_projection(matrix), atol=1e-12, rtol=0)
    assert helpers.toeplitz_spread(matrix.to(device)).device.type == "cuda"
    zero = helpers.toeplitz_spread(torch.zeros(3, 3, device=device))
    assert zero.device.type == "cuda" and float(zero) == 0.0


def test_score_example_is_deterministic_and_shaped():
    a, b = helpers.plots.score_example(T=10, d_model=16, seed=3), helpers.plots.score_example(T=10, d_model=16, seed=3)
    torch.testing.assert_close(a["x"], b["x"])
    assert a["x"].shape == a["p"].shape == (10, 16)
    assert set(a["weights"]) == {"general", "identity", "commuting"}
    for w_q, w_k in a["weights"].values():
        assert w_q.shape == w_k.shape == (16, 16)
    with pytest.raises(ValueError, match="even"):
        helpers.plots.score_example(d_model=15)


def test_score_term_maps_show_the_four_terms():
    example = helpers.plots.score_example(T=12, d_model=16, seed=0)
    x, p, weights = example["x"], example["p"], example["weights"]
    drawing = helpers.plots.score_term_maps(x, p, weights, a="general", content_weight=0.7)
    terms = helpers.score_terms(0.7 * x, p, *weights["general"])
    full = sum(terms.values())
    scale = float(full.abs().max())
    images = drawing.artists["images"]
    for name, term in terms.items():
        np.testing.assert_allclose(images[name].get_array(), term.numpy() / scale, atol=1e-12)
        assert drawing.artists["spreads"][name] == pytest.approx(float(helpers.toeplitz_spread(term)), abs=1e-12)
    np.testing.assert_allclose(images["full"].get_array(), full.numpy() / scale, atol=1e-12)
    heights = [bar.get_height() for bar in drawing.artists["bars"]]
    assert heights[-1] == pytest.approx(float(helpers.toeplitz_spread(full)), abs=1e-12)


def test_score_term_maps_position_only_with_identity_is_the_kernel():
    example = helpers.plots.score_example(T=12, d_model=16, seed=0)
    drawing = helpers.plots.score_term_maps(example["x"], example["p"], example["weights"])
    drawing.update(a="identity", content_weight=0.0)
    delta = torch.arange(12, dtype=torch.float64)
    kernel = helpers.position_kernel(delta, 16)  # κ(0) = 1 is the largest entry
    np.testing.assert_allclose(drawing.artists["images"]["full"].get_array()[:, 0], kernel.numpy(), atol=1e-12)
    assert drawing.artists["spreads"]["full"] < 1e-12
    assert drawing.artists["spreads"]["content_content"] == 0.0
    drawing.update(a="commuting", content_weight=1.0)
    assert drawing.artists["spreads"]["position_position"] < 1e-12
    assert drawing.artists["spreads"]["full"] > 0.1  # the content terms still depend on m and n
    with pytest.raises(ValueError, match="one of"):
        drawing.update(a="nonsense")
    with pytest.raises(ValueError, match="content_weight"):
        drawing.update(content_weight=-1.0)


def test_score_terms_explorer_slider_drives_the_drawing():
    explorer = helpers.widgets.score_terms_explorer(T=12, d_model=16)
    before = explorer.image.value
    explorer.controls["content_weight"].value = 0.01
    assert explorer.drawing.params["content_weight"] == pytest.approx(0.01)
    assert explorer.image.value != before
    explorer.controls["a"].value = "identity"
    assert explorer.drawing.artists["spreads"]["position_position"] < 1e-12


def test_score_term_maps_label_every_spread_bar_and_follow_updates():
    """A bar of height 0 (the position term for A = I) is invisible: each bar carries its value."""
    example = helpers.plots.score_example(T=12, d_model=16, seed=0)
    drawing = helpers.plots.score_term_maps(
        example["x"], example["p"], example["weights"], a="identity", content_weight=0.3
    )
    labels, bars = drawing.artists["bar_labels"], drawing.artists["bars"]
    names = ["content_content", "content_position", "position_content", "position_position", "full"]
    assert len(labels) == len(bars) == 5
    assert labels[3].get_text() == "0.00"  # the zero-height bar still shows its value
    for params in ({}, {"a": "general", "content_weight": 2.0}):
        drawing.update(**params)
        spreads = drawing.artists["spreads"]
        for label, bar, name in zip(labels, bars, names, strict=True):
            assert label.get_text() == f"{spreads[name]:.2f}"
            x, y = label.get_position()
            assert x == pytest.approx(bar.get_x() + bar.get_width() / 2)
            assert y >= bar.get_height()
            assert label in drawing.animated  # redrawn at every slider step
    assert labels[3].get_text() != "0.00"


@pytest.mark.parametrize("half, seed", [(1, 0), (3, 1), (4, 2)])
def test_rotation_commuting_matrix_gives_gain_and_phase_with_the_sign_of_this_layout(half, seed):
    """In the [sin, cos] layout, s R(φ) gives p_mᵀ A p_n = Σ s_i cos(Δθ_i + φ_i), Δ = m - n; the
    [cos, sin] layout of article 001 would give cos(Δθ_i - φ_i) instead."""
    d = 2 * half
    generator = torch.Generator().manual_seed(seed)
    scales = 0.5 + torch.rand(half, generator=generator, dtype=torch.float64)
    angles = 0.3 + 2 * torch.rand(half, generator=generator, dtype=torch.float64)  # away from 0 and π
    a = helpers.rotation_commuting_matrix(scales, angles)  # (d, d)
    pe = helpers.sinusoidal_pe(12, d, dtype=torch.float64)  # (12, d)
    delta = torch.arange(12, dtype=torch.float64)[:, None] - torch.arange(12)[None, :]  # (12, 12): Δ = m - n
    theta = helpers.frequencies(d)
    plus = (scales * torch.cos(delta[..., None] * theta + angles)).sum(-1)
    torch.testing.assert_close(pe @ a @ pe.T, plus, rtol=0, atol=1e-12)
    swap = torch.block_diag(*[torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64)] * half)
    cos_sin = pe @ swap  # (12, d): [cos, sin] per pair
    minus = (scales * torch.cos(delta[..., None] * theta - angles)).sum(-1)
    torch.testing.assert_close(cos_sin @ a @ cos_sin.T, minus, rtol=0, atol=1e-12)
