"""Shared fixtures: the article's reference numbers."""

from __future__ import annotations

import json
import os
import pathlib

import pytest

if "MUTANT_UNDER_TEST" in os.environ:
    # Under `make mutants`, mutmut runs the tests once, then forks a child per mutant. A fork taken
    # while torch's thread pools hold a lock leaves the child waiting forever (a futex no thread
    # will release), which mutmut counts as a timeout, and a timeout as caught: a mutant that every
    # test lets through looked caught. One thread, and Inductor compiling in this process, keep the
    # children free of inherited locks, so that a mutant's tests finish and their verdict counts.
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set, or parallel work started: the first session of this process set it
        pass

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def article():
    return json.loads((ROOT / "data" / "article_numbers.json").read_text())
