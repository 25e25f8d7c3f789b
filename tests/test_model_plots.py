"""Notebook 09's pictures and explorer: the RoPE of real models, drawn from helpers/data/rope_models.json.

Each drawing is built or updated, then its artists' data are compared with values computed here
from the published configs alone (closed forms for plain RoPE, a slow transcription of Meta's
``apply_scaling`` for "llama3"), not with helpers' own RoPE code.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import helpers
from helpers.plots import attention_span, model_variants, variant_rope

MODELS = helpers.rope_models()


def plain_speeds(config: dict) -> np.ndarray:
    """θ_i = b^(-2i/r) of a model without scaling, from its config keys alone."""
    d = config.get("head_dim", config["hidden_size"] // config["num_attention_heads"])
    r = int(d * config.get("rotary_pct", 1.0))
    base = config.get("rope_theta", config.get("rotary_emb_base"))
    return np.array([base ** (-2 * i / r) for i in range(r // 2)])


def meta_apply_scaling(config: dict) -> np.ndarray:
    """Llama 3.1's speeds, one pair at a time, as Meta's apply_scaling writes them."""
    scaling = config["rope_scaling"]
    s, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    length = scaling["original_max_position_embeddings"]
    out = []
    for theta in plain_speeds({k: v for k, v in config.items() if k != "rope_scaling"}):
        wavelength = 2 * math.pi / theta
        if wavelength < length / high:
            out.append(theta)
        elif wavelength > length / low:
            out.append(theta / s)
        else:
            smooth = (length / wavelength - low) / (high - low)
            out.append((1 - smooth) * theta / s + smooth * theta)
    return np.array(out)


PLAIN = [key for key, entry in MODELS.items() if "rope_scaling" not in entry["config"]]


def test_the_variants_follow_the_data_file():
    variants = [v for _, v in model_variants()]
    assert [v for v in variants if "/" not in v] == list(MODELS)
    local = {v.split("/")[0] for v in variants if v.endswith("/local")}
    recommended = {v.split("/")[0] for v in variants if v.endswith("/recommended")}
    assert local == {k for k, e in MODELS.items() if "rope_local_base_freq" in e["config"]} == {"gemma3_4b"}
    assert recommended == {k for k, e in MODELS.items() if "recommended_rope_scaling" in e} == {"qwen2_5_7b_instruct"}
    labels = [label for label, _ in model_variants()]
    assert len(set(labels)) == len(labels)


def test_variant_rope_refuses_bad_names():
    with pytest.raises(ValueError, match="after '/'"):
        variant_rope("gemma3_4b/locale")
    with pytest.raises(TypeError, match="variant"):
        variant_rope(3)
    with pytest.raises(ValueError, match="did you mean 'llama3_8b'"):
        variant_rope("llama3_8")
    with pytest.raises(ValueError, match="local"):
        variant_rope("llama2_7b/local")


def test_attention_span_is_the_window_or_the_context():
    mistral = MODELS["mistral_7b_v0_1"]["config"]
    gemma = MODELS["gemma3_4b"]["config"]
    qwen = MODELS["qwen2_5_7b_instruct"]["recommended_rope_scaling"]
    assert attention_span("mistral_7b_v0_1") == (mistral["sliding_window"], "window")
    assert attention_span("gemma3_4b/local") == (gemma["sliding_window"], "window")
    assert attention_span("gemma3_4b") == (gemma["max_position_embeddings"], "context")
    assert attention_span("llama2_7b") == (MODELS["llama2_7b"]["config"]["max_position_embeddings"], "context")
    recommended = qwen["factor"] * qwen["original_max_position_embeddings"]
    assert attention_span("qwen2_5_7b_instruct/recommended") == (recommended, "context")


def test_attention_span_of_chunked_layers_is_the_chunk():
    """Bug: Llama 4 Scout's RoPE layers given the 10M context, when they attend only inside chunks."""
    scout = MODELS["llama4_scout"]["config"]
    assert attention_span("llama4_scout") == (scout["attention_chunk_size"], "chunk") == (8192, "chunk")
    assert scout["attention_chunk_size"] < scout["max_position_embeddings"]
    # a chunk as long as the context changes nothing
    entry = dict(MODELS["llama4_scout"], config=dict(scout, attention_chunk_size=scout["max_position_embeddings"]))
    assert attention_span("llama4_scout", models={"llama4_scout": entry}) == (
        scout["max_position_embeddings"],
        "context",
    )


def test_turns_of_the_plain_models_follow_the_closed_form():
    drawing = helpers.plots.rope_model_turns()
    assert list(drawing.artists["lines"]) == list(MODELS)  # shipped settings only
    for key in PLAIN:
        config = MODELS[key]["config"]
        theta = plain_speeds(config)
        span = config.get("sliding_window", config["max_position_embeddings"])
        x, y = drawing.artists["lines"][key].get_data()
        np.testing.assert_allclose(y, span * theta / (2 * math.pi), rtol=1e-12)
        np.testing.assert_allclose(x, np.arange(len(theta)) / len(theta))
        assert drawing.artists["counts"][key] == sum(2 * math.pi / t <= span for t in theta)


def test_equal_curves_are_named_and_drawn_apart():
    """Bugs: Llama 2's curve hidden under Mistral's identical one, Code Llama's under Gemma 3's global layers
    (the same base, and 131,072 / 8 = 16,384 tokens: a curve of 64 points on one of 128), Llama 3's under Llama 4
    Scout's for the pairs Llama 4 keeps, with no word in the legend."""
    drawing = helpers.plots.rope_model_turns()
    lines = drawing.artists["lines"]
    labels = {key: line.get_label() for key, line in lines.items()}
    assert drawing.artists["same"] == {"mistral_7b_v0_1": "llama2_7b", "code_llama_7b": "gemma3_4b"}
    assert "same curve as Llama 2 7B" in labels["mistral_7b_v0_1"]
    assert "same curve as Gemma 3 4B · global layers" in labels["code_llama_7b"]
    for key in ("mistral_7b_v0_1", "code_llama_7b"):  # markers only, over the line they lie on
        assert lines[key].get_linestyle() == "None" and lines[key].get_marker() not in ("None", None, "")
    assert lines["mistral_7b_v0_1"].get_marker() != lines["code_llama_7b"].get_marker()
    assert sum("same curve" in label for label in labels.values()) == 2
    shared = drawing.artists["shared"]
    assert shared == {"llama4_scout": ("llama3_8b", 35), "deepseek_v3": ("llama2_7b", 9)}
    for key, (other, _) in shared.items():  # dashed over a solid line, so that both colours show
        assert lines[key].get_linestyle() == "--" and lines[other].get_linestyle() == "-", key
        assert f"dashed: on {labels[other].split(':')[0]}" in labels[key]
    solid = [key for key, line in lines.items() if line.get_linestyle() == "-"]
    assert len(solid) == len(lines) - 4
    assert "(chunk)" in labels["llama4_scout"] and "(window)" in labels["mistral_7b_v0_1"]


def test_curve_overlaps_finds_points_on_a_wider_curve():
    """Bug: a curve with half the points of another, lying on every other point of it, not found (the check
    compared only curves of the same length)."""
    wide = np.array([8.0, 4.0, 2.0, 1.0])
    narrow = wide[::2].copy()  # its points at x = 0, 1/2: those of wide at 0 and 2/4
    same, shared = helpers.plots.curve_overlaps({"narrow": narrow, "wide": wide, "other": wide * 3})
    assert same == {"narrow": "wide"} and shared == {}
    bent = np.array([8.0, 4.0, 0.5, 0.25])  # on wide for its first two points only
    same, shared = helpers.plots.curve_overlaps({"wide": wide, "bent": bent})
    assert same == {} and shared == {"bent": ("wide", 2)}


def test_turns_of_llama_3_1_use_its_scaled_speeds():
    drawing = helpers.plots.rope_model_turns(["llama3_1_8b"])
    config = MODELS["llama3_1_8b"]["config"]
    _, y = drawing.artists["lines"]["llama3_1_8b"].get_data()
    np.testing.assert_allclose(y, config["max_position_embeddings"] * meta_apply_scaling(config) / (2 * math.pi))


def test_scaling_panels_show_each_rule():
    variants = ["llama3_1_8b", "llama4_scout", "gemma3_4b", "qwen2_5_7b_instruct/recommended"]
    ratios = helpers.plots.rope_model_scaling(variants).artists["ratios"]
    for key in ("llama3_1_8b", "llama4_scout"):
        config = MODELS[key]["config"]
        np.testing.assert_allclose(ratios[key][""], meta_apply_scaling(config) / plain_speeds(config), rtol=1e-12)
    gemma = MODELS["gemma3_4b"]["config"]["rope_scaling"]["factor"]
    np.testing.assert_allclose(ratios["gemma3_4b"][""], 1 / gemma, rtol=1e-12)
    qwen = ratios["qwen2_5_7b_instruct/recommended"][""]
    recommended = MODELS["qwen2_5_7b_instruct"]["recommended_rope_scaling"]
    assert qwen[0] == 1.0 and qwen[-1] == pytest.approx(1 / recommended["factor"], rel=1e-12)
    assert np.all(np.diff(qwen) <= 1e-15)  # a ramp from 1 down to 1/s, never up
    with pytest.raises(ValueError, match="at least one"):
        helpers.plots.rope_model_scaling([])


def test_slowest_angles_from_the_configs():
    angles = helpers.plots.rope_slowest_angles().artists["angles"]
    for key in PLAIN:
        config = MODELS[key]["config"]
        span = config.get("sliding_window", config["max_position_embeddings"])
        assert angles[key] == pytest.approx(math.degrees(span * plain_speeds(config)[-1]), rel=1e-12)
    scout = MODELS["llama4_scout"]["config"]
    slowest = meta_apply_scaling(scout)[-1]
    assert angles["llama4_scout"] == pytest.approx(math.degrees(scout["attention_chunk_size"] * slowest), rel=1e-12)


def test_slowest_angles_mark_the_threshold():
    ax = helpers.plots.rope_slowest_angles(["llama2_7b"], threshold=3).fig.axes[0]
    assert sorted(line.get_xdata()[0] for line in ax.lines) == [3, 360]
    for bad in (0, 400, "3", True):
        with pytest.raises(ValueError, match="threshold"):
            helpers.plots.rope_slowest_angles(["llama2_7b"], threshold=bad)


def split(drawing):
    """Pair indices drawn as completing a turn, and as never completing one (x is i / (r/2))."""
    pairs = len(drawing.artists["unscaled"].get_xdata())
    wraps, never = drawing.artists["wraps"].get_xdata(), drawing.artists["never"].get_xdata()
    return [round(x * pairs) for x in wraps], [round(x * pairs) for x in never]


def test_pairs_drawing_splits_at_the_context():
    drawing = helpers.plots.rope_model_pairs(model="llama2_7b")
    config = MODELS["llama2_7b"]["config"]
    theta = plain_speeds(config)
    assert drawing.params == {"model": "llama2_7b", "context": config["max_position_embeddings"]}
    for context in (256, 4096, 65536, 2**24):
        drawing.update(context=context)
        wraps, never = split(drawing)
        assert wraps == [i for i, t in enumerate(theta) if 2 * math.pi / t <= context]
        assert never == [i for i, t in enumerate(theta) if 2 * math.pi / t > context]
        assert list(drawing.artists["context"].get_ydata()) == [context, context]
        assert f"{len(wraps)} of {len(theta)} pairs complete a turn" in drawing.artists["info"].get_text()
    np.testing.assert_allclose(drawing.artists["ratio"].get_ydata(), 1.0)
    assert not drawing.artists["original"].get_visible()


def test_pairs_drawing_follows_the_model_without_a_new_layout():
    drawing = helpers.plots.rope_model_pairs(model="llama3_1_8b", context=8192)
    config = MODELS["llama3_1_8b"]["config"]
    np.testing.assert_allclose(drawing.artists["ratio"].get_ydata(), meta_apply_scaling(config) / plain_speeds(config))
    original = config["rope_scaling"]["original_max_position_embeddings"]
    assert drawing.artists["original"].get_visible()
    assert list(drawing.artists["original"].get_ydata()) == [original, original]
    _, y_unscaled = drawing.artists["unscaled"].get_data()
    np.testing.assert_allclose(y_unscaled, 2 * math.pi / plain_speeds(config), rtol=1e-12)
    # pairs placed at i / (r/2): 64 pairs or GPT-NeoX's 12, the axes stay, no update asks for a new layout
    assert drawing._update(model="gpt_neox_20b", context=8192) is None
    np.testing.assert_allclose(drawing.artists["unscaled"].get_xdata(), np.arange(12) / 12)
    drawing.update(model="gemma3_4b/local", context=1024)
    window = MODELS["gemma3_4b"]["config"]["sliding_window"]
    assert list(drawing.artists["published"].get_ydata()) == [window, window]
    assert (
        f"Gemma 3 4B · local layers: {MODELS['gemma3_4b']['config']['head_dim'] // 2} pairs"
        in drawing.artists["info"].get_text()
    )
    assert drawing.render().shape[2] == 4


def test_pairs_drawing_checks_its_input():
    drawing = helpers.plots.rope_model_pairs()
    with pytest.raises(ValueError, match="context"):
        drawing.update(context=0)
    with pytest.raises(ValueError, match="context"):
        drawing.update(context=2.5)
    with pytest.raises(TypeError, match="no parameter"):
        drawing.update(base=10.0)
    with pytest.raises(ValueError, match="did you mean"):
        helpers.plots.rope_model_pairs(model="llama_3_1_8b")


def test_explorer_moves_the_drawing():
    explorer = helpers.widgets.rope_models_explorer()
    assert list(explorer.controls["context"].options) == [
        (helpers.plots.token_count(c), c) for c in helpers.plots.CONTEXT_CHOICES
    ]
    assert explorer.drawing.params["context"] == MODELS["llama3_1_8b"]["config"]["max_position_embeddings"]  # 2^17
    explorer.controls["model"].value = "gpt_neox_20b"
    explorer.controls["context"].value = 1024
    assert explorer.drawing.params == {"model": "gpt_neox_20b", "context": 1024}
    theta = plain_speeds(MODELS["gpt_neox_20b"]["config"])
    assert split(explorer.drawing)[0] == [i for i, t in enumerate(theta) if 2 * math.pi / t <= 1024]
    assert explorer.last_update_s is not None


def test_explorer_starts_at_the_nearest_power_of_two_and_checks_its_input():
    deepseek = MODELS["deepseek_v3"]["config"]["max_position_embeddings"]  # 163,840: between 2^17 and 2^18
    start = helpers.widgets.rope_models_explorer(model="deepseek_v3").drawing.params["context"]
    assert start == min(helpers.plots.CONTEXT_CHOICES, key=lambda c: abs(math.log2(c / deepseek)))
    with pytest.raises(ValueError, match="model must be one of"):
        helpers.widgets.rope_models_explorer(model="gpt5")
    with pytest.raises(ValueError, match="power of two"):
        helpers.widgets.rope_models_explorer(context=5000)


@pytest.mark.parametrize(
    "n, shown", [(4096, "4k"), (131072, "128k"), (10485760, "10M"), (163840, "160k"), (100, "100")]
)
def test_token_count(n, shown):
    assert helpers.plots.token_count(n) == shown
