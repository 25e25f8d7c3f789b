"""The shift map M_k (PE(m+k) = M_k PE(m)), shift distances and near-collisions (article 001 §4, §9.5.3)."""

from __future__ import annotations

import math

import pytest
import torch
from _support import raises_naming
from hypothesis import given, settings
from hypothesis import strategies as st

import helpers


def _slow_shift_matrix(k, d, base):
    """Block by block with torch.block_diag, straight from article 001 §4.2."""
    blocks = []
    for i in range(d // 2):
        angle = k * base ** (-2 * i / d)
        blocks.append(
            torch.tensor([[math.cos(angle), math.sin(angle)], [-math.sin(angle), math.cos(angle)]], dtype=torch.float64)
        )
    return torch.block_diag(*blocks)


@pytest.mark.parametrize("k, d, base", [(0, 4, 10000.0), (1, 8, 10000.0), (5, 16, 100.0), (-3, 6, 10.0), (2.5, 8, 1e6)])
def test_shift_matrix_matches_block_by_block_reference(k, d, base):
    torch.testing.assert_close(helpers.shift_matrix(k, d, base), _slow_shift_matrix(k, d, base), atol=1e-12, rtol=0)


@settings(max_examples=40, deadline=None)
@given(k=st.integers(-500, 500), m=st.integers(0, 10_000), half=st.integers(1, 32), base=st.floats(2.0, 1e6))
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


@pytest.mark.parametrize(
    "bad, error, words",
    [
        (dict(k=1, d=5), ValueError, ["d", "5", "even"]),
        (dict(k=1, d=3.0), TypeError, ["d", "int"]),
        (dict(k="1", d=4), TypeError, ["k", "'1'", "str"]),
        (dict(k=True, d=4), TypeError, ["k", "True", "bool"]),
        (dict(k=1, d=4, base=1.0), ValueError, ["base", "1.0", "> 1"]),
        (dict(k=1, d=4, base="10"), TypeError, ["base", "str"]),
        (dict(k=float("nan"), d=4), ValueError, ["k", "nan", "finite"]),
        (dict(k=float("inf"), d=4), ValueError, ["k", "inf", "finite"]),
        (dict(k=-float("inf"), d=4), ValueError, ["k", "-inf", "finite"]),
        (dict(k=1, d=4, dtype=torch.int32), TypeError, ["dtype", "torch.int32"]),
    ],
)
def test_shift_matrix_rejects_bad_input(bad, error, words):
    raises_naming(error, lambda: helpers.shift_matrix(**bad), *words)


def test_shift_matrix_keeps_the_digits_of_a_real_shift():
    # A shift that float32 cannot hold (1/3, 123456.789) must turn the hands by exactly that much.
    for k in (1 / 3, 123456.789):
        torch.testing.assert_close(helpers.shift_matrix(k, 8), _slow_shift_matrix(k, 8, 10000.0), atol=1e-12, rtol=0)


def test_shift_matrix_is_built_on_the_device_asked_for():
    matrix = helpers.shift_matrix(3, 8, device="meta")
    assert matrix.device.type == "meta" and matrix.shape == (8, 8) and matrix.dtype == torch.float64


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
    torch.testing.assert_close(helpers.shift_distance(100, helpers.frequencies(d, base)), reference, atol=1e-10, rtol=0)


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


@pytest.mark.parametrize(
    "bad, error, words",
    [
        (dict(theta="x", max_shift=3), TypeError, ["theta", "1-D", "str"]),
        (dict(theta=True, max_shift=3), TypeError, ["theta", "1-D", "bool"]),
        (dict(theta=torch.tensor([True]), max_shift=3), TypeError, ["theta", "torch.bool"]),
        (dict(theta=torch.tensor([1 + 1j]), max_shift=3), TypeError, ["theta", "torch.complex64"]),
        (dict(theta=1.0, max_shift=0), ValueError, ["max_shift", "0", ">= 1"]),
        (dict(theta=1.0, max_shift=2.0), TypeError, ["max_shift", "int"]),
        (dict(theta=torch.ones(2, 2), max_shift=3), ValueError, ["theta", "1-D", "(2, 2)"]),
        (dict(theta=torch.ones(0), max_shift=3), ValueError, ["theta", "non-empty", "(0,)"]),
        (dict(theta=float("inf"), max_shift=3), ValueError, ["theta", "finite", "NaN"]),
        (dict(theta=1.0, max_shift=3, tol="x"), TypeError, ["tol", ">= 0", "'x'", "str"]),
        (dict(theta=1.0, max_shift=3, tol=-1e-12), ValueError, ["tol", ">= 0", "-1e-12"]),
        (dict(theta=1.0, max_shift=3, tol=float("inf")), ValueError, ["tol", "finite", "inf"]),
    ],
)
def test_nearest_collision_rejects_bad_input(bad, error, words):
    raises_naming(error, lambda: helpers.nearest_collision(**bad), *words)


def test_shift_distance_rejects_bad_shifts():
    raises_naming(ValueError, lambda: helpers.shift_distance(-1, 1.0), "shifts", "-1", ">= 0")
    raises_naming(ValueError, lambda: helpers.shift_distance(torch.zeros(2, 2), 1.0), "shifts", "1-D", "(2, 2)")


def test_nearest_collision_searches_up_to_max_shift_and_no_further():
    # θ = 2π·3/10 comes back exactly after 10 tokens; searching 1 .. 9 must not find it.
    theta = 2 * math.pi * 0.3
    k, gap = helpers.nearest_collision(theta, 9)
    assert k == 3 and gap == pytest.approx(2 * abs(math.sin(1.5 * theta)))
    assert helpers.nearest_collision(theta, 1) == (1, pytest.approx(2 * abs(math.sin(theta / 2))))


def test_nearest_collision_with_no_tolerance_keeps_the_smallest_gap():
    # tol = 0 is allowed: only shifts at the smallest gap itself tie (θ = 1 within 100: k = 44).
    k, gap = helpers.nearest_collision(1.0, 100, tol=0.0)
    assert k == 44 and gap == pytest.approx(2 * abs(math.sin(22.0)))


def test_shift_matrix_is_the_articles_r_beta_the_mirror_of_a_counterclockwise_turn():
    # Article 001 §4.2: R(β) = [[cos β, sin β], [-sin β, cos β]] on the pair [sin, cos]. Swapping the pair's
    # order (S = [[0, 1], [1, 0]]) reverses the sense of turning: S R_ccw(β) S = R_ccw(-β) = R(β).
    k, d = 7, 10
    angles = k * helpers.frequencies(d)  # (d/2,)
    swap = torch.block_diag(*[torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64)] * (d // 2))
    ccw = helpers.block_rotation(angles)  # [[cos, -sin], [sin, cos]] per block
    torch.testing.assert_close(swap @ ccw @ swap, helpers.block_rotation(-angles), atol=1e-15, rtol=0)
    torch.testing.assert_close(helpers.shift_matrix(k, d), swap @ ccw @ swap, atol=1e-12, rtol=0)
    beta = float(angles[1])
    article = torch.tensor([[math.cos(beta), math.sin(beta)], [-math.sin(beta), math.cos(beta)]], dtype=torch.float64)
    torch.testing.assert_close(helpers.shift_matrix(k, d)[2:4, 2:4], article, atol=1e-12, rtol=0)


def test_the_fastest_hand_alone_never_returns_exactly():
    # θ_0 = 1 rad for every base: k θ_0 = 2πj with integers k, j ≠ 0 would make π rational.
    k, gap = helpers.nearest_collision(1.0, 1_000_000)
    assert gap > 1e-7 and k == 312_689  # closest return within a million tokens: 312689 ≈ 49766 · 2π
    # 710 tokens ≈ 113 turns (355/113 ≈ π): one hand comes close; more hands keep positions apart.
    assert helpers.nearest_collision(helpers.frequencies(2), 1000) == (710, pytest.approx(6.03e-5, rel=1e-3))
    assert helpers.nearest_collision(helpers.frequencies(8), 1000)[1] > 0.6


def _commutant_dimension(m, tol=1e-10):
    """Dimension of {X : X M - M X = 0}, from the singular values of X -> X M - M X (row-major vec)."""
    d = m.shape[0]
    eye = torch.eye(d, dtype=torch.float64)
    operator = torch.kron(eye, m.T.contiguous()) - torch.kron(m, eye)  # (d², d²)
    singular = torch.linalg.svdvals(operator)
    return int((singular < tol * max(1.0, float(singular[0]))).sum())


@pytest.mark.parametrize("d", [2, 4, 8, 16])
def test_matrices_commuting_with_the_unit_shift_are_the_block_scaled_rotations(d):
    """Every θ_i lies in (0, 1]: no two are equal or opposite mod 2π, none is a multiple of π, so the
    commutant of M_1 has dimension d (a·I + b·J on each pair) and holds rotation_commuting_matrix."""
    theta = helpers.frequencies(d)
    assert bool((theta > 0).all()) and bool((theta <= 1).all())
    m1 = helpers.shift_matrix(1, d)
    assert _commutant_dimension(m1) == d
    generator = torch.Generator().manual_seed(d)
    a = helpers.rotation_commuting_matrix(
        torch.rand(d // 2, generator=generator, dtype=torch.float64) + 0.5,
        torch.randn(d // 2, generator=generator, dtype=torch.float64),
    )
    torch.testing.assert_close(a @ m1, m1 @ a, atol=1e-12, rtol=0)
    # M_k = M_1^k, so commuting with M_1 is commuting with every M_k
    torch.testing.assert_close(torch.linalg.matrix_power(m1, 7), helpers.shift_matrix(7, d), atol=1e-12, rtol=0)


def test_equal_speeds_would_enlarge_the_commutant():
    """The hypothesis matters: two pairs turning at the same speed commute with a 4-dimensional
    mixing of the pairs, so the commutant grows beyond d."""
    m = torch.block_diag(helpers.shift_matrix(1, 2), helpers.shift_matrix(1, 2))  # θ_0 = θ_1 = 1
    assert _commutant_dimension(m) == 8 > 4


def _toeplitz_table_dimension(d, base, t, tol=1e-10):
    """Dimension of {A : the (t, t) table p_mᵀ A p_n is Toeplitz}, p from sinusoidal_pe(t, d, base)."""
    pe = helpers.sinusoidal_pe(t, d, base, dtype=torch.float64)  # (t, d)
    columns = []
    for j in range(d * d):
        unit = torch.zeros(d * d, dtype=torch.float64)
        unit[j] = 1.0
        table = pe @ unit.reshape(d, d) @ pe.T  # (t, t)
        columns.append((table - helpers.toeplitz_projection(table)).reshape(-1))
    singular = torch.linalg.svdvals(torch.stack(columns, dim=1))  # (t², d²)
    return d * d - int((singular > tol).sum())


@pytest.mark.parametrize("d", [4, 6])
def test_short_windows_leave_d2_minus_t_minus_1_squared_matrices_and_d_plus_one_positions_leave_d(d):
    """A (t, t) Toeplitz table is (t - 1)² linear conditions on A; for t ≤ d they are independent
    (the t position vectors are), so d² - (t - 1)² > d matrices pass; from t = d + 1 on only the d
    scaled rotations do (base 10 keeps the example well conditioned)."""
    for t in range(2, d + 1):
        assert _toeplitz_table_dimension(d, 10.0, t) == d * d - (t - 1) ** 2 > d
    assert _toeplitz_table_dimension(d, 10.0, d + 1) == d == _toeplitz_table_dimension(d, 10.0, d + 3)


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=pytest.mark.gpu)])
def test_shift_distance_takes_shifts_and_speeds_from_any_device(device):
    # The distance is computed on the CPU in float64 whatever the inputs' device (mixing a CUDA tensor
    # with a CPU one would fail); without a second device this cannot be seen.
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    theta, shifts = helpers.frequencies(8), torch.arange(6)
    want = helpers.shift_distance(shifts, theta)
    want32 = helpers.shift_distance(shifts, theta.float())  # float32 speeds are other speeds (1e-9 apart here)
    for got, expected in (
        (helpers.shift_distance(shifts, theta.to(device)), want),
        (helpers.shift_distance(shifts.to(device), theta), want),
        (helpers.shift_distance(shifts.to(device), theta.float().to(device)), want32),
    ):
        assert got.device.type == "cpu" and got.dtype == torch.float64
        torch.testing.assert_close(got, expected, atol=1e-12, rtol=0)
