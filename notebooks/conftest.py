"""pytest, for every run that collects the notebooks (`make test`, `make test-portable`): notebook
kernels start one at a time.

nbval starts a Jupyter kernel per notebook, and under pytest-xdist the workers start theirs at
the same moment. jupyter_client picks a kernel's five ports by binding free ones and releasing
them for the kernel to take, so two workers can pick the same port and one kernel dies before it
replies ("Kernel died before replying to kernel_info"; jupyter/jupyter_client#487). Holding a file
lock from the choice of ports until the kernel has answered closes that window for our own
workers: the next kernel chooses only after the last one has bound its ports.

It lives here, not at the repository's root: pytest puts a conftest's folder first on sys.path,
and from the root that would shadow the copy of `helpers` that tests/test_planted_bugs.py plants
its bugs in.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pathlib
import tempfile

try:
    import fcntl
except ImportError:  # Windows: no fcntl; kernels start as nbval starts them
    fcntl = None

USER = os.getuid() if hasattr(os, "getuid") else 0
LOCK = pathlib.Path(tempfile.gettempdir()) / f"positional-encoding-kernel-start-{USER}.lock"


@contextlib.contextmanager
def one_kernel_start_at_a_time():
    with open(LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def serialise(kernel) -> None:
    """Wrap ``kernel.start_new_kernel`` (nbval's kernel module) so that it holds the lock."""
    if fcntl is None or getattr(kernel.start_new_kernel, "serialised", False):
        return
    start = kernel.start_new_kernel

    @functools.wraps(start)
    def start_new_kernel(*args, **kwargs):
        with one_kernel_start_at_a_time():
            return start(*args, **kwargs)  # returns once the kernel has replied to kernel_info

    start_new_kernel.serialised = True
    kernel.start_new_kernel = start_new_kernel


def pytest_configure(config):
    try:
        from nbval import kernel
    except ImportError:
        return
    serialise(kernel)
