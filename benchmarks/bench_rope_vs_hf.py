"""Time ``helpers.apply_rope_qk`` against Hugging Face transformers' ``apply_rotary_pos_emb`` (Llama).

Same inputs, one CPU thread by default, the two taking turns in every round: queries and keys
``(B, H, T, d)`` in the half layout, rotated together as a Llama attention layer does. Each side
gets its tables as a model makes them once per forward pass, outside the timed call: Hugging Face
its rotary module's ``(B, T, d)`` tables in ``x``'s dtype, helpers the rows of its float32
``(L, d/2)`` tables at the positions, ``helpers.rope_gather(cos, sin, positions)`` ``(B, T, d/2)``.
A third column times helpers given the positions instead (``positions=``: checked and gathered in
every call), for information; the goal is on the first.
Cases: prefill at 512 and 2,048 tokens, a decode step (one token after 2,047, and a batch of 4 after
511), and forward + backward at 512, with q and k contiguous and as many key heads as query heads;
then as a Llama attention layer with grouped-query attention hands them over (8 key heads for 32
query heads, q and k transposed views of its ``(B, T, H, d)`` projections): prefill at 512 and a
decode step; each in float32 and bfloat16. Prints each ratio helpers / transformers
against the goal of at most 1.0, and ``OVER GOAL`` where it is above; ``tests/test_speed_vs_hf.py``
runs the same cases in ``make test`` against a budget with headroom for a busy machine.

    .venv/bin/python benchmarks/bench_rope_vs_hf.py [--threads 1] [--rounds 9]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch

import helpers

GOAL = 1.0
CASES = (  # (query shape (B, H, T, d), key heads, first position, with backward, from a projection)
    ((1, 32, 512, 128), 32, 0, False, False),
    ((1, 32, 2048, 128), 32, 0, False, False),
    ((1, 32, 1, 128), 32, 2047, False, False),
    ((4, 32, 1, 128), 32, 511, False, False),
    ((1, 32, 512, 128), 32, 0, True, False),
    ((1, 32, 512, 128), 8, 0, False, True),  # grouped-query, q and k read from (B, T, H, d) projections
    ((1, 32, 1, 128), 8, 2047, False, True),
)
#: Names of the cases, in order (the test's ids).
NAMES = ("prefill-512", "prefill-2048", "decode-1", "decode-4", "backward", "gqa-prefill-512", "gqa-decode-1")


def median_seconds(functions: dict, rounds: int, inner: int = 3, sample: float = 2e-3) -> dict:
    """Median seconds per call of each function, the functions taking turns in every round; each
    sample times ``inner`` calls in a row, or more where that would take under ``sample`` seconds
    (a decoding step is tens of microseconds: one call alone is mostly the timer's noise), the
    same number for every function."""
    once = []
    for f in functions.values():  # warm up, and time one call
        start = time.perf_counter()
        f()
        once.append(time.perf_counter() - start)
    inner = max(inner, math.ceil(sample / max(min(once), 1e-7)))
    samples = {name: [] for name in functions}
    for _ in range(rounds):
        for name, f in functions.items():
            start = time.perf_counter()
            for _ in range(inner):
                f()
            samples[name].append((time.perf_counter() - start) / inner)
    return {name: statistics.median(values) for name, values in samples.items()}


def case(
    shape, kv_heads: int, offset: int, backward: bool, projected: bool, dtype, rounds: int, apply_rotary_pos_emb
) -> dict:
    """Median seconds per call of ``"ours"`` (gathered rows), ``"positions"`` (helpers given the
    positions) and ``"hf"``, after checking that all three give the same numbers; and
    ``"ours_off"``, ``"hf_off"``: the fraction of elements in which each differs from the exact
    rotation (float64) rounded once to the inputs' dtype. ``kv_heads``
    key heads (fewer than the query's in grouped-query attention); ``projected``: q and k are
    transposed views of ``(B, T, H, d)`` tensors, as a Llama attention layer makes them from its
    projections (not contiguous when ``T > 1``)."""
    batch, heads, length, width = shape
    generator = torch.Generator().manual_seed(0)

    def make(h):
        if projected:  # (B, T, H, d) -> (B, H, T, d) view
            return torch.randn((batch, length, h, width), generator=generator).to(dtype).transpose(1, 2)
        return torch.randn((batch, h, length, width), generator=generator).to(dtype)

    q, k = make(heads), make(kv_heads)  # (B, H, T, d), (B, H_kv, T, d)
    positions = torch.arange(offset, offset + length).expand(batch, length)  # (B, T)
    cos, sin = helpers.rope_cos_sin(offset + length, width)  # (L, d/2) float32
    cos_rows, sin_rows = helpers.rope_gather(cos, sin, positions)  # (B, T, d/2), once per forward pass
    cos_hf = torch.cat((cos[positions], cos[positions]), dim=-1).to(dtype)  # (B, T, d), as Llama's module makes it
    sin_hf = torch.cat((sin[positions], sin[positions]), dim=-1).to(dtype)

    def ours():
        return helpers.apply_rope_qk(q, k, cos_rows, sin_rows, layout="half")

    def with_positions():
        return helpers.apply_rope_qk(q, k, cos, sin, layout="half", positions=positions)

    def theirs():
        return apply_rotary_pos_emb(q, k, cos_hf, sin_hf)

    functions = {"ours": ours, "positions": with_positions, "hf": theirs}
    with torch.no_grad():  # the same numbers first: a fast wrong answer is not a result
        want = theirs()
        for name in ("ours", "positions"):
            for a, b in zip(functions[name](), want, strict=True):
                assert torch.allclose(a.float(), b.float(), atol=5e-2 if dtype == torch.bfloat16 else 1e-5), name
        # how often each differs from the exact rotation of the same inputs, rounded once to their dtype
        exact = helpers.rope_cos_sin(offset + length, width, dtype=torch.float64)
        rounded = [helpers.apply_rope(t.double(), *exact, layout="half", positions=positions).to(dtype) for t in (q, k)]
        total = q.numel() + k.numel()
        off = {
            name: sum((a != b).sum().item() for a, b in zip(functions[name](), rounded, strict=True)) / total
            for name in ("ours", "hf")
        }
    if backward:
        q, k = q.detach().requires_grad_(True), k.detach().requires_grad_(True)
        timed = {name: (lambda f=f: sum(t.sum() for t in f()).backward()) for name, f in functions.items()}
        times = median_seconds(timed, rounds)
    else:
        with torch.inference_mode():
            times = median_seconds(functions, rounds)
    return {**times, "ours_off": off["ours"], "hf_off": off["hf"]}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args(argv)
    try:
        import transformers
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    except ImportError:
        print("transformers is not installed: nothing to compare against")
        return
    torch.set_num_threads(args.threads)
    print(
        f"helpers.apply_rope_qk against transformers {transformers.__version__} apply_rotary_pos_emb, torch "
        f"{torch.__version__}, CPU, {torch.get_num_threads()} thread(s); goal: ratio <= {GOAL}"
    )
    over = 0
    for dtype in (torch.float32, torch.bfloat16):
        for (shape, kv_heads, offset, backward, projected), name in zip(CASES, NAMES, strict=True):
            times = case(shape, kv_heads, offset, backward, projected, dtype, args.rounds, apply_rotary_pos_emb)
            ratio = times["ours"] / times["hf"]
            over += ratio > GOAL
            print(
                f"  {str(dtype)[6:]:9s} {name:15s} q {str(shape):18s} {kv_heads:2d} key heads from {offset:5d}: "
                f"helpers {times['ours'] * 1e3:8.3f} ms, "
                f"transformers {times['hf'] * 1e3:8.3f} ms, ratio {ratio:.2f}{'  OVER GOAL' if ratio > GOAL else ''}"
                f"   (with positions= {times['positions'] * 1e3:8.3f} ms, {times['positions'] / times['hf']:.2f}); "
                f"not the rounded exact rotation: helpers {times['ours_off']:.4%}, transformers {times['hf_off']:.2%}"
            )
    print(f"{2 * len(CASES) - over} of {2 * len(CASES)} cases within the goal")


if __name__ == "__main__":
    main()
