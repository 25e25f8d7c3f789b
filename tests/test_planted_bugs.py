"""Plausible bugs, planted one at a time in a copy of ``helpers``: the suite must catch each.

Each entry names a file of ``helpers``, a line as it is and the line as the bug would write it,
and the tests that must then fail. The test copies the package, plants the bug, and runs those
tests in a fresh Python that imports the copy. A plant whose line no longer exists fails loudly,
so the list follows the code. One baseline run, with nothing planted, must pass: it shows that the
copy is what the tests import.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

# (name, file, as it is, as the bug writes it, tests that must fail)
PLANTED = [
    (
        "sin and cos swapped in the sinusoidal table",
        "_angles.py",
        "torch.sin(angle, out=table[..., 0])\n    torch.cos(angle, out=table[..., 1])",
        "torch.cos(angle, out=table[..., 0])\n    torch.sin(angle, out=table[..., 1])",
        "tests/test_core.py tests/test_precision.py",
    ),
    (
        "scores scaled by sqrt(dv) instead of sqrt(d)",
        "self_attention.py",
        "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
        "scores = q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1])",
        "tests/test_attention_fused.py tests/test_core.py",
    ),
    (
        "causal mask aligned top-left",
        "self_attention.py",
        "i = torch.arange(n_queries, device=device)[:, None] + (n_keys - n_queries)  # (Tq, 1)",
        "i = torch.arange(n_queries, device=device)[:, None]  # (Tq, 1)",
        "tests/test_attention_fused.py tests/test_core.py",
    ),
    (
        "ALiBi slopes for other head counts from the next power of two",
        "alibi.py",
        "extra = alibi_slopes(2 * closest)[0::2][: n_heads - closest]",
        "extra = alibi_slopes(2 * closest)[1::2][: n_heads - closest]",
        "tests/test_alibi.py",
    ),
    (
        "T5: keys after the query in the lower half",
        "relative.py",
        "offset = (relative_position > 0).long() * num_buckets",
        "offset = (relative_position >= 0).long() * num_buckets",
        "tests/test_relative.py",
    ),
    (
        "shift map turning the wrong way",
        "sinusoidal.py",
        "matrix[even, even + 1] = sin\n    matrix[even + 1, even] = -sin",
        "matrix[even, even + 1] = -sin\n    matrix[even + 1, even] = sin",
        "tests/test_shift_matrix.py",
    ),
    (
        "dynamic NTK changes the base below the original length",
        "rope.py",
        'length = max(opt["seq_len"] or opt["original_max_len"], opt["original_max_len"])',
        'length = opt["seq_len"] or opt["original_max_len"]',
        "tests/test_rope_settings.py",
    ),
    (
        "YaRN's upper correction index clipped to the last pair",
        "rope.py",
        "return max(low, 0), min(high, d - 1)",
        "return max(low, 0), min(high, d // 2 - 1)",
        "tests/test_rope_settings.py",
    ),
    (
        "YaRN attention factor dropped",
        "rope.py",
        "return theta * (1.0 - interpolate) + (theta / s) * interpolate, float(factor)",
        "return theta * (1.0 - interpolate) + (theta / s) * interpolate, 1.0",
        "tests/test_rope.py tests/test_rope_settings.py",
    ),
    (
        "short-dtype tables rounded twice through float32",
        "rope.py",
        "return _round_from_float64(cos, dtype), _round_from_float64(sin, dtype)",
        "return cos.to(dtype), sin.to(dtype)",
        "tests/test_rope_settings.py",
    ),
    (
        "pair members swapped in the strided (CUDA) interleaved kernel",
        "rope.py",
        "(x1, x2), (o1, o2) = x_p.unbind(-1), out_p.unbind(-1)",
        "(x2, x1), (o1, o2) = x_p.unbind(-1), out_p.unbind(-1)",
        "tests/test_rope_settings.py",
    ),
    (
        "the backward pass turns the gradient the same way as the forward",
        "rope.py",
        "return _rotate(grad, cos, -sin, ctx.layout, ctx.r), None, None, None, None",
        "return _rotate(grad, cos, sin, ctx.layout, ctx.r), None, None, None, None",
        "tests/test_rope.py",
    ),
    (
        "query and key swapped when a decoding step rotates them as one tensor",
        "rope.py",
        "x = torch.cat((q, k), dim=-3)  # (..., Hq + Hk, T, d)",
        "x = torch.cat((k, q), dim=-3)  # (..., Hq + Hk, T, d)",
        "tests/test_rope.py",
    ),
    (
        "FlexAttention's block mask one key short when a block's last query sees a block's first key",
        "self_attention.py",
        "count = (last // block + 1).clamp(max=n_k).to(torch.int32)[None, None]  # (1, 1, n_q)",
        "count = ((last - 1) // block + 1).clamp(max=n_k).to(torch.int32)[None, None]  # (1, 1, n_q)",
        "tests/test_attention_fused.py::test_flex_alibi_equals_materialised_bias",
    ),
    (
        "an exercise's expected value moved (+7)",
        "exercises/_nb06.py",
        'expected=lambda p: int((_wavelengths(p) > p["context"]).sum()),',
        'expected=lambda p: int((_wavelengths(p) > p["context"]).sum()) + 7,',
        "tests/test_exercises_06.py",
    ),
]


def _run(tests: str, package: pathlib.Path) -> subprocess.CompletedProcess:
    """Run ``tests`` in a fresh Python whose ``helpers`` is the copy in ``package``.

    The working directory is the copy's parent, not the repository: ``python -m`` puts the working
    directory first on the path, where the repository's own ``helpers`` would win.
    """
    env = dict(os.environ, PYTHONPATH=str(package), HELPERS_DEVICE="cpu")
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-x",
        "-q",
        "-p",
        "no:cacheprovider",
        "-m",
        # A test named by its node id runs even when slow; whole files run their fast tests.
        "not browser" if "::" in tests else "not slow and not browser",
        f"--rootdir={ROOT}",
        "-c",
        str(ROOT / "pyproject.toml"),
        *(str(ROOT / t) for t in tests.split()),
    ]
    return subprocess.run(command, cwd=package.parent, env=env, capture_output=True, text=True, timeout=600)


def _copy(tmp_path: pathlib.Path) -> pathlib.Path:
    package = tmp_path / "planted"
    shutil.copytree(ROOT / "helpers", package / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    return package


@pytest.mark.slow
def test_the_copy_is_what_the_tests_import(tmp_path):
    package = _copy(tmp_path)
    (package / "helpers" / "__init__.py").write_text(
        (ROOT / "helpers" / "__init__.py").read_text() + "\nPLANTED_COPY = True\n"
    )
    probe = subprocess.run(
        [sys.executable, "-c", "import helpers; print(helpers.__file__, helpers.PLANTED_COPY)"],
        cwd=package.parent,
        env=dict(os.environ, PYTHONPATH=str(package)),
        capture_output=True,
        text=True,
    )
    assert probe.returncode == 0 and str(package) in probe.stdout, probe.stdout + probe.stderr
    result = _run("tests/test_alibi.py", package)
    assert result.returncode == 0, "with nothing planted the tests must pass:\n" + result.stdout[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("name, file, good, bad, tests", PLANTED, ids=[p[0] for p in PLANTED])
def test_a_planted_bug_is_caught(tmp_path, name, file, good, bad, tests):
    package = _copy(tmp_path)
    source = package / "helpers" / file
    text = source.read_text()
    assert text.count(good) == 1, f"the line to plant into is no longer in helpers/{file} once: {good!r}"
    source.write_text(text.replace(good, bad))
    result = _run(tests, package)
    assert result.returncode == 1, (
        f"planted bug not caught ({name}); exit {result.returncode}:\n" + result.stdout[-2000:] + result.stderr[-1000:]
    )


def test_the_readme_counts_the_planted_bugs():
    """The README says how many bugs `make test` plants; the count follows this list."""
    words = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen \
sixteen seventeen eighteen nineteen twenty".split()
    readme = (ROOT / "README.md").read_text()
    assert f"plants {words[len(PLANTED)]} plausible bugs" in readme, (
        f"README.md should say `make test` plants {words[len(PLANTED)]} plausible bugs"
    )
