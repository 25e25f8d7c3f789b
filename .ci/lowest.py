"""Print pip constraints that pin every package of a requirements file to its lower bound.

    python .ci/lowest.py requirements-dev.txt > lowest.txt
    PIP_CONSTRAINT=lowest.txt make test

CI's oldest lane installs with these, so a lower bound we state (``numpy>=1.24``) is one we test.
Files named by ``-r`` are followed. A package without a lower bound is an error: the oldest lane
could not say which version it tested.
"""

from __future__ import annotations

import pathlib
import re
import sys

REQUIREMENT = re.compile(r"^([A-Za-z0-9_.-]+)\s*(\S*)$")


def lower_bounds(path: pathlib.Path) -> dict[str, str]:
    pins: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#")[0].strip()
        if not line:
            continue
        if line.startswith("-r "):
            pins.update(lower_bounds(path.parent / line[3:].strip()))
            continue
        match = REQUIREMENT.match(line.replace(" ", ""))
        lower = [s[2:] for s in (match.group(2).split(",") if match else []) if s.startswith(">=")]
        if not match or len(lower) != 1:
            raise SystemExit(f"{path}: {raw!r} has no single lower bound '>=' to test")
        pins[match.group(1).lower()] = lower[0]
    return pins


if __name__ == "__main__":
    for name, version in lower_bounds(pathlib.Path(sys.argv[1])).items():
        print(f"{name}=={version}")
