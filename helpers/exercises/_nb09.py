"""The exercises of notebook 09 (RoPE in today's models).

09.1 (predict) which scores of a new token go wrong when its position offset is forgotten after a
correct prefill; 09.2 the pairs of Gemma 3's local layers that never complete a turn within the
sliding window; 09.3 the softmax temperature DeepSeek-V3's scale on every score amounts to; 09.4 Llama 3.1's
"llama3" scaling of the speeds, written from scratch.

Every model number comes from ``helpers/data/rope_models.json`` through ``helpers.rope_models``.
"""

from __future__ import annotations

import math

import torch

from .. import rope as _rope
from ..model_catalog import model_rope, rope_models
from ._core import Exercise, Mistake, register

# Exercise 09.4 switches these off (under any name) only while the learner's function runs; the
# reference and the recorded mistakes run outside that window and may call them.
_rope_frequencies = _rope.rope_frequencies

# ----- 09.1 · predict: the offset forgotten after a correct prefill -----------------------------------

_OPTIONS_1 = (
    "none",
    "only its score with itself",
    "its scores with the cached keys, not with itself",
    "every score",
)


def _forgotten_offset(p: dict) -> str:
    """Which scores of the first generated token change when it is rotated at position 0 instead of
    ``P`` (the prompt's ``P`` keys cached correctly at ``0 .. P-1``), found with helpers' RoPE."""
    d, prompt = 16, p["P"]  # any even head width gives the same verdict
    gen = torch.Generator().manual_seed(9)
    q, keys = (
        torch.randn(1, d, dtype=torch.float64, generator=gen),
        torch.randn(prompt + 1, d, dtype=torch.float64, generator=gen),
    )
    cos, sin = _rope.rope_cos_sin(prompt + 1, d, dtype=torch.float64)  # (P+1, d/2)
    cached = _rope.apply_rope(keys[:prompt], cos, sin, layout="interleaved")  # (P, d): positions 0 .. P-1, right

    def scores(position: int) -> torch.Tensor:
        query = _rope.apply_rope(q, cos, sin, positions=position, layout="interleaved")  # (1, d)
        own = _rope.apply_rope(keys[prompt:], cos, sin, positions=position, layout="interleaved")  # (1, d)
        return (query @ torch.cat((cached, own)).T)[0]  # (P+1,): cached keys, then itself

    wrong = (scores(prompt) - scores(0)).abs() > 1e-9  # (P+1,)
    with_cache, with_itself = bool(wrong[:prompt].any()), bool(wrong[prompt])
    if with_cache and with_itself:
        return _OPTIONS_1[3]
    if with_cache:
        return _OPTIONS_1[2]
    return _OPTIONS_1[1] if with_itself else _OPTIONS_1[0]


register(
    Exercise(
        name="09.1",
        title="predict: the offset forgotten after a correct prefill",
        kind="choice",
        level=1,
        predict=True,
        params={"P": 6},  # P as in the notebook's decoding demo (prompt = 6)
        options=_OPTIONS_1,
        expected=_forgotten_offset,
        mistakes=(
            Mistake(
                "a rotation at position 0 is no rotation, but the cached keys were rotated at their true "
                "positions: the query now measures its offset to key j as 0 − j instead of P − j.",
                option="none",
            ),
            Mistake(
                "the new query and the new key were both rotated at the same wrong position, so their offset "
                "is still 0, as it should be: that score is the one that stays right.",
                option="only its score with itself",
            ),
            Mistake(
                "look at the new token's score with its own key: both sit at the same wrong position, and a "
                "score sees only the offset between the two.",
                option="every score",
            ),
        ),
        hint="a score sees only the offset between the query's position and the key's: for each key, compare the "
        "offset the model uses with the true one.",
        explain="Only offsets enter a score; the two rotations of the new token agree with each other, not with the "
        "cache.",
    )
)

# ----- 09.2 · Gemma 3's local layers: pairs that never complete a turn in the window ------------------


def _gemma_window(p: dict) -> int:
    return int(rope_models()[p["model"]]["config"]["sliding_window"])


def _never_within(wavelengths: torch.Tensor, span: float) -> int:
    return int((wavelengths > span).sum())


register(
    Exercise(
        name="09.2",
        title="Gemma 3's local layers: pairs that never turn within the window",
        kind="integer",
        level=2,
        params={"model": "gemma3_4b"},
        expected=lambda p: _never_within(model_rope(p["model"], local=True).wavelengths, _gemma_window(p)),
        mistakes=(
            Mistake(
                "you get against the whole published context; a local layer only ever sees keys inside its "
                "sliding window, so no offset it meets is longer than the window.",
                value=lambda p: _never_within(
                    model_rope(p["model"], local=True).wavelengths,
                    model_rope(p["model"]).context_length,
                ),
            ),
            Mistake(
                "you get with the base of the global layers; the local layers rotate with their own base, "
                "rope_local_base_freq (model_rope(..., local=True)).",
                value=lambda p: _never_within(model_rope(p["model"]).unscaled_wavelengths, _gemma_window(p)),
            ),
            Mistake(
                "you get with the global layers' base and their linear scaling; the local layers have neither.",
                value=lambda p: _never_within(model_rope(p["model"]).wavelengths, _gemma_window(p)),
            ),
            Mistake(
                # Two ideas give this number for Gemma 3 4B, so the message names both: counting the pairs
                # that turn, and a head width of hidden_size / num_attention_heads (2560 / 8 = 320, not 256).
                "you get in two ways: by counting the pairs that do complete a turn (the question asks for the "
                "others), or with a head width of hidden_size / num_attention_heads, which for Gemma 3 is not its "
                "head_dim, the width RoPE sees (section 1).",
                value=lambda p: int((model_rope(p["model"], local=True).wavelengths <= _gemma_window(p)).sum()),
            ),
            Mistake(
                "you get with 1/θ_i as the wavelength; one turn is 2π radians, so it takes 2π/θ_i tokens.",
                value=lambda p: _never_within(
                    model_rope(p["model"], local=True).wavelengths / (2 * math.pi), _gemma_window(p)
                ),
            ),
        ),
        hint="a local layer's longest offset is its sliding window; pair i completes a turn every 2π/θ_i tokens, "
        "with the local layers' own speeds.",
    )
)

# ----- 09.3 · the temperature DeepSeek-V3's softmax scale amounts to ---------------------------------


def _deepseek_scaling(p: dict) -> dict:
    return rope_models()[p["model"]]["config"]["rope_scaling"]


def _score_factor(p: dict, log=math.log, square: bool = True, plus_one: bool = True) -> float:
    """``c = (0.1 m ln s + 1)²``: the factor on every score (transformers' DeepseekV3Attention,
    ``yarn_get_mscale(factor, mscale_all_dim)`` squared; DeepSeek's own ``inference/model.py`` reads
    ``mscale``, equal here), with the data file's ``s`` and ``mscale_all_dim``; the keywords build
    the recorded mistakes."""
    scaling = _deepseek_scaling(p)
    m = 0.1 * scaling["mscale_all_dim"] * log(scaling["factor"]) + (1.0 if plus_one else 0.0)
    return m * m if square else m


def _temperature(p: dict, **wrong) -> float:
    """``T = 1/c``: multiplying every score by ``c`` is a softmax at temperature ``1/c``."""
    return 1.0 / _score_factor(p, **wrong)


register(
    Exercise(
        name="09.3",
        title="the temperature DeepSeek-V3's softmax scale amounts to",
        kind="number",
        level=2,
        sig=3,
        params={"model": "deepseek_v3"},
        expected=_temperature,
        mistakes=(
            Mistake(
                "the factor on every score, c, comes to; a softmax of c · score is a softmax at temperature "
                "T = 1/c, so turn it over.",
                value=_score_factor,
            ),
            Mistake(
                "YaRN's factor itself comes to: what the query, or the key, would carry alone. Find the factor "
                "on the whole score q · k, then turn a factor on the scores into a temperature.",
                value=lambda p: _score_factor(p, square=False),
            ),
            Mistake(
                "you get from the factor of one side only; YaRN's factor sits on the query and on the key alike, "
                "so the score carries its square.",
                value=lambda p: _temperature(p, square=False),
            ),
            Mistake(
                "the cos and sin tables carry here (the two mscale settings are equal, so their ratio is 1); "
                "the softmax scale carries a factor of its own, and that one is not 1.",
                value=lambda p: model_rope(p["model"]).attention_factor,
            ),
            Mistake(
                "you get with log10 in place of ln; YaRN's factor uses the natural logarithm.",
                value=lambda p: _temperature(p, log=math.log10),
            ),
            Mistake(
                "you get with log2 in place of ln; YaRN's factor uses the natural logarithm.",
                value=lambda p: _temperature(p, log=math.log2),
            ),
            Mistake(
                "you get without the + 1 in YaRN's factor: at s = 1 the factor, and the temperature, must be 1.",
                value=lambda p: _temperature(p, plus_one=False),
            ),
        ),
        hint="YaRN's factor for a stretch s is 0.1 · mscale_all_dim · ln s + 1, as for the tables of a plain YaRN "
        "model; find how many times it lands on q · k, then turn a factor on the scores into a temperature.",
    )
)

# ----- 09.4 · Llama 3.1's "llama3" scaling from scratch -----------------------------------------------


def _llama3_reference(d, base, factor, low_freq_factor, high_freq_factor, original_max_len):
    """helpers' "llama3" speeds ``θ'_i``, float64 ``(d/2,)``."""
    scaling = {
        "type": "llama3",
        "factor": factor,
        "low_freq_factor": low_freq_factor,
        "high_freq_factor": high_freq_factor,
        "original_max_len": original_max_len,
    }
    return _rope_frequencies(d, base, scaling=scaling)[0]


def _plain(d, base):
    return base ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d)  # (d/2,)


def _every_pair_slowed(d, base, factor, low_freq_factor, high_freq_factor, original_max_len):
    return _plain(d, base) / factor


def _fast_pairs_slowed(d, base, factor, low_freq_factor, high_freq_factor, original_max_len):
    theta = _plain(d, base)
    wavelength = 2 * math.pi / theta
    out = torch.where(wavelength < original_max_len / high_freq_factor, theta / factor, theta)
    slow = wavelength > original_max_len / low_freq_factor
    return torch.where(slow, theta, out)


def _blend_reversed(d, base, factor, low_freq_factor, high_freq_factor, original_max_len):
    theta = _plain(d, base)
    wavelength = 2 * math.pi / theta
    smooth = (original_max_len / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)
    blended = smooth * theta / factor + (1 - smooth) * theta
    out = torch.where(wavelength > original_max_len / low_freq_factor, theta / factor, theta)
    middle = (wavelength >= original_max_len / high_freq_factor) & (wavelength <= original_max_len / low_freq_factor)
    return torch.where(middle, blended, out)


def _blend_in_wavelength(d, base, factor, low_freq_factor, high_freq_factor, original_max_len):
    theta = _plain(d, base)
    wavelength = 2 * math.pi / theta
    short, long = original_max_len / high_freq_factor, original_max_len / low_freq_factor
    smooth = (long - wavelength) / (long - short)  # 1 at the short end, 0 at the long end
    blended = (1 - smooth) * theta / factor + smooth * theta
    out = torch.where(wavelength > long, theta / factor, theta)
    return torch.where((wavelength >= short) & (wavelength <= long), blended, out)


def _llama3_inputs(rng) -> list[dict]:
    """Llama 3.1 8B's and Llama 4 Scout's published settings first (Llama 4: no blend band), then
    random widths, bases and factors."""
    cases = []
    for key in ("llama3_1_8b", "llama4_scout"):
        rope = model_rope(key)
        scaling = rope_models()[key]["config"]["rope_scaling"]
        cases.append(
            {
                "d": rope.head_dim,
                "base": rope.base,
                "factor": float(scaling["factor"]),
                "low_freq_factor": float(scaling["low_freq_factor"]),
                "high_freq_factor": float(scaling["high_freq_factor"]),
                "original_max_len": int(scaling["original_max_position_embeddings"]),
            }
        )
    for _ in range(6):
        low = float(rng.uniform(1.0, 2.0))
        cases.append(
            {
                "d": int(rng.choice([8, 16, 64, 128])),
                "base": float(10 ** rng.uniform(3.0, 6.5)),
                "factor": float(rng.uniform(2.0, 32.0)),
                "low_freq_factor": low,
                "high_freq_factor": low + float(rng.uniform(0.5, 6.0)),
                "original_max_len": int(rng.choice([1024, 2048, 4096, 8192, 16384])),
            }
        )
    return cases


_FORBID_4 = (
    "helpers.rope_frequencies",
    "helpers.rope.rope_frequencies",
    "helpers.rope_from_config",
    "helpers.rope.rope_from_config",
    "helpers.rope_cos_sin",
    "helpers.rope.rope_cos_sin",
    "helpers.model_rope",
    "helpers.model_catalog.model_rope",
    "helpers.exercises._nb09._llama3_reference",
    "helpers.exercises._nb09._every_pair_slowed",
    "helpers.exercises._nb09._fast_pairs_slowed",
    "helpers.exercises._nb09._blend_reversed",
    "helpers.exercises._nb09._blend_in_wavelength",
)

register(
    Exercise(
        name="09.4",
        title="Llama 3.1's llama3 scaling, from scratch",
        kind="function",
        level=3,
        expected=lambda p: _llama3_reference,
        inputs=_llama3_inputs,
        forbid=_FORBID_4,
        rtol=1e-9,
        atol=0.0,
        seed=9,
        mistakes=(
            Mistake(
                "dividing every speed by the factor gives (Position Interpolation); llama3 keeps the fast pairs.",
                function=_every_pair_slowed,
            ),
            Mistake(
                "slowing the fast pairs and keeping the slow ones gives: it is the other way round.",
                function=_fast_pairs_slowed,
            ),
            Mistake(
                "a blend that runs the wrong way gives: the pairs near the short end of the band should stay "
                "close to their own speed, those near the long end close to θ/s.",
                function=_blend_reversed,
            ),
            Mistake(
                "a blend linear in the wavelength gives; Meta's code blends linearly in the number of turns L/λ_i.",
                function=_blend_in_wavelength,
            ),
        ),
        hint="sort the pairs by wavelength λ_i = 2π/θ_i: below L/high_freq_factor keep θ_i, above "
        "L/low_freq_factor use θ_i/factor, and in between blend with weight (L/λ_i − low)/(high − low).",
    )
)
