"""Every public function rejects what it cannot handle, naming the argument, the value and what was expected."""

from __future__ import annotations

import pytest
import torch
from _support import raises_naming

import helpers

q = torch.randn(2, 4, 8)
INTS = torch.ones(3, 4, dtype=torch.int64)
Q3 = torch.randn(3, 4, 8)  # leading dimension 3, which does not broadcast with the 2 of q
ROW_HIDDEN = torch.zeros(2, 4, 4)
ROW_HIDDEN[1, 2] = float("-inf")
FIRST_HIDDEN = torch.zeros(4, 4)
FIRST_HIDDEN[0, 0] = float("-inf")
CASES = [
    # (call, error type, words the message must contain)
    (lambda: helpers.frequencies(7), ValueError, ["d", "7", "even"]),
    (lambda: helpers.frequencies(0), ValueError, ["d", "0"]),
    (lambda: helpers.frequencies(8.0), TypeError, ["d", "int"]),
    (lambda: helpers.frequencies(True), TypeError, ["d", "int"]),
    (lambda: helpers.frequencies(8, base=1.0), ValueError, ["base", "1.0", "> 1"]),
    (lambda: helpers.frequencies(8, base=-3), ValueError, ["base", "-3"]),
    (lambda: helpers.frequencies(8, base="10000"), TypeError, ["base", "str"]),
    (lambda: helpers.frequencies(8, dtype=torch.int64), TypeError, ["dtype", "torch.int64"]),
    (lambda: helpers.sinusoidal_pe(-1, 8), ValueError, ["positions", "-1", ">= 0"]),
    (lambda: helpers.sinusoidal_pe(torch.zeros(2, 3), 8), ValueError, ["positions", "1-D", "(2, 3)"]),
    (lambda: helpers.sinusoidal_pe(torch.tensor([0.0, float("nan")]), 8), ValueError, ["positions", "NaN"]),
    (lambda: helpers.sinusoidal_pe("ten", 8), TypeError, ["positions", "str"]),
    (lambda: helpers.sinusoidal_pe(4, 5), ValueError, ["d", "5", "even"]),
    (lambda: helpers.sinusoidal_pe(4, 8, base=1.0), ValueError, ["base", "1.0", "> 1"]),
    (lambda: helpers.sinusoidal_pe(4, 8, dtype=torch.int32), TypeError, ["dtype", "torch.int32"]),
    (lambda: helpers.position_kernel(torch.tensor([True]), 8), TypeError, ["delta", "torch.bool"]),
    (lambda: helpers.position_kernel(3, 9), ValueError, ["d", "9"]),
    (lambda: helpers.continuous_kernel(3, base=0.5), ValueError, ["base", "0.5"]),
    (lambda: helpers.attention(q.long(), q, q), TypeError, ["q", "torch.int64", "floating"]),
    (lambda: helpers.attention(q, q.double(), q), TypeError, ["dtype"]),
    (lambda: helpers.attention(q, torch.randn(2, 4, 7), q), ValueError, ["q", "k", "width"]),
    (lambda: helpers.attention(q, q, torch.randn(2, 5, 8)), ValueError, ["k", "v", "keys"]),
    (lambda: helpers.attention(q, q, q, bias=torch.zeros(3, 3)), ValueError, ["bias", "(3, 3)", "Tq, Tk"]),
    (lambda: helpers.attention(torch.randn(8), q, q), ValueError, ["q", "(..., T, d)"]),
    (lambda: helpers.attention(torch.randn(2, 5, 8), q, q, causal=True), ValueError, ["n_queries", "5", "n_keys"]),
    (lambda: helpers.attention(q, q, q, bias=torch.full((4, 4), float("-inf"))), ValueError, ["no visible key"]),
    (
        lambda: helpers.score_terms(torch.randn(3, 4), torch.randn(3, 5), torch.randn(2, 4), torch.randn(2, 4)),
        ValueError,
        ["x", "p", "(3, 4)", "(3, 5)"],
    ),
    (
        lambda: helpers.score_terms(torch.randn(3, 4), torch.randn(3, 4), torch.randn(2, 5), torch.randn(2, 4)),
        ValueError,
        ["w_q", "d_model=4"],
    ),
    (
        lambda: helpers.score_terms(torch.randn(3, 4), torch.randn(3, 4), torch.randn(2, 4), torch.randn(2, 5)),
        ValueError,
        ["w_k", "d_model=4", "(2, 5)"],
    ),
    (
        lambda: helpers.score_terms(torch.randn(3, 4), torch.randn(3, 4), torch.randn(2, 4), torch.randn(3, 4)),
        ValueError,
        ["w_q", "w_k", "same shape", "(2, 4)", "(3, 4)"],
    ),
    (lambda: helpers.score_terms(INTS, q[0], q[0], q[0]), TypeError, ["x", "torch.int64"]),
    (lambda: helpers.score_terms(q[0], INTS, q[0], q[0]), TypeError, ["p", "torch.int64"]),
    (lambda: helpers.score_terms(q[0], q[0], INTS, q[0]), TypeError, ["w_q", "torch.int64"]),
    (lambda: helpers.score_terms(q[0], q[0], q[0], INTS), TypeError, ["w_k", "torch.int64"]),
    (lambda: helpers.rope_cos_sin(4, 6, base=1), ValueError, ["base"]),
    (lambda: helpers.rope_cos_sin(4, 7), ValueError, ["d", "7", "even"]),
    (lambda: helpers.apply_rope(q, *helpers.rope_cos_sin(2, 8), layout="interleaved"), ValueError, ["cos", "2", "4"]),
    (lambda: helpers.apply_rope(q, *helpers.rope_cos_sin(4, 6), layout="interleaved"), ValueError, ["cos", "4", "3"]),
    (lambda: helpers.apply_rope(q, *helpers.rope_cos_sin(4, 8)), TypeError, ["layout", "None", "interleaved", "half"]),
    (
        lambda: helpers.apply_rope(q, *helpers.rope_cos_sin(4, 8), layout="neox"),
        ValueError,
        ["layout", "neox", "interleaved"],
    ),
    (
        lambda: helpers.apply_rope(q.long(), *helpers.rope_cos_sin(4, 8), layout="interleaved"),
        TypeError,
        ["x", "torch.int64"],
    ),
    # Per-row positions (B, T): B is x's dimension 0 (here 2), or 1.
    (
        lambda: helpers.apply_rope(
            q, *helpers.rope_cos_sin(4, 8), positions=torch.zeros(3, 4, dtype=torch.int64), layout="interleaved"
        ),
        ValueError,
        ["positions", "(3, 4)", "(2, 4)", "(1, 4)"],
    ),
    # positions on a device other than x's (and not the CPU): both devices named, not torch's RuntimeError.
    (
        lambda: helpers.apply_rope(
            q, *helpers.rope_cos_sin(4, 8), positions=torch.arange(4, device="meta"), layout="interleaved"
        ),
        ValueError,
        ["positions", "meta", "cpu"],
    ),
    # A (B, T, H, d) tensor where (B, H, T, d) is expected: the length of positions shows it.
    (
        lambda: helpers.apply_rope(
            torch.randn(2, 10, 4, 8), *helpers.rope_cos_sin(16, 8), positions=torch.arange(10), layout="interleaved"
        ),
        ValueError,
        ["positions", "(2, 10, 4, 8)", "-2", "(B, H, T, d)"],
    ),
    (lambda: helpers.alibi_slopes(0), ValueError, ["n_heads", "0", ">= 1"]),
    (lambda: helpers.alibi_slopes(2.5), TypeError, ["n_heads", "int"]),
    (lambda: helpers.alibi_bias(4, -2), ValueError, ["n_queries", "-2"]),
    (lambda: helpers.alibi_bias(4, 5, 3), ValueError, ["n_queries", "5", "n_keys", "3"]),
    (lambda: helpers.plots.one_clock().update(speed=1.0), TypeError, ["speed", "theta"]),
    (lambda: helpers.attention(q, q.long(), q), TypeError, ["k", "torch.int64", "floating"]),
    (lambda: helpers.attention(q, q, q.long()), TypeError, ["v", "torch.int64", "floating"]),
    (lambda: helpers.attention(q, torch.randn(8), q), ValueError, ["k", "(8,)", "(..., T, d)"]),
    (lambda: helpers.attention(q, q, torch.randn(8)), ValueError, ["v", "(8,)", "(..., T, d)"]),
    (lambda: helpers.attention(q, q.to("meta"), q), ValueError, ["q", "k", "v", "device", "cpu", "meta"]),
    # Leading dimensions that do not broadcast, whichever of q, k, v is the odd one out.
    (lambda: helpers.attention(q, Q3, Q3), ValueError, ["q", "(2, 4, 8)", "k", "(3, 4, 8)", "broadcast"]),
    (lambda: helpers.attention(q, Q3, q), ValueError, ["q", "(2, 4, 8)", "k", "(3, 4, 8)", "broadcast"]),
    (lambda: helpers.attention(q, q, Q3), ValueError, ["q", "(2, 4, 8)", "v", "(3, 4, 8)", "broadcast"]),
    (lambda: helpers.attention(q, q, q, bias=torch.zeros(4, 4, dtype=torch.int64)), TypeError, ["bias", "torch.int64"]),
    (lambda: helpers.attention(q, q, q, bias=torch.zeros(3, 4)), ValueError, ["bias", "(3, 4)", "Tq, Tk"]),
    (lambda: helpers.attention(q, q, q, bias=torch.zeros(4, 3)), ValueError, ["bias", "(4, 3)", "Tq, Tk"]),
    (
        lambda: helpers.attention(q, q, q, bias=torch.zeros(3, 4, 4)),
        ValueError,
        ["bias", "(3, 4, 4)", "(2,)", "broadcast"],
    ),
    (lambda: helpers.attention(q, q, q, bias=torch.zeros(4, 4, device="meta")), ValueError, ["bias", "cpu", "meta"]),
    # One query (of head 1) hides every key: the check is per query, not over the whole bias.
    (lambda: helpers.attention(q, q, q, bias=ROW_HIDDEN), ValueError, ["bias", "no visible key"]),
    # Key 0 is hidden from query 0 by the bias, and keys 1.. by the causal mask: together, all.
    (
        lambda: helpers.attention(q, q, q, bias=FIRST_HIDDEN, causal=True),
        ValueError,
        ["bias", "causal", "no visible key"],
    ),
    (lambda: helpers.attention(q, q, q, causal=1), TypeError, ["causal", "1", "bool"]),
    (lambda: helpers.attention(q, q, q, need_weights="yes"), TypeError, ["need_weights", "'yes'", "bool"]),
    (
        lambda: helpers.attention(q, q, q, alibi_slopes=torch.ones(2, dtype=torch.int64)),
        TypeError,
        ["alibi_slopes", "torch.int64"],
    ),
    (
        lambda: helpers.attention(q, q, q, alibi_slopes=torch.ones(2, device="meta")),
        ValueError,
        ["alibi_slopes", "cpu", "meta"],
    ),
    (
        lambda: helpers.attention(q, q, q, alibi_slopes=torch.tensor([0.5, float("nan")])),
        ValueError,
        ["alibi_slopes", "finite", "NaN"],
    ),
    # Heads (dim -3) 5 for 3 slopes: the message shows that dimension alone, not those before it.
    (
        lambda: helpers.attention(*[torch.randn(2, 3, 5, 4, 8)] * 3, alibi_slopes=torch.ones(3)),
        ValueError,
        ["alibi_slopes", "3", "(5,)", "H=3"],
    ),
    (
        lambda: helpers.attention(q[0], q[0], q[0], alibi_slopes=torch.ones(3)),
        ValueError,
        ["alibi_slopes", "missing", "H=3"],
    ),
    (lambda: helpers.causal_mask(-1), ValueError, ["n_queries", "-1", ">= 0"]),
    (lambda: helpers.causal_mask(2.5), TypeError, ["n_queries", "int"]),
    (lambda: helpers.causal_mask(0, -1), ValueError, ["n_keys", "-1", ">= 0"]),
    (lambda: helpers.causal_mask(2, "4"), TypeError, ["n_keys", "int"]),
    (lambda: helpers.causal_mask(5, 3), ValueError, ["n_queries", "5", "n_keys", "3", "bottom-right"]),
]


@pytest.mark.parametrize("call,error,words", CASES, ids=[f"case{k}" for k in range(len(CASES))])
def test_bad_input_is_named_in_the_message(call, error, words):
    # Whole words: "w_q" is not named by "XXw_qXX" or "w_qk", "dtype" not by "torch.dtype".
    raises_naming(error, call, *words)


@pytest.mark.parametrize(
    "kwargs, got",
    [
        ({}, "alibi_slopes=None, need_weights=True, bias=None"),
        (
            {"alibi_slopes": torch.ones(2), "bias": torch.zeros(4, 4), "need_weights": False},
            "alibi_slopes=given, need_weights=False, bias=given",
        ),
    ],
)
def test_flex_true_outside_alibi_reports_what_it_got(kwargs, got):
    # flex=True needs ALiBi slopes, no weights and no bias: the message shows which of the three were given.
    raises_naming(ValueError, lambda: helpers.attention(q, q, q, flex=True, **kwargs), "flex=True", f"got {got}")
