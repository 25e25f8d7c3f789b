"""Time ``helpers.apply_rope`` against the textbook rotate-half formula and against ``x.clone()``.

RoPE is memory-bound: the least it can cost is one read and one write of ``x``, which is what
``x.clone()`` costs. The textbook formula of GPT-NeoX and Hugging Face,
``x * cos + rotate_half(x) * sin`` with full-width tables, makes a negated copy, a concatenated
copy, two products and a sum: several times that traffic. All three are timed on the same
tensor, interleaved in rounds, in one run; the script prints times and the ratios
``apply_rope / rotate_half`` (goal <= 1) and ``apply_rope / clone`` (floor 1).

Usage:
    .venv/bin/python benchmarks/bench_rope.py                       # default device, float32 and bfloat16
    .venv/bin/python benchmarks/bench_rope.py --device cpu --shape 1 32 2048 128 --dtype float32
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import helpers


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """``[-x2, x1]`` for ``x = [x1, x2]`` split at d/2 (the Hugging Face LLaMA helper)."""
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def textbook_rotate_half(x, cos_full, sin_full):
    """``x * cos + rotate_half(x) * sin`` with full-width ``(T, d)`` tables in ``x``'s dtype."""
    return x * cos_full + rotate_half(x) * sin_full


def textbook_complex(x, turn):
    """Meta's LLaMA formula: ``view_as_real(view_as_complex(x) * freqs_cis)`` (float32 only)."""
    x_c = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))  # (..., T, d/2)
    return torch.view_as_real(x_c * turn).flatten(-2).type_as(x)  # (..., T, d)


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_all(functions: dict, device, *, rounds: int, inner: int) -> dict:
    """Median seconds per call of each function, the functions taking turns in every round."""
    for f in functions.values():  # warm up
        f()
    _sync(device)
    samples = {name: [] for name in functions}
    for _ in range(rounds):
        for name, f in functions.items():
            _sync(device)
            start = time.perf_counter()
            for _ in range(inner):
                f()
            _sync(device)
            samples[name].append((time.perf_counter() - start) / inner)
    return {name: statistics.median(values) for name, values in samples.items()}


def bench(shape, dtype, device, *, rounds: int, inner: int) -> dict:
    torch.manual_seed(0)
    t, d = shape[-2], shape[-1]
    x = torch.randn(shape, device=device, dtype=torch.float32).to(dtype)  # (B, H, T, d)
    cos, sin = helpers.rope_cos_sin(t, d, device=device, dtype=dtype)  # (T, d/2) each, x's dtype
    cos_full, sin_full = torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)  # (T, d): the textbook's tables
    functions = {
        "clone": lambda: x.clone(),
        "rotate_half (textbook)": lambda: textbook_rotate_half(x, cos_full, sin_full),
        "apply_rope half": lambda: helpers.apply_rope(x, cos, sin, layout="half"),
        "apply_rope interleaved": lambda: helpers.apply_rope(x, cos, sin, layout="interleaved"),
    }
    if dtype == torch.float32:
        turn = torch.complex(cos, sin)  # (T, d/2), Meta's freqs_cis
        functions["complex (Meta, textbook)"] = lambda: textbook_complex(x, turn)
    with torch.inference_mode():
        # Same numbers first: a fast wrong answer is not a result.
        ref = textbook_rotate_half(x.double(), cos_full.double(), sin_full.double())
        got = helpers.apply_rope(x, cos, sin, layout="half").double()
        tol = 1e-5 if dtype == torch.float32 else 5e-2
        assert torch.allclose(got, ref, atol=tol, rtol=tol), "apply_rope disagrees with rotate_half"
        return time_all(functions, device, rounds=rounds, inner=inner)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="torch device (default: helpers.default_device())")
    parser.add_argument("--shape", type=int, nargs="+", default=None, help="B H T d (default depends on device)")
    parser.add_argument("--dtype", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads (on a busy shared machine, 1 gives the steadiest numbers)",
    )
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device) if args.device else helpers.default_device()
    on_gpu = device.type == "cuda"
    shape = tuple(args.shape) if args.shape else ((8, 32, 4096, 128) if on_gpu else (1, 16, 2048, 128))
    rounds = args.rounds or (30 if on_gpu else 15)
    inner = 20 if on_gpu else 3
    name = torch.cuda.get_device_name(device) if on_gpu else f"CPU, {torch.get_num_threads()} threads"
    print(f"apply_rope benchmark on {device} ({name}), torch {torch.__version__}, x of shape {shape}")
    for dtype_name in args.dtype:
        dtype = getattr(torch, dtype_name)
        times = bench(shape, dtype, device, rounds=rounds, inner=inner)
        nbytes = 2 * torch.Size(shape).numel() * torch.empty((), dtype=dtype).element_size()  # read + write x
        print(f"\n{dtype_name}: median of {rounds} rounds")
        for label, seconds in times.items():
            print(f"  {label:26s} {seconds * 1e3:8.3f} ms  {nbytes / seconds / 1e9:7.1f} GB/s (of x read + written)")
        for layout in ("half", "interleaved"):
            mine = times[f"apply_rope {layout}"]
            print(
                f"  apply_rope {layout:11s} / rotate_half = {mine / times['rotate_half (textbook)']:.2f}   "
                f"/ clone = {mine / times['clone']:.2f}   "
                f"(apply_rope runs at {times['clone'] / mine:.0%} of clone's speed)"
            )


if __name__ == "__main__":
    main()
