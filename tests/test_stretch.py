"""The context-stretching experiment (``helpers.experiment.stretch``): its task, its RoPE settings, the hook
that puts them into the model, fine-tuning, scoring, and the cached results."""

from __future__ import annotations

import pytest
import torch
from _support import raises_naming

import helpers
from helpers import stretch
from helpers.experiment.model import TinyEnsemble, TinyTransformer
from helpers.experiment.tasks import PASSKEY_FIRST_KEY, PASSKEY_MARK, PASSKEY_QUERY, passkey_batch

L = 32


def test_a_passkey_is_found_only_by_its_place_after_the_mark():
    gen = torch.Generator().manual_seed(0)
    inputs, targets, mask = passkey_batch(4000, 40, vocab=32, keys=16, generator=gen)
    rows = torch.arange(4000)
    marks = inputs == PASSKEY_MARK
    assert (marks.sum(dim=1) == 1).all() and (inputs[:, :-1] != PASSKEY_QUERY).all()
    assert (inputs[:, -1] == PASSKEY_QUERY).all()
    where = marks.double().argmax(dim=1)  # (B,)
    key = inputs[rows, where + 1]
    assert ((key >= PASSKEY_FIRST_KEY) & (key < PASSKEY_FIRST_KEY + 16)).all()
    assert torch.equal(targets[:, -1], key) and mask[:, -1].all() and mask.sum() == 4000
    distance = 40 - 2 - where
    assert distance.min() == 1 and distance.max() == 38  # every distance from 1 to T - 2
    # The filler holds key ids too: a key is not given away by its id (a task whose filler avoided
    # the keys was solved with no position at all, by every scaling, at every length).
    filler = inputs.clone()
    filler[rows, where + 1] = -1
    filler[marks] = -1
    filler[:, -1] = -1
    in_key_range = (filler >= PASSKEY_FIRST_KEY) & (filler < PASSKEY_FIRST_KEY + 16)
    assert in_key_range.float().mean() > 0.4  # 16 of the 30 filler ids


def test_bad_passkey_settings_are_named():
    raises_naming(ValueError, lambda: passkey_batch(2, 2, vocab=32, keys=16), "length", "2")
    raises_naming(ValueError, lambda: passkey_batch(2, 8, vocab=32, keys=31), "keys", "31", "30")
    raises_naming(TypeError, lambda: passkey_batch(2, 8, vocab=32, keys=4.0), "keys", "4.0")


@pytest.mark.parametrize("method", stretch.METHODS)
def test_each_method_is_the_scaling_of_rope_cos_sin(method):
    scaling = stretch.method_scaling(method, 4, L, seq_len=100)
    if method == "none":
        assert scaling is None
        return
    assert scaling["type"] == method and scaling["factor"] == 4.0
    cos, sin = helpers.rope_cos_sin(100, 16, 10000.0, scaling=scaling)
    plain_cos, _ = helpers.rope_cos_sin(100, 16, 10000.0)
    assert not torch.equal(cos, plain_cos)  # every method changes the tables at 100 > L positions
    if method == "linear":  # position interpolation: row m is plain RoPE's row m / 4
        cos_at, _ = helpers.rope_cos_sin(torch.arange(100, dtype=torch.float64) / 4, 16, 10000.0)
        torch.testing.assert_close(cos, cos_at)


def test_an_unknown_method_is_named():
    raises_naming(ValueError, lambda: stretch.method_scaling("ntk-by-parts", 4, L), "method", "ntk-by-parts")


def _models(seeds=(0, 1)):
    models = []
    for seed in seeds:
        torch.manual_seed(seed)
        models.append(TinyTransformer("rope", vocab=32, max_len=128))
    return models


@pytest.mark.parametrize("method", ["linear", "dynamic", "yarn"])
def test_the_model_reads_its_scaling_alone_and_in_an_ensemble(method):
    # The scaling must reach the RoPE tables of both forward passes (a hook in one of them only
    # would fine-tune one setting and score another); "dynamic" changes nothing up to L.
    models = _models()
    tokens = torch.randint(0, 32, (2, 3, 96), generator=torch.Generator().manual_seed(1))  # (E, B, T)
    ensemble = TinyEnsemble(models)
    with torch.no_grad():
        plain = ensemble(tokens)
        scaling = stretch.method_scaling(method, 4, L)
        ensemble.rope_scaling = scaling
        scaled = ensemble(tokens)
        for e, model in enumerate(models):
            model.rope_scaling = scaling
            torch.testing.assert_close(model(tokens[e]), scaled[e], rtol=1e-5, atol=1e-5)
        assert not torch.allclose(plain, scaled)
        short = tokens[..., :L]
        ensemble.rope_scaling = None
        unscaled_short = ensemble(short)
        ensemble.rope_scaling = scaling
        same = torch.equal(ensemble(short), unscaled_short)
    assert same == (method == "dynamic")


def test_a_member_taken_out_keeps_the_scaling():
    ensemble = TinyEnsemble(_models())
    ensemble.rope_scaling = stretch.method_scaling("yarn", 4, L)
    assert ensemble.member(1).rope_scaling == ensemble.rope_scaling
    assert ensemble.select([1]).rope_scaling == ensemble.rope_scaling


def test_the_default_model_has_no_scaling_and_its_state_carries_none():
    model = _models((0,))[0]
    assert model.rope_scaling is None and TinyEnsemble([model]).rope_scaling is None
    model.rope_scaling = stretch.method_scaling("linear", 4, L)
    assert set(model.state_dict()) == set(_models((0,))[0].state_dict())


def _quick_config(**changes):
    values = {**stretch.QUICK, "tasks": ("lag",), "methods": ("none", "linear")}
    values.update(changes)
    return stretch.StretchConfig(**values)


def test_fine_tuning_scores_the_untouched_model_at_budget_0_and_reads_s_times_longer_batches(monkeypatch):
    config = _quick_config(budgets=(0, 2))
    models = _models()
    seen, shapes = {}, []
    original = stretch.stretch_batch

    def spy(task, cfg, batch_size, length, **kwargs):
        shapes.append((batch_size, length))
        return original(task, cfg, batch_size, length, **kwargs)

    monkeypatch.setattr(stretch, "stretch_batch", spy)
    before = [{k: v.clone() for k, v in m.state_dict().items()} for m in models]

    def on_budget(steps, ensemble):
        seen[steps] = [ensemble.member(j).state_dict() for j in range(ensemble.members)]
        assert ensemble.rope_scaling == stretch.method_scaling("linear", 4, L)

    stretch.fine_tune(models, "lag", "linear", config, on_budget=on_budget)
    assert sorted(seen) == [0, 2]
    for j in range(2):
        assert all(torch.equal(seen[0][j][k], before[j][k]) for k in before[j])
        assert any(not torch.equal(seen[2][j][k], before[j][k]) for k in before[j])
    assert set(shapes) == {(32 // 4, 4 * L)}  # as many tokens per step as in training


def test_scores_split_into_bands_by_position_and_by_the_keys_distance():
    config = _quick_config(tasks=("passkey", "lag"))
    ensemble = TinyEnsemble(_models())
    for task in ("lag", "passkey"):
        sets = stretch.evaluation_sets(task, config)
        scores = stretch.score_members(ensemble, task, sets, L, 4)
        assert len(scores) == 2
        for member in scores:
            at = {t: member[str(t)] for t in config.eval_lengths}
            assert at[L]["loss_past"] is None and at[L]["loss_beyond"] is None and at[L]["loss_within"] is not None
            assert at[2 * L]["loss_past"] is not None and at[2 * L]["loss_beyond"] is None
            assert at[8 * L]["loss_beyond"] is not None
            assert all(0 <= at[t]["accuracy_within"] <= 1 for t in config.eval_lengths)
    # the bands themselves: positions for "lag", the key's distance (T - 2 - p) for "passkey"
    inputs = torch.full((3, 8 * L), 5)
    mask = torch.ones(3, 8 * L, dtype=torch.bool)
    band = stretch.bands("lag", inputs, mask, L, 4)
    assert band[0, L - 1] == 0 and band[0, L] == 1 and band[0, 4 * L - 1] == 1 and band[0, 4 * L] == 2
    length = 8 * L
    for p, want in ((length - L, 0), (length - L - 1, 1), (length - 4 * L, 1), (length - 4 * L - 1, 2)):
        keyed = inputs.clone()
        keyed[:, p] = PASSKEY_MARK  # distance T - 2 - p: L - 2 (as in training), L - 1, 4L - 2, 4L - 1
        assert (stretch.bands("passkey", keyed, mask, L, 4) == want).all(), (p, want)


def test_dynamic_is_scored_without_fine_tuning_only():
    config = _quick_config(budgets=(0, 2))
    seen = []
    stretch.fine_tune(_models(), "lag", "dynamic", config, on_budget=lambda steps, _: seen.append(steps))
    assert seen == [0] and stretch.method_budgets("linear", config) == (0, 2)


def test_attention_entropy_is_zero_for_one_key_and_the_log_for_even_spread(monkeypatch):
    # A model whose attention is uniform over the t + 1 keys it sees: ln(t + 1) on average per band.
    model = _models((0,))[0]
    config = _quick_config(tasks=("lag",))

    def uniform(tokens, need_weights=True):
        t = tokens.shape[1]
        w = torch.tril(torch.ones(t, t)) / torch.arange(1, t + 1)[:, None]
        return None, [w.expand(tokens.shape[0], 4, t, t)] * 2

    monkeypatch.setattr(model, "forward", uniform)
    monkeypatch.setattr(model, "__call__", uniform, raising=False)
    got = stretch.attention_entropy(model, "lag", "linear", config, 8 * L, batches=1)
    t = torch.arange(8 * L, dtype=torch.float64)
    want = [torch.log(t[:L] + 1).mean(), torch.log(t[L : 4 * L] + 1).mean(), torch.log(t[4 * L :] + 1).mean()]
    for name, value in zip(stretch.BANDS, want, strict=True):
        assert got[name] == pytest.approx([float(value)] * 2, abs=1e-4)
    assert model.rope_scaling is None  # restored
    short = stretch.attention_entropy(model, "lag", "none", config, L, batches=1)
    assert short["past"] is None and short["beyond"] is None


@pytest.mark.slow
def test_a_quick_run_gives_every_budget_seed_and_length():
    config = _quick_config()
    results = stretch.run_stretch(config, workers=1, progress=False)
    runs = results["runs"]
    assert {(r["method"], r["budget"], r["seed"]) for r in runs} == {
        (m, b, s) for m in ("none", "linear") for b in (0, 10) for s in (0, 1)
    }
    assert all(set(r["eval"]) == {str(t) for t in config.eval_lengths} for r in runs)
    summary = results["summary"]["lag"]
    mean, low, high = summary["none"]["0"][str(2 * L)]["accuracy_past"]
    assert summary["none"]["0"][str(8 * L)]["accuracy_beyond"] is not None
    assert low <= mean <= high
    # Position interpolation by 4 moves "three places back" to 3/4 of a place: the unscaled model
    # copies the right token at L, the interpolated one does not, before any fine-tuning.
    none_at_l = summary["none"]["0"][str(L)]["accuracy_within"][0]
    linear_at_l = summary["linear"]["0"][str(L)]["accuracy_within"][0]
    assert none_at_l > linear_at_l + 0.3


def test_the_cached_results_match_the_current_settings():
    results = stretch.load_stretch()
    config = stretch.StretchConfig()
    assert results["config"] == config.to_dict()
    expected = {
        (task, method, budget, seed)
        for task in config.tasks
        for method in config.methods
        for budget in stretch.method_budgets(method, config)
        for seed in config.seeds[task]
    }
    assert {(r["task"], r["method"], r["budget"], r["seed"]) for r in results["runs"]} == expected
    # The goal (issue 34): the whole run in about 15 minutes on two cores. A regenerated cache that took
    # longer on such a machine fails here; the time is measured by run_stretch itself.
    if results["environment"]["cpu_count"] <= 2:
        assert results["wall_seconds"] <= 15 * 60, f"make experiment-stretch took {results['wall_seconds']:.0f} s"


def test_compare_separates_only_when_every_seed_is_on_one_side():
    def results(a, b):
        return {
            "summary": {
                task: {"x": {"0": {"128": {f"{m}_past": a}}}, "y": {"0": {"128": {f"{m}_past": b}}}}
                for task, m in (("text", "loss"), ("lag", "accuracy"))
            }
        }

    apart = results([0.9, 0.85, 0.95], [0.5, 0.4, 0.6])
    assert stretch.compare(apart, "lag", "x", "y", 0, 128, "past") == "better"
    assert stretch.compare(apart, "lag", "y", "x", 0, 128, "past") == "worse"
    assert stretch.compare(apart, "text", "x", "y", 0, 128, "past") == "worse"  # a higher loss is worse
    touching = results([0.9, 0.6, 0.95], [0.5, 0.4, 0.6])
    assert stretch.compare(touching, "lag", "x", "y", 0, 128, "past") == "not separable"
    raises_naming(ValueError, lambda: stretch.score(apart, "lag", "x", 0, 256, "past"), "256")


def test_attention_entropy_sets_yarns_factor_only_and_names_bad_ones():
    model = _models((0,))[0]
    config = _quick_config(tasks=("lag",))
    seen = []
    forward = model.forward

    def spy(tokens, need_weights=False):
        seen.append(dict(model.rope_scaling))
        return forward(tokens, need_weights=need_weights)

    model.forward = spy
    sharp = stretch.attention_entropy(model, "lag", "yarn", config, 4 * L, batches=1)
    flat = stretch.attention_entropy(model, "lag", "yarn", config, 4 * L, batches=1, attention_factor=1.0)
    assert "attention_factor" not in seen[0] and seen[1]["attention_factor"] == 1.0
    assert {k: v for k, v in seen[1].items() if k != "attention_factor"} == seen[0]
    assert sharp["past"] != flat["past"]  # the factor reaches the attention
    assert model.rope_scaling is None
    raises_naming(
        ValueError,
        lambda: stretch.attention_entropy(model, "lag", "linear", config, L, attention_factor=1.0),
        "attention_factor",
        "'linear'",
    )
    for bad in (0.0, -1.0, True, "1"):
        raises_naming(
            ValueError,
            lambda bad=bad: stretch.attention_entropy(model, "lag", "yarn", config, L, attention_factor=bad),
            "attention_factor",
            repr(bad),
        )


def test_the_saved_evaluation_text_is_what_the_cached_run_read():
    import sys

    from helpers.experiment.tasks import text_corpus

    empty, held_out = stretch.load_eval_text()
    assert empty.numel() == 0 and held_out.dtype == torch.int64 and held_out.numel() > 40_000
    assert stretch.load_stretch()["environment"]["python"].startswith("3.11")
    if sys.version_info[:2] == (3, 11):  # the cache was made under 3.11: the same documentation
        assert torch.equal(held_out, text_corpus()[1])
