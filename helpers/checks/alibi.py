"""``check_alibi`` and ``check_t5_bias``: the biases added to attention scores (ALiBi's slopes,
sign, decoding step and alignment; T5's relative-position buckets)."""

from __future__ import annotations

import math

import torch

from .._validate import check_int
from ..alibi import alibi_bias, alibi_slopes
from ..relative import relative_position_bucket
from ._report import (
    CheckReport,
    Finding,
    _Bad,
    _call,
    _check_callable,
    _eps,
    _num,
    _report,
    _tensor_out,
)


def _alibi_call(bias_fn, n_heads: int, n_queries: int, n_keys: int, rounding: list) -> torch.Tensor:
    """The bias as float64 ``(H, Tq, Tk)``; a broadcastable shape such as BLOOM's and MPT's ``(H, 1, Tk)``
    is expanded. ``rounding`` collects the largest rounding step of a low-precision result."""
    shown = f"n_heads={n_heads}, n_queries={n_queries}, n_keys={n_keys}"
    shape = (n_heads, n_queries, n_keys)
    out = _call(bias_fn, "bias_fn", shape, shown)
    if isinstance(out, torch.Tensor) and out.dim() == 3 and tuple(out.shape) != shape:
        if all(a in (1, b) for a, b in zip(out.shape, shape, strict=True)):
            out = out.expand(shape)  # broadcastable, as the attention scores it is added to
    out = _tensor_out(out, "bias_fn", shape, shown)
    if out.dtype in (torch.bfloat16, torch.float16):
        finite = out[torch.isfinite(out)].double()
        rounding.append(_eps(out.dtype) * (float(finite.abs().max()) if finite.numel() else 0.0))
    out = out.detach().to(torch.float64)
    if bool(torch.isposinf(out).any()):
        raise _Bad(Finding("output", False, f"bias_fn returned +inf for {shown}; expected finite values or -inf"))
    return out


def _rows_from_own_key(bias: torch.Tensor, n_keys: int) -> torch.Tensor:
    """Each row minus its entry at the query's own key (bottom-right: query i at key i + Tk - Tq)."""
    tq = bias.shape[-2]
    own = torch.arange(tq) + (n_keys - tq)  # (Tq,)
    return bias - bias[:, torch.arange(tq), own][..., None]


def _log2_list(values) -> str:
    return "[" + ", ".join(f"{math.log2(v):.3g}" if v > 0 else _num(v) for v in values) + "]"


def check_alibi(bias_fn, *, max_heads: int = 64, n_tokens: int = 16) -> CheckReport:
    """Check an ALiBi bias against ``helpers.alibi_bias`` and ``helpers.alibi_slopes``.

    Args:
        bias_fn: ``bias_fn(n_heads, n_queries, n_keys) -> (H, Tq, Tk)`` additive causal bias,
            queries aligned bottom-right (query ``i`` is the token at position ``i + Tk - Tq``, so
            a single query is the newest token). Only the keys at or before each query are
            compared, and each row only up to a constant (softmax ignores one): the distance form
            ``-m_h (i - j)`` and the reference code's ``+m_h j`` both pass; what the bias holds
            above the diagonal (``-inf`` or anything a separate mask covers) is not checked. A
            broadcastable ``(H, 1, Tk)`` result (BLOOM's ``+m_h j``, MPT's anchored row) is expanded, and a
            bfloat16 or float16 result is compared within its own rounding.
        max_heads: slopes are checked for every head count ``1 .. max_heads``.
        n_tokens: ``Tk`` of the probes (at least 4).

    Findings: ``sign`` (the penalty grows with distance), ``slopes`` (every head count),
    ``decoding`` (``Tq = 1`` against the last row of the full bias) and ``alignment`` (``Tq < Tk``
    against the last ``Tq`` rows). A bias that is the same for every key a query sees (it
    depends on the query's index only, as in ggml#143) fails first, as ``distance``.
    """
    bias_fn = _check_callable("bias_fn", bias_fn)
    max_heads = check_int("max_heads", max_heads, minimum=1)
    n_tokens = check_int("n_tokens", n_tokens, minimum=4)
    try:
        findings = _alibi_findings(bias_fn, max_heads, n_tokens)
    except _Bad as bad:
        findings = [bad.finding]
    return _report("check_alibi", findings, ("sign", "slopes", "decoding", "alignment"))


def _alibi_findings(bias_fn, max_heads, T):
    """The findings of ``check_alibi``, in order; decoding and alignment are judged against the
    implementation's own full pass, so that wrong slopes are reported once."""
    probe = _AlibiProbe(bias_fn, T)
    got8, slope8 = probe.measured(8)
    if bool((got8[:, probe.visible].abs() <= 1e-9 + probe.slack()).all()):
        raise _Bad(
            Finding(
                "distance",
                False,
                "every key a query sees gets the same bias (it depends on the query's index only, or is 0): "
                "softmax cancels a constant added to a row, so this is no ALiBi at all. The bias must change "
                "with the key: -m_h (i - j), or +m_h j with j the key's index.",
            )
        )
    findings = [_sign_finding(slope8)]
    findings.append(_slopes_finding(probe, max_heads, got8, slope8, sign_failed=not findings[0].passed))
    findings.append(_decoding_finding(probe, got8))
    findings.append(_alignment_finding(probe, got8))
    return findings


class _AlibiProbe:
    """Calls ``bias_fn`` for ``T`` queries and keys and reads each row from the query's own key;
    ``rounding`` collects the rounding steps of low-precision results (bfloat16 ``+m_h j`` grows
    with ``j``), which every comparison then allows for (``slack``)."""

    def __init__(self, bias_fn, T: int):
        self.bias_fn, self.T = bias_fn, T
        self.rounding: list[float] = []
        self.visible = torch.ones(T, T).tril().bool()  # (T, T): j <= i
        self.distance = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).double()  # (T, T)

    def slack(self) -> float:
        return 2.0 * max(self.rounding, default=0.0)

    def call(self, H: int, n_queries: int) -> torch.Tensor:
        return _alibi_call(self.bias_fn, H, n_queries, self.T, self.rounding)  # (H, n_queries, T)

    def measured(self, H: int):
        """``(bias (H, T, T) measured from each query's own key, slope of each head (H,))``."""
        T, visible, distance = self.T, self.visible, self.distance
        raw = self.call(H, T)  # (H, T, T)
        if bool(torch.isneginf(raw[:, visible]).any()):
            h, i, j = (int(t) for t in torch.nonzero(torch.isneginf(raw) & visible)[0])
            raise _Bad(
                Finding(
                    "output",
                    False,
                    f"bias_fn({H}, {T}, {T}) is -inf at head {h}, query {i}, key {j} <= {i}: "
                    "a key the query may see is masked",
                )
            )
        got = _rows_from_own_key(raw, T)
        far = visible & (distance > 0)
        slope = -(got[:, far] / distance[far]).mean(-1)  # (H,)
        return got, slope


def _sign_finding(slope8) -> Finding:
    if bool((slope8 < 0).any()):
        h = int((slope8 < 0).nonzero()[0])
        return Finding(
            "sign",
            False,
            f"head {h} of 8 adds {_num(-slope8[h])} per token of distance: the penalty shrinks as the key gets "
            "further away, so far keys are favoured. The sign is flipped: ALiBi adds -m_h (i - j).",
        )
    return Finding("sign", True, "the penalty grows with distance in every head")


def _slopes_finding(probe: _AlibiProbe, max_heads, got8, slope8, sign_failed: bool) -> Finding:
    """Every head count from 1 to ``max_heads`` against the reference bias; a failure says what the
    slopes are (flipped, rounded, reordered, the power-of-two rule applied to any H, or a bias that
    is not linear in the distance)."""
    visible, T = probe.visible, probe.T
    wrong = []
    for H in range(1, max_heads + 1):
        got, slope = (got8, slope8) if H == 8 else probe.measured(H)
        want = alibi_slopes(H)
        ref = alibi_bias(H, T, T, dtype=torch.float64)
        tol = 1e-4 * float(want.max()) * T + probe.slack()
        if not torch.allclose(got[:, visible], ref[:, visible], rtol=1e-4, atol=tol):
            wrong.append((H, slope, want, got, ref))
    if not wrong:
        low = (
            f" (the bias comes in a low precision: compared within its rounding, {_num(probe.slack())})"
            if probe.rounding
            else ""
        )
        return Finding("slopes", True, f"the slopes of every head count from 1 to {max_heads} are right{low}")
    H, slope, want, got, ref = wrong[0]
    rounded_to = next(
        (
            name
            for name, dt in (("bfloat16", torch.bfloat16), ("float16", torch.float16))
            if all(torch.allclose(w[1], w[2].to(dt).double(), rtol=1e-4) for w in wrong)
        ),
        None,
    )
    flipped = bool((slope < 0).all()) and torch.allclose(-slope, want, rtol=1e-3)
    if flipped:
        text = "the slopes are right in size but negative: the same fault as the sign finding."
    elif rounded_to is not None:
        worst = max(float(((w[1] - w[2]) / w[2]).abs().max()) for w in wrong)
        text = (
            f"wrong for {len(wrong)} of {max_heads} head counts, each slope off by up to {_num(100 * worst)}%: "
            f"they are the reference slopes rounded to {rounded_to} (keep the slopes in float32 and cast the "
            "bias, not the slopes)."
        )
    elif not torch.allclose(slope, want, rtol=1e-3):
        powers = [w for w in wrong if w[0] & (w[0] - 1) == 0]
        text = (
            f"wrong for {len(wrong)} of {max_heads} head counts"
            + ("" if powers else ", right for every power of two")
            + f"; first at H = {H}: log2 of the slopes is {_log2_list(slope.tolist())}, expected "
            f"{_log2_list(want.tolist())}."
        ) + _wrong_slopes_story(H, slope, want)
    else:
        diff = (got - ref).abs().masked_fill(~visible, 0.0)
        h, i, j = (int(t) for t in torch.unravel_index(diff.argmax(), diff.shape))
        text = (
            f"the slopes are right but the bias is not linear in the distance: H = {H}, head {h}, query {i}, "
            f"key {j} has {_num(got[h, i, j])}, expected {_num(ref[h, i, j])}."
        )
    return Finding("slopes", False, text, folded_into="sign" if flipped and sign_failed else "")


def _wrong_slopes_story(H: int, slope, want) -> str:
    """What wrong slopes of ``H`` heads are: the right ones reordered, or a rule that holds for a
    power of two only."""
    direct = torch.tensor([2.0 ** (-8.0 * (k + 1) / H) for k in range(H)], dtype=torch.float64)
    if torch.allclose(slope.sort().values, want.sort().values, rtol=1e-3):
        return (
            " These are the right slopes given to the wrong heads"
            + (" (in ascending order)" if bool((slope.diff() > 0).all()) else "")
            + ": head h must get the h-th slope of the reference order (largest first, alibi_slopes(H)); "
            "weights trained with one assignment are wrong with another."
        )
    if H & (H - 1) and torch.allclose(slope, direct, rtol=1e-3):
        n = 2 ** math.floor(math.log2(H))
        return (
            f" These are 2^(-8k/H) with H = {H}, the rule for a power of two; the reference keeps the {n} "
            f"slopes of {n} heads and appends every other slope of {2 * n} heads (the odd powers of "
            f"2^(-{_num(4 / n)}))."
        )
    if H & (H - 1):
        n = 2 ** math.floor(math.log2(H))
        good = int((torch.isclose(slope, want, rtol=1e-3)).sum())
        return f" {good} of {H} heads match; the last {H - n} should be every other slope of {2 * n} heads."
    return ""


def _decoding_finding(probe: _AlibiProbe, ref_full) -> Finding:
    """One query against ``T`` keys (a decoding step) against the last row of the implementation's
    own full bias ``ref_full`` ``(8, T, T)``."""
    T = probe.T
    step = probe.call(8, 1)  # (8, 1, T)
    own = step[:, 0, T - 1]
    if bool(torch.isneginf(own).any()):
        return Finding(
            "decoding",
            False,
            f"at the decoding step (Tq = 1, Tk = {T}) the query's own key {T - 1} is masked with -inf: the "
            "query is aligned top-left (at position 0); it is the newest token, at position Tk - 1.",
        )
    step = _rows_from_own_key(step, T)[:, 0]  # (8, T)
    if torch.allclose(step, ref_full[:, -1], rtol=1e-4, atol=1e-4 * T + probe.slack()):
        return Finding("decoding", True, f"Tq = 1 matches the last row of its own full bias (Tk = {T})")
    text = (
        f"at the decoding step (Tq = 1, Tk = {T}) head 0 gives the keys {_num(step[0, 0])} ... "
        f"{_num(step[0, -1])}; the last row of its own full bias (Tq = Tk) has "
        f"{_num(ref_full[0, -1, 0])} ... 0."
    )
    if bool((step.abs() <= 1e-6).all()):
        text += (
            " The bias is the same for every key, so ALiBi does nothing while generating: the distance is "
            "measured from position 0 (or from the step's own length) instead of from the newest position."
        )
    return Finding("decoding", False, text)


def _alignment_finding(probe: _AlibiProbe, ref_full, tq: int = 4) -> Finding:
    """``tq`` queries against ``T`` keys must be the last ``tq`` rows of the full bias (bottom-right)."""
    T = probe.T
    part = probe.call(8, tq)  # (8, tq, T)
    ok_rows = ref_full[:, -tq:]
    finite = torch.isfinite(ok_rows)
    own_ok = bool(torch.isfinite(part[:, torch.arange(tq), torch.arange(tq) + T - tq]).all())
    shifted = _rows_from_own_key(part, T) if own_ok else part
    if own_ok and torch.allclose(shifted[finite], ok_rows[finite], rtol=1e-4, atol=1e-4 * T + probe.slack()):
        return Finding("alignment", True, f"Tq = {tq} queries against Tk = {T} keys align bottom-right")
    top = ref_full[:, :tq]
    top_finite = torch.isfinite(top)
    part_top = part - part[:, torch.arange(tq), torch.arange(tq)][..., None]
    top_left = bool(torch.isfinite(part_top[top_finite]).all()) and torch.allclose(
        part_top[top_finite], top[top_finite], rtol=1e-4, atol=1e-4 * T + probe.slack()
    )
    text = f"with Tq = {tq} queries against Tk = {T} keys, query 0 should be the token at position {T - tq}"
    text += (
        " (bottom-right: the queries are the newest tokens); this bias places it at position 0 (top-left)."
        if top_left
        else "; the bias of the last rows differs from the last rows of its own full bias (Tq = Tk)."
    )
    return Finding("alignment", False, text)


def check_t5_bias(
    bucket_fn, *, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128
) -> CheckReport:
    """Check T5's relative-position buckets against ``helpers.relative_position_bucket``.

    Args:
        bucket_fn: ``bucket_fn(relative_position) -> buckets``: ``relative_position`` an int64
            tensor of ``j - i`` (key minus query, negative for keys in the past, T5's
            ``memory_position - context_position``), the result an integer tensor of the same shape.
        bidirectional, num_buckets, max_distance: the settings ``bucket_fn`` should have.

    Findings: ``distance 0`` (bucket 0) and ``buckets`` (every relative position from
    ``-4 max_distance`` to ``4 max_distance``; names a flipped sign convention or the other
    ``bidirectional`` setting).
    """
    bucket_fn = _check_callable("bucket_fn", bucket_fn)
    if not isinstance(bidirectional, bool):
        raise TypeError(f"bidirectional must be a bool, got {bidirectional!r}")
    num_buckets = check_int("num_buckets", num_buckets, minimum=4)
    max_distance = check_int("max_distance", max_distance, minimum=2)
    rel = torch.arange(-4 * max_distance, 4 * max_distance + 1)
    shown = f"relative positions {-4 * max_distance}..{4 * max_distance}"
    try:
        out = _call(bucket_fn, "bucket_fn", (rel.clone(),), shown)
        got = _tensor_out(out, "bucket_fn", tuple(rel.shape), shown, integer=True).long()
    except _Bad as bad:
        return _report("check_t5_bias", [bad.finding], ("distance 0", "buckets"))
    want = relative_position_bucket(rel, bidirectional, num_buckets, max_distance)
    zero = int(got[4 * max_distance])
    findings = [
        Finding("distance 0", zero == 0, "bucket 0" if zero == 0 else f"bucket {zero}; expected 0 (its own bucket)")
    ]
    if torch.equal(got, want):
        findings.append(Finding("buckets", True, f"all {len(rel)} relative positions in helpers' bucket"))
        return CheckReport("check_t5_bias", tuple(findings))
    differ = (got != want).nonzero()[:, 0]
    past = differ[rel[differ] <= 0]  # keys at or before the query matter in encoders and decoders alike
    if not bidirectional and not len(past):
        findings.append(
            Finding(
                "buckets",
                True,
                f"every relative position at or before the query (j - i <= 0) in helpers' bucket; {len(differ)} future "
                f"ones differ (from j - i = {int(rel[differ].min())}), which a decoder's causal mask hides "
                "(bidirectional=False puts them all in bucket 0)",
            )
        )
        return CheckReport("check_t5_bias", tuple(findings))
    differ = past if len(past) else differ
    at = int(differ[rel[differ].abs().argmin()])  # the nearest such relative position that differs
    text = f"relative position {int(rel[at])} is in bucket {int(got[at])}, expected {int(want[at])}."
    if torch.equal(got, relative_position_bucket(-rel, bidirectional, num_buckets, max_distance)):
        text += (
            " Past and future are swapped: the relative position is read as i - j (query minus key); T5's is "
            "j - i (memory minus context), negative for keys in the past."
        )
    elif torch.equal(got, relative_position_bucket(rel, not bidirectional, num_buckets, max_distance)):
        text += f" These are the buckets of bidirectional={not bidirectional}; expected bidirectional={bidirectional}."
    elif bool((got[differ] > want[differ]).all()) and bool((rel[differ].abs() >= max_distance).all()):
        half = num_buckets // 2 if bidirectional else num_buckets
        text += (
            f" Every difference is at a distance of max_distance ({max_distance}) or more, one bucket or more "
            f"too high: the clamp to bucket {half - 1} (min(..., num_buckets - 1) after the logarithm) is missing"
            + (f", so far past keys spill into bucket {half}, the first future bucket." if bidirectional else ".")
        )
    elif bool(((got - want).abs() <= 1).all()):
        text += " Every difference is one bucket: T5 truncates the logarithmic position toward zero; it is not rounded."
    findings.append(Finding("buckets", False, text))
    return CheckReport("check_t5_bias", tuple(findings))
