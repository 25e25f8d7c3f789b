"""Train short, test long: tiny Transformers with different position schemes (article 001 §6.3, §7, §13).

Notation: ``E`` seeds trained together, ``B`` batch, ``T`` positions, ``H`` heads, ``d`` model
width, ``V`` vocabulary size, ``L`` the training length.

The model is one small decoder-only Transformer (pre-norm, causal) whose position scheme is a
parameter. Every scheme is built from the functions the notebooks teach (``VARIANTS`` names them):

- ``"none"`` (NoPE): no position signal at all; only the causal mask breaks the symmetry.
- ``"none_bos"``: NoPE with a beginning-of-sequence token in front of every sequence.
- ``"learned"``: a trainable table of ``max_len`` rows added to the token embeddings, initialised
  as GPT-2's (``N(0, 0.02^2)``). Rows past the training length never receive a gradient.
- ``"sinusoidal"``: ``helpers.sinusoidal_pe`` added to ``sqrt(d) * embedding`` (Vaswani et al.).
- ``"rope"``: ``helpers.rope_cos_sin`` and ``helpers.apply_rope`` rotate queries and keys.
- ``"alibi"``: ``helpers.alibi_bias`` (the reference slopes ``2^(-8h/H)``) added to the scores.
- ``"t5"``: ``helpers.T5RelativeBias`` (32 causal buckets up to distance 128, one table shared by
  the layers) added to the scores.
- The controls (``CONTROLS``), each one setting changed: ``"alibi_x8"`` (4 heads, every slope
  times 8: 2, 1/2, 1/8, 1/32), ``"alibi_8h"`` (8 heads of width 8, slopes 1/2 to 1/256),
  ``"t5_L"`` (T5's buckets ending at the training length ``L`` instead of 128) and ``"rope_L"``
  (RoPE with its base chosen so that the slowest pair turns once in ``L`` positions:
  ``b = (L / 2π)^(dh / (dh - 2))``, 6.42 for ``L = 32``, ``dh = 16``; every angle a test length
  meets was met in training).

Tasks (``TASKS``): "lag" (copy the token ``lag`` places back), "pattern" (after a noise prefix of
random length, continue a repeated block of distinct tokens: an induction-style lookup whose
answer is not at fixed positions) and "text" (next-character prediction on the English reference
documentation that ships with Python, ``pydoc_data``).

Training (``helpers/experiment/train.py``). The seeds of one task and variant train together as
one batched ensemble, each on its own stream of batches and with its own schedule: Adam, linear
warm-up, then a constant rate until the seed's own training loss has plateaued. From
``min_steps`` on, every ``plateau_window`` steps, the seed's mean loss over the last window is
compared with the window ``plateau_lookback`` windows before it (a trend over
``(plateau_lookback + 1) plateau_window`` steps), and the rule holds when it improved by less than
``plateau_tolerance`` of it (or by less than ``plateau_floor`` nats). The rate then falls linearly
to zero over ``cooldown_steps`` and the seed stops; the others go on without it. A seed still
improving at ``max_steps`` cools down there and is marked ``plateaued = False``; its record keeps
how much it was still improving (``improvement``), and ``LONG`` trains such groups longer.

Evaluation. At each evaluation length, loss and accuracy over every scored position and over the
scored positions past the training length only (``t >= L``, the part that is extrapolated); at
the longest length also per position. Every model sees the same evaluation sequences. On
"pattern", ``moved_block_accuracy`` also scores each seed with the block placed at chosen
positions of an ``8L`` sequence (``MOVED_BLOCK_STARTS``): a model that found the answer by where
it sits in training sequences, not by what it is, fails when the block moves.

``python -m helpers.experiment --out data/extrapolation.json`` (``make experiment``) regenerates
the cached results and the models that notebook 08 reads attention from; ``--check fresh`` trains
seeds the notebook never read (``FRESH``) and ``--check long`` the groups stopped by the step
limit, longer (``LONG``), into files of their own (``make experiment-checks``).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import hashlib
import json
import math
import multiprocessing
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch

from .._validate import check_int
from ..device import default_device
from .model import LEARNED_INIT_STD, SCHEMES, TinyEnsemble, TinyTransformer
from .probes import answer_weights, induction_heads, moved_block_accuracy, offset_weights, pattern_probe
from .tasks import TASKS, TEXT_VOCAB, decode, lag_batch, pattern_batch, text_batch, text_corpus
from .train import evaluate_model, plateaued, train_ensemble

__all__ = [
    "SCHEMES",
    "VARIANTS",
    "ABLATIONS",
    "METRICS",
    "LEARNED_INIT_STD",
    "ExperimentConfig",
    "QUICK",
    "TinyTransformer",
    "TinyEnsemble",
    "TASKS",
    "TEXT_VOCAB",
    "lag_batch",
    "pattern_batch",
    "text_batch",
    "text_corpus",
    "decode",
    "task_batch",
    "task_vocab",
    "build_model",
    "plateaued",
    "train_seeds",
    "train_model",
    "evaluation_batches",
    "evaluate_model",
    "run_experiment",
    "summarize_runs",
    "compare",
    "ranking",
    "describe_ranking",
    "regenerate",
    "load_results",
    "load_models",
    "save_models",
    "pattern_probe",
    "answer_weights",
    "induction_heads",
    "offset_weights",
    "moved_block_accuracy",
    "moved_block_starts",
    "CONTROLS",
    "CHECKS",
    "FRESH",
    "LONG",
    "MOVED_BLOCK_STARTS",
    "one_turn_base",
    "check_config",
    "CACHED_RESULTS",
    "SAVED_MODELS",
    "CACHED_MODELS",
    "CACHED_FRESH",
    "CACHED_LONG",
]

SCHEMA_VERSION = 3

#: Every model the experiment trains: its name and the ``TinyTransformer`` arguments that make it.
VARIANTS = {
    "none": dict(scheme="none"),
    "none_bos": dict(scheme="none", bos=True),
    "learned": dict(scheme="learned"),
    "sinusoidal": dict(scheme="sinusoidal"),
    "rope": dict(scheme="rope"),
    "alibi": dict(scheme="alibi"),
    "t5": dict(scheme="t5"),
    "alibi_8h": dict(scheme="alibi", n_heads=8),
    "alibi_x8": dict(scheme="alibi", alibi_scale=8.0),
    "t5_L": dict(scheme="t5", t5_max_distance="L"),
    "rope_L": dict(scheme="rope", rope_base="one turn in L"),
}
#: The controls: variants that change one setting of a scheme.
CONTROLS = ("alibi_x8", "alibi_8h", "t5_L", "rope_L")
ABLATIONS = CONTROLS  # the name of earlier versions
METRICS = ("loss", "accuracy", "loss_beyond", "accuracy_beyond")
#: Where ``moved_block_accuracy`` starts the block of a "pattern" probe, as multiples of ``L``.
MOVED_BLOCK_STARTS = (0, 0.5, 1, 2, 4, 6)


def one_turn_base(train_length: int, head_width: int) -> float:
    """The RoPE base ``b`` whose slowest pair turns once in ``train_length`` positions:
    ``θ_slowest = b^(-(dh - 2)/dh) = 2π / L``, so ``b = (L / 2π)^(dh / (dh - 2))``."""
    train_length = check_int("train_length", train_length, minimum=1)
    head_width = check_int("head_width", head_width, minimum=4)
    return (train_length / (2 * math.pi)) ** (head_width / (head_width - 2))


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
    """Everything that decides the numbers of one experiment (stored with the results)."""

    tasks: tuple = TASKS
    schemes: tuple = ("none", "none_bos", "learned", "sinusoidal", "rope", "alibi", "t5")
    #: (task, variant) pairs of ``CONTROLS`` trained beside the schemes, with the task's seeds.
    controls: tuple = (("lag", "alibi_x8"), ("lag", "rope_L"), ("text", "alibi_x8"), ("text", "t5_L"))
    seeds: tuple = (0, 1, 2, 3, 4)
    #: How many of ``seeds`` the text task trains (it costs the most).
    text_seeds: int = 3
    train_length: int = 32
    eval_multiples: tuple = (1, 2, 4, 8)
    vocab: int = 32
    lag: int = 3
    min_period: int = 3
    max_period: int = 12
    #: "pattern": ids kept for the noise prefix (the last ones of ``vocab``).
    noise_tokens: int = 8
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 128
    batch_size: int = 32
    learning_rate: float = 1e-2
    warmup_steps: int = 100
    min_steps: int = 600
    max_steps: int = 3000
    plateau_window: int = 200
    plateau_lookback: int = 2
    plateau_tolerance: float = 0.02
    plateau_floor: float = 0.01
    cooldown_steps: int = 150
    curve_every: int = 25
    eval_batches: int = 4
    eval_batch_size: int = 64
    eval_seed: int = 1234
    rope_base: float = 10000.0

    def __post_init__(self):
        unknown = [t for t in self.tasks if t not in TASKS]
        if unknown:
            raise ValueError(f"tasks must be drawn from {TASKS}, got {unknown}")
        unknown = [v for v in self.schemes if v not in VARIANTS]
        if unknown:
            raise ValueError(f"schemes must be drawn from {tuple(VARIANTS)}, got {unknown}")
        pairs = tuple(tuple(pair) for pair in self.controls)
        bad = [p for p in pairs if len(p) != 2 or p[0] not in TASKS or p[1] not in VARIANTS]
        if bad:
            raise ValueError(f"controls must be (task, variant) pairs from {TASKS} and {tuple(VARIANTS)}, got {bad}")
        object.__setattr__(self, "controls", pairs)
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct and at least one, got {self.seeds}")
        for name in (
            "min_steps",
            "plateau_window",
            "cooldown_steps",
            "curve_every",
            "warmup_steps",
            "text_seeds",
            "plateau_lookback",
        ):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be an int >= 1, got {getattr(self, name)!r}")
        if not self.min_steps <= self.max_steps:
            raise ValueError(f"min_steps must be <= max_steps ({self.max_steps}), got {self.min_steps}")
        if self.warmup_steps > self.min_steps:
            raise ValueError(f"warmup_steps must be <= min_steps ({self.min_steps}), got {self.warmup_steps}")

    def task_seeds(self, task: str, variant: str | None = None) -> tuple:
        """The seeds of (``task``, ``variant``): all of ``seeds``, or the first ``text_seeds`` of
        them for "text" (controls train the seeds of their task)."""
        if task == "text":
            return tuple(self.seeds[: self.text_seeds])
        return tuple(self.seeds)

    @property
    def pairs(self) -> list:
        """Every (task, variant) the experiment trains: the schemes on each task, then the controls."""
        pairs = [(t, v) for t in self.tasks for v in self.schemes]
        return pairs + [p for p in self.controls if p[0] in self.tasks and p not in pairs]

    @property
    def eval_lengths(self) -> tuple:
        return tuple(self.train_length * m for m in self.eval_multiples)

    @property
    def max_len(self) -> int:
        """Rows of the learned table: enough for the longest evaluation."""
        return max(self.eval_lengths)

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        for key, value in out.items():
            if isinstance(value, tuple):
                out[key] = [list(v) if isinstance(v, tuple) else v for v in value]
        out["eval_lengths"] = list(self.eval_lengths)
        return out

    @classmethod
    def from_dict(cls, values: dict) -> "ExperimentConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        kept = {
            k: (tuple(tuple(x) if isinstance(x, list) else x for x in v) if isinstance(v, list) else v)
            for k, v in values.items()
            if k in names
        }
        return cls(**kept)


#: The settings ``--quick`` uses (about a minute on two CPU cores): two seeds, 120 steps and a
#: 20-step cool-down, no plateau rule, no control. Its numbers are far from converged: it shows that the pipeline runs.
QUICK = dict(
    seeds=(0, 1),
    min_steps=120,
    max_steps=120,
    cooldown_steps=20,
    warmup_steps=20,
    eval_batches=1,
    eval_batch_size=32,
    controls=(),
)
#: ``--check fresh``: the same experiment on seeds the main run never read (5 to 9; 5 to 7 on
#: text), so that a ranking stated from seeds 0 to 4 is tested on seeds it did not see.
FRESH = dict(seeds=(5, 6, 7, 8, 9))
#: ``--check long``: every group with a seed that the step limit stopped while its loss was
#: still falling, trained again with the same seeds to this many steps.
LONG = dict(max_steps=8000)
CHECKS = {"fresh": FRESH, "long": LONG}


def check_config(check: str, main: dict) -> ExperimentConfig:
    """The settings of a check (a key of ``CHECKS``), made from the main run's results ``main``.

    "fresh": the main run's settings on ``FRESH``'s seeds. "long": the main run's settings with
    ``LONG``'s step limit, for the (task, variant) groups in which a seed stopped at the limit
    (``plateaued`` False), as controls (so with their seeds), and no other scheme.
    """
    if check not in CHECKS:
        raise ValueError(f"check must be one of {tuple(CHECKS)}, got {check!r}")
    base = ExperimentConfig.from_dict(main["config"])
    if check == "fresh":
        if set(FRESH["seeds"]) & set(base.seeds):
            raise ValueError(f"the fresh seeds {FRESH['seeds']} must differ from the main run's {base.seeds}")
        return dataclasses.replace(base, **FRESH)
    capped = []
    for run in main["runs"]:
        pair = (run["task"], run["scheme"])
        if not run["plateaued"] and pair not in capped:
            capped.append(pair)
    if not capped:
        raise ValueError("no group of the main run was stopped by the step limit: nothing to train longer")
    tasks = tuple(t for t in base.tasks if any(p[0] == t for p in capped))
    return dataclasses.replace(base, tasks=tasks, schemes=(), controls=tuple(capped), **LONG)


#: A tiny setting for the tests (seconds per group).
TINY = dict(
    seeds=(0,),
    min_steps=40,
    max_steps=40,
    cooldown_steps=10,
    plateau_window=10,
    curve_every=5,
    train_length=16,
    eval_multiples=(1, 2),
    d_model=32,
    d_ff=64,
    n_heads=2,
    batch_size=16,
    eval_batches=1,
    eval_batch_size=16,
    warmup_steps=5,
    max_period=6,
    noise_tokens=4,
    controls=(),
)


def task_vocab(task: str, config: "ExperimentConfig") -> int:
    """Vocabulary size of ``task``: ``config.vocab`` for the synthetic tasks, ``TEXT_VOCAB`` (97) for "text"."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    return TEXT_VOCAB if task == "text" else config.vocab


def task_batch(
    task: str,
    config: "ExperimentConfig",
    batch_size: int,
    length: int,
    *,
    generator: torch.Generator | None = None,
    device=None,
    split: str = "train",
    corpus=None,
):
    """``(inputs, targets, mask)`` of ``task`` (one of ``TASKS``) with the sizes of ``config``, each ``(B, T)``.

    ``split`` and ``corpus`` matter for "text" only: ``"train"`` or ``"held_out"`` text, and the
    ``text_corpus()`` pair to draw from (read when None). The synthetic tasks draw fresh random
    sequences either way.
    """
    if task == "lag":
        return lag_batch(batch_size, length, vocab=config.vocab, lag=config.lag, generator=generator, device=device)
    if task == "pattern":
        return pattern_batch(
            batch_size,
            length,
            vocab=config.vocab,
            min_period=config.min_period,
            max_period=config.max_period,
            noise=config.noise_tokens,
            generator=generator,
            device=device,
        )
    if task == "text":
        return text_batch(batch_size, length, corpus=corpus, split=split, generator=generator, device=device)
    raise ValueError(f"task must be one of {TASKS}, got {task!r}")


def build_model(variant: str, config: ExperimentConfig, task: str) -> TinyTransformer:
    """The untrained model of ``variant`` (a key of ``VARIANTS``) for ``task``, sized by ``config``."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {tuple(VARIANTS)}, got {variant!r}")
    sizes = dict(
        vocab=task_vocab(task, config),
        d_model=config.d_model,
        n_heads=config.n_heads,
        n_layers=config.n_layers,
        d_ff=config.d_ff,
        max_len=config.max_len,
        rope_base=config.rope_base,
    )
    arguments = dict(VARIANTS[variant])
    scheme = arguments.pop("scheme")
    if arguments.get("t5_max_distance") == "L":
        arguments["t5_max_distance"] = config.train_length
    if arguments.get("rope_base") == "one turn in L":
        arguments["rope_base"] = one_turn_base(
            config.train_length, config.d_model // arguments.get("n_heads", config.n_heads)
        )
    return TinyTransformer(scheme, **{**sizes, **arguments})


# ----------------------------------------------------------------------------------------------
# Training and evaluation


def train_seeds(task: str, variant: str, config: ExperimentConfig, seeds=None, *, device=None, corpus=None):
    """Train ``variant`` on ``task`` at ``config.train_length`` with every seed, side by side.

    ``seeds`` defaults to ``config.task_seeds(task, variant)``. Seed ``s`` initialises its model
    after ``torch.manual_seed(s)`` and draws its training batches from
    ``torch.Generator().manual_seed(10_000 + s)``; it stops when its own loss has plateaued, so
    whether it trains alone or beside other seeds, it computes the same thing, up to the order in
    which batched products add (the two paths agree to rounding at first and can part later). ``corpus``:
    ``text_corpus()`` for "text" (read when None).

    Returns:
        ``(models, losses, stops)`` of ``train.train_ensemble``, in the order of
        ``seeds``: the trained ``TinyTransformer`` of each seed, its training loss at every step
        (a float64 array) and its stopping record.
    """
    seeds = tuple(config.task_seeds(task, variant) if seeds is None else seeds)
    if task == "text" and corpus is None:
        corpus = text_corpus()
    models = []
    for seed in seeds:
        torch.manual_seed(seed)
        models.append(build_model(variant, config, task))
    streams = [torch.Generator().manual_seed(10_000 + seed) for seed in seeds]

    def batches(members):
        drawn = [
            task_batch(task, config, config.batch_size, config.train_length, generator=streams[e], corpus=corpus)
            for e in members
        ]  # k triples of (B, L)
        return [torch.stack(parts) for parts in zip(*drawn, strict=True)]  # (k, B, L) each

    return train_ensemble(models, batches, config, device=device)


def train_model(task: str, variant: str, config: ExperimentConfig, seed: int, *, device=None, corpus=None):
    """One seed's model, trained as ``train_seeds`` trains it: ``(model, losses (steps,), stop)``."""
    models, losses, stops = train_seeds(task, variant, config, (seed,), device=device, corpus=corpus)
    return models[0], losses[0], stops[0]


def evaluation_batches(task: str, config: ExperimentConfig, *, corpus=None):
    """The evaluation sequences: a function ``length -> [(inputs, targets, mask), ...]``, each ``(B, T)``.

    They depend only on ``config.eval_seed`` and the length (for "text": windows of the held-out
    topics), so every model is scored on the same sequences.
    """
    if task == "text" and corpus is None:
        corpus = text_corpus()

    def batches(length):
        generator = torch.Generator().manual_seed(config.eval_seed + length)
        return [
            task_batch(
                task, config, config.eval_batch_size, length, generator=generator, split="held_out", corpus=corpus
            )
            for _ in range(config.eval_batches)
        ]

    return batches


def moved_block_starts(config: ExperimentConfig) -> list:
    """The block starts of the moved-block probe: ``MOVED_BLOCK_STARTS`` times ``L``, as ints, those
    that leave two periods before the end of the longest evaluation length."""
    room = max(config.eval_lengths) - 2 * config.max_period
    return [int(m * config.train_length) for m in MOVED_BLOCK_STARTS if m * config.train_length <= room]


def _round(value, digits=5):
    return None if value is None else round(float(value), digits)


def _run_group(job: tuple) -> tuple[list, dict, dict]:
    """Train and evaluate every seed of one (task, variant); runs in a worker process or in this one."""
    task, variant, config_values, device, keep, threads = job
    if threads:
        torch.set_num_threads(threads)
    config = ExperimentConfig.from_dict(config_values)
    corpus = text_corpus() if task == "text" else None
    began, began_cpu = time.perf_counter(), time.process_time()
    models, losses, stops = train_seeds(task, variant, config, device=device, corpus=corpus)
    trained = time.perf_counter() - began
    batches = evaluation_batches(task, config, corpus=corpus)
    every = config.curve_every
    runs, states = [], {}
    for e, seed in enumerate(config.task_seeds(task, variant)):
        model, stop = models[e], stops[e]
        scores, per_position = evaluate_model(model, batches, config.eval_lengths, config.train_length)
        curve = losses[e]
        runs.append(
            {
                "task": task,
                "scheme": variant,
                "seed": seed,
                "steps": stop["steps"],
                "stop_step": stop["stop_step"],
                "plateaued": stop["plateaued"],
                "improvement": stop.get("improvement"),
                "initial_loss": _round(np.mean(curve[:10])),
                "final_loss": _round(np.mean(curve[-10:])),
                "loss_curve": [_round(np.mean(curve[i : i + every]), 4) for i in range(0, len(curve), every)],
                "loss_curve_every": every,
                "eval": {str(length): {k: _round(v) for k, v in value.items()} for length, value in scores.items()},
                "per_position": {k: [_round(v, 4) for v in values] for k, values in per_position.items()},
            }
        )
        if task == "pattern":
            moved = moved_block_accuracy(model, config, moved_block_starts(config))
            runs[-1]["moved_block"] = {str(k): _round(v) for k, v in moved.items()}
        if keep and seed == config.seeds[0]:
            states[(task, variant)] = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    group = {
        "task": task,
        "scheme": variant,
        "train_seconds": trained,
        "seconds": time.perf_counter() - began,
        "cpu_seconds": time.process_time() - began_cpu,
        "steps": [stop["steps"] for stop in stops],
        # member-steps: the training work of the group (each seed stops on its own)
        "member_steps": sum(stop["steps"] for stop in stops),
    }
    return runs, group, states


def summarize_runs(runs: list[dict], tasks, schemes, lengths) -> dict:
    """Spread over seeds: ``{task: {scheme: {length: {metric_mean, _std, _min, _max}}}}`` (lengths as str).

    Only the (task, scheme) pairs present in ``runs`` appear; ``*_beyond`` metrics are None at ``T = L``.
    Beside the lengths, ``"per_position"`` holds the mean over seeds at each position of the
    longest length, ``"seeds"`` the seeds, ``"steps"`` the steps each seed trained and
    ``"plateaued"`` whether every seed's plateau rule held.
    """
    summary = {}
    for task in tasks:
        for scheme in schemes:
            chosen = [r for r in runs if r["task"] == task and r["scheme"] == scheme]
            if not chosen:
                continue
            entry = summary.setdefault(task, {}).setdefault(scheme, {})
            for length in lengths:
                row = {}
                for metric in METRICS:
                    values = [r["eval"][str(length)][metric] for r in chosen]
                    if any(v is None for v in values):
                        row.update({f"{metric}_{k}": None for k in ("mean", "std", "min", "max")})
                        continue
                    values = np.array(values)
                    row[f"{metric}_mean"] = _round(values.mean())
                    row[f"{metric}_std"] = _round(values.std(ddof=1)) if len(values) > 1 else 0.0
                    row[f"{metric}_min"] = _round(values.min())
                    row[f"{metric}_max"] = _round(values.max())
                entry[str(length)] = row
            entry["per_position"] = {
                name: [
                    None
                    if any(r["per_position"][name][t] is None for r in chosen)
                    else _round(np.mean([r["per_position"][name][t] for r in chosen]), 4)
                    for t in range(len(chosen[0]["per_position"][name]))
                ]
                for name in ("loss", "accuracy")
            }
            if "moved_block" in chosen[0]:
                entry["moved_block"] = {
                    start: {
                        f"accuracy_{k}": _round(f([r["moved_block"][start] for r in chosen]))
                        for k, f in (("mean", np.mean), ("min", np.min), ("max", np.max))
                    }
                    for start in chosen[0]["moved_block"]
                }
            entry["seeds"] = [r["seed"] for r in chosen]
            entry["steps"] = [r["steps"] for r in chosen]
            entry["plateaued"] = all(r["plateaued"] for r in chosen)
    return summary


def compare(results: dict, task: str, a: str, b: str, length: int, metric: str = "accuracy_beyond") -> str:
    """How the seeds of scheme ``a`` and scheme ``b`` compare on ``metric`` at ``length``.

    Returns ``"higher"`` when every seed of ``a`` is above every seed of ``b`` (the worst of ``a``
    beats the best of ``b``), ``"lower"`` when every seed is below, and ``"not separable"`` when
    the ranges overlap. "Higher" is better for accuracy and worse for loss.
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    try:
        rows = [results["summary"][task][s][str(length)] for s in (a, b)]
    except KeyError as missing:
        raise ValueError(f"no results for task {task!r}, schemes {a!r} and {b!r}, length {length}") from missing
    if rows[0][f"{metric}_min"] is None or rows[1][f"{metric}_min"] is None:
        raise ValueError(f"{metric} is not defined at length {length} (no position past the training length)")
    if rows[0][f"{metric}_min"] > rows[1][f"{metric}_max"]:
        return "higher"
    if rows[0][f"{metric}_max"] < rows[1][f"{metric}_min"]:
        return "lower"
    return "not separable"


def ranking(results: dict, task: str, length: int, metric: str = "accuracy_beyond", schemes=None) -> list[list]:
    """The schemes of ``task`` ranked on ``metric`` at ``length``, best first, in tiers.

    Schemes are sorted by their mean over seeds (highest first for accuracy, lowest first for
    loss); a scheme joins the tier of the one ranked just above it when ``compare`` calls the two
    "not separable" (their seed ranges overlap). So ``[["alibi"], ["t5", "rope"]]`` says: ALiBi is
    above every seed of the next two, which cannot be told apart.

    Args:
        schemes: the schemes to rank (default ``results["schemes"]``; ablations may be named).
    """
    schemes = list(results["schemes"] if schemes is None else schemes)
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    sign = -1.0 if metric.startswith("accuracy") else 1.0
    rows = {}
    for scheme in schemes:
        try:
            rows[scheme] = results["summary"][task][scheme][str(length)][f"{metric}_mean"]
        except KeyError as missing:
            raise ValueError(f"no results for task {task!r}, scheme {scheme!r}, length {length}") from missing
        if rows[scheme] is None:
            raise ValueError(f"{metric} is not defined at length {length} (no position past the training length)")
    ordered = sorted(schemes, key=lambda name: sign * rows[name])
    tiers = [[ordered[0]]]
    for above, scheme in zip(ordered, ordered[1:], strict=False):
        if compare(results, task, above, scheme, length, metric) == "not separable":
            tiers[-1].append(scheme)
        else:
            tiers.append([scheme])
    return tiers


def describe_ranking(results: dict, task: str, length: int, metric: str = "accuracy_beyond", schemes=None) -> str:
    """``ranking`` as one line: ``"alibi 0.920 > t5 0.382 ≈ rope 0.331 > ..."`` (means over seeds);
    ``>`` separates schemes whose seed ranges do not overlap, ``≈`` joins those that do."""
    tiers = ranking(results, task, length, metric, schemes)
    summary = results["summary"][task]
    return " > ".join(
        " ≈ ".join(f"{name} {summary[name][str(length)][metric + '_mean']:.3f}" for name in tier) for tier in tiers
    )


def _environment(device, workers) -> dict:
    import matplotlib

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "matplotlib": matplotlib.__version__,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        # Which of torch's CPU kernels ran (AVX2, AVX512, ...): another kind rounds differently, and a
        # rerun reproduces the file's scores to the last digits only on the same kind.
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "device": str(device),
        "workers": workers,
        "torch_threads_per_worker": 1 if workers > 1 or str(device).startswith("cpu") else torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
    }


def _corpus_record(corpus) -> dict:
    """What the text task read: sizes, a fingerprint, the start of the held-out text, and two
    baselines that read no context at all, measured on the held-out text.

    ``unigram_loss``: the cross-entropy (nats per character) of predicting every held-out
    character from the training text's character frequencies (each count plus one);
    ``most_common_accuracy``: the accuracy of always predicting the training text's most common
    character. A model past its training length that does worse than these has lost more than
    its context: what it reads there misleads it.
    """
    train, held_out = corpus
    digest = hashlib.sha256(torch.cat([train, held_out]).numpy().tobytes()).hexdigest()
    counts = torch.bincount(train, minlength=TEXT_VOCAB).double() + 1.0  # (V,)
    log_p = (counts / counts.sum()).log()  # (V,)
    return {
        "source": "pydoc_data.topics of Python " + platform.python_version(),
        "train_characters": len(train),
        "held_out_characters": len(held_out),
        "sha256": digest,
        "held_out_sample": decode(held_out[:400]),
        "unigram_loss": _round(-log_p[held_out].mean()),
        "most_common_accuracy": _round((held_out == counts.argmax()).double().mean()),
        "most_common_character": decode(counts.argmax()[None]),
    }


#: The models saved beside the results (the first seed's), for notebook 08: attention maps of
#: "pattern", attention by offset of the "lag" models, the learned table's rows, the T5 buckets.
SAVED_MODELS = (
    ("pattern", "alibi"),
    ("pattern", "rope"),
    ("lag", "alibi"),
    ("lag", "alibi_x8"),
    ("lag", "rope"),
    ("lag", "rope_L"),
    ("lag", "learned"),
    ("lag", "t5"),
    ("lag", "none_bos"),
)


def run_experiment(
    config: ExperimentConfig | None = None,
    *,
    device=None,
    progress: bool = True,
    keep_models: dict | None = None,
    workers: int | None = None,
    costs: dict | None = None,
) -> dict:
    """Train every scheme on every task with every seed (and the ablations), and evaluate them.

    Args:
        config: the settings (default ``ExperimentConfig()``).
        device: where to train (default ``helpers.default_device()``).
        progress: show a tqdm progress bar on stderr.
        keep_models: if a dict is given, the first seed's trained models of ``SAVED_MODELS`` are
            put in it, keyed by ``(task, scheme)``.
        workers: processes that train side by side on a CPU, one torch thread each (default: one
            per core; 1 on a GPU, where the seeds of a group already fill the device together).
            With one worker on a CPU the groups train in this process, also on one torch thread
            (its thread count is restored afterwards).
            The groups are independent, so the numbers do not depend on it.
        costs: ``{(task, scheme): member-steps}`` of an earlier run (its ``groups``), to start the
            longest groups first; it changes the order only, never a number.

    Returns:
        The results dictionary that ``--out`` writes as JSON (see ``load_results``).
    """
    from tqdm.auto import tqdm

    config = config or ExperimentConfig()
    device = torch.device(device) if device is not None else default_device()
    if workers is None:
        workers = 1 if device.type != "cpu" else max(1, os.cpu_count() or 1)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    start = time.perf_counter()
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    pairs = config.pairs
    keep = set(SAVED_MODELS) if keep_models is not None else set()
    # One torch thread per group, in a worker or in this process: tiny matrices gain nothing from
    # more threads (a busy second thread makes a --quick run several times slower), and one thread
    # adds in the order the cached run added in. This process's thread count is restored after.
    threads = 1 if workers > 1 or device.type == "cpu" else 0
    threads_before = torch.get_num_threads()
    jobs = [(task, scheme, config.to_dict(), str(device), (task, scheme) in keep, threads) for task, scheme in pairs]
    # The longest groups first, so that the workers finish together (the order changes no number):
    # by the training work ``costs`` gives, else by the number of seeds.
    costs = costs or {}
    order = sorted(
        range(len(pairs)),
        key=lambda i: -costs.get(pairs[i], 1000 * len(config.task_seeds(*pairs[i]))),
    )
    corpus = text_corpus() if "text" in config.tasks else None  # read here too: a missing pydoc_data fails now
    runs, groups, states = [], [], {}
    bar = tqdm(total=len(jobs), desc="train short, test long", unit="group", disable=not progress)

    def collect(result):
        group_runs, group, group_states = result
        runs.extend(group_runs)
        groups.append(group)
        states.update(group_states)
        bar.set_postfix_str(f"{group['task']}, {group['scheme']}: {max(group['steps'])} steps")
        bar.update()

    if workers == 1:
        try:
            for i in order:
                collect(_run_group(jobs[i]))
        finally:
            torch.set_num_threads(threads_before)
    else:
        context = multiprocessing.get_context("spawn")  # a fork would inherit torch's thread pools
        with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            for future in concurrent.futures.as_completed([pool.submit(_run_group, jobs[i]) for i in order]):
                collect(future.result())
    bar.close()
    position = {pair: i for i, pair in enumerate(pairs)}
    runs.sort(key=lambda r: (position[(r["task"], r["scheme"])], config.seeds.index(r["seed"])))
    groups.sort(key=lambda g: position[(g["task"], g["scheme"])])
    if keep_models is not None:
        for (task, scheme), state in states.items():
            model = build_model(scheme, config, task)
            model.load_state_dict(state)
            keep_models[(task, scheme)] = model.to(device).eval()
    controls = [v for t, v in config.controls if t in config.tasks and v not in config.schemes]
    schemes = list(config.schemes) + list(dict.fromkeys(controls))
    schemes_of = {task: [s for t, s in pairs if t == task] for task in config.tasks}
    return {
        "schema_version": SCHEMA_VERSION,
        "task_descriptions": {
            "lag": f"copy the token {config.lag} places back; scored at positions t >= {config.lag}",
            "pattern": "after a noise prefix of random length, continue a repeated block of distinct random tokens;"
            " scored where the next token is determined",
            "text": "next character of Python's reference documentation (pydoc_data), held-out topics; every position",
        },
        "config": config.to_dict(),
        "tasks": list(config.tasks),
        "schemes": list(config.schemes),
        "controls": [list(p) for p in config.controls if p[0] in config.tasks],
        "moved_block_starts": moved_block_starts(config) if "pattern" in config.tasks else [],
        "seeds": list(config.seeds),
        "group_seeds": {
            task: {scheme: list(config.task_seeds(task, scheme)) for scheme in schemes_of[task]}
            for task in config.tasks
        },
        "eval_lengths": list(config.eval_lengths),
        "runs": runs,
        "groups": groups,
        "summary": summarize_runs(runs, config.tasks, schemes, config.eval_lengths),
        "text_corpus": _corpus_record(corpus) if corpus is not None else None,
        "environment": _environment(device, workers),
        "wall_seconds": time.perf_counter() - start,
        # CPU time summed over the groups (in whichever process they ran): on an idle machine with
        # one thread per worker, about the wall time times the number of workers.
        "cpu_seconds": sum(g["cpu_seconds"] for g in groups),
        "load_average_before": list(load_before) if load_before else None,
        "load_average_after": list(os.getloadavg()) if load_before else None,
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


# ----------------------------------------------------------------------------------------------
# Files


#: The cached results committed with the collection (``make experiment`` rewrites them), found
#: from the package so that a notebook reads them from any working directory.
CACHED_RESULTS = Path(__file__).resolve().parents[2] / "data" / "extrapolation.json"
CACHED_MODELS = CACHED_RESULTS.with_name("extrapolation_models.pt")
#: The two checks' results (``make experiment-checks``): fresh seeds, and the capped groups trained longer.
CACHED_FRESH = CACHED_RESULTS.with_name("extrapolation_fresh.json")
CACHED_LONG = CACHED_RESULTS.with_name("extrapolation_long.json")


def load_results(path=CACHED_RESULTS) -> dict:
    """Read a results file written by ``python -m helpers.experiment`` and check its schema version."""
    with open(path, encoding="utf-8") as handle:
        results = json.load(handle)
    if results.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{path} has schema_version {results.get('schema_version')!r}, expected {SCHEMA_VERSION}")
    return results


def save_models(models: dict, config: ExperimentConfig, path) -> None:
    """Save trained models ``{(task, scheme): model}`` in float16, with the config to rebuild them."""
    states = {
        f"{task}/{scheme}": {k: v.detach().cpu().half() for k, v in model.state_dict().items()}
        for (task, scheme), model in models.items()
    }
    torch.save({"config": config.to_dict(), "states": states}, path)


def load_models(path=CACHED_MODELS, *, device=None) -> tuple[dict, ExperimentConfig]:
    """Rebuild the models saved by ``save_models``: ``({(task, scheme): model in eval mode}, config)``.

    The float16 weights are loaded into float32 models on ``device`` (default: the CPU).
    """
    saved = torch.load(path, map_location="cpu", weights_only=True)
    config = ExperimentConfig.from_dict(saved["config"])
    models = {}
    for key, state in saved["states"].items():
        task, scheme = key.split("/")
        model = build_model(scheme, config, task)
        model.load_state_dict({k: v.float() for k, v in state.items()})
        models[(task, scheme)] = model.to(device or "cpu").eval()
    return models, config


def _earlier_costs(path) -> dict:
    """``{(task, scheme): member-steps}`` of the results at ``path``, or {} when there are none."""
    try:
        return {(g["task"], g["scheme"]): g["member_steps"] for g in load_results(path)["groups"]}
    except (OSError, ValueError, KeyError):
        return {}


#: Where ``--quick`` writes by default: a smoke test of the pipeline never replaces the cache that
#: notebook 08 reads (``build/`` is not committed).
QUICK_RESULTS = CACHED_RESULTS.parents[1] / "build" / "extrapolation_quick.json"


def default_out(*, quick: bool = False, check: str | None = None) -> Path:
    """Where ``regenerate`` writes when no ``out`` is given: the cache for the full run,
    ``data/extrapolation_<check>.json`` for a check, ``QUICK_RESULTS`` for a quick run."""
    if check is not None:
        return CACHED_RESULTS.with_name(f"extrapolation_{check}.json")
    return QUICK_RESULTS if quick else CACHED_RESULTS


def regenerate(
    out=None,
    *,
    models=None,
    quick: bool = False,
    check: str | None = None,
    main=CACHED_RESULTS,
    device=None,
    workers=None,
    progress: bool = True,
) -> tuple[Path, Path | None]:
    """Run the experiment and write its results (JSON) to ``out`` and its saved models beside them.

    ``out`` defaults to ``default_out(quick=quick, check=check)``: ``data/extrapolation.json``,
    ``data/extrapolation_<check>.json`` for a check, ``build/extrapolation_quick.json`` for a quick
    run; ``models`` to ``extrapolation_models.pt`` in the folder of ``out``; ``quick`` uses
    ``QUICK``; ``check`` (a key of ``CHECKS``: "fresh" or "long") runs that check of the main
    run's results at ``main`` instead (``check_config``), and saves no model. Returns the two
    paths (None for the models of a check). ``make experiment`` and ``make experiment-checks``
    call this.
    """
    if check is not None and check not in CHECKS:
        raise ValueError(f"check must be one of {tuple(CHECKS)} or None, got {check!r}")
    if check is not None and quick:
        raise ValueError("quick and check cannot be combined")
    out = Path(out) if out is not None else default_out(quick=quick, check=check)
    if check is None:
        models = Path(models) if models is not None else out.with_name("extrapolation_models.pt")
        config = ExperimentConfig(**QUICK) if quick else ExperimentConfig()
    else:
        config = check_config(check, load_results(main))
    kept: dict | None = {} if check is None else None
    results = run_experiment(
        config, device=device, keep_models=kept, workers=workers, progress=progress, costs=_earlier_costs(out)
    )
    results["quick"] = bool(quick)
    results["check"] = check
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as handle:
        json.dump(results, handle, indent=None, separators=(",", ":"))
        handle.write("\n")
    if check is None:
        save_models(kept, config, models)
        return out, models
    return out, None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.experiment", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        default=None,
        help="where to write the results (JSON; default data/extrapolation.json, data/extrapolation_CHECK.json for a "
        "check, build/extrapolation_quick.json for --quick)",
    )
    parser.add_argument(
        "--models",
        default=None,
        help="where to save the first seed's models named in SAVED_MODELS "
        "(default: extrapolation_models.pt beside --out)",
    )
    parser.add_argument("--quick", action="store_true", help="two seeds, 120 steps (about a minute on two cores)")
    parser.add_argument(
        "--check",
        choices=sorted(CHECKS),
        default=None,
        help="fresh: the main run's experiment on seeds 5-9; long: its groups the step limit stopped, to 8,000 steps",
    )
    parser.add_argument("--device", default=None, help="torch device (default: helpers.default_device())")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="processes training side by side, one torch thread each (default: one per core on a CPU, 1 on a GPU)",
    )
    args = parser.parse_args(argv)
    out, models = regenerate(
        args.out, models=args.models, quick=args.quick, check=args.check, device=args.device, workers=args.workers
    )
    results = load_results(out)
    saved = f" and {models}" if models else ""
    print(
        f"wrote {out}{saved}: {len(results['runs'])} models in {results['wall_seconds'] / 60:.1f} min on "
        f"{results['environment']['device']} with {results['environment']['workers']} worker(s)"
    )
    return 0
