"""Stretching a trained model's context: RoPE models trained at ``L``, read at ``2L``, ``4L`` and
``8L`` under six RoPE settings, without fine-tuning and after a short fine-tune at the target
length (article 003 §10; the scalings of notebook 06, as ``helpers.rope_cos_sin`` computes them).

Notation: ``L`` the training length, ``s`` the scaling factor (the target length is ``sL``), ``E``
seeds trained together, ``B`` batch, ``T`` positions.

Methods (``METHODS``), each a RoPE setting of ``helpers.rope_cos_sin`` with factor ``s`` and
original length ``L``: ``"none"`` (the tables as trained), ``"linear"`` (position interpolation,
Chen et al. 2023: every speed divided by ``s``), ``"ntk"`` (NTK-aware, bloc97 2023: the base
times ``s^(d/(d-2))``), ``"dynamic"`` (Hugging Face's dynamic NTK: the base grown with the length
read, unchanged up to ``L``), ``"yarn"`` (Peng et al. 2023: fast pairs kept, slow pairs divided,
a ramp between, tables times ``0.1 ln s + 1``) and ``"llama3"`` (Meta's Llama 3.1 rule by
wavelength).

The base models are notebook 08's RoPE models (``helpers.experiment``, the same settings, seeds
and trainer): "text" (next character of Python's reference documentation), "lag" (copy the token
three places back: an answer fixed in relative position, which plain RoPE loses past ``L``) and
"passkey" (a key hidden anywhere, asked for at the end: an answer found by content, at distances
up to ``T - 2``). Each seed of each task is then, for every method:

- scored with no fine-tuning, at every evaluation length (the method's tables at that length);
- fine-tuned at the target length ``sL`` with the method's tables, every seed side by side (a
  ``TinyEnsemble``, as 08 trains), with as many tokens per step as in training (the batch divided
  by ``s``), Adam at ``finetune_rate`` after a short warm-up, and scored again after each budget of
  ``budgets`` steps. Not "dynamic" (``INFERENCE_ONLY``): its base follows the length read, so at
  the fine-tuning length ``sL`` it would train with the factor ``s² - s + 1`` (13 for ``s = 4``)
  and be read at a smaller one; Hugging Face offers it for models used without fine-tuning.

Scores at each length ``T``: the loss and accuracy over the scored positions, in three bands
(``BANDS``): "within" the training length (``t < L``: does the scaling damage what the model
already did?), "past" it up to the target length (``L <= t < sL``: what the scaling is for) and
"beyond" the target (``t >= sL``); for "passkey", whose one scored position is the last, the
bands are the key's distance instead (up to ``L - 2``, as in training; up to ``sL - 2``; farther),
read on ``passkey_eval_batches`` batches (1,024 sequences: the key's place is uniform, so a band
gets its share of them).

``python -m helpers.experiment stretch --out data/stretch.json --models data/stretch_models.pt`` (``make
experiment-stretch``) regenerates the cached results and seed 0's base models; ``--quick`` runs a
small version in about a minute.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from .._validate import check_int
from .extrapolation import ExperimentConfig
from .model import TinyEnsemble, TinyTransformer
from .tasks import PASSKEY_MARK, lag_batch, passkey_batch, text_batch, text_corpus
from .train import clip_per_member, masked_losses, train_ensemble

__all__ = [
    "METHODS",
    "INFERENCE_ONLY",
    "BANDS",
    "STRETCH_TASKS",
    "StretchConfig",
    "method_scaling",
    "stretch_batch",
    "train_base_models",
    "fine_tune",
    "method_budgets",
    "bands",
    "score_members",
    "attention_entropy",
    "load_base_model",
    "run_stretch",
    "score",
    "compare",
    "load_stretch",
]

METHODS = ("none", "linear", "ntk", "dynamic", "yarn", "llama3")
#: Methods scored without fine-tuning only (see the module's docstring).
INFERENCE_ONLY = ("dynamic",)
#: The bands a score is split into: t < L, L <= t < sL, t >= sL (for "passkey", the key's distance).
BANDS = ("within", "past", "beyond")
STRETCH_TASKS = ("text", "lag", "passkey")
CACHED_RESULTS = Path(__file__).resolve().parents[2] / "data" / "stretch.json"
#: Seed 0's base model of every task (state dicts), for the notebook's look inside.
CACHED_MODELS = CACHED_RESULTS.with_name("stretch_models.pt")
#: The held-out text the cached run was scored on: ``text_corpus()`` reads Python's own documentation,
#: which differs between Python versions, so a look inside the cached models reads this copy.
CACHED_TEXT = CACHED_RESULTS.with_name("stretch_text.pt")


@dataclasses.dataclass(frozen=True)
class StretchConfig:
    """Everything that decides the numbers (stored with the results)."""

    tasks: tuple = STRETCH_TASKS
    methods: tuple = METHODS
    #: Seeds per task: notebook 08's seeds 0-4 for "lag", 0-2 for "text" (its text_seeds), 0-4 for "passkey".
    seeds: dict = dataclasses.field(
        default_factory=lambda: {"text": (0, 1, 2), "lag": (0, 1, 2, 3, 4), "passkey": (0, 1, 2, 3, 4)}
    )
    factor: int = 4
    budgets: tuple = (0, 25, 100, 400)
    eval_multiples: tuple = (1, 2, 4, 8)
    finetune_rate: float = 1e-3
    finetune_warmup: int = 10
    passkey_keys: int = 16
    eval_batches: int = 4
    passkey_eval_batches: int = 16
    eval_batch_size: int = 64
    eval_seed: int = 4321
    #: The base models' settings (notebook 08's, unchanged).
    base: dict = dataclasses.field(default_factory=lambda: ExperimentConfig().to_dict())

    def __post_init__(self):
        unknown = [t for t in self.tasks if t not in STRETCH_TASKS]
        if unknown:
            raise ValueError(f"tasks must be drawn from {STRETCH_TASKS}, got {unknown}")
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown:
            raise ValueError(f"methods must be drawn from {METHODS}, got {unknown}")
        check_int("factor", self.factor, minimum=2)
        if list(self.budgets) != sorted(set(self.budgets)) or self.budgets[0] != 0:
            raise ValueError(f"budgets must be increasing fine-tuning steps starting at 0, got {self.budgets}")
        if self.base_config.batch_size % self.factor:
            raise ValueError(
                f"factor must divide the training batch ({self.base_config.batch_size}) so that a fine-tuning step "
                f"reads as many tokens as a training step, got {self.factor}"
            )
        missing = [t for t in self.tasks if not self.seeds.get(t)]
        if missing:
            raise ValueError(f"seeds must name at least one seed for every task, missing {missing}")

    @property
    def base_config(self) -> ExperimentConfig:
        return ExperimentConfig.from_dict(self.base)

    @property
    def train_length(self) -> int:
        return self.base_config.train_length

    @property
    def eval_lengths(self) -> tuple:
        return tuple(self.train_length * m for m in self.eval_multiples)

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["seeds"] = {task: list(seeds) for task, seeds in self.seeds.items()}
        for key in ("tasks", "methods", "budgets", "eval_multiples"):
            out[key] = list(out[key])
        out["eval_lengths"] = list(self.eval_lengths)
        return out

    @classmethod
    def from_dict(cls, values: dict) -> "StretchConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        kept = {k: (tuple(v) if isinstance(v, list) else v) for k, v in values.items() if k in names}
        if "seeds" in kept:
            kept["seeds"] = {task: tuple(seeds) for task, seeds in kept["seeds"].items()}
        return cls(**kept)


#: ``--quick``: two seeds per task, short base training, budgets 0 and 10, one evaluation batch.
QUICK = dict(
    seeds={"text": (0, 1), "lag": (0, 1), "passkey": (0, 1)},
    budgets=(0, 10),
    eval_batches=1,
    passkey_eval_batches=2,
    eval_batch_size=32,
    base=ExperimentConfig(min_steps=120, max_steps=120, cooldown_steps=20, warmup_steps=20).to_dict(),
)


def method_scaling(method: str, factor: float, train_length: int, seq_len: int | None = None):
    """The ``scaling`` dict of ``helpers.rope_cos_sin`` for ``method`` (None for ``"none"``).

    ``seq_len``: the length read, for ``"dynamic"`` (whose base grows with it past ``train_length``).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method == "none":
        return None
    if method in ("linear", "ntk"):
        return {"type": method, "factor": float(factor)}
    scaling = {"type": method, "factor": float(factor), "original_max_len": int(train_length)}
    if method == "dynamic":
        scaling["seq_len"] = int(seq_len if seq_len is not None else train_length)
    return scaling


def stretch_batch(
    task: str, config: StretchConfig, batch_size: int, length: int, *, generator, split="train", corpus=None
):
    """``(inputs, targets, mask)`` of ``task`` at ``length``, each ``(B, T)`` (see ``STRETCH_TASKS``)."""
    base = config.base_config
    if task == "text":
        return text_batch(batch_size, length, corpus=corpus, split=split, generator=generator)
    if task == "lag":
        return lag_batch(batch_size, length, vocab=base.vocab, lag=base.lag, generator=generator)
    if task == "passkey":
        return passkey_batch(batch_size, length, vocab=base.vocab, keys=config.passkey_keys, generator=generator)
    raise ValueError(f"task must be one of {STRETCH_TASKS}, got {task!r}")


def _vocab(task: str, config: StretchConfig) -> int:
    from .tasks import TEXT_VOCAB

    return TEXT_VOCAB if task == "text" else config.base_config.vocab


def _new_model(task: str, config: StretchConfig) -> TinyTransformer:
    base = config.base_config
    return TinyTransformer(
        "rope",
        vocab=_vocab(task, config),
        d_model=base.d_model,
        n_heads=base.n_heads,
        n_layers=base.n_layers,
        d_ff=base.d_ff,
        max_len=max(config.eval_lengths),
        rope_base=base.rope_base,
    )


def train_base_models(task: str, config: StretchConfig, *, corpus=None):
    """The RoPE models of ``task`` trained at ``L`` as notebook 08 trains them (its trainer, settings
    and seeding: seed ``s`` initialises after ``torch.manual_seed(s)`` and reads batches from
    ``torch.Generator().manual_seed(10_000 + s)``). Returns ``(models, stops)``, one per seed."""
    base = config.base_config
    seeds = tuple(config.seeds[task])
    models = []
    for seed in seeds:
        torch.manual_seed(seed)
        models.append(_new_model(task, config))
    streams = [torch.Generator().manual_seed(10_000 + seed) for seed in seeds]

    def batches(members):
        drawn = [
            stretch_batch(task, config, base.batch_size, base.train_length, generator=streams[e], corpus=corpus)
            for e in members
        ]
        return [torch.stack(parts) for parts in zip(*drawn, strict=True)]  # (k, B, L) each

    trained, _, stops = train_ensemble(models, batches, base, device="cpu")
    return trained, stops


def _set_scaling(model, method: str, config: StretchConfig) -> None:
    model.rope_scaling = method_scaling(method, config.factor, config.train_length)


def method_budgets(method: str, config: StretchConfig) -> tuple:
    """The fine-tuning budgets ``method`` is scored at: ``config.budgets``, or 0 alone for the
    methods of ``INFERENCE_ONLY``."""
    return (0,) if method in INFERENCE_ONLY else tuple(config.budgets)


def fine_tune(models, task: str, method: str, config: StretchConfig, *, corpus=None, on_budget=None):
    """Fine-tune copies of ``models`` (one per seed, trained at ``L``) at the target length ``sL``
    with ``method``'s tables, every seed side by side; call ``on_budget(steps, ensemble)`` at each
    budget of ``method_budgets(method, config)`` (0 first, before any step). Seed ``j`` reads its
    batches from ``torch.Generator().manual_seed(20_000 + seed)`` in the order of ``config.seeds[task]``."""
    base = config.base_config
    seeds = tuple(config.seeds[task])
    ensemble = TinyEnsemble(models)
    _set_scaling(ensemble, method, config)
    length, batch = config.factor * base.train_length, base.batch_size // config.factor
    streams = [torch.Generator().manual_seed(20_000 + seed) for seed in seeds]
    optimizer = torch.optim.Adam(ensemble.parameters(), lr=config.finetune_rate)
    budgets = list(method_budgets(method, config))
    step = 0
    while True:
        if step in budgets:
            ensemble.eval()
            on_budget(step, ensemble)
            ensemble.train()
        if step == budgets[-1]:
            return ensemble
        for group in optimizer.param_groups:
            group["lr"] = config.finetune_rate * min(1.0, (step + 1) / config.finetune_warmup)
        drawn = [stretch_batch(task, config, batch, length, generator=g, corpus=corpus) for g in streams]
        inputs, targets, mask = (torch.stack(parts) for parts in zip(*drawn, strict=True))  # (E, B', sL) each
        loss, _ = masked_losses(ensemble(inputs), targets, mask)  # (E,)
        optimizer.zero_grad(set_to_none=True)
        loss.sum().backward()
        clip_per_member(ensemble, 1.0)
        optimizer.step()
        step += 1


def evaluation_sets(task: str, config: StretchConfig, *, corpus=None) -> dict:
    """The evaluation sequences, the same for every model: ``{length: [(inputs, targets, mask), ...]}``."""
    sets = {}
    batches = config.passkey_eval_batches if task == "passkey" else config.eval_batches
    for length in config.eval_lengths:
        generator = torch.Generator().manual_seed(config.eval_seed + length)
        sets[length] = [
            stretch_batch(
                task, config, config.eval_batch_size, length, generator=generator, split="held_out", corpus=corpus
            )
            for _ in range(batches)
        ]
    return sets


def bands(task: str, inputs: torch.Tensor, mask: torch.Tensor, train_length: int, factor: int) -> torch.Tensor:
    """The band (index into ``BANDS``) of every scored place, int64 ``(B, T)``: position ``t < L``,
    ``< sL``, farther; for "passkey", the key's distance (query at ``T - 1``, key at ``p + 1``:
    ``T - 2 - p``) up to ``L - 2``, ``sL - 2``, farther."""
    length = inputs.shape[-1]
    if task == "passkey":
        where = (inputs == PASSKEY_MARK).double().argmax(dim=1)  # (B,) the mark's position p
        distance = (length - 2 - where)[:, None]  # (B, 1) from the query back to the key
        band = (distance > train_length - 2).long() + (distance > factor * train_length - 2).long()  # (B, 1)
    else:
        t = torch.arange(length)[None, :]  # (1, T)
        band = (t >= train_length).long() + (t >= factor * train_length).long()  # (1, T)
    return band.expand_as(mask)


@torch.no_grad()
def score_members(ensemble: TinyEnsemble, task: str, sets: dict, train_length: int, factor: int) -> list[dict]:
    """Each member's scores at each length: ``[{length: {"loss_within", "accuracy_within", "loss_past",
    ...}}]`` (str lengths), one loss and one accuracy per band of ``BANDS`` (see ``bands``). A band
    with nothing scored is None, as is "beyond" at lengths up to ``sL``."""
    e = ensemble.members
    sums = [{} for _ in range(e)]
    for length, batches in sets.items():
        total = torch.zeros(e, len(BANDS), 3, dtype=torch.float64)  # (member, band, loss/correct/count)
        for inputs, targets, mask in batches:
            logits = ensemble(inputs.expand(e, *inputs.shape))  # (E, B, T, V)
            losses = F.cross_entropy(logits.permute(0, 3, 1, 2), targets.expand(e, *targets.shape), reduction="none")
            correct = logits.argmax(dim=-1) == targets  # (E, B, T)
            band = bands(task, inputs, mask, train_length, factor)  # (B, T)
            for part in range(len(BANDS)):
                chosen = mask & (band == part)  # (B, T)
                total[:, part, 0] += (losses * chosen).sum(dim=(1, 2)).double()
                total[:, part, 1] += (correct & chosen).sum(dim=(1, 2)).double()
                total[:, part, 2] += chosen.sum().double()
        for j in range(e):
            row = {}
            for part, name in enumerate(BANDS):
                count = float(total[j, part, 2])
                row[f"loss_{name}"] = round(float(total[j, part, 0]) / count, 5) if count else None
                row[f"accuracy_{name}"] = round(float(total[j, part, 1]) / count, 5) if count else None
            sums[j][str(length)] = row
    return sums


@torch.no_grad()
def attention_entropy(
    model, task: str, method: str, config: StretchConfig, length: int, *, batches=2, corpus=None, attention_factor=None
):
    """How spread each layer's attention is when ``model`` reads ``length`` tokens under ``method``'s
    tables: the entropy (nats) of an attention row, averaged over sequences, heads and the queries
    of each position band (``BANDS``: ``t < L``, ``L <= t < sL``, farther), one value per layer:
    ``{"within": [layer 0, layer 1, ...], "past": [...], "beyond": [...]}`` (None for an empty band).
    A row that attends to one key has entropy 0; one spread evenly over the ``t + 1`` keys it sees,
    ``ln(t + 1)``. The sequences are the evaluation's (``evaluation_sets``' first ``batches``). The
    model's ``rope_scaling`` is restored afterwards. ``attention_factor``: for "yarn" only, replaces
    YaRN's factor on both tables (1 takes it away and leaves the speeds)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    length = check_int("length", length, minimum=2)
    scaling = method_scaling(method, config.factor, config.train_length)
    if attention_factor is not None:
        if method != "yarn":
            raise ValueError(f"attention_factor applies to method 'yarn' only, got method {method!r}")
        if (
            isinstance(attention_factor, bool)
            or not isinstance(attention_factor, (int, float))
            or attention_factor <= 0
        ):
            raise ValueError(f"attention_factor must be a positive number, got {attention_factor!r}")
        scaling["attention_factor"] = float(attention_factor)
    kept = model.rope_scaling
    model.rope_scaling = scaling
    generator = torch.Generator().manual_seed(config.eval_seed + length)
    try:
        totals = None
        for _ in range(check_int("batches", batches, minimum=1)):
            inputs, _, _ = stretch_batch(
                task, config, config.eval_batch_size, length, generator=generator, split="held_out", corpus=corpus
            )
            _, weights = model(inputs, need_weights=True)  # one (B, H, T, T) per layer
            rows = torch.stack([-(w * w.clamp_min(1e-30).log()).sum(dim=-1).mean(dim=(0, 1)) for w in weights])
            totals = rows if totals is None else totals + rows  # (layers, T)
    finally:
        model.rope_scaling = kept
    per_position = (totals / batches).double()  # (layers, T)
    t = torch.arange(length)
    band = (t >= config.train_length).long() + (t >= config.factor * config.train_length).long()  # (T,)
    return {
        name: (
            [round(float(v), 5) for v in per_position[:, band == part].mean(dim=1)] if (band == part).any() else None
        )
        for part, name in enumerate(BANDS)
    }


def load_base_model(task: str, path=CACHED_MODELS, results=None) -> TinyTransformer:
    """Seed 0's base model of ``task`` (trained at ``L``, before any stretching), as the cached run
    saved it (``make experiment-stretch``); its settings from ``results`` (``load_stretch()``)."""
    if task not in STRETCH_TASKS:
        raise ValueError(f"task must be one of {STRETCH_TASKS}, got {task!r}")
    results = results if results is not None else load_stretch()
    config = StretchConfig.from_dict(results["config"])
    saved = torch.load(path, map_location="cpu", weights_only=True)
    if task not in saved:
        raise ValueError(
            f"{path} holds the base models of {sorted(saved)}, not {task!r}: rerun make experiment-stretch"
        )
    model = _new_model(task, config)
    model.load_state_dict(saved[task])
    return model.eval()


def _run_task_method(job: tuple) -> list[dict]:
    """Fine-tune and score one (task, method) from the base models' states; runs in a worker."""
    task, method, config_values, states = job
    torch.set_num_threads(1)
    config = StretchConfig.from_dict(config_values)
    corpus = text_corpus() if task == "text" else None
    models = []
    for state in states:
        model = _new_model(task, config)
        model.load_state_dict(state)
        models.append(model)
    sets = evaluation_sets(task, config, corpus=corpus)
    runs = []
    began = time.perf_counter()

    def on_budget(steps, ensemble):
        scores = score_members(ensemble, task, sets, config.train_length, config.factor)
        for seed, member_scores in zip(config.seeds[task], scores, strict=True):
            runs.append({"task": task, "method": method, "budget": steps, "seed": seed, "eval": member_scores})

    fine_tune(models, task, method, config, corpus=corpus, on_budget=on_budget)
    for run in runs:
        run["group_seconds"] = round(time.perf_counter() - began, 1)
    return runs


def _train_task(job: tuple):
    task, config_values = job
    torch.set_num_threads(1)
    config = StretchConfig.from_dict(config_values)
    corpus = text_corpus() if task == "text" else None
    began = time.perf_counter()
    models, stops = train_base_models(task, config, corpus=corpus)
    states = [{k: v.detach().clone() for k, v in m.state_dict().items()} for m in models]
    return task, states, stops, time.perf_counter() - began


def summarize(runs: list[dict]) -> dict:
    """Mean, lowest and highest over seeds: ``{task: {method: {budget: {length: {metric: [mean, lo, hi]}}}}}``."""
    grouped = {}
    for run in runs:
        for length, scores in run["eval"].items():
            for metric, value in scores.items():
                key = (run["task"], run["method"], str(run["budget"]), length, metric)
                grouped.setdefault(key, []).append(value)
    out = {}
    for (task, method, budget, length, metric), values in grouped.items():
        if any(v is None for v in values):
            entry = None
        else:
            entry = [round(float(np.mean(values)), 5), min(values), max(values)]
        out.setdefault(task, {}).setdefault(method, {}).setdefault(budget, {}).setdefault(length, {})[metric] = entry
    return out


def run_stretch(
    config: StretchConfig | None = None, *, workers: int | None = None, progress: bool = True, models_out=None
) -> dict:
    """Train the base models, fine-tune and score every (task, method); the results dict of ``--out``.
    ``models_out``: a path where the first seed's base model of every task is saved (state dicts)."""
    config = config or StretchConfig()
    workers = workers or max(1, min(2, os.cpu_count() or 1))
    began = time.perf_counter()
    threads = torch.get_num_threads()
    base = {}
    try:
        with concurrent.futures.ProcessPoolExecutor(workers) as pool:
            for task, states, stops, seconds in pool.map(_train_task, [(t, config.to_dict()) for t in config.tasks]):
                base[task] = {"states": states, "stops": stops, "seconds": round(seconds, 1)}
                if progress:
                    print(f"stretch: {task} base models trained in {seconds:.0f} s", file=sys.stderr)
            if models_out is not None:
                torch.save({task: b["states"][0] for task, b in base.items()}, models_out)
                torch.save(text_corpus()[1], Path(models_out).with_name(CACHED_TEXT.name))
            jobs = [(t, m, config.to_dict(), base[t]["states"]) for t in config.tasks for m in config.methods]
            jobs.sort(key=lambda job: 0 if job[0] == "text" else 1)  # the longest first
            runs = []
            for group in pool.map(_run_task_method, jobs):
                runs.extend(group)
                if progress:
                    print(
                        f"stretch: {group[0]['task']}, {group[0]['method']} in {group[0]['group_seconds']:.0f} s",
                        file=sys.stderr,
                    )
    finally:
        torch.set_num_threads(threads)
    return {
        "schema_version": 1,
        "config": config.to_dict(),
        "base": {t: {"stops": b["stops"], "seconds": b["seconds"]} for t, b in base.items()},
        "runs": runs,
        "summary": summarize(runs),
        "wall_seconds": round(time.perf_counter() - began, 1),
        "environment": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "cpu_count": os.cpu_count(),
            "workers": workers,
        },
    }


def score(results: dict, task: str, method: str, budget: int, length: int, band: str) -> list:
    """``[mean, lowest, highest]`` over seeds of ``task``'s score (loss for "text", accuracy for the
    others) for ``method`` after ``budget`` fine-tuning steps, read at ``length``, in ``band``."""
    metric = "loss" if task == "text" else "accuracy"
    try:
        entry = results["summary"][task][method][str(budget)][str(length)][f"{metric}_{band}"]
    except KeyError as missing:
        raise ValueError(
            f"no score for task={task!r}, method={method!r}, budget={budget!r}, length={length!r}, band={band!r} "
            f"in the results ({missing} is missing)"
        ) from None
    if entry is None:
        raise ValueError(f"band {band!r} is empty at length {length} (nothing scored there)")
    return entry


def compare(results: dict, task: str, a: str, b: str, budget: int, length: int, band: str, budget_b=None) -> str:
    """Whether method ``a`` is "better" or "worse" than ``b`` (after ``budget_b`` steps, default
    ``budget``) on every seed: its worst seed beats the other's best (lower loss on "text", higher
    accuracy elsewhere); "not separable" when the seeds' ranges overlap."""
    _, a_low, a_high = score(results, task, a, budget, length, band)
    _, b_low, b_high = score(results, task, b, budget if budget_b is None else budget_b, length, band)
    if task == "text":  # a loss: lower is better
        a_low, a_high, b_low, b_high = -a_high, -a_low, -b_high, -b_low
    if a_low > b_high:
        return "better"
    if a_high < b_low:
        return "worse"
    return "not separable"


def load_eval_text(path=CACHED_TEXT) -> tuple[torch.Tensor, torch.Tensor]:
    """The text corpus as the cached run read it, for ``corpus=``: ``(empty train, held_out)``, int64.
    Only the held-out part is kept (the evaluation and ``attention_entropy`` read nothing else); it
    is Python 3.11's documentation whatever Python runs this."""
    held_out = torch.load(path, map_location="cpu", weights_only=True)
    return torch.empty(0, dtype=torch.int64), held_out


def load_stretch(path=CACHED_RESULTS) -> dict:
    """The cached results (``data/stretch.json``)."""
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.experiment stretch", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="write the results here (JSON)")
    parser.add_argument("--quick", action="store_true", help="a small version, about a minute")
    parser.add_argument("--models", type=Path, default=None, help="save seed 0's base models here")
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args(argv)
    config = StretchConfig(**QUICK) if args.quick else StretchConfig()
    results = run_stretch(config, workers=args.workers, models_out=args.models)
    print(f"stretch: {results['wall_seconds']:.0f} s", file=sys.stderr)
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0
