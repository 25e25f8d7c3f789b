"""Tests of the train-short / test-long experiment (helpers.experiment) and its pictures."""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import helpers
from helpers.experiment import extrapolation as ex

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


@given(st.integers(1, 5), st.integers(0, 4), st.integers(0, 3), st.integers(0, 2**31 - 1))
@settings(max_examples=40, deadline=None)
def test_pattern_batch_repeats_a_block_of_distinct_tokens_after_noise(min_period, spread, noise, seed):
    max_period = min_period + spread
    length = 3 * max_period + 5
    vocab = 12
    inputs, targets, mask = ex.pattern_batch(
        4,
        length,
        vocab=vocab,
        min_period=min_period,
        max_period=max_period,
        noise=noise,
        generator=torch.Generator().manual_seed(seed),
    )
    for b in range(4):
        sequence = inputs[b].tolist() + [int(targets[b, -1])]
        assert targets[b, :-1].tolist() == sequence[1:-1]  # targets are the next tokens
        start = next(t for t, token in enumerate(sequence) if token < vocab - noise)  # the block begins
        assert all(token >= vocab - noise for token in sequence[:start])  # noise ids only before it
        assert noise > 0 or start == 0
        block = sequence[start:]
        period = next(n for n in range(1, len(block) + 1) if all(block[t] == block[t % n] for t in range(len(block))))
        assert min_period <= period <= max_period and start <= length - 2 * period
        assert len(set(block[:period])) == period  # the block's tokens are distinct
        for t in range(length):
            # scored exactly where the current token was seen before in the block (its successor is then known)
            assert bool(mask[b, t]) == (t >= start and sequence[t] in sequence[start:t])


def test_pattern_blocks_start_anywhere_that_leaves_a_period_to_score():
    """No fixed place holds the answer: at the training length the block starts anywhere in 0 .. L - 2n."""
    config = ex.ExperimentConfig()
    inputs, _, mask = ex.task_batch("pattern", config, 4000, 32, generator=torch.Generator().manual_seed(0))
    starts = (inputs < config.vocab - config.noise_tokens).float().argmax(dim=1)  # (B,)
    first = mask.float().argmax(dim=1)  # (B,) start + n
    periods = first - starts
    assert int(periods.min()) == config.min_period and int(periods.max()) == config.max_period
    for n in (config.min_period, config.max_period):
        chosen = starts[periods == n]
        assert int(chosen.min()) == 0 and int(chosen.max()) == 32 - 2 * n  # every start is drawn
    moved, _, moved_mask = ex.pattern_batch(
        8, 256, vocab=32, min_period=3, max_period=12, noise=8, prefix=100, generator=torch.Generator().manual_seed(1)
    )
    assert bool((moved[:, :100] >= 24).all()) and bool((moved[:, 100] < 24).all())
    assert not bool(moved_mask[:, :103].any())  # nothing is scored before one period of the block


def test_bad_task_arguments_name_the_argument():
    with pytest.raises(ValueError, match="lag"):
        ex.lag_batch(2, 4, vocab=5, lag=4)
    with pytest.raises(ValueError, match="max_period"):
        ex.pattern_batch(2, 40, vocab=5, min_period=2, max_period=6)
    with pytest.raises(ValueError, match="max_period"):
        ex.pattern_batch(2, 6, vocab=10, min_period=2, max_period=6)
    with pytest.raises(ValueError, match="vocab - noise"):
        ex.pattern_batch(2, 40, vocab=10, min_period=2, max_period=6, noise=5)
    with pytest.raises(ValueError, match="prefix"):
        ex.pattern_batch(2, 40, vocab=10, min_period=2, max_period=6, noise=2, prefix=29)
    with pytest.raises(ValueError, match="prefix"):
        ex.pattern_batch(2, 40, vocab=10, min_period=2, max_period=6, prefix=3)
    with pytest.raises(ValueError, match="controls"):
        tiny_config(controls=(("lag", "rope_x"),))
    with pytest.raises(TypeError, match="batch_size"):
        ex.lag_batch(2.0, 4, vocab=5, lag=1)
    with pytest.raises(ValueError, match="task"):
        ex.task_batch("sort", tiny_config(), 2, 8)
    with pytest.raises(ValueError, match="scheme"):
        ex.TinyTransformer("t6", vocab=8)
    with pytest.raises(ValueError, match="variant"):
        ex.build_model("alibi_x9", tiny_config(), "lag")
    with pytest.raises(ValueError, match="alibi_scale"):
        ex.TinyTransformer("alibi", vocab=8, alibi_scale=0.0)
    with pytest.raises(TypeError, match="bos"):
        ex.TinyTransformer("none", vocab=8, bos=1)
    with pytest.raises(ValueError, match="split"):
        ex.text_batch(2, 8, split="test", corpus=(torch.arange(50), torch.arange(50)))
    with pytest.raises(ValueError, match="length"):
        ex.text_batch(2, 60, split="held_out", corpus=(torch.arange(500), torch.arange(50)))
    with pytest.raises(ValueError, match="schemes"):
        tiny_config(schemes=("rope", "xpos"))
    with pytest.raises(ValueError, match="min_steps"):
        tiny_config(min_steps=50, max_steps=40)
    with pytest.raises(ValueError, match="seeds"):
        tiny_config(seeds=(1, 1))
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


def test_text_corpus_holds_out_whole_topics_and_windows_are_consecutive_characters():
    train, held_out = ex.text_corpus()
    assert train.dtype == held_out.dtype == torch.int64
    total = len(train) + len(held_out)
    assert 0.1 <= len(held_out) / total < 0.2 and total > 100_000
    assert int(train.min()) >= 0 and int(max(train.max(), held_out.max())) < ex.TEXT_VOCAB
    from pydoc_data.topics import topics

    last = max(topics)  # the last topic in sorted order is held out, the first is trained on
    assert topics[last][:200] in ex.decode(held_out) and topics[last][:200] not in ex.decode(train)
    assert topics[min(topics)][:200] in ex.decode(train)
    corpus = (train, held_out)
    for split, ids in (("train", train), ("held_out", held_out)):
        inputs, targets, mask = ex.text_batch(
            4, 40, corpus=corpus, split=split, generator=torch.Generator().manual_seed(0)
        )
        assert inputs.shape == targets.shape == mask.shape == (4, 40) and bool(mask.all())
        assert torch.equal(targets[:, :-1], inputs[:, 1:])  # the target is the next character
        text = ex.decode(ids)
        for row in range(4):
            window = ex.decode(torch.cat([inputs[row], targets[row, -1:]]))
            assert window in text  # a stretch of this split
    assert ex.decode(torch.tensor([ex.TEXT_VOCAB - 1])) == "?"


def test_bos_gives_nope_a_position_signal_and_keeps_t_rows():
    tokens = torch.full((1, 10), 3)
    with torch.no_grad():
        plain = small_model("none")(tokens)
        with_bos, weights = small_model("none", bos=True)(tokens, need_weights=True)
    assert with_bos.shape == plain.shape == (1, 10, 11)
    torch.testing.assert_close(plain[0, 0].expand(10, -1), plain[0])  # no position signal at all
    assert float((with_bos[0, 1:] - with_bos[0, :-1]).abs().amax()) > 1e-3  # the BOS key tells positions apart
    # First layer, equal content everywhere but at the BOS key: query t sees the BOS and t + 1 tokens.
    assert weights[0].shape == (1, 2, 10, 11) and float(weights[0][0, :, :, 0].min()) > 0.0
    shares = weights[0][0, :, :, 1:]  # (H, T, T) the weight on the real tokens, all alike
    for t in range(10):
        torch.testing.assert_close(shares[:, t, : t + 1], shares[:, t, :1].expand(-1, t + 1))
        if t < 9:
            assert float(shares[:, t, t + 1 :].abs().max()) == 0.0  # later keys are masked


@pytest.mark.parametrize("scale", [1.0, 8.0])
def test_alibi_scale_multiplies_every_slope_and_t5_adds_its_buckets(scale):
    tokens = torch.full((1, 12), 3)  # equal content: first-layer weights are the softmax of the bias alone
    with torch.no_grad():
        _, weights = small_model("alibi", alibi_scale=scale)(tokens, need_weights=True)
    expected = torch.softmax(helpers.alibi_bias(2, 12) * scale, dim=-1)
    torch.testing.assert_close(weights[0][0], expected, rtol=1e-5, atol=1e-6)
    model = small_model("t5")
    with torch.no_grad():
        _, weights = model(tokens, need_weights=True)
    buckets = helpers.relative_position_bucket(helpers.relative_positions(12), bidirectional=False)  # (T, T)
    bias = model.t5_bias.embedding.weight[buckets].permute(2, 0, 1)  # (H, T, T)
    bias = bias.masked_fill(~torch.ones(12, 12, dtype=torch.bool).tril(), float("-inf"))
    torch.testing.assert_close(weights[0][0], torch.softmax(bias, dim=-1), rtol=1e-5, atol=1e-6)


def test_initial_spreads_are_gpt2_for_the_table_and_t5_for_the_bias():
    torch.manual_seed(0)
    learned = ex.TinyTransformer("learned", vocab=32, max_len=256)
    assert 0.019 < float(learned.pos_table.detach().std()) < 0.021  # N(0, 0.02^2), not N(0, 1)
    assert 0.9 < float((learned.embed.weight.detach() * 8).std()) < 1.1  # token entries of size 1 (sqrt(64) N(0, 1/64))
    t5 = ex.TinyTransformer("t5", vocab=32)
    assert 0.1 < float(t5.t5_bias.embedding.weight.detach().std()) < 0.15  # d_model^-0.5 = 0.125


# ----------------------------------------------------------------------------------------------
# Seeds side by side: the ensemble


@pytest.mark.parametrize("variant", list(ex.VARIANTS))
def test_ensemble_members_compute_what_their_models_compute(variant):
    config = tiny_config(d_model=16, n_heads=2, d_ff=24, train_length=20)  # max_len 40; T5 buckets to L > 16
    models = []
    for seed in range(3):
        torch.manual_seed(seed)
        model = ex.build_model(variant, config, "lag").eval()
        with torch.no_grad():  # as after training: no two members share a value (norm scales start at 1)
            for p in model.parameters():
                p.add_(0.3 * torch.randn_like(p))
        models.append(model)
    ensemble = ex.TinyEnsemble(models)
    tokens = torch.randint(0, config.vocab, (3, 2, 29), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        together = ensemble(tokens)  # (E, B, T, V)
        alone = torch.stack([models[e](tokens[e]) for e in range(3)])
        copy = ensemble.member(1)(tokens[1])
    torch.testing.assert_close(together, alone, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(copy, alone[1], rtol=0, atol=0)
    assert together.shape == (3, 2, 29, config.vocab)


def test_ensemble_members_do_not_mix():
    config = tiny_config()
    models = []
    for seed in range(2):
        torch.manual_seed(seed)
        models.append(ex.build_model("t5", config, "lag"))
    ensemble = ex.TinyEnsemble(models)
    tokens = torch.randint(0, config.vocab, (2, 3, 20), generator=torch.Generator().manual_seed(0))
    ensemble(tokens)[0].sum().backward()  # member 0's output only
    for name, p in ensemble.stacked.items():
        assert float(p.grad[1].abs().max()) == 0.0, name  # member 1 receives nothing
    assert all(float(p.grad[0].abs().max()) > 0.0 for p in ensemble.stacked.values())
    with pytest.raises(ValueError, match="one per member"):
        ensemble(tokens[:1])
    with pytest.raises(ValueError, match="same arguments"):
        ex.TinyEnsemble([models[0], ex.build_model("rope", config, "lag")])
    with pytest.raises(ValueError, match="e must be"):
        ensemble.member(2)


def test_clipping_per_member_is_clip_grad_norm_of_each_member():
    config = tiny_config()
    models = []
    for seed in range(3):
        torch.manual_seed(seed)
        models.append(ex.build_model("rope", config, "lag"))
    ensemble = ex.TinyEnsemble(models)
    tokens = torch.randint(0, config.vocab, (3, 4, 16), generator=torch.Generator().manual_seed(0))
    scale = torch.tensor([1.0, 1e-4, 30.0])  # one member's gradient is below the limit, two above
    (ensemble(tokens).pow(2).mean(dim=(1, 2, 3)) * scale).sum().backward()
    for e, model in enumerate(models):
        model(tokens[e]).pow(2).mean().mul(scale[e]).backward()
    from helpers.experiment.train import clip_per_member

    norms = clip_per_member(ensemble, 1.0)
    for e, model in enumerate(models):
        expected = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        torch.testing.assert_close(norms[e], expected, rtol=1e-4, atol=0)
        for name, p in model.named_parameters():
            torch.testing.assert_close(ensemble.stacked[name.replace(".", "__")].grad[e], p.grad, rtol=1e-4, atol=1e-7)
    assert float(norms[1]) < 1.0 < float(norms[2])


def _reference_training(task, variant, config, seed, steps):
    """The plainest loop: one TinyTransformer, torch's Adam and clip_grad_norm_, the same schedule."""
    torch.manual_seed(seed)
    model = ex.build_model(variant, config, task)
    data = torch.Generator().manual_seed(10_000 + seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    for step in range(steps + config.cooldown_steps):
        if step < config.warmup_steps:
            rate = (step + 1) / config.warmup_steps
        elif step < steps:
            rate = 1.0
        else:
            rate = 1.0 - (step - steps) / config.cooldown_steps
        for group in optimizer.param_groups:
            group["lr"] = config.learning_rate * rate
        inputs, targets, mask = ex.task_batch(task, config, config.batch_size, config.train_length, generator=data)
        losses = torch.nn.functional.cross_entropy(model(inputs).transpose(1, 2), targets, reduction="none")
        loss = (losses * mask).sum() / mask.sum()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    return model


@pytest.mark.parametrize("variant", ["alibi", "learned"])
def test_seeds_trained_together_follow_the_path_each_follows_alone(variant):
    config = tiny_config(min_steps=12, max_steps=12, plateau_window=6, cooldown_steps=4, warmup_steps=3)
    models, losses, stops = ex.train_seeds("lag", variant, config, seeds=(0, 1), device="cpu")
    assert [{k: v for k, v in stop.items() if k != "improvement"} for stop in stops] == [
        {"stop_step": 12, "steps": 16, "plateaued": stops[e]["plateaued"]} for e in range(2)
    ]
    assert [len(row) for row in losses] == [16, 16]
    reference = _reference_training("lag", variant, config, 1, 12)
    alone, _, _ = ex.train_model("lag", variant, config, 1, device="cpu")
    tokens = torch.randint(0, config.vocab, (2, 24), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        expected = reference(tokens)
        torch.testing.assert_close(models[1](tokens), expected, rtol=2e-3, atol=2e-3)
        torch.testing.assert_close(alone(tokens), expected, rtol=2e-3, atol=2e-3)
        assert float((models[0](tokens) - expected).abs().max()) > 0.05  # another seed is another model


def test_plateau_rule():
    window = 4
    flat = [1.0] * 8
    assert ex.plateaued(flat, window, 0.01, 0.0)
    assert not ex.plateaued(flat[:7], window, 0.01, 0.0)  # fewer than two windows
    falling = [1.0] * 4 + [0.98] * 4  # 2 % better: still learning at tolerance 1 %
    assert not ex.plateaued(falling, window, 0.01, 0.0)
    assert ex.plateaued(falling, window, 0.03, 0.0)
    small = [0.010] * 4 + [0.009] * 4  # 10 % better, but by 0.001 nats: below the floor
    assert ex.plateaued(small, window, 0.01, 0.002) and not ex.plateaued(small, window, 0.01, 0.0005)
    assert ex.plateaued([1.0] * 4 + [1.1] * 4, window, 0.01, 0.0)  # worse is not better
    assert not ex.plateaued([5.0] * 4 + [1.0] * 4 + [0.9] * 4, window, 0.05, 0.0)  # only the last two windows count
    # A slow descent: 1 % per window is a plateau to a rule that compares neighbours at 2 %, not to
    # one that reads the trend over three windows (3 % over the span).
    slow = [1.0] * 4 + [0.99] * 4 + [0.98] * 4 + [0.97] * 4
    assert ex.plateaued(slow, window, 0.02, 0.0, lookback=1)
    assert not ex.plateaued(slow, window, 0.02, 0.0, lookback=3)
    assert not ex.plateaued(slow[:-1], window, 0.0, 0.0, lookback=3)  # fewer than four windows: never
    assert ex.plateaued([1.0] * 16, window, 0.02, 0.0, lookback=3)
    from helpers.experiment.train import improvement

    assert improvement(slow, window, lookback=3) == pytest.approx(0.03)
    assert improvement(slow[:-1], window, lookback=3) == -math.inf


def test_each_seed_stops_when_its_own_rule_holds_or_at_the_limit():
    config = tiny_config(
        min_steps=20, max_steps=60, plateau_window=10, plateau_lookback=1, cooldown_steps=5, plateau_tolerance=10.0
    )
    _, losses, stops = ex.train_seeds("lag", "rope", config, seeds=(0, 1), device="cpu")
    assert all(math.isfinite(s.pop("improvement")) for s in stops)
    assert stops == [{"stop_step": 20, "steps": 25, "plateaued": True}] * 2  # the rule holds at the first check
    config = tiny_config(
        min_steps=20, max_steps=40, plateau_window=10, cooldown_steps=5, plateau_tolerance=-1.0, plateau_floor=-1.0
    )
    _, losses, stops = ex.train_seeds("lag", "rope", config, seeds=(0,), device="cpu")
    gain = stops[0].pop("improvement")
    assert stops == [{"stop_step": 40, "steps": 45, "plateaued": False}]  # never holds: the limit
    from helpers.experiment.train import improvement

    assert gain == pytest.approx(improvement(losses[0][:40], 10, config.plateau_lookback), abs=1e-5)
    assert losses[0].shape == (45,) and np.isfinite(losses[0]).all()


def _two_members(config):
    """Member 0 cannot learn (targets drawn independently of the inputs); member 1 learns "lag"."""
    streams = {0: torch.Generator().manual_seed(0), 1: torch.Generator().manual_seed(1)}

    def draw(e):
        if e == 0:
            noise = torch.randint(0, config.vocab, (2, config.batch_size, config.train_length), generator=streams[0])
            return noise[0], noise[1], torch.ones_like(noise[0], dtype=torch.bool)
        return ex.task_batch("lag", config, config.batch_size, config.train_length, generator=streams[1])

    def batches(members):
        return [torch.stack(parts) for parts in zip(*[draw(e) for e in members], strict=True)]

    models = []
    for seed in range(2):
        torch.manual_seed(seed)
        models.append(ex.build_model("rope", config, "lag"))
    return models, batches


def test_a_seed_that_plateaus_leaves_and_the_others_go_on_as_if_alone():
    from helpers.experiment.train import train_ensemble

    config = tiny_config(min_steps=60, max_steps=100, plateau_window=20, cooldown_steps=5)
    models, batches = _two_members(config)
    trained, losses, stops = train_ensemble(models, batches, config, device="cpu")
    first = [
        ex.plateaued(row[:60], 20, config.plateau_tolerance, config.plateau_floor, config.plateau_lookback)
        for row in losses
    ]
    assert first == [True, False]  # at the first check, member 0 only
    assert stops[0]["improvement"] < config.plateau_tolerance
    assert {k: v for k, v in stops[0].items() if k != "improvement"} == {
        "stop_step": 60,
        "steps": 65,
        "plateaued": True,
    }
    assert len(losses[0]) == 65
    assert stops[1]["stop_step"] > 60 and len(losses[1]) == stops[1]["steps"] == stops[1]["stop_step"] + 5
    tokens = torch.randint(0, config.vocab, (2, 24), generator=torch.Generator().manual_seed(5))
    for e in range(2):  # each member again, alone: the same losses and the same weights, to the last bit
        models, batches = _two_members(config)
        alone, alone_losses, alone_stops = train_ensemble(
            [models[e]], lambda members, e=e, draw=batches: [z[e : e + 1] for z in draw([0, 1])], config, device="cpu"
        )
        assert alone_stops == [stops[e]]
        np.testing.assert_array_equal(alone_losses[0], losses[e])
        with torch.no_grad():
            torch.testing.assert_close(alone[0](tokens), trained[e](tokens), rtol=0, atol=0)


def test_selecting_members_copies_them():
    config = tiny_config()
    models = []
    for seed in range(3):
        torch.manual_seed(seed)
        models.append(ex.build_model("t5", config, "lag").eval())
    ensemble = ex.TinyEnsemble(models)
    chosen = ensemble.select([2, 0])
    assert chosen.members == 2 and chosen.training
    tokens = torch.randint(0, config.vocab, (2, 2, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = torch.stack([models[2](tokens[0]), models[0](tokens[1])])
        torch.testing.assert_close(chosen(tokens), expected, rtol=1e-5, atol=1e-5)
        chosen.stacked["embed__weight"].add_(1.0)  # a copy: the ensemble it came from keeps its values
    torch.testing.assert_close(ensemble.stacked["embed__weight"][2], models[2].embed.weight, rtol=0, atol=0)
    for rows in ([3], [], [-1]):
        with pytest.raises(ValueError, match="rows"):
            ensemble.select(rows)


def test_evaluation_against_a_position_by_position_count():
    config = tiny_config(eval_batches=2, eval_batch_size=3)
    torch.manual_seed(0)
    model = ex.build_model("rope", config, "pattern").eval()
    batches = ex.evaluation_batches("pattern", config)
    scores, per_position = ex.evaluate_model(model, batches, (16, 32), 16)
    assert batches(32)[0][0].tolist() == batches(32)[0][0].tolist()  # the same sequences every time
    loss = {t: [0.0, 0] for t in range(32)}
    right = {t: 0 for t in range(32)}
    for inputs, targets, mask in batches(32):
        with torch.no_grad():
            logits = model(inputs)
        for b in range(inputs.shape[0]):
            for t in range(32):
                if mask[b, t]:
                    loss[t][0] += float(torch.nn.functional.cross_entropy(logits[b, t], targets[b, t]))
                    loss[t][1] += 1
                    right[t] += int(logits[b, t].argmax() == targets[b, t])
    counted = [t for t in range(32) if loss[t][1]]
    beyond = [t for t in counted if t >= 16]
    assert scores[32]["loss"] == pytest.approx(sum(loss[t][0] for t in counted) / sum(loss[t][1] for t in counted))
    assert scores[32]["accuracy_beyond"] == pytest.approx(
        sum(right[t] for t in beyond) / sum(loss[t][1] for t in beyond)
    )
    assert scores[32]["loss_beyond"] == pytest.approx(sum(loss[t][0] for t in beyond) / sum(loss[t][1] for t in beyond))
    assert scores[16]["loss_beyond"] is None and scores[16]["accuracy_beyond"] is None
    for t in range(32):
        if loss[t][1]:
            assert per_position["loss"][t] == pytest.approx(loss[t][0] / loss[t][1])
            assert per_position["accuracy"][t] == pytest.approx(right[t] / loss[t][1])
        else:
            assert per_position["loss"][t] is None  # the first tokens of a pattern are never scored


def test_offset_weights_match_a_loop():
    torch.manual_seed(0)
    model = ex.TinyTransformer("alibi", vocab=11, d_model=16, n_heads=2, d_ff=32, max_len=24).eval()
    tokens = torch.randint(0, 11, (3, 20), generator=torch.Generator().manual_seed(1))
    got = ex.offset_weights(model, tokens, max_offset=4, first=6)
    with torch.no_grad():
        _, weights = model(tokens, need_weights=True)
    for layer, w in enumerate(weights):
        for h in range(2):
            for delta in range(5):
                values = [float(w[b, h, t, t - delta]) for b in range(3) for t in range(6, 20)]
                assert float(got[layer, h, delta]) == pytest.approx(np.mean(values))
    bos = ex.TinyTransformer("none", vocab=11, d_model=16, n_heads=2, bos=True).eval()
    with torch.no_grad():
        _, weights = bos(tokens, need_weights=True)  # keys shifted by one: the BOS key is key 0
    got = ex.offset_weights(bos, tokens, max_offset=0)
    assert float(got[1, 0, 0]) == pytest.approx(float(weights[1][:, 0, torch.arange(20), torch.arange(20) + 1].mean()))
    with pytest.raises(ValueError, match="first"):
        ex.offset_weights(model, tokens, max_offset=4, first=20)


# ----------------------------------------------------------------------------------------------
# End to end, on a tiny configuration


@pytest.fixture(scope="module")
def tiny_results():
    kept = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: extra threads only wait on each other on a busy machine
    try:
        config = tiny_config(seeds=(0, 1, 2), text_seeds=2, controls=(("lag", "alibi_x8"), ("lag", "rope_L")))
        results = ex.run_experiment(config, device="cpu", progress=False, keep_models=kept, workers=1)
    finally:
        torch.set_num_threads(threads)
    return results, kept


def test_every_scheme_trains_and_training_lowers_the_loss(tiny_results):
    results, _ = tiny_results
    config = ex.ExperimentConfig.from_dict(results["config"])
    pairs = config.pairs
    assert pairs[-2:] == [("lag", "alibi_x8"), ("lag", "rope_L")]
    assert len(results["groups"]) == len(pairs)
    assert len(results["runs"]) == sum(len(config.task_seeds(t, s)) for t, s in pairs)
    for run in results["runs"]:
        assert run["final_loss"] < run["initial_loss"] - 0.1, run["task"] + "/" + run["scheme"]
        assert len(run["loss_curve"]) == math.ceil(run["steps"] / config.curve_every)
        for value in run["eval"].values():
            assert 0.0 <= value["accuracy"] <= 1.0 and math.isfinite(value["loss"])


class _Reader(torch.nn.Module):
    """A stand-in model for the moved-block probe: it predicts the token that followed the most
    recent earlier copy of the current token, looking only at keys before ``horizon`` (None: all)."""

    def __init__(self, vocab, horizon=None):
        super().__init__()
        self.vocab, self.horizon = vocab, horizon
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def forward(self, tokens):
        b, t = tokens.shape
        logits = torch.zeros(b, t, self.vocab)
        logits[..., -1] = 0.5  # nothing found: a noise id, never the answer
        for row in range(b):
            seq = tokens[row].tolist()
            for i in range(t):
                limit = i if self.horizon is None else min(i, self.horizon)
                earlier = [j for j in range(limit) if seq[j] == seq[i] and j + 1 < t]
                if earlier:
                    logits[row, i, seq[earlier[-1] + 1]] = 1.0
        return logits


def test_moved_block_probe_separates_reading_by_content_from_reading_by_place():
    config = ex.ExperimentConfig(eval_batch_size=6)
    starts = ex.moved_block_starts(config)
    assert starts == [0, 16, 32, 64, 128, 192]
    content = ex.moved_block_accuracy(_Reader(config.vocab), config, starts)
    assert content == {p: 1.0 for p in starts}  # the answer is one period back, wherever the block is
    anchored = ex.moved_block_accuracy(_Reader(config.vocab, horizon=config.train_length), config, starts)
    assert anchored[0] == 1.0 and all(anchored[p] == 0.0 for p in starts if p >= config.train_length)
    assert anchored[16] == 1.0  # the block's first period still lies before L: a copy is in view


@pytest.mark.parametrize("task", ex.TASKS)
def test_a_seed_in_the_ensemble_starts_on_the_path_it_follows_alone(task):
    """Not bit for bit: batched products may add in another order than a single model's, so the
    paths agree to float32 rounding at first and may part later (notebook 08 says so). Planted
    bug this catches: members that share a batch or a gradient differ from the first step."""
    config = ex.ExperimentConfig(min_steps=8, max_steps=8, warmup_steps=4, cooldown_steps=2, plateau_window=4)
    _, together, _ = ex.train_seeds(task, "rope", config, seeds=(0, 1, 2), device="cpu")
    _, alone, _ = ex.train_model(task, "rope", config, 1, device="cpu")
    np.testing.assert_allclose(together[1][:6], alone[:6], rtol=1e-5, atol=1e-6)
    assert not np.allclose(together[0][:6], alone[:6], rtol=1e-5, atol=1e-6)  # another seed is another path


@pytest.mark.slow
def test_a_rerun_of_a_cached_group_reproduces_the_cache():
    """The cheapest group of the committed run, trained again as ``make experiment`` trains it
    (one torch thread, as each worker does): the same stops, and the same scores to 1e-4 where the
    rerun uses the torch version and the kind of CPU kernels (AVX2, AVX512, ...) that the file
    records. On other kernels float32 sums round differently and the paths part late in training:
    the stops and the scores at the training length still agree (to 0.01), but past it, where a
    broken scheme's scores hang on every bit of its weights, they do not (seen: 0.3 nats at 2L for
    sinusoidal on "lag", AVX2 against the file's run), so they are compared only on the same path."""
    cached = ex.load_results()
    config = ex.ExperimentConfig.from_dict(cached["config"])
    group = min(cached["groups"], key=lambda g: g["member_steps"])
    task, scheme = group["task"], group["scheme"]
    threads = torch.get_num_threads()
    again = ex.run_experiment(
        dataclasses.replace(config, tasks=(task,), schemes=(scheme,), controls=()),
        device="cpu",
        progress=False,
        workers=1,
    )  # one torch thread per group, as each worker of make experiment has
    assert torch.get_num_threads() == threads  # and this process's setting restored
    before = [r for r in cached["runs"] if (r["task"], r["scheme"]) == (task, scheme)]
    assert [r["steps"] for r in again["runs"]] == [r["steps"] for r in before]
    recorded = cached["environment"]
    same_path = (recorded.get("torch"), recorded.get("cpu_capability")) == (
        torch.__version__,
        torch.backends.cpu.get_cpu_capability(),
    )
    compared = 0
    for new, old in zip(again["runs"], before, strict=True):
        for length, row in old["eval"].items():
            if int(length) > config.train_length and not same_path:
                continue
            for metric, value in row.items():
                if value is not None:
                    tolerance = 1e-4 if same_path else 1e-2
                    assert new["eval"][length][metric] == pytest.approx(value, abs=tolerance), (
                        task,
                        scheme,
                        length,
                        metric,
                    )
                    compared += 1
    assert compared >= 2 * len(before)


def test_worker_processes_give_the_same_numbers():
    config = tiny_config(tasks=("lag", "text"), schemes=("rope", "t5"), seeds=(0, 1))
    one = ex.run_experiment(config, device="cpu", progress=False, workers=1)
    two = ex.run_experiment(config, device="cpu", progress=False, workers=2)
    assert one["runs"] == two["runs"] and one["summary"] == two["summary"]
    assert two["environment"]["workers"] == 2


def check_schema(results, *, min_seeds=1):
    config = ex.ExperimentConfig.from_dict(results["config"])
    assert results["schema_version"] == ex.SCHEMA_VERSION
    assert results["tasks"] == list(config.tasks) and set(config.tasks) <= set(results["task_descriptions"])
    assert results["schemes"] == list(config.schemes)
    assert results["controls"] == [list(p) for p in config.controls if p[0] in config.tasks]
    assert results["seeds"] == list(config.seeds) and len(config.seeds) >= min_seeds
    assert results["eval_lengths"] == [config.train_length * m for m in config.eval_multiples]
    assert results["eval_lengths"][0] == config.train_length and config.max_len == max(results["eval_lengths"])
    assert {"python", "torch", "numpy", "device", "platform", "workers", "cpu_count"} <= set(results["environment"])
    assert results["wall_seconds"] > 0 and results["cpu_seconds"] > 0
    keys = {f"{m}_{s}" for m in ex.METRICS for s in ("mean", "std", "min", "max")}
    for task, scheme in config.pairs:
        runs = [r for r in results["runs"] if r["task"] == task and r["scheme"] == scheme]
        assert (
            [r["seed"] for r in runs] == list(config.task_seeds(task, scheme)) == results["group_seeds"][task][scheme]
        )
        for length in results["eval_lengths"]:
            row = results["summary"][task][scheme][str(length)]
            assert set(row) == keys
            for metric in ("accuracy", "loss_beyond"):
                values = [r["eval"][str(length)][metric] for r in runs]
                if None in values:
                    assert length == config.train_length and row[f"{metric}_mean"] is None
                    continue
                assert row[f"{metric}_mean"] == pytest.approx(np.mean(values), abs=1e-5)
                assert row[f"{metric}_min"] == pytest.approx(min(values), abs=1e-5)
                assert row[f"{metric}_max"] == pytest.approx(max(values), abs=1e-5)
        per_position = results["summary"][task][scheme]["per_position"]
        assert len(per_position["accuracy"]) == max(results["eval_lengths"])
        assert results["summary"][task][scheme]["plateaued"] == all(r["plateaued"] for r in runs)
        assert all(r["improvement"] is None or math.isfinite(r["improvement"]) for r in runs)
        if task == "pattern":
            starts = [str(p) for p in results["moved_block_starts"]]
            moved = results["summary"][task][scheme]["moved_block"]
            assert list(moved) == starts and starts[0] == "0"
            for start in starts:
                values = [r["moved_block"][start] for r in runs]
                assert moved[start]["accuracy_mean"] == pytest.approx(np.mean(values), abs=1e-5)
                assert moved[start]["accuracy_min"] == pytest.approx(min(values), abs=1e-5)


def test_results_schema_and_json_round_trip(tiny_results, tmp_path):
    results, _ = tiny_results
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    check_schema(ex.load_results(path))
    path.write_text(json.dumps({**results, "schema_version": 99}))
    with pytest.raises(ValueError, match="schema_version"):
        ex.load_results(path)


def test_compare_reads_the_seed_ranges(tiny_results):
    results, _ = tiny_results
    summary = {"lag": {"a": {"64": {}}, "b": {"64": {}}}}
    fake = {"summary": summary}
    for low_a, high_a, low_b, high_b, expected in (
        (0.8, 0.9, 0.5, 0.7, "higher"),
        (0.5, 0.7, 0.8, 0.9, "lower"),
        (0.5, 0.8, 0.7, 0.9, "not separable"),
        (0.7, 0.8, 0.7, 0.7, "not separable"),  # touching ranges do not separate
    ):
        summary["lag"]["a"]["64"] = {"accuracy_beyond_min": low_a, "accuracy_beyond_max": high_a}
        summary["lag"]["b"]["64"] = {"accuracy_beyond_min": low_b, "accuracy_beyond_max": high_b}
        assert ex.compare(fake, "lag", "a", "b", 64) == expected
    with pytest.raises(ValueError, match="not defined"):
        ex.compare(results, "lag", "rope", "alibi", results["eval_lengths"][0])
    with pytest.raises(ValueError, match="no results"):
        ex.compare(results, "lag", "rope", "xpos", results["eval_lengths"][1])
    with pytest.raises(ValueError, match="metric"):
        ex.compare(results, "lag", "rope", "alibi", results["eval_lengths"][1], metric="perplexity")


def test_saved_models_come_back(tiny_results, tmp_path):
    results, kept = tiny_results
    config = ex.ExperimentConfig.from_dict(results["config"])
    assert set(kept) == set(ex.SAVED_MODELS)
    ex.save_models(kept, config, tmp_path / "models.pt")
    models, loaded = ex.load_models(tmp_path / "models.pt")
    assert loaded == config and set(models) == set(kept)
    tokens, _, _ = ex.task_batch(
        "pattern", config, 2, config.train_length * 2, generator=torch.Generator().manual_seed(0)
    )
    with torch.no_grad():
        for key, model in models.items():
            torch.testing.assert_close(model(tokens), kept[key](tokens), rtol=0.05, atol=0.05)  # float16 storage


def test_the_kept_model_is_the_first_seed_of_its_run(tiny_results):
    results, kept = tiny_results
    config = ex.ExperimentConfig.from_dict(results["config"])
    run = next(r for r in results["runs"] if (r["task"], r["scheme"]) == ("lag", "rope") and r["seed"] == 0)
    scores, _ = ex.evaluate_model(
        kept[("lag", "rope")], ex.evaluation_batches("lag", config), config.eval_lengths, config.train_length
    )
    for length, value in scores.items():
        assert run["eval"][str(length)]["accuracy"] == pytest.approx(value["accuracy"], abs=1e-5)


def test_committed_results_file_has_the_schema():
    path = DATA / "extrapolation.json"
    results = ex.load_results(path)
    check_schema(results, min_seeds=5)
    config = ex.ExperimentConfig.from_dict(results["config"])
    assert config == ex.ExperimentConfig() and not results["quick"]  # the full default run
    assert results["text_corpus"]["held_out_characters"] > 40_000
    models, saved = ex.load_models()
    assert saved == config and set(models) == set(ex.SAVED_MODELS)
    assert_run_within_budget(results)


#: What a regenerated ``make experiment`` may cost on a two-core CPU before this test fails. The aim of
#: issue 31 is about 20 minutes and is not met: the committed run took 31 (docs/experiment.md says
#: why); this budget stops it from growing further unnoticed, with room for a machine's variation.
EXPERIMENT_BUDGET_SECONDS = 35 * 60


def assert_run_within_budget(results):
    """The run's own recorded wall time, where it was made on a CPU of two cores or fewer (a machine
    with more cores or a GPU is not the one the budget is for)."""
    env = results["environment"]
    if env["device"] == "cpu" and env["cpu_count"] <= 2:
        seconds = results["wall_seconds"]
        assert seconds <= EXPERIMENT_BUDGET_SECONDS, (
            f"make experiment took {seconds:.0f} s on {env['cpu_count']} cores, over the budget of "
            f"{EXPERIMENT_BUDGET_SECONDS} s"
        )


def test_the_time_budget_reads_the_run_it_is_given():
    results = ex.load_results(DATA / "extrapolation.json")
    assert_run_within_budget({**results, "wall_seconds": EXPERIMENT_BUDGET_SECONDS})
    with pytest.raises(AssertionError, match="over the budget"):
        assert_run_within_budget({**results, "wall_seconds": EXPERIMENT_BUDGET_SECONDS + 1})
    on_a_gpu = {**results["environment"], "device": "cuda"}
    assert_run_within_budget({**results, "environment": on_a_gpu, "wall_seconds": 10 * EXPERIMENT_BUDGET_SECONDS})
    many_cores = {**results["environment"], "cpu_count": 16}
    assert_run_within_budget({**results, "environment": many_cores, "wall_seconds": 10 * EXPERIMENT_BUDGET_SECONDS})


# ----------------------------------------------------------------------------------------------
# Pictures


def test_panorama_draws_the_summary_and_its_spread(tiny_results):
    results, _ = tiny_results
    lengths = results["eval_lengths"]
    beyond = [t for t in lengths if t > results["config"]["train_length"]]
    drawing = helpers.plots.extrapolation_panorama(results)  # past L only, by default
    line = drawing.artists["lines"][("accuracy", "rope")]
    expected = [results["summary"]["lag"]["rope"][str(t)]["accuracy_beyond_mean"] for t in beyond]
    np.testing.assert_allclose(line.get_ydata(), expected)
    np.testing.assert_allclose(line.get_xdata(), beyond)
    drawing.update(task="pattern", band="std", positions="all")
    line = drawing.artists["lines"][("loss", "t5")]
    expected = [results["summary"]["pattern"]["t5"][str(t)]["loss_mean"] for t in lengths]
    np.testing.assert_allclose(line.get_ydata(), expected)
    np.testing.assert_allclose(line.get_xdata(), lengths)
    assert "standard deviation" in drawing.artists["note"].get_text()
    assert "every scored position" in drawing.artists["title"].get_text()
    assert drawing.png()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="band"):
        drawing.update(band="iqr")
    with pytest.raises(ValueError, match="positions"):
        drawing.update(positions="first")
    ablation = helpers.plots.extrapolation_panorama(results, schemes=["alibi", "alibi_x8"])
    assert set(ablation.artists["lines"]) == {(m, s) for m in ("accuracy", "loss") for s in ("alibi", "alibi_x8")}
    with pytest.raises(ValueError, match="schemes"):
        helpers.plots.extrapolation_panorama(results, schemes=["xpos"])


def test_panorama_scale_axes_and_baselines_follow_the_task():
    """Text losses (1 to 4 nats) on a linear axis with the two no-context baselines; synthetic losses
    near 0 on a symlog one without them; past L only, the axes start after L and hide its line."""
    results = ex.load_results()
    train_length = results["config"]["train_length"]
    drawing = helpers.plots.extrapolation_panorama(results, task="text")
    accuracy_axes, loss_axes = drawing.fig.axes[:2]
    baselines = drawing.artists["baselines"]
    assert loss_axes.get_yscale() == "linear"
    assert baselines["loss"].get_visible() and baselines["accuracy"].get_visible()
    assert baselines["loss"].get_ydata()[0] == results["text_corpus"]["unigram_loss"]
    assert baselines["accuracy"].get_ydata()[0] == results["text_corpus"]["most_common_accuracy"]
    assert accuracy_axes.get_xlim()[0] > train_length and loss_axes.get_xlim()[0] > train_length
    assert "dashed" not in drawing.artists["note"].get_text() and "dotted" in drawing.artists["note"].get_text()
    drawing.update(task="lag", positions="all", band="minmax")
    assert loss_axes.get_yscale() == "symlog" and "linear below 0.1" in loss_axes.get_title()
    assert not baselines["loss"].get_visible() and not baselines["accuracy"].get_visible()
    assert accuracy_axes.get_xlim()[0] < train_length and "dashed line: L" in drawing.artists["note"].get_text()


def test_loss_curves_draw_every_seed_to_its_own_end(tiny_results):
    results, _ = tiny_results
    drawing = helpers.plots.loss_curves(results)
    lines = drawing.artists["lines"]
    assert len(lines) == len(results["runs"])
    for run in results["runs"]:
        line = lines[(run["task"], run["scheme"], run["seed"])]
        np.testing.assert_allclose(line.get_ydata(), run["loss_curve"])
        assert line.get_xdata()[-1] < run["steps"] <= line.get_xdata()[-1] + run["loss_curve_every"]
    assert drawing.png()[:4] == b"\x89PNG"


def test_per_position_curves_draw_the_mean_over_seeds(tiny_results):
    results, _ = tiny_results
    drawing = helpers.plots.per_position_curves(results, task="pattern")
    line = drawing.artists["lines"]["rope"]
    expected = [np.nan if v is None else v for v in results["summary"]["pattern"]["rope"]["per_position"]["accuracy"]]
    np.testing.assert_allclose(line.get_ydata(), expected)  # NaN (a gap) where no sequence is scored
    assert np.isnan(line.get_ydata()[0])  # the first token of a pattern is never scored
    drawing.update(metric="loss", task="text")
    expected = results["summary"]["text"]["rope"]["per_position"]["loss"]
    np.testing.assert_allclose(drawing.artists["lines"]["rope"].get_ydata(), expected)
    with pytest.raises(ValueError, match="metric"):
        drawing.update(metric="perplexity")


def test_offset_attention_shows_each_head_by_offset():
    weights = {"a": np.arange(2 * 3 * 5).reshape(2, 3, 5) / 30.0, "b": np.ones((2, 3, 5)) / 5}
    drawing = helpers.plots.offset_attention(weights, slopes={"a": [0.5, 0.25, 0.125]})
    images = drawing.artists["images"]
    np.testing.assert_allclose(images["a"].get_array(), weights["a"].reshape(6, 5))
    assert [t.get_text() for t in drawing.fig.axes[0].get_yticklabels()][3] == "2.1  m=1/2"
    with pytest.raises(ValueError, match="weights"):
        helpers.plots.offset_attention({"a": np.ones((3, 5))})


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
    for seed in range(20):  # block ids only: training never put a noise id in a block
        probe = ex.pattern_probe(config, period=7, seed=seed)
        assert int(probe.max()) < config.vocab - config.noise_tokens, (seed, probe[:7].tolist())
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


def test_checks_rerun_the_main_experiment_on_fresh_seeds_and_the_capped_groups_longer(tiny_results, tmp_path):
    results, _ = tiny_results
    main = tmp_path / "main.json"
    main.write_text(json.dumps(results))
    config = ex.ExperimentConfig.from_dict(results["config"])
    fresh = ex.check_config("fresh", results)
    assert fresh == dataclasses.replace(config, seeds=ex.FRESH["seeds"])
    long = ex.check_config("long", results)
    capped = {(r["task"], r["scheme"]) for r in results["runs"] if not r["plateaued"]}
    assert capped and set(long.controls) == capped and long.schemes == ()  # TINY never plateaus: every group
    assert long.max_steps == ex.LONG["max_steps"] and long.seeds == config.seeds
    marked = json.loads(json.dumps(results))
    for run in marked["runs"]:
        run["plateaued"] = (run["task"], run["scheme"]) != ("lag", "rope") or run["seed"] != 1
    small = ex.check_config("long", marked)
    assert small.controls == (("lag", "rope"),) and small.tasks == ("lag",)
    for run in marked["runs"]:
        run["plateaued"] = True
    with pytest.raises(ValueError, match="nothing to train longer"):
        ex.check_config("long", marked)
    with pytest.raises(ValueError, match="check"):
        ex.check_config("slow", results)
    with pytest.raises(ValueError, match="fresh seeds"):
        ex.check_config("fresh", {**results, "config": {**results["config"], "seeds": [5, 6]}})
    one = [dict(r, plateaued=(r["task"], r["scheme"], r["seed"]) != ("lag", "rope", 0)) for r in marked["runs"]]
    small_main = tmp_path / "small.json"
    small_main.write_text(json.dumps({**marked, "runs": one}))
    out, models = ex.regenerate(
        tmp_path / "long.json", check="long", main=small_main, device="cpu", workers=1, progress=False
    )
    again = ex.load_results(out)
    assert models is None and again["check"] == "long" and not (tmp_path / "extrapolation_models.pt").exists()
    assert {(r["task"], r["scheme"]) for r in again["runs"]} == {("lag", "rope")}
    assert [r["seed"] for r in again["runs"]] == list(config.seeds)  # the whole group, with its seeds


def test_a_quick_run_never_overwrites_the_cache_the_notebook_reads():
    """``python -m helpers.experiment --quick`` is the smoke test the docs suggest: with no ``--out`` it
    wrote its two-seed results over data/extrapolation.json, which notebook 08 then read."""
    assert ex.default_out() == ex.CACHED_RESULTS
    quick = ex.default_out(quick=True)
    assert quick != ex.CACHED_RESULTS and quick.parent.name == "build"
    assert ex.default_out(check="fresh") == ex.CACHED_RESULTS.with_name("extrapolation_fresh.json")
