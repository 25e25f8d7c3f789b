"""Every public function rejects what it cannot handle, naming the argument, the value and what was expected."""

from __future__ import annotations

import pytest
import torch
from _support import raises_naming

import helpers

q = torch.randn(2, 4, 8)
INTS = torch.ones(3, 4, dtype=torch.int64)
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
    (lambda: helpers.apply_rope(q, *helpers.rope_cos_sin(2, 8)), ValueError, ["cos", "2", "4"]),
    (lambda: helpers.apply_rope(q, *helpers.rope_cos_sin(4, 6)), ValueError, ["cos", "4", "3"]),
    (
        lambda: helpers.apply_rope(q, *helpers.rope_cos_sin(4, 8), layout="neox"),
        ValueError,
        ["layout", "neox", "interleaved"],
    ),
    (lambda: helpers.apply_rope(q.long(), *helpers.rope_cos_sin(4, 8)), TypeError, ["x", "torch.int64"]),
    (lambda: helpers.alibi_slopes(0), ValueError, ["n_heads", "0", ">= 1"]),
    (lambda: helpers.alibi_slopes(2.5), TypeError, ["n_heads", "int"]),
    (lambda: helpers.alibi_bias(4, -2), ValueError, ["n_queries", "-2"]),
    (lambda: helpers.alibi_bias(4, 5, 3), ValueError, ["n_queries", "5", "n_keys", "3"]),
    (lambda: helpers.plots.one_clock().update(speed=1.0), TypeError, ["speed", "theta"]),
]


@pytest.mark.parametrize("call,error,words", CASES, ids=[f"case{k}" for k in range(len(CASES))])
def test_bad_input_is_named_in_the_message(call, error, words):
    # Whole words: "w_q" is not named by "XXw_qXX" or "w_qk", "dtype" not by "torch.dtype".
    raises_naming(error, call, *words)
