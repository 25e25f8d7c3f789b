"""The exercises of notebook 10 (bugs worth knowing).

- 10.1 predict: does a common shift change the score of a RoPE with the layout swapped?
- 10.2 name the fault of ``rope_faulty`` (a table of one layout with the other's rotation).
- 10.3 fix ``rope_faulty``: RoPE in the half layout, checked against ``helpers.apply_rope``.
- 10.4 fix ``alibi_faulty``: ALiBi aligned bottom-right, checked against ``helpers.alibi_bias``.
"""

from __future__ import annotations

import numpy as np
import torch

from .. import alibi as _alibi
from .. import rope as _rope
from ._core import Exercise, Mistake, register

# ----- 10.1 ------------------------------------------------------------------------------------------


def _shift_changes_score(p: dict) -> str:
    """Whether moving query and key by ``shift`` changes the swapped layout's score, computed."""
    d, m, n, shift = p["d"], p["m"], p["n"], p["shift"]
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 1, d, generator=gen, dtype=torch.float64)
    cos, sin = _rope.rope_cos_sin(n + shift + 1, d, dtype=torch.float64)

    def score(a, b):
        rq = _rope.apply_rope(q, cos, sin, layout="half", positions=torch.tensor([a]))
        rk = _rope.apply_rope(k, cos, sin, layout="half", positions=torch.tensor([b]))
        return float((rq * rk).sum())

    if abs(score(m, n) - score(m + shift, n + shift)) <= 1e-9:
        return "the same"
    return "different, by an amount that grows with the shift"


register(
    Exercise(
        name="10.1",
        title="predict: does a shift change the swapped model's score?",
        kind="choice",
        level=1,
        predict=True,
        params={"d": 64, "m": 5, "n": 12, "shift": 1000},
        options=("the same", "different, by an amount that grows with the shift", "different, by a fixed amount"),
        expected=_shift_changes_score,
        hint="is a RoPE in the other layout still a rotation of pairs at RoPE's speeds?",
        mistakes=(
            Mistake(
                "the swapped layout pairs the wrong coordinates, but it still rotates pairs at RoPE's speeds, so "
                "its score still depends on n - m only: nothing in it can grow with the shift.",
                option="different, by an amount that grows with the shift",
            ),
            Mistake(
                "a fixed change would need something that sees the absolute positions; every pair is still "
                "rotated by m θ and n θ, and only their difference reaches the score.",
                option="different, by a fixed amount",
            ),
        ),
    )
)

# ----- 10.2 ------------------------------------------------------------------------------------------

register(
    Exercise(
        name="10.2",
        title="name the fault in rope_faulty",
        kind="choice",
        level=1,
        options=("layout swapped", "table and rotation mismatched", "angles in low precision", "base ignored"),
        expected=lambda p: "table and rotation mismatched",
        hint="rotate_half pairs coordinate j with j + d/2: which speed does the table give each of them?",
        mistakes=(
            Mistake(
                "the rotation is rotate_half, the half layout that is meant; look at the table it is fed instead.",
                option="layout swapped",
            ),
            Mistake(
                "the angles are formed in float64 (positions.double() times a float64 inv_freq) and only the cos "
                "and sin tables are cast to x's dtype: that is section 3's fix, not its bug (bfloat16 or float16 "
                "angles).",
                option="angles in low precision",
            ),
            Mistake(
                "the speeds use 10000, the base that is meant; look at how they are repeated.", option="base ignored"
            ),
        ),
    )
)

# ----- 10.3 ------------------------------------------------------------------------------------------


def _rope_half(x, positions):
    """The reference: helpers' RoPE in the half layout, base 10000, tables in x's dtype."""
    cos, sin = _rope.rope_cos_sin(positions, x.shape[-1], dtype=x.dtype)
    return _rope.apply_rope(x, cos, sin, layout="half")


def _angles(x, positions, repeat):
    """Angles in float64 (section 3's fix), as halves cat(θ, θ) or pairs (θ_0, θ_0, θ_1, ...); cast to x's dtype."""
    d = x.shape[-1]
    speeds = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    angle = positions.double()[:, None] * speeds  # (T, d/2)
    angle = torch.cat((angle, angle), dim=-1) if repeat == "halves" else angle.repeat_interleave(2, dim=-1)
    return angle.to(x.dtype)


def _rotate_half(x, angle, sign=1.0):
    d = x.shape[-1]
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * angle.cos() + sign * torch.cat((-x2, x1), dim=-1) * angle.sin()


def _faulty(x, positions):
    """The notebook's rope_faulty: rotate_half fed the interleaved layout's table."""
    return _rotate_half(x, _angles(x, positions, "pairs"))


def _interleaved(x, positions):
    """Adjacent pairs rotated with the right speeds: the other layout."""
    cos, sin = _rope.rope_cos_sin(positions, x.shape[-1], dtype=x.dtype)
    return _rope.apply_rope(x, cos, sin, layout="interleaved")


def _backwards(x, positions):
    """The half layout turned the other way (the sine's sign flipped)."""
    return _rotate_half(x, _angles(x, positions, "halves"), sign=-1.0)


def _rope_inputs(rng: np.random.Generator) -> list[dict]:
    """Edge cases (one pair, position 0, consecutive positions), then random widths, lengths and positions."""
    cases = [
        {"x": torch.tensor([[1.0, 2.0]], dtype=torch.float64), "positions": torch.tensor([0])},
        {"x": torch.tensor([[1.0, 0.0]], dtype=torch.float64), "positions": torch.tensor([3])},
        {
            "x": torch.from_numpy(rng.standard_normal((6, 8))),
            "positions": torch.arange(6),
        },
    ]
    for d, t in ((4, 3), (16, 7), (64, 33), (128, 5)):
        cases.append(
            {
                "x": torch.from_numpy(rng.standard_normal((t, d))),
                "positions": torch.from_numpy(rng.integers(0, 5000, size=t)),
            }
        )
    return cases


register(
    Exercise(
        name="10.3",
        title="fix rope_faulty",
        kind="function",
        level=2,
        expected=lambda p: _rope_half,
        inputs=_rope_inputs,
        forbid=(
            "helpers.apply_rope",
            "helpers.rope.apply_rope",
            "helpers.rope_cos_sin",
            "helpers.rope.rope_cos_sin",
        ),
        hint="which coordinate does rotate_half pair with coordinate j, and which angle must both turn by?",
        mistakes=(
            Mistake(
                "rope_faulty gives: the table (θ_0, θ_0, θ_1, θ_1, ...) is the interleaved layout's; rotate_half "
                "needs cat(θ, θ).",
                function=_faulty,
            ),
            Mistake(
                "the interleaved layout gives: adjacent pairs (x_2i, x_2i+1); the half layout pairs x_j with "
                "x_(j+d/2).",
                function=_interleaved,
            ),
            Mistake(
                "a rotation the other way gives (R_(-m) instead of R_m): check the sign in front of the sine.",
                function=_backwards,
            ),
        ),
    )
)

# ----- 10.4 ------------------------------------------------------------------------------------------


def _alibi_open(n_heads, n_queries, n_keys):
    """The reference: ``helpers.alibi_bias`` in float64 with its -inf entries read as 0."""
    bias = _alibi.alibi_bias(n_heads, n_queries, n_keys, dtype=torch.float64)
    return torch.where(torch.isfinite(bias), bias, torch.zeros_like(bias))


def _alibi_variant(n_heads, n_queries, n_keys, *, align=True, sign=1.0, absolute=False):
    slopes = _alibi.alibi_slopes(n_heads)[:, None, None]  # (H, 1, 1)
    i = torch.arange(n_queries)[:, None] + ((n_keys - n_queries) if align else 0)
    j = torch.arange(n_keys)[None, :]
    distance = (i - j).abs() if absolute else (i - j).clamp(min=0)
    return -sign * slopes * distance


def _top_left(n_heads, n_queries, n_keys):
    return _alibi_variant(n_heads, n_queries, n_keys, align=False)


def _flipped(n_heads, n_queries, n_keys):
    return _alibi_variant(n_heads, n_queries, n_keys, sign=-1.0)


def _symmetric(n_heads, n_queries, n_keys):
    return _alibi_variant(n_heads, n_queries, n_keys, absolute=True)


def _key_form(n_heads, n_queries, n_keys, *, masked=True):
    """Notebook 07's key form +m_h j (a row constant away from the distance form), 0 after the query if masked."""
    slopes = _alibi.alibi_slopes(n_heads)[:, None, None]  # (H, 1, 1)
    i = torch.arange(n_queries)[:, None] + (n_keys - n_queries)
    j = torch.arange(n_keys)[None, :]
    bias = slopes * j.double().expand(n_queries, n_keys)
    return bias.masked_fill(j > i, 0.0) if masked else bias


def _key_form_unmasked(n_heads, n_queries, n_keys):
    return _key_form(n_heads, n_queries, n_keys, masked=False)


def _alibi_inputs(rng: np.random.Generator) -> list[dict]:
    """(H, Tq, Tk): one token, a full pass, decoding steps, a chunk; then random decoding shapes."""
    shapes = [(1, 1, 1), (8, 6, 6), (8, 1, 16), (12, 4, 20)]
    for _ in range(4):
        n_keys = int(rng.integers(2, 400))
        shapes.append((int(rng.integers(1, 33)), int(rng.integers(1, min(n_keys, 8) + 1)), n_keys))
    return [{"n_heads": h, "n_queries": q, "n_keys": k} for h, q, k in shapes]


register(
    Exercise(
        name="10.4",
        title="fix alibi_faulty",
        kind="function",
        level=2,
        expected=lambda p: _alibi_open,
        inputs=_alibi_inputs,
        forbid=("helpers.alibi_bias", "helpers.alibi.alibi_bias"),
        hint=(
            "if your bias holds -inf after each query, put 0 there: this exercise leaves masking to a separate "
            "step. Otherwise compare your n_queries=1 result with the last row of your n_queries=n_keys one."
        ),
        mistakes=(
            Mistake(
                "alibi_faulty gives: query i is placed at position i (top-left), so at a decoding step every "
                "distance clamps to 0; the queries are the newest tokens, at i + Tk - Tq.",
                function=_top_left,
            ),
            Mistake(
                "a bias with the sign flipped gives: ALiBi subtracts m_h (i - j), a penalty that grows with distance.",
                function=_flipped,
            ),
            Mistake(
                "the symmetric -m_h |i - j| gives: keys after the query get 0 here, since the mask hides them.",
                function=_symmetric,
            ),
            Mistake(
                "notebook 07's key form +m_h j gives: it differs from -m_h (i - j) by m_h i, the same for every "
                "key of a row, so softmax sees the same weights; this exercise asks for the distance form itself.",
                function=_key_form,
            ),
            Mistake(
                "the key form +m_h j without the 0 after the query gives: softmax-equivalent once masked, but this "
                "exercise asks for -m_h (i - j) with 0 after each query.",
                function=_key_form_unmasked,
            ),
        ),
    )
)
