"""Run every notebook under strict nbval and print its wall time, peak memory and slowest cells.

Goals on a two-core laptop-class CPU: each notebook under 30 s, all together under 3 minutes,
the largest under 1.5 GB.

Each notebook runs in a fresh helper process that starts ``pytest --nbval`` (which starts the
Jupyter kernel) and then reads ``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss``: the largest
resident set of any process below it, in practice the kernel's. Wall time includes the kernel's
start. The slowest cells come from pytest's ``--durations`` (each nbval item is a code cell, counted from 0;
the first line of each is printed).

Usage:
    .venv/bin/python benchmarks/notebook_times.py                         # every notebooks/NN_*.ipynb
    .venv/bin/python benchmarks/notebook_times.py notebooks/06_rope.ipynb --cells 5
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
GOAL_EACH_S, GOAL_TOTAL_S, GOAL_PEAK_MB = 30.0, 180.0, 1536.0

# Runs in the helper process: the notebook's pytest, then the children's peak memory.
_RUNNER = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
wall = time.perf_counter() - start
peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # kB on Linux
print(json.dumps({"rc": done.returncode, "wall": wall, "peak_kb": peak_kb, "out": done.stdout[-20000:]}))
"""

_DURATION = re.compile(r"^\s*([\d.]+)s call\s+\S+::Cell (\d+)", re.MULTILINE)


def _code_cell_heads(path: pathlib.Path) -> list[str]:
    """First non-comment line of every code cell (nbval's "Cell N" counts code cells from 0)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    heads = []
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"]).splitlines()
        lines = [line for line in source if line.strip() and not line.lstrip().startswith("#")]
        heads.append((lines[0] if lines else "").strip()[:60])
    return heads


def run_notebook(path: pathlib.Path, cells: int) -> dict:
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--nbval",
        str(path),
        "--sanitize-with",
        str(ROOT / "tests" / "nbval_sanitize.cfg"),
        "-p",
        "no:cacheprovider",
        "-q",
        f"--durations={cells}",
        "--durations-min=0",
    ]
    env = dict(os.environ, HELPERS_DEVICE="cpu", PYTHONHASHSEED="0", PYDEVD_DISABLE_FILE_VALIDATION="1")
    done = subprocess.run([sys.executable, "-c", _RUNNER, *command], capture_output=True, text=True, cwd=ROOT, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"the runner failed for {path}: {done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    heads = _code_cell_heads(path)
    result["slow_cells"] = [
        (f"code cell {n} `{heads[int(n)] if int(n) < len(heads) else '?'}`", float(seconds))
        for seconds, n in _DURATION.findall(result["out"])
    ]
    summary = [line for line in result["out"].splitlines() if re.search(r"\d+ (passed|failed|error)", line)]
    result["summary"] = summary[-1].strip("= ") if summary else "no summary"
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help="default: notebooks/[0-9][0-9]_*.ipynb")
    parser.add_argument("--cells", type=int, default=3, help="how many of the slowest cells to list per notebook")
    args = parser.parse_args(argv)
    paths = [pathlib.Path(p).resolve() for p in args.notebooks] or sorted(
        (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")
    )
    if not paths:
        print("no notebooks found")
        return 1
    print(f"{'notebook':<36} {'wall s':>7} {'peak MB':>8}  nbval")
    total, largest, failed = 0.0, 0.0, 0
    for path in paths:
        result = run_notebook(path, args.cells)
        peak_mb = result["peak_kb"] / 1024.0
        total += result["wall"]
        largest = max(largest, peak_mb)
        failed += result["rc"] != 0
        flag = "" if result["wall"] < GOAL_EACH_S and peak_mb < GOAL_PEAK_MB else "   <-- over the goal"
        print(f"{path.name:<36} {result['wall']:7.1f} {peak_mb:8.0f}  {result['summary']}{flag}")
        for name, seconds in result["slow_cells"]:
            print(f"{'':<38}{seconds:5.1f} s  {name}")
    print(
        f"{'total':<36} {total:7.1f}   (goals: each < {GOAL_EACH_S:.0f} s, total < {GOAL_TOTAL_S:.0f} s, "
        f"peak < {GOAL_PEAK_MB:.0f} MB; largest peak {largest:.0f} MB)"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
