"""Time ``helpers`` at scale against the baselines it replaces, measured beside them in one run.

Prints ratios (ours / baseline; below 1 is better):

1. attention: fused ``attention(..., need_weights=False)`` against the teaching (eager) path that
   forms the ``(T, T)`` weights, causal, with and without ALiBi, at T = 1024, 4096 and 16384:
   time and peak memory. ALiBi is timed three ways: eager, fused with the bias materialised
   (``flex=False``), and FlexAttention (score modifier + block mask) where it is available.
   A path whose estimated memory is over ``--memory-budget`` is skipped and says so.
2. ``sinusoidal_pe`` against the common float32 formula of article 001 §8.1 (goal: at most 2x;
   ours forms the angles in float64 so that position 5,000,000 is as precise as position 5).
3. ``apply_rope`` against rotate-half and ``x.clone()``, reusing ``benchmarks/bench_rope.py``;
   the fraction of measured copy bandwidth that ``apply_rope`` reaches (``clone`` time / ours:
   both read and write ``x`` once).

Peak memory: on CUDA ``torch.cuda.max_memory_allocated`` above what was allocated before the
call; on Linux CPUs the peak resident set (``VmHWM``, reset through ``/proc/self/clear_refs``)
above the resident set before the call. Times are medians over rounds in which the contenders
take turns, so that a busy machine slows all of them alike.

Usage:
    .venv/bin/python benchmarks/bench_helpers.py                 # default device, about 3 minutes on 2 CPU cores
    .venv/bin/python benchmarks/bench_helpers.py --device cuda --heads 16
    .venv/bin/python benchmarks/bench_helpers.py --lengths 1024 4096 --skip-rope
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import gc
import math
import os
import pathlib
import re
import statistics
import sys
import time

import torch

import helpers
from helpers._angles import sin_cos_interleaved

_attention_module = sys.modules["helpers.self_attention"]


# --- measurement -------------------------------------------------------------------------------


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _proc_kb(field: str) -> int | None:
    try:
        text = pathlib.Path("/proc/self/status").read_text()
    except OSError:
        return None
    found = re.search(rf"{field}:\s+(\d+) kB", text)
    return int(found.group(1)) if found else None


def _release_cpu_memory():
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)  # hand freed heap pages back, so the baseline is honest
    except (OSError, AttributeError):
        pass


def peak_memory(fn, device) -> float | None:
    """Bytes of memory that one call of ``fn`` needs above what was in use before it, or None."""
    if device.type == "cuda":
        _sync(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        result = fn()
        _sync(device)
        del result
        return float(torch.cuda.max_memory_allocated(device) - before)
    if device.type != "cpu":
        return None
    _release_cpu_memory()
    before = _proc_kb("VmRSS")
    try:
        pathlib.Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current RSS
    except OSError:
        return None
    result = fn()
    peak = _proc_kb("VmHWM")
    del result
    if before is None or peak is None:
        return None
    return max(peak - before, 0) * 1024.0


def median_times(functions: dict, device, *, rounds: int, statistic=statistics.median) -> dict:
    """Median (or ``statistic``) seconds per call of each function, taking turns in every round."""
    samples = {name: [] for name in functions}
    for _ in range(rounds):
        for name, fn in functions.items():
            _sync(device)
            start = time.perf_counter()
            fn()
            _sync(device)
            samples[name].append(time.perf_counter() - start)
    return {name: statistic(values) for name, values in samples.items()}


def _mb(nbytes):
    return "     n/a" if nbytes is None else f"{nbytes / 2**20:8.1f}"


def _ratio(a, b):
    return "   n/a" if a is None or b is None or b == 0 else f"{a / b:6.2f}"


# --- 1. attention ------------------------------------------------------------------------------


def bench_attention(device, dtype, *, lengths, heads: int, width: int, budget: float, rounds: int):
    element = torch.empty((), dtype=dtype).element_size()
    slopes = helpers.alibi_slopes(heads).to(device)
    print(
        f"\n1. attention, causal, B=1, H={heads}, d={width}, {dtype} "
        f"(eager = need_weights=True; fused = need_weights=False); time ms, peak MiB"
    )
    probe = torch.zeros(1, heads, 2, width, device=device, dtype=dtype)
    flex_reason = _attention_module._flex_unavailable(probe, probe, probe)
    print(f"   FlexAttention for ALiBi: {'available' if flex_reason is None else 'not used: ' + flex_reason}")
    print(f"   {'T':>6} {'case':<26} {'time':>9} {'peak':>8}   {'time/eager':>10} {'peak/eager':>10}")
    for t in lengths:
        gen = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(1, heads, t, width, generator=gen).to(device=device, dtype=dtype) for _ in range(3))
        square = heads * t * t * element  # one (H, T, T) tensor
        # Estimated peaks: eager keeps scores, their masked copy and the weights; a materialised
        # ALiBi bias adds the bias and its masked copy.
        attend = functools.partial(helpers.attention, q, k, v, causal=True)
        cases = {
            "plain  eager": (attend, 3 * square),
            "plain  fused (SDPA)": (functools.partial(attend, need_weights=False), 0),
            "alibi  eager": (functools.partial(attend, alibi_slopes=slopes), 4 * square),
            "alibi  fused, bias (SDPA)": (
                functools.partial(attend, alibi_slopes=slopes, need_weights=False, flex=False),
                2.5 * square,
            ),
        }
        if flex_reason is None:
            cases["alibi  fused (FlexAttention)"] = (
                functools.partial(attend, alibi_slopes=slopes, need_weights=False, flex=True),
                0,
            )
        runnable = {name: fn for name, (fn, estimate) in cases.items() if estimate <= budget}
        long = t >= 16384
        with torch.inference_mode():
            compiled_in = {}
            for name, fn in runnable.items():
                if "Flex" in name or not long:  # warm up; FlexAttention compiles for the new length here
                    start = time.perf_counter()
                    fn()
                    compiled_in[name] = time.perf_counter() - start
            if not long:  # same numbers first: a fast wrong answer is not a result
                reference = runnable["plain  fused (SDPA)"]()[0]
                if "plain  eager" in runnable:
                    assert torch.allclose(runnable["plain  eager"]()[0], reference, atol=1e-3, rtol=1e-3)
                alibi_outputs = [runnable[n]()[0] for n in runnable if n.startswith("alibi")]
                for out in alibi_outputs[1:]:
                    assert torch.allclose(out, alibi_outputs[0], atol=1e-3, rtol=1e-3), "ALiBi paths disagree"
                del reference, alibi_outputs
            peaks = {name: peak_memory(fn, device) for name, fn in runnable.items()}
            times = median_times(runnable, device, rounds=1 if long and device.type == "cpu" else rounds)
        for name, (_fn, estimate) in cases.items():
            group = name.split()[0]
            base = f"{group}  eager"
            if name not in runnable:
                print(
                    f"   {t:>6} {name:<26}   skipped: needs about {estimate / 2**30:.1f} GiB "
                    f"(--memory-budget {budget / 2**30:.1f} GiB)"
                )
                continue
            note = f"   (first call {compiled_in[name]:.1f} s: compiles)" if "Flex" in name else ""
            print(
                f"   {t:>6} {name:<26} {times[name] * 1e3:9.1f} {_mb(peaks[name])}   "
                f"{_ratio(times[name], times.get(base)):>10} {_ratio(peaks[name], peaks.get(base)):>10}{note}"
            )
            if name.startswith("alibi  fused (Flex") and "alibi  fused, bias (SDPA)" in runnable:
                other = "alibi  fused, bias (SDPA)"
                print(
                    f"   {'':>6} {'  flex / fused-with-bias':<26} {'':>9} {'':>8}   "
                    f"{_ratio(times[name], times[other]):>10} {_ratio(peaks[name], peaks[other]):>10}"
                )
        del q, k, v


# --- 2. sinusoidal table -----------------------------------------------------------------------


def common_float32_pe(seq_len: int, d_model: int, device=None) -> torch.Tensor:
    """Article 001 §8.1 (the Annotated Transformer's formula), float32 throughout."""
    pe = torch.zeros(seq_len, d_model, device=device)
    position = torch.arange(0, seq_len, dtype=torch.float, device=device).unsqueeze(1)  # (T, 1)
    div_term = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float, device=device) * -(math.log(10000.0) / d_model)
    )  # (d/2,)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def _repeat(times: int, function, *args, **kwargs) -> list:
    return [function(*args, **kwargs) for _ in range(times)]


def bench_sinusoidal(device, *, rounds: int):
    print(
        "\n2. sinusoidal_pe (float64 angles, reduced) / common float32 formula (article 001 §8.1); goal <= 2;\n"
        f"   fastest of {rounds} rounds (a busy machine only ever adds time)"
    )
    for t, d in ((512, 64), (4096, 512), (32768, 1024)):
        inner = max(1, 2_000_000 // (t * d))
        functions = {
            "common": functools.partial(_repeat, inner, common_float32_pe, t, d, device),
            "helpers": functools.partial(_repeat, inner, helpers.sinusoidal_pe, t, d, device=device),
            "interleaved": functools.partial(
                _repeat,
                inner,
                sin_cos_interleaved,
                torch.arange(t),
                helpers.frequencies(d),
                device=device,
                dtype=torch.float32,
            ),
        }
        for fn in functions.values():
            fn()
        times = median_times(functions, device, rounds=rounds, statistic=min)
        mine, theirs = times["helpers"] / inner, times["common"] / inner
        worst = float(
            (helpers.sinusoidal_pe(t, d, device=device).double() - common_float32_pe(t, d, device).double()).abs().max()
        )
        print(
            f"   T={t:>6} d={d:>5}: helpers {mine * 1e3:8.3f} ms, common {theirs * 1e3:8.3f} ms, "
            f"ratio {mine / theirs:5.2f}   (largest difference between the two tables {worst:.1e})"
        )
        print(
            f"   {'':>15}  the same table written in place by _angles.sin_cos_interleaved: ratio "
            f"{times['interleaved'] / times['common']:5.2f}"
        )


# --- 3. apply_rope -----------------------------------------------------------------------------


def bench_rope_section(device, *, rounds: int):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    try:
        import bench_rope
    except ImportError:
        print("\n3. apply_rope: benchmarks/bench_rope.py not found, skipped")
        return
    on_gpu = device.type == "cuda"
    shape = (8, 32, 4096, 128) if on_gpu else (1, 16, 2048, 128)
    dtypes = (torch.float32, torch.bfloat16)
    print(f"\n3. apply_rope on x of shape {shape} (bench_rope.py's measurement); ratios of time")
    for dtype in dtypes:
        times = bench_rope.bench(shape, dtype, device, rounds=rounds, inner=20 if on_gpu else 3)
        nbytes = 2 * torch.Size(shape).numel() * torch.empty((), dtype=dtype).element_size()  # read + write x
        copy_bw = nbytes / times["clone"]
        for layout in ("half", "interleaved"):
            mine = times[f"apply_rope {layout}"]
            print(
                f"   {str(dtype):15s} {layout:11s}: / rotate_half {mine / times['rotate_half (textbook)']:5.2f}, "
                f"/ clone {mine / times['clone']:5.2f}; reaches {times['clone'] / mine:5.1%} of the measured copy "
                f"bandwidth ({nbytes / mine / 1e9:.1f} of {copy_bw / 1e9:.1f} GB/s)"
            )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="torch device (default: helpers.default_device())")
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--heads", type=int, default=None, help="attention heads (default 2 on CPU, 16 on CUDA)")
    parser.add_argument("--width", type=int, default=64, help="head width d")
    parser.add_argument(
        "--memory-budget",
        type=float,
        default=None,
        help="GiB a path may need before it is skipped (default 3 on CPU, 40 on CUDA)",
    )
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--skip-rope", action="store_true")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's choice)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device) if args.device else helpers.default_device()
    on_gpu = device.type == "cuda"
    heads = args.heads or (16 if on_gpu else 2)
    budget = (args.memory_budget or (40.0 if on_gpu else 3.0)) * 2**30
    rounds = args.rounds or (20 if on_gpu else 3)
    dtype = torch.bfloat16 if on_gpu else torch.float32
    name = (
        torch.cuda.get_device_name(device)
        if on_gpu
        else f"CPU, {torch.get_num_threads()} threads, {os.cpu_count()} cores"
    )
    print(f"helpers benchmark on {device} ({name}), torch {torch.__version__}")
    start = time.perf_counter()
    bench_attention(device, dtype, lengths=args.lengths, heads=heads, width=args.width, budget=budget, rounds=rounds)
    bench_sinusoidal(device, rounds=15)
    if not args.skip_rope:
        bench_rope_section(device, rounds=max(rounds, 5))
    print(f"\nfinished in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
