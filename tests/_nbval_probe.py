"""A pytest plugin for tests/test_notebooks_hygiene.py: records, for every notebook cell that nbval
collects, whether nbval will compare its output (its own ``options["check"]``), in the JSON file
named by ``NBVAL_PROBE_OUT``: ``{"00_start_here.ipynb": [true, false, ...], ...}``."""

from __future__ import annotations

import json
import os
import pathlib


def pytest_collection_modifyitems(session, config, items):
    compared: dict[str, list[bool]] = {}
    for item in items:
        options = getattr(item, "options", None)
        if options is not None and hasattr(item, "cell_num"):
            compared.setdefault(pathlib.Path(str(item.fspath)).name, []).append(bool(options["check"]))
    pathlib.Path(os.environ["NBVAL_PROBE_OUT"]).write_text(json.dumps(compared))
