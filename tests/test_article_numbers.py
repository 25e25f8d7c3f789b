"""The articles' worked numbers, reproduced by code to the digits they print (data/article_numbers.json)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import helpers


def _within_last_digit(computed, printed, decimals):
    """True where the computed value, rounded, equals the printed one, or is one unit of the last digit away."""
    unit = 10.0**-decimals
    return np.abs(np.round(computed, decimals) - np.asarray(printed)) <= unit * 1.0001


def test_d4_table_matches_section_3_4(article):
    ref = article["d4_table"]
    table = helpers.sinusoidal_pe(4, ref["d"], ref["base"], dtype=torch.float64).numpy()
    np.testing.assert_array_equal(np.round(table, ref["decimals"]) + 0.0, np.asarray(ref["rows"]) + 0.0)


def test_d4_table_matches_section_8_2(article):
    ref = article["d4_table_torch"]
    table = helpers.sinusoidal_pe(4, ref["d"], ref["base"], dtype=torch.float64).numpy()
    np.testing.assert_array_equal(np.round(table, ref["decimals"]) + 0.0, np.asarray(ref["rows"]) + 0.0)


def test_d8_table_matches_section_3_5_up_to_its_truncations(article):
    ref = article["d8_table"]
    table = helpers.sinusoidal_pe(8, ref["d"], ref["base"], dtype=torch.float64).numpy()
    printed = np.asarray(ref["rows"])
    assert _within_last_digit(table, printed, ref["decimals"]).all()
    exact = np.round(table, ref["decimals"]) == printed
    # The five known truncations, and only those, differ from correct rounding.
    slips = {(1, 2), (2, 2), (3, 2), (4, 0), (7, 3)}
    assert {tuple(int(k) for k in idx) for idx in np.argwhere(~exact)} == slips


def test_six_token_scores_of_section_6_5(article):
    ref = article["six_token_scores"]
    pe = helpers.sinusoidal_pe(6, ref["d"], ref["base"], dtype=torch.float64)
    scores = (pe @ pe.T).numpy()  # (6, 6), W_Q = W_K = I, zero content
    row = scores[0, ref["distances"]]
    assert _within_last_digit(row, ref["scores"], ref["decimals"]).all()
    # Distances 0..3 round exactly to the print; 4 and 5 are 2.26661 and 3.15998, printed 2.266 and 3.161.
    np.testing.assert_array_equal(np.round(row[:4], 3), ref["scores"][:4])
    assert round(row[4], 5) == 2.26661 and round(row[5], 5) == 3.15998
    # The kernel gives the same numbers through (d/2) * kappa_d.
    kernel = helpers.position_kernel(torch.tensor(ref["distances"], dtype=torch.float64), ref["d"]) * ref["d"] / 2
    np.testing.assert_allclose(kernel.numpy(), row, atol=1e-12)
    # The rebound the article points out: distances 4 and 5 score higher than 3.
    assert row[4] > row[3] and row[5] > row[4]


def test_d8_frequencies_and_periods(article):
    ref = article["d8_frequencies"]
    theta = helpers.frequencies(ref["d"], ref["base"])
    np.testing.assert_allclose(theta.numpy(), ref["theta"], rtol=1e-12)
    periods = (2 * math.pi / theta).numpy()
    for period, printed in zip(periods, ref["periods_approx"], strict=True):
        digits = len(str(printed).replace(".", "").lstrip("0"))
        assert float(f"{period:.{digits}g}") == printed


def test_one_clock_at_pi_over_4(article):
    ref = article["one_clock_pi_over_4"]
    # With d = 2 the only speed is θ_0 = 1 rad per token: position m·θ turns the hand by mθ.
    angles = torch.tensor(ref["positions"], dtype=torch.float64) * ref["theta"]
    table = helpers.sinusoidal_pe(angles, 2, dtype=torch.float64)  # (4, 2): [sin, cos]
    p = table[:, [1, 0]]  # the article writes the pair as [cos mθ, sin mθ]
    np.testing.assert_allclose(p.numpy(), ref["vectors"], atol=1e-15)
    assert abs(float(p[0] @ p[2])) < 1e-15 and abs(float(p[1] @ p[3])) < 1e-15
    # The inner product is the kernel of the offset: cos(Δθ) for every pair of the four positions.
    for m in range(4):
        for n in range(4):
            assert float(p[m] @ p[n]) == pytest.approx(math.cos((m - n) * ref["theta"]), abs=1e-15)


def test_rotation_by_30_degrees_twice(article):
    ref = article["rotation_30_degrees"]
    # With d = 2 the only speed is theta_0 = 1 rad per token: pass m * 30 degrees as the position.
    angle = ref["m"] * math.radians(ref["theta_degrees"])
    cos, sin = helpers.rope_cos_sin(torch.tensor([angle], dtype=torch.float64), 2, dtype=torch.float64)
    x = torch.tensor([[ref["start"]]], dtype=torch.float64)  # (1, 1, 2)
    turned = helpers.apply_rope(x, cos, sin, layout="interleaved")[0, 0].numpy()
    np.testing.assert_array_equal(np.round(turned, ref["decimals"]), ref["end"])


def test_embedding_scale_numbers(article):
    ref = article["embedding_scale"]
    d = ref["d_model"]
    norms = helpers.sinusoidal_pe(1000, d, dtype=torch.float64).norm(dim=1)
    np.testing.assert_allclose(norms.numpy(), ref["pe_norm"], rtol=1e-12)
    # An N(0, 1/d) row has expected squared norm d · (1/d) = 1 (the article's "about 1"), and
    # √d_model times it about 22.6: arithmetic on the article's own assumption, nothing sampled.
    assert math.sqrt(d * (1 / d)) == ref["embedding_norm"]
    assert round(math.sqrt(d), 1) == ref["scaled_embedding_norm"]
    # The position vector is 16 times the word's, before the scale, and 16/22.6 of it after.
    assert float(norms[0]) / ref["embedding_norm"] == pytest.approx(16.0, rel=1e-12)


def test_article_001_speed_ratio_and_longest_period_slips():
    # §3.5 says the d = 8 speeds shrink by √10 per pair; the factor is b^(2/d) = 10 (√10 belongs to d = 16).
    theta = helpers.frequencies(8)
    np.testing.assert_allclose((theta[:-1] / theta[1:]).numpy(), 10.0, rtol=1e-12)
    theta16 = helpers.frequencies(16)
    assert float(theta16[0] / theta16[1]) == pytest.approx(math.sqrt(10), rel=1e-12)
    # §3.2-3.3 give the slowest hand of d = 512 as 1/10000 with period 2π·10000 ≈ 62832; it is
    # 10000^(-510/512) ≈ 1/9647, period 2π·b^((d-2)/d) ≈ 60,611.
    slowest = float(helpers.frequencies(512)[-1])
    assert round(1 / slowest) == 9647 and round(2 * math.pi / slowest) == 60_611
    assert round(2 * math.pi * 10000) == 62_832
