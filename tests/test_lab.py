"""`make lab`, the README's first command, starts a JupyterLab that serves the start notebook.

The server is started exactly as `make lab` starts it (as root too, where JupyterLab refuses to run
without `--allow-root`), with `--no-browser` and a free port on localhost, and stopped again.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
URL = re.compile(r"http://127\.0\.0\.1:(\d+)/lab\?token=([0-9a-f]+)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, b""


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "jupyter").exists(), reason="needs the project's .venv")
def test_make_lab_serves_the_start_notebook(tmp_path):
    port = _free_port()
    log = tmp_path / "lab.log"
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    flags = f"--no-browser --ServerApp.ip=127.0.0.1 --ServerApp.port={port} --ServerApp.port_retries=0"
    with log.open("w") as out:
        server = subprocess.Popen(
            ["make", "--no-print-directory", "lab", f"LAB_FLAGS={flags}"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 90
        found = None
        while time.monotonic() < deadline and found is None:
            assert server.poll() is None, f"`make lab` exited with {server.returncode}:\n{log.read_text()[-2000:]}"
            found = URL.search(log.read_text())
            time.sleep(0.5)
        assert found, f"no http://127.0.0.1:PORT/lab?token=... line within 90 s:\n{log.read_text()[-2000:]}"
        assert int(found.group(1)) == port
        token = found.group(2)
        assert len(token) >= 32, "the server must protect itself with a token"

        base = f"http://127.0.0.1:{port}"
        status, body = _get(f"{base}/api/contents/00_start_here.ipynb?token={token}&content=0")
        assert status == 200, f"the start notebook is not served: HTTP {status}"
        assert json.loads(body)["type"] == "notebook"
        status, _ = _get(f"{base}/lab/tree/00_start_here.ipynb?token={token}")
        assert status == 200, f"JupyterLab's page for the start notebook: HTTP {status}"
        status, _ = _get(f"{base}/api/contents/00_start_here.ipynb")
        assert status in (401, 403), f"without the token the notebook must not be served, got HTTP {status}"
    finally:
        _stop(server)


def _stop(server: subprocess.Popen) -> None:
    """Stop make and the server it started (one process group)."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, None)):
        try:
            os.killpg(server.pid, sig)
        except ProcessLookupError:
            break
        try:
            server.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
