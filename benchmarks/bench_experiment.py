"""Where the time of the train-short / test-long experiment goes, and what training seeds together buys.

For one variant and task, times a training step two ways, in turns, on one torch thread:

1. baseline: each seed's ``TinyTransformer`` trained alone (torch's Adam, ``clip_grad_norm_``), the
   way a one-model loop does it, once per seed;
2. ensemble: the seeds side by side as one ``TinyEnsemble`` (``helpers.experiment.train_seeds``'s
   step: batched matrix products, per-member clipping, one Adam over the stacked parameters).

Prints milliseconds per model and step for both, the ratio ensemble / baseline (below 1 is
faster), and the ensemble's step split into its parts: drawing the batches, forward, backward,
clipping and the optimiser. Times are medians over rounds in which the two take turns, so that a
busy machine slows both alike.

Usage:
    .venv/bin/python benchmarks/bench_experiment.py                      # rope on lag, 5 seeds, CPU
    .venv/bin/python benchmarks/bench_experiment.py --variant t5 --task text --device cuda
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from helpers.experiment import extrapolation as ex
from helpers.experiment.train import clip_per_member, masked_losses


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", default="rope", choices=list(ex.VARIANTS))
    parser.add_argument("--task", default="lag", choices=list(ex.TASKS))
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=10, help="steps per round and contender")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    config = ex.ExperimentConfig()
    corpus = ex.text_corpus() if args.task == "text" else None
    seeds = range(args.seeds)
    streams = [torch.Generator().manual_seed(10_000 + s) for s in seeds]

    def batch(stream):
        return ex.task_batch(args.task, config, config.batch_size, config.train_length, generator=stream, corpus=corpus)

    # 1. one model per seed, alone
    alone = []
    for s in seeds:
        torch.manual_seed(s)
        model = ex.build_model(args.variant, config, args.task).to(device)
        alone.append((model, torch.optim.Adam(model.parameters(), lr=config.learning_rate)))

    def baseline_step():
        for (model, optimizer), stream in zip(alone, streams, strict=True):
            inputs, targets, mask = (z.to(device) for z in batch(stream))  # (B, L) each
            losses = torch.nn.functional.cross_entropy(model(inputs).transpose(1, 2), targets, reduction="none")
            loss = (losses * mask).sum() / mask.sum()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()

    # 2. the seeds side by side
    models = []
    for s in seeds:
        torch.manual_seed(s)
        models.append(ex.build_model(args.variant, config, args.task))
    ensemble = ex.TinyEnsemble(models).to(device)
    optimizer = torch.optim.Adam(ensemble.parameters(), lr=config.learning_rate)
    parts = {name: [] for name in ("batches", "forward", "backward", "clip", "optimiser")}

    def ensemble_step(record=False):
        marks = [time.perf_counter()]
        drawn = [batch(stream) for stream in streams]
        inputs, targets, mask = (torch.stack(z).to(device) for z in zip(*drawn, strict=True))  # (E, B, L) each
        _sync(device)
        marks.append(time.perf_counter())
        loss, _ = masked_losses(ensemble(inputs), targets, mask)  # (E,)
        _sync(device)
        marks.append(time.perf_counter())
        optimizer.zero_grad(set_to_none=True)
        loss.sum().backward()
        _sync(device)
        marks.append(time.perf_counter())
        clip_per_member(ensemble, 1.0)
        _sync(device)
        marks.append(time.perf_counter())
        optimizer.step()
        _sync(device)
        marks.append(time.perf_counter())
        if record:
            for name, a, b in zip(parts, marks, marks[1:], strict=False):
                parts[name].append((b - a) * 1000)

    times = {"baseline": [], "ensemble": []}
    for _ in range(2):  # warm up both
        baseline_step()
        ensemble_step()
    for _ in range(args.rounds):
        for name, step in (("baseline", baseline_step), ("ensemble", lambda: ensemble_step(record=True))):
            _sync(device)
            began = time.perf_counter()
            for _ in range(args.steps):
                step()
            _sync(device)
            times[name].append((time.perf_counter() - began) * 1000 / args.steps / args.seeds)
    base, ours = statistics.median(times["baseline"]), statistics.median(times["ensemble"])
    print(
        f"{args.variant} on {args.task}, {args.seeds} seeds, batch {config.batch_size} x L {config.train_length}, "
        f"{device}, {args.threads} thread(s)"
    )
    print(f"  baseline (each seed alone): {base:.2f} ms per model and step")
    print(f"  ensemble (seeds together):  {ours:.2f} ms per model and step   ratio {ours / base:.2f}")
    total = sum(statistics.median(v) for v in parts.values())
    print(
        "  ensemble step, split:",
        ", ".join(
            f"{name} {statistics.median(v):.1f} ms ({statistics.median(v) / total:.0%})" for name, v in parts.items()
        ),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
