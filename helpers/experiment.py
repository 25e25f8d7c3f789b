"""Train short, test long: tiny Transformers with different position schemes (article 001 §6.3, §7, §13).

Notation: ``B`` batch, ``T`` positions, ``H`` heads, ``d`` model width, ``dh = d / H`` head width,
``V`` vocabulary size, ``L`` the training length.

The model is one small decoder-only Transformer (pre-norm, causal) whose position scheme is a
parameter. Every scheme is built from the functions the notebooks teach:

- ``"none"`` (NoPE): no position signal at all; only the causal mask breaks the symmetry.
- ``"learned"``: a trainable table of ``max_len`` rows added to the token embeddings. Rows past the
  training length never receive a gradient and stay at their random initial values.
- ``"sinusoidal"``: ``helpers.sinusoidal_pe`` added to ``sqrt(d) * embedding`` (Vaswani et al.).
- ``"rope"``: ``helpers.rope_cos_sin`` and ``helpers.apply_rope`` rotate queries and keys.
- ``"alibi"``: ``helpers.alibi_bias`` is added to the attention scores.

Attention itself is ``helpers.attention`` (the fused kernel while training, the explicit softmax
when attention maps are asked for).

The task ("continue the pattern"). A block of ``n`` distinct random tokens (``n`` drawn from
``min_period .. max_period``) is repeated to fill the sequence. Once the block has been seen, every
next token is determined: the model must find where the current token occurred one period ago
and copy its successor (an induction-style lookup). The rule is the same at every position and
every length, so the only thing that changes with the evaluation length is *where* the tokens
sit: exactly what a position scheme must cope with.

The model lives in ``helpers/_experiment_model.py`` and the task generators in
``helpers/_experiment_tasks.py``; this module trains, evaluates, stores and is the command line:
``python -m helpers.experiment --out data/extrapolation.json`` regenerates the cached results.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from ._experiment_model import SCHEMES, TinyTransformer
from ._experiment_tasks import TASKS, lag_batch, pattern_batch
from .device import default_device

__all__ = [
    "SCHEMES",
    "ExperimentConfig",
    "TinyTransformer",
    "TASKS",
    "lag_batch",
    "pattern_batch",
    "task_batch",
    "train_model",
    "evaluate_model",
    "run_experiment",
    "summarize_runs",
    "load_results",
    "load_models",
    "save_models",
    "pattern_probe",
    "answer_weights",
    "induction_heads",
]

SCHEMA_VERSION = 1


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
    """Everything that decides the numbers of one experiment (stored with the results)."""

    tasks: tuple = TASKS
    schemes: tuple = SCHEMES
    seeds: tuple = (0, 1, 2)
    train_length: int = 32
    eval_multiples: tuple = (1, 2, 4, 8)
    vocab: int = 32
    lag: int = 3
    min_period: int = 3
    max_period: int = 12
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 128
    batch_size: int = 32
    steps: int = 600
    learning_rate: float = 3e-3
    warmup_steps: int = 50
    eval_batches: int = 2
    eval_batch_size: int = 64
    eval_seed: int = 1234
    rope_base: float = 10000.0

    @property
    def eval_lengths(self) -> tuple:
        return tuple(self.train_length * m for m in self.eval_multiples)

    @property
    def max_len(self) -> int:
        """Rows of the learned table: enough for the longest evaluation."""
        return max(self.eval_lengths)

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["tasks"] = list(self.tasks)
        out["schemes"] = list(self.schemes)
        out["seeds"] = list(self.seeds)
        out["eval_multiples"] = list(self.eval_multiples)
        out["eval_lengths"] = list(self.eval_lengths)
        return out

    @classmethod
    def from_dict(cls, values: dict) -> "ExperimentConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        kept = {k: (tuple(v) if isinstance(v, list) else v) for k, v in values.items() if k in names}
        return cls(**kept)


#: The settings ``--quick`` uses (about a minute on two CPU cores).
QUICK = dict(seeds=(0, 1), steps=200, eval_batches=1)
#: A tiny setting for the tests (seconds per scheme).
TINY = dict(
    seeds=(0,),
    steps=40,
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
)


def task_batch(
    task: str,
    config: "ExperimentConfig",
    batch_size: int,
    length: int,
    *,
    generator: torch.Generator | None = None,
    device=None,
):
    """``(inputs, targets, mask)`` of ``task`` (one of ``TASKS``) with the sizes of ``config``, each ``(B, T)``."""
    if task == "lag":
        return lag_batch(batch_size, length, vocab=config.vocab, lag=config.lag, generator=generator, device=device)
    if task == "pattern":
        return pattern_batch(
            batch_size,
            length,
            vocab=config.vocab,
            min_period=config.min_period,
            max_period=config.max_period,
            generator=generator,
            device=device,
        )
    raise ValueError(f"task must be one of {TASKS}, got {task!r}")


def _build(scheme: str, config: ExperimentConfig) -> TinyTransformer:
    return TinyTransformer(
        scheme,
        vocab=config.vocab,
        d_model=config.d_model,
        n_heads=config.n_heads,
        n_layers=config.n_layers,
        d_ff=config.d_ff,
        max_len=config.max_len,
        rope_base=config.rope_base,
    )


# ----------------------------------------------------------------------------------------------
# Training and evaluation


def _masked_loss(model, inputs, targets, mask):
    """Mean cross-entropy and accuracy over the scored positions; inputs, targets, mask ``(B, T)``."""
    logits = model(inputs)  # (B, T, V)
    losses = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (B, T)
    correct = (logits.argmax(dim=-1) == targets) & mask  # (B, T)
    count = mask.sum()
    return (losses * mask).sum() / count, correct.sum() / count, count


def train_model(task: str, scheme: str, config: ExperimentConfig, seed: int, *, device=None):
    """Train one model on ``task`` at ``config.train_length``.

    Returns:
        ``(model, losses)``: the trained model (in eval mode) and the training loss at every step.
    """
    device = torch.device(device) if device is not None else default_device()
    torch.manual_seed(seed)
    model = _build(scheme, config).to(device)
    data = torch.Generator().manual_seed(10_000 + seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate)

    def rate(step):  # linear warm-up, then cosine decay to 10 %
        if step < config.warmup_steps:
            return (step + 1) / config.warmup_steps
        progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
    losses = []
    model.train()
    for _ in range(config.steps):
        batch = task_batch(
            task, config, config.batch_size, config.train_length, generator=data, device=device
        )  # (B, L) each
        loss, _, _ = _masked_loss(model, *batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    model.eval()
    return model, losses


@torch.no_grad()
def evaluate_model(model: TinyTransformer, task: str, config: ExperimentConfig, *, lengths=None) -> dict:
    """Loss and accuracy on the determined positions at each evaluation length.

    The evaluation sequences depend only on ``config.eval_seed`` and the length, so every model
    sees the same ones. Returns ``{length: {"loss": float, "accuracy": float}}``.
    """
    device = next(model.parameters()).device
    out = {}
    for length in lengths or config.eval_lengths:
        data = torch.Generator().manual_seed(config.eval_seed + length)
        total_loss, total_correct, total_count = 0.0, 0.0, 0
        for _ in range(config.eval_batches):
            batch = task_batch(
                task, config, config.eval_batch_size, length, generator=data, device=device
            )  # (B, T) each
            loss, accuracy, count = _masked_loss(model, *batch)
            total_loss += float(loss) * int(count)
            total_correct += float(accuracy) * int(count)
            total_count += int(count)
        out[int(length)] = {"loss": total_loss / total_count, "accuracy": total_correct / total_count}
    return out


def summarize_runs(runs: list[dict], tasks, schemes, lengths) -> dict:
    """Mean, standard deviation, min and max over seeds: ``{task: {scheme: {length: {...}}}}`` (lengths as str)."""
    summary = {}
    for task in tasks:
        summary[task] = {}
        for scheme in schemes:
            summary[task][scheme] = {}
            chosen = [r for r in runs if r["task"] == task and r["scheme"] == scheme]
            for length in lengths:
                row = {}
                for metric in ("loss", "accuracy"):
                    values = np.array([r["eval"][str(length)][metric] for r in chosen])
                    row[f"{metric}_mean"] = float(values.mean())
                    row[f"{metric}_std"] = float(values.std(ddof=1)) if len(values) > 1 else 0.0
                    row[f"{metric}_min"] = float(values.min())
                    row[f"{metric}_max"] = float(values.max())
                summary[task][scheme][str(length)] = row
    return summary


def _environment(device) -> dict:
    import matplotlib

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "matplotlib": matplotlib.__version__,
        "platform": platform.platform(),
        "device": str(device),
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
    }


def run_experiment(
    config: ExperimentConfig | None = None, *, device=None, progress: bool = True, keep_models: dict | None = None
) -> dict:
    """Train every scheme on every task with every seed, and evaluate at every length.

    Args:
        config: the settings (default ``ExperimentConfig()``).
        device: where to train (default ``helpers.default_device()``).
        progress: show a tqdm progress bar on stderr.
        keep_models: if a dict is given, the trained models of the first seed are put in it,
            keyed by ``(task, scheme)``.

    Returns:
        The results dictionary that ``--out`` writes as JSON (see ``load_results``).
    """
    from tqdm.auto import tqdm

    config = config or ExperimentConfig()
    device = torch.device(device) if device is not None else default_device()
    start, start_cpu = time.perf_counter(), time.process_time()
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    runs = []
    jobs = [(task, scheme, seed) for seed in config.seeds for task in config.tasks for scheme in config.schemes]
    bar = tqdm(jobs, desc="train short, test long", unit="model", disable=not progress)
    for task, scheme, seed in bar:
        bar.set_postfix_str(f"{task}, {scheme}, seed {seed}")
        began = time.perf_counter()
        model, losses = train_model(task, scheme, config, seed, device=device)
        scores = evaluate_model(model, task, config)
        if keep_models is not None and seed == config.seeds[0]:
            keep_models[(task, scheme)] = model
        every = max(1, len(losses) // 50)
        runs.append(
            {
                "task": task,
                "scheme": scheme,
                "seed": seed,
                "initial_loss": float(np.mean(losses[:10])),
                "final_loss": float(np.mean(losses[-10:])),
                "loss_curve": [float(np.mean(losses[i : i + every])) for i in range(0, len(losses), every)],
                "loss_curve_every": every,
                "eval": {str(length): value for length, value in scores.items()},
                "seconds": time.perf_counter() - began,
            }
        )
    bar.close()
    return {
        "schema_version": SCHEMA_VERSION,
        "task_descriptions": {
            "lag": f"copy the token {config.lag} places back; scored at positions t >= {config.lag}",
            "pattern": "continue a repeated block of distinct random tokens; scored where the next token is determined",
        },
        "config": config.to_dict(),
        "tasks": list(config.tasks),
        "schemes": list(config.schemes),
        "seeds": list(config.seeds),
        "eval_lengths": list(config.eval_lengths),
        "runs": runs,
        "summary": summarize_runs(runs, config.tasks, config.schemes, config.eval_lengths),
        "environment": _environment(device),
        "wall_seconds": time.perf_counter() - start,
        # CPU time of this process: close to the wall time on an idle machine, much smaller when
        # other programs share the cores (the load averages say how busy the machine was).
        "cpu_seconds": time.process_time() - start_cpu,
        "load_average_before": list(load_before) if load_before else None,
        "load_average_after": list(os.getloadavg()) if load_before else None,
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


# ----------------------------------------------------------------------------------------------
# Files


#: The cached results committed with the collection (``make experiment`` rewrites them), found
#: from the package so that a notebook reads them from any working directory.
CACHED_RESULTS = Path(__file__).resolve().parents[1] / "data" / "extrapolation.json"
CACHED_MODELS = CACHED_RESULTS.with_name("extrapolation_models.pt")


def load_results(path=CACHED_RESULTS) -> dict:
    """Read a results file written by ``python -m helpers.experiment`` and check its schema version."""
    with open(path, encoding="utf-8") as handle:
        results = json.load(handle)
    if results.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{path} has schema_version {results.get('schema_version')!r}, expected {SCHEMA_VERSION}")
    return results


#: The models ``--out`` saves beside the results for the attention maps of notebook 08.
SAVED_MODELS = (("pattern", "alibi"), ("pattern", "rope"))


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
        model = _build(scheme, config)
        model.load_state_dict({k: v.float() for k, v in state.items()})
        models[(task, scheme)] = model.to(device or "cpu").eval()
    return models, config


def pattern_probe(config: ExperimentConfig, *, period: int = 7, seed: int = 3) -> torch.Tensor:
    """One "pattern" sequence of ``4 L + 1`` tokens, a block of ``period`` distinct tokens repeated,
    int64 ``(4 L + 1,)``: what notebook 08 reads the trained models' attention on."""
    generator = torch.Generator().manual_seed(seed)
    tokens, _, _ = pattern_batch(
        1, 4 * config.train_length + 1, vocab=config.vocab, min_period=period, max_period=period, generator=generator
    )
    return tokens[0]


def answer_weights(model: TinyTransformer, tokens: torch.Tensor, length: int, period: int) -> torch.Tensor:
    """How much each head looks at the keys that hold the answer, ``(layers, H)``.

    For the first ``length`` tokens of a periodic sequence, the mean over queries ``t >= period``
    (those with an earlier copy of the next token in view) of the attention weight on the visible
    keys holding the token that comes next: near 1 for an induction head.
    """
    x = tokens[:length]
    answer = tokens[1 : length + 1]  # (T,) the next token of each query
    hit = (x[None, :] == answer[:, None]) & torch.ones(length, length, dtype=torch.bool).tril()  # (T, T)
    with torch.no_grad():
        _, weights = model(x[None, :], need_weights=True)  # list of (1, H, T, T)
    rows = torch.arange(period, length)
    return torch.stack([(w[0][:, rows] * hit[rows]).sum(dim=-1).mean(dim=-1) for w in weights])


def induction_heads(models: dict, tokens: torch.Tensor, length: int, period: int) -> dict:
    """``{scheme: (layer, head)}``: each model's head with the largest ``answer_weights`` at ``length``."""
    heads = {}
    for scheme, model in models.items():
        weights = answer_weights(model, tokens, length, period)
        layer, head = divmod(int(weights.argmax()), weights.shape[1])
        heads[scheme] = (layer, head)
    return heads


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.experiment", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="data/extrapolation.json", help="where to write the results (JSON)")
    parser.add_argument(
        "--models",
        default=None,
        help="where to save the first seed's ALiBi and RoPE models of the pattern task "
        "(default: extrapolation_models.pt beside --out)",
    )
    parser.add_argument("--quick", action="store_true", help="fewer steps and seeds (about a minute on a CPU)")
    parser.add_argument("--device", default=None, help="torch device (default: helpers.default_device())")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (default 1: the matrices are tiny, more threads mostly wait)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    config = ExperimentConfig(**QUICK) if args.quick else ExperimentConfig()
    kept: dict = {}
    results = run_experiment(config, device=args.device, keep_models=kept)
    results["quick"] = bool(args.quick)
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(results, handle, indent=1)
        handle.write("\n")
    models_path = args.models or os.path.join(out_dir, "extrapolation_models.pt")
    save_models({key: kept[key] for key in SAVED_MODELS if key in kept}, config, models_path)
    print(
        f"wrote {args.out} and {models_path} in {results['wall_seconds']:.0f} s on {results['environment']['device']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
