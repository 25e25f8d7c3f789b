"""Tests of the train-short / test-long experiment (helpers.experiment) and its pictures."""

from __future__ import annotations

import json
import math
import pathlib

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import helpers
from helpers import experiment as ex

DATA = pathlib.Path(__file__).resolve().parent.parent / "data"


def tiny_config(**changes) -> ex.ExperimentConfig:
    return ex.ExperimentConfig(**{**ex.TINY, **changes})


# ----------------------------------------------------------------------------------------------
# The tasks, against slow loops


@given(st.integers(1, 6), st.integers(1, 40), st.integers(0, 2**31 - 1))
@settings(max_examples=30, deadline=None)
def test_lag_batch_copies_from_lag_places_back(lag, extra, seed):
    length = lag + extra
    inputs, targets, mask = ex.lag_batch(3, length, vocab=7, lag=lag, generator=torch.Generator().manual_seed(seed))
    assert inputs.shape == targets.shape == mask.shape == (3, length)
    for b in range(3):
        for t in range(length):
            assert bool(mask[b, t]) == (t >= lag)
            if t >= lag:
                assert targets[b, t] == inputs[b, t - lag]


@given(st.integers(1, 5), st.integers(0, 4), st.integers(0, 2**31 - 1))
@settings(max_examples=30, deadline=None)
def test_pattern_batch_repeats_a_block_of_distinct_tokens(min_period, spread, seed):
    max_period = min_period + spread
    length = 3 * max_period + 1
    inputs, targets, mask = ex.pattern_batch(
        4, length, vocab=12, min_period=min_period, max_period=max_period, generator=torch.Generator().manual_seed(seed)
    )
    for b in range(4):
        sequence = inputs[b].tolist() + [int(targets[b, -1])]
        assert targets[b, :-1].tolist() == sequence[1:-1]  # targets are the next tokens
        period = next(
            n for n in range(1, length + 1) if all(sequence[t] == sequence[t % n] for t in range(len(sequence)))
        )
        assert min_period <= period <= max_period
        assert len(set(sequence[:period])) == period  # the block's tokens are distinct
        for t in range(length):
            # scored exactly where the current token was seen before (its successor is then known)
            assert bool(mask[b, t]) == (sequence[t] in sequence[:t])


def test_bad_task_arguments_name_the_argument():
    with pytest.raises(ValueError, match="lag"):
        ex.lag_batch(2, 4, vocab=5, lag=4)
    with pytest.raises(ValueError, match="max_period"):
        ex.pattern_batch(2, 40, vocab=5, min_period=2, max_period=6)
    with pytest.raises(ValueError, match="max_period"):
        ex.pattern_batch(2, 6, vocab=10, min_period=2, max_period=6)
    with pytest.raises(TypeError, match="batch_size"):
        ex.lag_batch(2.0, 4, vocab=5, lag=1)
    with pytest.raises(ValueError, match="task"):
        ex.task_batch("sort", tiny_config(), 2, 8)
    with pytest.raises(ValueError, match="scheme"):
        ex.TinyTransformer("t5", vocab=8)
    with pytest.raises(ValueError, match="n_heads"):
        ex.TinyTransformer("rope", vocab=8, d_model=12, n_heads=4)


# ----------------------------------------------------------------------------------------------
# The model


def small_model(scheme, **sizes):
    torch.manual_seed(0)
    return ex.TinyTransformer(scheme, vocab=11, d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=24, **sizes).eval()


@pytest.mark.parametrize("scheme", ex.SCHEMES)
def test_model_is_causal_and_fused_path_matches_explicit_softmax(scheme):
    model = small_model(scheme)
    tokens = torch.randint(0, 11, (3, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        fast = model(tokens)  # (B, T, V), fused attention
        slow, weights = model(tokens, need_weights=True)
        changed = tokens.clone()
        changed[:, 12:] = (changed[:, 12:] + 1) % 11
        after = model(changed)
    assert fast.shape == (3, 20, 11)
    torch.testing.assert_close(fast, slow, rtol=1e-4, atol=1e-5)
    assert len(weights) == 2 and weights[0].shape == (3, 2, 20, 20)
    torch.testing.assert_close(weights[1].sum(-1), torch.ones(3, 2, 20))
    assert float(weights[0].triu(1).abs().max()) == 0.0  # no query sees a later key
    torch.testing.assert_close(after[:, :12], fast[:, :12])  # the past does not see the future
    assert not torch.allclose(after[:, 12:], fast[:, 12:])


def test_position_schemes_are_the_helpers_functions():
    # With equal tokens everywhere, NoPE's first layer cannot tell positions apart: every query's
    # attention output is the same; the other schemes differ by position as their helper says.
    tokens = torch.full((1, 10), 3)
    with torch.no_grad():
        nope = small_model("none")(tokens)
        sinusoidal = small_model("sinusoidal")
    torch.testing.assert_close(nope[0, 0].expand(10, -1), nope[0])
    x = sinusoidal.embed(tokens) * math.sqrt(16)
    expected = x + helpers.sinusoidal_pe(10, 16)
    captured = {}
    hook = sinusoidal.blocks[0].register_forward_pre_hook(lambda module, args: captured.setdefault("x", args[0]))
    with torch.no_grad():
        sinusoidal(tokens)
    hook.remove()
    torch.testing.assert_close(captured["x"], expected)
    # ALiBi's first-layer weights with identical tokens: the content scores are equal across keys,
    # so the weights are softmax of the ALiBi bias row, exactly.
    alibi = small_model("alibi")
    with torch.no_grad():
        _, weights = alibi(tokens, need_weights=True)
    bias = helpers.alibi_bias(2, 10)  # (H, T, T)
    torch.testing.assert_close(weights[0][0], torch.softmax(bias, dim=-1), rtol=1e-5, atol=1e-6)


def test_learned_table_refuses_longer_sequences():
    with pytest.raises(ValueError, match="learned table"):
        small_model("learned")(torch.zeros((1, 25), dtype=torch.int64))
    with pytest.raises(TypeError, match="tokens"):
        small_model("rope")(torch.zeros((1, 5)))


# ----------------------------------------------------------------------------------------------
# End to end, on a tiny configuration


@pytest.fixture(scope="module")
def tiny_results():
    kept = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: extra threads only wait on each other on a busy machine
    try:
        results = ex.run_experiment(tiny_config(), device="cpu", progress=False, keep_models=kept)
    finally:
        torch.set_num_threads(threads)
    return results, kept


def test_every_scheme_trains_and_training_lowers_the_loss(tiny_results):
    results, _ = tiny_results
    config = tiny_config()
    assert len(results["runs"]) == len(config.tasks) * len(config.schemes) * len(config.seeds)
    for run in results["runs"]:
        assert run["final_loss"] < run["initial_loss"] - 0.1, run["task"] + "/" + run["scheme"]
        for value in run["eval"].values():
            assert 0.0 <= value["accuracy"] <= 1.0 and math.isfinite(value["loss"])


def check_schema(results, *, min_seeds=1):
    config = ex.ExperimentConfig.from_dict(results["config"])
    assert results["schema_version"] == ex.SCHEMA_VERSION
    assert results["tasks"] == list(config.tasks) and set(results["task_descriptions"]) == set(config.tasks)
    assert results["schemes"] == list(config.schemes)
    assert results["seeds"] == list(config.seeds) and len(config.seeds) >= min_seeds
    assert results["eval_lengths"] == [config.train_length * m for m in config.eval_multiples]
    assert results["eval_lengths"][0] == config.train_length and config.max_len == max(results["eval_lengths"])
    assert {"python", "torch", "numpy", "device", "platform", "torch_threads"} <= set(results["environment"])
    assert results["wall_seconds"] > 0
    keys = {
        "loss_mean",
        "loss_std",
        "loss_min",
        "loss_max",
        "accuracy_mean",
        "accuracy_std",
        "accuracy_min",
        "accuracy_max",
    }
    for task in config.tasks:
        for scheme in config.schemes:
            runs = [r for r in results["runs"] if r["task"] == task and r["scheme"] == scheme]
            assert sorted(r["seed"] for r in runs) == sorted(config.seeds)
            for length in results["eval_lengths"]:
                row = results["summary"][task][scheme][str(length)]
                assert set(row) == keys
                values = [r["eval"][str(length)]["accuracy"] for r in runs]
                assert row["accuracy_mean"] == pytest.approx(np.mean(values))
                assert row["accuracy_min"] <= row["accuracy_mean"] <= row["accuracy_max"]


def test_results_schema_and_json_round_trip(tiny_results, tmp_path):
    results, _ = tiny_results
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    check_schema(ex.load_results(path))
    path.write_text(json.dumps({**results, "schema_version": 99}))
    with pytest.raises(ValueError, match="schema_version"):
        ex.load_results(path)


def test_saved_models_come_back(tiny_results, tmp_path):
    results, kept = tiny_results
    config = ex.ExperimentConfig.from_dict(results["config"])
    chosen = {key: kept[key] for key in ex.SAVED_MODELS}
    ex.save_models(chosen, config, tmp_path / "models.pt")
    models, loaded = ex.load_models(tmp_path / "models.pt")
    assert loaded == config and set(models) == set(chosen)
    tokens, _, _ = ex.task_batch(
        "pattern", config, 2, config.train_length * 2, generator=torch.Generator().manual_seed(0)
    )
    with torch.no_grad():
        for key, model in models.items():
            torch.testing.assert_close(model(tokens), chosen[key](tokens), rtol=0.05, atol=0.05)  # float16 storage


def test_evaluation_is_deterministic(tiny_results):
    _, kept = tiny_results
    config = tiny_config()
    model = kept[("lag", "rope")]
    assert ex.evaluate_model(model, "lag", config) == ex.evaluate_model(model, "lag", config)


def test_committed_results_file_has_the_schema():
    path = DATA / "extrapolation.json"
    if not path.exists():
        pytest.skip("data/extrapolation.json not generated yet")
    results = ex.load_results(path)
    check_schema(results, min_seeds=3)
    assert set(results["schemes"]) == set(ex.SCHEMES) and results["eval_lengths"][-1] == 8 * results["eval_lengths"][0]


# ----------------------------------------------------------------------------------------------
# Pictures


def test_panorama_draws_the_summary_and_its_spread(tiny_results):
    results, _ = tiny_results
    drawing = helpers.plots.extrapolation_panorama(results)
    line = drawing.artists["lines"][("accuracy", "rope")]
    expected = [results["summary"]["lag"]["rope"][str(t)]["accuracy_mean"] for t in results["eval_lengths"]]
    np.testing.assert_allclose(line.get_ydata(), expected)
    np.testing.assert_allclose(line.get_xdata(), results["eval_lengths"])
    drawing.update(task="pattern", band="std")
    line = drawing.artists["lines"][("accuracy", "rope")]
    expected = [results["summary"]["pattern"]["rope"][str(t)]["accuracy_mean"] for t in results["eval_lengths"]]
    np.testing.assert_allclose(line.get_ydata(), expected)
    assert "standard deviation" in drawing.artists["note"].get_text()
    assert drawing.png()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="band"):
        drawing.update(band="iqr")


def test_attention_maps_follow_the_length(tiny_results):
    results, kept = tiny_results
    config = ex.ExperimentConfig.from_dict(results["config"])
    tokens, _, _ = ex.task_batch(
        "pattern", config, 1, 4 * config.train_length, generator=torch.Generator().manual_seed(0)
    )
    models = {scheme: kept[("pattern", scheme)] for scheme in ("alibi", "rope")}
    drawing = helpers.plots.attention_maps(
        models,
        tokens[0],
        {"alibi": (1, 0), "rope": (1, 1)},
        length=config.train_length,
        train_length=config.train_length,
        window=8,
    )
    image = drawing.artists["images"]["rope"]
    assert image.get_array().shape == (8, config.train_length)
    drawing.update(length=3 * config.train_length)
    image = drawing.artists["images"]["rope"]
    assert image.get_array().shape == (8, 3 * config.train_length)
    with torch.no_grad():
        _, weights = models["rope"](tokens[:, : 3 * config.train_length], need_weights=True)
    np.testing.assert_allclose(image.get_array(), weights[1][0, 1, -8:].numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(image.get_array().sum(axis=1), 1.0, rtol=1e-5)
    with pytest.raises(ValueError, match="length"):
        drawing.update(length=10 * config.train_length)


def test_answer_weights_match_a_query_by_query_count_on_the_cached_models():
    models, config = ex.load_models()
    tokens = ex.pattern_probe(config, period=5, seed=1)
    assert tokens.shape == (4 * config.train_length + 1,) and tokens.dtype == torch.int64
    assert torch.equal(tokens[5:10], tokens[:5]) and len(set(tokens[:5].tolist())) == 5  # a block repeated
    model = models[("pattern", "rope")]
    length, period = 24, 5
    got = ex.answer_weights(model, tokens, length, period)
    with torch.no_grad():
        _, weights = model(tokens[None, :length], need_weights=True)
    expected = torch.zeros(len(weights), weights[0].shape[1], dtype=torch.float64)
    for layer, w in enumerate(weights):
        for t in range(period, length):
            keys = [j for j in range(t + 1) if tokens[j] == tokens[t + 1]]
            expected[layer] += w[0, :, t, keys].double().sum(dim=-1)
    expected /= length - period
    assert torch.allclose(got.double(), expected, atol=1e-6)
    heads = ex.induction_heads({"rope": model}, tokens, length, period)
    layer, head = heads["rope"]
    assert got[layer, head] == got.max()


def test_attention_maps_explorer_shows_the_induction_heads_and_records_its_call():
    explorer = helpers.widgets.attention_maps_explorer()
    models, config = ex.load_models()
    maps = {scheme: models[("pattern", scheme)] for scheme in ("alibi", "rope")}
    tokens = ex.pattern_probe(config)
    heads = ex.induction_heads(maps, tokens, config.train_length, 7)
    chosen = helpers.widgets.attention_maps_explorer(heads={s: list(h) for s, h in heads.items()}, length=48)
    assert chosen.spec["arguments"]["length"] == 48 and chosen.controls["length"].value == 48
    assert np.array_equal(
        explorer.drawing.render(), helpers.widgets.attention_maps_explorer(heads=heads).drawing.render()
    )
    with pytest.raises(ValueError, match="heads must name the schemes"):
        helpers.widgets.attention_maps_explorer(heads={"rope": (0, 0)})
