"""The shift map M_k (PE(m+k) = M_k PE(m)), shift distances and near-collisions (article 001 §4, §9.5.3)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import helpers


def _slow_shift_matrix(k, d, base):
    """Block by block with torch.block_diag, straight from article 001 §4.2."""
    blocks = []
    for i in range(d // 2):
        angle = k * base ** (-2 * i / d)
        blocks.append(torch.tensor([[math.cos(angle), math.sin(angle)], [-math.sin(angle), math.cos(angle)]],
                                   dtype=torch.float64))
    return torch.block_diag(*blocks)


@pytest.mark.parametrize("k, d, base", [(0, 4, 10000.0), (1, 8, 10000.0), (5, 16, 100.0), (-3, 6, 10.0), (2.5, 8, 1e6)])
def test_shift_matrix_matches_block_by_block_reference(k, d, base):
    torch.testing.assert_close(helpers.shift_matrix(k, d, base), _slow_shift_matrix(k, d, base), atol=1e-12, rtol=0)


@settings(max_examples=40, deadline=None)
@given(k=st.integers(-500, 500), m=st.integers(0, 10_000), half=st.integers(1, 32),
       base=st.floats(2.0, 1e6))
def test_shift_matrix_moves_every_position_by_k(k, m, half, base):
    d = 2 * half
    pe = helpers.sinusoidal_pe(torch.tensor([m, m + k]), d, base, dtype=torch.float64)  # (2, d)
    torch.testing.assert_close(helpers.shift_matrix(k, d, base) @ pe[0], pe[1], atol=1e-9, rtol=0)


def test_shift_matrix_is_orthogonal_and_composes():
    d = 12
    m3, m4 = helpers.shift_matrix(3, d), helpers.shift_matrix(4, d)
    torch.testing.assert_close(m3 @ m3.T, torch.eye(d, dtype=torch.float64), atol=1e-12, rtol=0)
    torch.testing.assert_close(m3 @ m4, helpers.shift_matrix(7, d), atol=1e-12, rtol=0)
    torch.testing.assert_close(helpers.shift_matrix(-3, d), m3.T, atol=1e-12, rtol=0)
    assert helpers.shift_matrix(0, d).equal(torch.eye(d, dtype=torch.float64))


def test_shift_matrix_dtype_and_zeros_off_the_blocks():
    matrix = helpers.shift_matrix(2, 8, dtype=torch.float32)
    assert matrix.dtype == torch.float32 and matrix.shape == (8, 8)
    mask = torch.block_diag(*[torch.ones(2, 2)] * 4).bool()
    assert matrix[~mask].abs().max() == 0


@pytest.mark.parametrize("bad, error", [(dict(k=1, d=5), ValueError), (dict(k="1", d=4), TypeError),
                                        (dict(k=True, d=4), TypeError), (dict(k=1, d=4, base=1.0), ValueError),
                                        (dict(k=float("nan"), d=4), ValueError)])
def test_shift_matrix_rejects_bad_input(bad, error):
    with pytest.raises(error):
        helpers.shift_matrix(**bad)


@settings(max_examples=30, deadline=None)
@given(theta=st.floats(0.01, 3.0), k=st.integers(0, 2000), m=st.integers(0, 1000))
def test_shift_distance_one_clock_is_the_chord(theta, k, m):
    distance = float(helpers.shift_distance(torch.tensor([k]), theta)[0])
    p = lambda n: torch.tensor([math.cos(n * theta), math.sin(n * theta)], dtype=torch.float64)  # noqa: E731
    assert distance == pytest.approx(float((p(m + k) - p(m)).norm()), abs=1e-9)
    assert distance == pytest.approx(2 * abs(math.sin(k * theta / 2)), abs=1e-12)


def test_shift_distance_many_clocks_matches_the_table():
    d, base = 64, 10000.0
    pe = helpers.sinusoidal_pe(300, d, base, dtype=torch.float64)  # (300, d)
    reference = (pe[100:200] - pe[100]).norm(dim=1)  # (100,): shifts 0..99 from m = 100
    torch.testing.assert_close(helpers.shift_distance(100, helpers.frequencies(d, base)), reference,
                               atol=1e-10, rtol=0)


def test_nearest_collision_finds_exact_and_near_returns():
    k, distance = helpers.nearest_collision(2 * math.pi / 10, 100)
    assert k == 10 and distance < 1e-12
    # theta = 1 rad: 44 radians is 7.003 turns, the best return within 100 tokens.
    k, distance = helpers.nearest_collision(1.0, 100)
    brute = min(range(1, 101), key=lambda j: abs(math.sin(j / 2)))
    assert k == brute == 44 and distance == pytest.approx(2 * abs(math.sin(22.0)))
    # With the article's d = 8 clocks, positions 63 apart are closer than neighbours (both fast hands return).
    theta = helpers.frequencies(8)
    k, distance = helpers.nearest_collision(theta, 100)
    assert k == 63 and distance < float(helpers.shift_distance(torch.tensor([1]), theta)[0])


def test_nearest_collision_default_width_never_closer_than_neighbours():
    theta = helpers.frequencies(64)
    k, distance = helpers.nearest_collision(theta, 4096)
    assert k == 1 and distance == pytest.approx(float(helpers.shift_distance(torch.tensor([1]), theta)[0]))


@pytest.mark.parametrize("bad, error", [(dict(theta="x", max_shift=3), TypeError), (dict(theta=1.0, max_shift=0), ValueError),
                                        (dict(theta=torch.ones(2, 2), max_shift=3), ValueError),
                                        (dict(theta=float("inf"), max_shift=3), ValueError)])
def test_nearest_collision_rejects_bad_input(bad, error):
    with pytest.raises(error):
        helpers.nearest_collision(**bad)
