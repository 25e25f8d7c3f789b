"""The exercises of notebook 05: the attention score in four terms.

05.1  predict: which score term is largest between different words, embedding scaled by sqrt(d_model)
05.2  write the four terms of (x + p)ᵀ W_Qᵀ W_K (y + p′) (without ``helpers.score_terms``)
05.3  p_3ᵀ A p_0 for a scaled rotation A (``helpers.rotation_commuting_matrix``)
05.4  the factor that gives an N(0, 1) embedding row the squared norm of a position vector
05.5  the extra weights of concatenating the position vector in a decoder-only model
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ._core import Exercise, Mistake, register


def _module(name: str):
    """A submodule of helpers, imported when the exercise is built."""
    import importlib

    return importlib.import_module(f"helpers.{name}")


TERMS = ("content_content", "content_position", "position_content", "position_position")


# ----- 05.1 predict: the largest term between different words --------------------------------------

OPTIONS_1 = ("content-content", "content-position", "position-position", "all about equal")


def _largest_term(params: dict) -> str:
    """Which term has the largest rms over the pairs m ≠ n, words N(0, I) (N(0, 1/d) times sqrt(d)), A = I."""
    attention, sinusoidal = _module("self_attention"), _module("sinusoidal")
    d, t = params["d_model"], params["T"]
    gen = torch.Generator().manual_seed(params["_seed"])
    words = torch.randn(t, d, generator=gen, dtype=torch.float64)  # (T, d): N(0, 1/d) rows times sqrt(d)
    positions = sinusoidal.sinusoidal_pe(t, d, dtype=torch.float64)  # (T, d)
    eye = torch.eye(d, dtype=torch.float64)
    parts = attention.score_terms(words, positions, eye, eye)
    other = ~torch.eye(t, dtype=torch.bool)  # m ≠ n
    rms = {name: float(parts[name][other].pow(2).mean().sqrt()) for name in TERMS}
    sizes = {
        "content-content": rms["content_content"],
        "content-position": max(rms["content_position"], rms["position_content"]),
        "position-position": rms["position_position"],
    }
    largest = max(sizes, key=sizes.get)
    if sizes[largest] < 2 * min(sizes.values()):
        return "all about equal"
    return largest


register(
    Exercise(
        name="05.1",
        title="predict: the largest term between different words",
        kind="choice",
        level=1,
        predict=True,
        params={"d_model": 512, "T": 32, "_seed": 0},
        options=OPTIONS_1,
        expected=_largest_term,
        mistakes=(
            Mistake(
                "the words are the longer vectors, but two different random words are nearly orthogonal: "
                "their inner product is much smaller than the product of their norms. Ask how aligned the two "
                "vectors of each term are, not only how long they are.",
                option="content-content",
            ),
            Mistake(
                "a word and a position vector are nearly orthogonal too (section 4): the cross terms stay near "
                "‖x‖ ‖p‖ / sqrt(d_model). Compare how aligned the two vectors of each term are.",
                option="content-position",
            ),
            Mistake(
                "the norms are of the same order, but the terms are inner products of different pairs of vectors, "
                "and how aligned each pair is differs a lot from term to term.",
                option="all about equal",
            ),
        ),
        hint="the norms are close; what differs is how aligned the two vectors of each term are "
        "(notebook 04 for two positions).",
        explain="Positions a few tokens apart are nearly parallel, while random words are nearly orthogonal.",
    )
)


# ----- 05.2 function: the four terms ----------------------------------------------------------------

# Held here, because ``forbid`` replaces ``helpers.score_terms`` while a function is checked, and the
# reference itself is also checked as the right answer.
_SCORE_TERMS = _module("self_attention").score_terms


def _four_terms_reference(x, y, p, p_prime, w_q, w_k):
    """The four terms of (x + p)ᵀ W_Qᵀ W_K (y + p′), through ``helpers.score_terms`` on a query row and a key row."""
    terms = _SCORE_TERMS(torch.stack([x, y]), torch.stack([p, p_prime]), w_q, w_k)  # (2, 2) each
    return torch.stack([terms[name][0, 1] for name in TERMS])  # (4,): query 0, key 1


def _guarded(variant):
    """A wrong variant that returns NaN where its shapes do not fit (non-square weights), instead of raising."""

    def call(x, y, p, p_prime, w_q, w_k):
        try:
            return variant(x, y, p, p_prime, w_q, w_k)
        except RuntimeError:
            return torch.full((4,), float("nan"), dtype=torch.float64)

    return call


def _terms_with(a, x, y, p, p_prime):
    return torch.stack([x @ a @ y, x @ a @ p_prime, p @ a @ y, p @ a @ p_prime])


def _swapped_cross(x, y, p, p_prime, w_q, w_k):
    a = w_q.T @ w_k
    return torch.stack([x @ a @ y, p @ a @ y, x @ a @ p_prime, p @ a @ p_prime])


def _no_transpose(x, y, p, p_prime, w_q, w_k):
    return _terms_with(w_q @ w_k.T, x, y, p, p_prime)


def _query_key_exchanged(x, y, p, p_prime, w_q, w_k):
    return _terms_with(w_k.T @ w_q, x, y, p, p_prime)


def _scaled(x, y, p, p_prime, w_q, w_k):
    return _terms_with(w_q.T @ w_k, x, y, p, p_prime) / math.sqrt(w_q.shape[0])


def _positions_exchanged(x, y, p, p_prime, w_q, w_k):
    return _terms_with(w_q.T @ w_k, x, y, p_prime, p)


def _four_terms_inputs(rng: np.random.Generator) -> list[dict]:
    """Fixed cases first (square weights with A ≠ Aᵀ, words set to zero, non-square weights), then random ones."""

    def t(values):
        return torch.tensor(values, dtype=torch.float64)

    cases = [
        dict(
            x=t([1.0, 0.0]),
            y=t([0.0, 2.0]),
            p=t([0.0, 1.0]),
            p_prime=t([3.0, 1.0]),
            w_q=t([[1.0, 1.0], [0.0, 1.0]]),
            w_k=t([[1.0, 2.0], [0.0, 1.0]]),
        ),
        dict(
            x=t([0.0, 0.0, 0.0]),
            y=t([0.0, 0.0, 0.0]),
            p=t([1.0, -1.0, 2.0]),
            p_prime=t([0.5, 0.0, 1.0]),
            w_q=t([[2.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]),
            w_k=t([[0.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 3.0]]),
        ),
        dict(
            x=t([1.0, 2.0, 0.0, -1.0]),
            y=t([0.0, 1.0, 1.0, 0.0]),
            p=t([0.0, 1.0, 0.0, 1.0]),
            p_prime=t([1.0, 0.0, 1.0, 0.0]),
            w_q=t([[1.0, 0.0, 2.0, 0.0], [0.0, 1.0, 0.0, -1.0]]),
            w_k=t([[0.0, 1.0, 1.0, 0.0], [2.0, 0.0, 0.0, 1.0]]),
        ),
    ]
    for d_model, d_k in ((4, 4), (6, 3), (8, 8), (8, 2), (5, 5)):

        def draw(*shape):
            return torch.from_numpy(rng.standard_normal(shape))

        cases.append(
            dict(
                x=draw(d_model),
                y=draw(d_model),
                p=draw(d_model),
                p_prime=draw(d_model),
                w_q=draw(d_k, d_model),
                w_k=draw(d_k, d_model),
            )
        )
    return cases


register(
    Exercise(
        name="05.2",
        title="the four terms of one score",
        kind="function",
        level=2,
        expected=lambda params: _four_terms_reference,
        inputs=_four_terms_inputs,
        forbid=("helpers.score_terms", "helpers.self_attention.score_terms"),
        mistakes=(
            Mistake(
                "you get with the two cross terms in each other's places: the second term pairs the query's word "
                "with the key's position.",
                function=_guarded(_swapped_cross),
            ),
            Mistake(
                "you get with A = W_Q W_Kᵀ: a transpose is missing or misplaced. The weights have shape "
                "(d_k, d_model), and q = W_Q (x + p) as a column.",
                function=_guarded(_no_transpose),
            ),
            Mistake(
                "you get with A = W_Kᵀ W_Q: the query and the key projections have changed places (A is not "
                "symmetric, so the order matters).",
                function=_guarded(_query_key_exchanged),
            ),
            Mistake(
                "you get with the 1/sqrt(d_k) of attention applied: the four terms add up to the unscaled score q · k.",
                function=_guarded(_scaled),
            ),
            Mistake(
                "you get with the two positions exchanged: p goes with the query's word x, p′ with the key's word y.",
                function=_guarded(_positions_exchanged),
            ),
        ),
        hint="form A = W_Qᵀ W_K once; each term is a row vector times A times a vector, the query's on the left.",
    )
)


# ----- 05.3 p_3ᵀ A p_0 for a scaled rotation -----------------------------------------------------------


def _theta(params: dict, *, two: bool = True) -> np.ndarray:
    d, b = params["d"], params["b"]
    i = np.arange(d // 2)
    return b ** (-(2 if two else 1) * i / d)


def _kernel(params: dict, delta: float, theta: np.ndarray, scales, phases) -> float:
    return float(np.sum(np.asarray(scales) * np.cos(delta * theta + np.asarray(phases))))


def _p_a_p(params: dict) -> float:
    """p_mᵀ A p_n with A = rotation_commuting_matrix(s, φ), from the matrices of helpers."""
    kernels, sinusoidal = _module("kernels"), _module("sinusoidal")
    m, n = params["m"], params["n"]
    table = sinusoidal.sinusoidal_pe(max(m, n) + 1, params["d"], base=float(params["b"]), dtype=torch.float64)
    scales = torch.tensor(params["scales"], dtype=torch.float64)
    phases = torch.tensor(params["phases_over_pi"], dtype=torch.float64) * math.pi
    a = kernels.rotation_commuting_matrix(scales, phases)  # (d, d)
    return float(table[m] @ a @ table[n])


def _phases(params: dict) -> np.ndarray:
    return np.asarray(params["phases_over_pi"]) * math.pi


register(
    Exercise(
        name="05.3",
        title="a commuting A, in numbers",
        kind="number",
        sig=4,
        level=2,
        params={"d": 4, "b": 10000, "m": 3, "n": 0, "scales": (2.0, 1.0), "phases_over_pi": (0.5, 0.0)},
        expected=_p_a_p,
        mistakes=(
            Mistake(
                "you get with Δ = n − m, or with the phase subtracted (the [cos, sin] layout): here Δ = m − n "
                "and, in the [sin, cos] layout of sinusoidal_pe, the phase adds to Δ θ_i.",
                value=lambda q: _kernel(q, q["n"] - q["m"], _theta(q), q["scales"], _phases(q)),
            ),
            Mistake(
                "you get without the gains s_i: each pair's cosine is multiplied by its gain.",
                value=lambda q: _kernel(q, q["m"] - q["n"], _theta(q), (1.0, 1.0), _phases(q)),
            ),
            Mistake(
                "you get with θ_i = b^(−i/d): the speeds are θ_i = b^(−2i/d), one per pair.",
                value=lambda q: _kernel(q, q["m"] - q["n"], _theta(q, two=False), q["scales"], _phases(q)),
            ),
            Mistake(
                "you get with the gains and phases given to the wrong pairs: the first entry of s and of φ "
                "belongs to the fastest pair, θ_0 = 1.",
                value=lambda q: _kernel(q, q["m"] - q["n"], _theta(q), q["scales"][::-1], _phases(q)[::-1]),
            ),
            Mistake(
                "you get with the phase in degrees; angles here are in radians.",
                value=lambda q: _kernel(
                    q, q["m"] - q["n"], _theta(q), q["scales"], np.asarray(q["phases_over_pi"]) * 180
                ),
            ),
        ),
        hint="section 3 writes p_mᵀ A p_n pair by pair, with a gain and a phase; mind the sign of Δ = m − n.",
    )
)


# ----- 05.4 the factor for N(0, 1) rows --------------------------------------------------------------


def _position_square(params: dict) -> float:
    return float(
        _module("sinusoidal").sinusoidal_pe(1, params["d_model"], dtype=torch.float64)[0].pow(2).sum()
    )  # ‖p_m‖²


def _scale_factor(params: dict) -> float:
    """λ with λ² E‖x‖² = ‖p‖², x a row of d_model entries drawn from N(0, 1)."""
    return math.sqrt(_position_square(params) / params["d_model"])


def _expected_norm(d: int) -> float:
    """E‖x‖ for x ~ N(0, I_d): sqrt(2) Γ((d+1)/2) / Γ(d/2), slightly below sqrt(d)."""
    return math.sqrt(2) * math.exp(math.lgamma((d + 1) / 2) - math.lgamma(d / 2))


register(
    Exercise(
        name="05.4",
        title="the factor for PyTorch's default rows",
        kind="number",
        sig=4,
        level=1,
        params={"d_model": 768},
        expected=_scale_factor,
        mistakes=(
            Mistake(
                "you get setting the factor itself equal to the ratio of the squared norms: multiplying a row by "
                "λ multiplies its squared norm by λ².",
                value=lambda q: _position_square(q) / q["d_model"],
            ),
            Mistake(
                "you get with the ratio the other way round (the row over the position vector).",
                value=lambda q: math.sqrt(q["d_model"] / _position_square(q)),
            ),
            Mistake(
                "you get with the ratio of the squared norms the other way round, and without a square root.",
                value=lambda q: q["d_model"] / _position_square(q),
            ),
            Mistake(
                "you get mixing a squared norm with a norm: ‖p_m‖² and ‖x‖² are compared with each other, or "
                "‖p_m‖ and ‖x‖, not one squared and one not.",
                value=lambda q: _position_square(q) / math.sqrt(q["d_model"]),
            ),
            Mistake(
                "you get with ‖p_m‖² = d_model: each pair (sin, cos) adds 1 to the squared norm, not each coordinate.",
                value=lambda q: 1.0,
            ),
            Mistake(
                "the factor sqrt(d_model) of the original Transformer gives; it is meant for rows drawn with variance "
                "1/d_model, not for PyTorch's N(0, 1) rows.",
                value=lambda q: math.sqrt(q["d_model"]),
            ),
            Mistake(
                "turns N(0, 1) rows into rows of variance 1/d_model (norm about 1), not into rows as long as a "
                "position vector.",
                value=lambda q: 1 / math.sqrt(q["d_model"]),
            ),
            Mistake(
                "you get matching the expected norm E‖x‖, which is slightly below sqrt(E‖x‖²); the question asks "
                "for the expected squared norm.",
                value=lambda q: math.sqrt(_position_square(q)) / _expected_norm(q["d_model"]),
            ),
        ),
        hint=(
            "count the entries of a row and the expected square of each; the recap at the top of this "
            "notebook gives ‖p_m‖."
        ),
    )
)


# ----- 05.5 concatenation in a decoder-only model ------------------------------------------------------


def _concat_count(
    params: dict, *, read_qkv=True, o=True, ffn=2, cross=False, output=True, embedding=False, layers=None
) -> int:
    d_k, d_ff, d_p, v = params["d_k"], params["d_ff"], params["d_p"], params["vocab"]
    attention = (3 * read_qkv + 1 * o) * d_k * d_p
    per_layer = attention * (2 if cross else 1) + ffn * d_ff * d_p
    total = (params["n_layers"] if layers is None else layers) * per_layer
    return total + output * v * d_p + embedding * v * d_p


register(
    Exercise(
        name="05.5",
        title="concatenating in a decoder-only model",
        kind="integer",
        level=3,
        params={"n_layers": 6, "d_model": 384, "d_k": 384, "d_ff": 1536, "d_p": 48, "vocab": 8000},
        expected=_concat_count,
        mistakes=(
            Mistake(
                "you get leaving out the output projection onto the vocabulary, which reads the wider stream too.",
                value=lambda q: _concat_count(q, output=False),
            ),
            Mistake(
                "you get counting a cross-attention block in every layer: a decoder-only model has none.",
                value=lambda q: _concat_count(q, cross=True),
            ),
            Mistake(
                "you get counting a cross-attention block in every layer (a decoder-only model has none) and "
                "leaving out the output projection.",
                value=lambda q: _concat_count(q, cross=True, output=False),
            ),
            Mistake(
                "you get counting only the matrices that read the stream in attention, W_Q, W_K, W_V, in each layer: "
                "W_O writes to it, and both feed-forward matrices touch it.",
                value=lambda q: _concat_count(q, o=False, ffn=0),
            ),
            Mistake(
                "you get leaving out W_O, which writes to the stream and so gains d_p rows.",
                value=lambda q: _concat_count(q, o=False),
            ),
            Mistake(
                "you get growing only one of the two feed-forward matrices: the first reads the stream, the second "
                "writes to it.",
                value=lambda q: _concat_count(q, ffn=1),
            ),
            Mistake("you get counting one layer only.", value=lambda q: _concat_count(q, layers=1)),
            Mistake(
                "you get growing the word embedding table as well: with concatenation each word keeps its d_model "
                "entries, and the sinusoidal position vector has no weights.",
                value=lambda q: _concat_count(q, embedding=True),
            ),
        ),
        hint="list every matrix that reads the residual stream or writes to it, layer by layer and after the "
        "last layer.",
    )
)
