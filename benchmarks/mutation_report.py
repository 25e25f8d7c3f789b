"""The kill rate per module of the last `make mutants` run (mutmut's results, summarised).

A mutant is killed when a test fails on it, or when it makes the tests run past mutmut's time
limit (an endless loop is caught too); it survives when every test passes. The kill rate is
killed / (killed + survived); a failing test alone gives the lower figure beside it (a timeout on a
busy machine may be a slow survivor: rerun those on an idle one). Mutants that no test reaches
are listed apart.

    python benchmarks/mutation_report.py            # the table
    python benchmarks/mutation_report.py --survivors  # and every surviving mutant's name
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import re
import subprocess
import sys

LINE = re.compile(r"^\s*((helpers\.[\w.]+?)\.x_?\w+?__mutmut_\d+):\s*(.+?)\s*$")
KILLED = {"killed", "timeout"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--survivors", action="store_true", help="list every surviving mutant")
    args = parser.parse_args(argv)
    mutmut = pathlib.Path(sys.executable).parent / "mutmut"
    out = subprocess.run([str(mutmut), "results", "--all", "true"], capture_output=True, text=True, check=True).stdout
    table: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    survivors = []
    for line in out.splitlines():
        match = LINE.match(line)
        if not match:
            continue
        name, module, status = match.groups()
        table[module][status] += 1
        if status == "survived":
            survivors.append(name)  # as mutmut spells it, so that `mutmut show NAME` finds it
    if not table:
        print("no mutmut results here: run `make mutants` first")
        return 1
    header = ("module", "mutants", "killed", "timeout", "survived", "no test", "other", "kill rate", "by a test")
    print(f"{header[0]:<20} " + " ".join(f"{h:>8}" for h in header[1:]))
    for module in sorted(table):
        counts = table[module]
        killed = sum(counts[s] for s in KILLED)
        survived = counts["survived"]
        untested = counts["no tests"]
        other = sum(counts.values()) - killed - survived - untested
        rate = f"{killed / (killed + survived):.1%}" if killed + survived else "-"
        by_test = f"{counts['killed'] / (killed + survived):.1%}" if killed + survived else "-"
        row = (sum(counts.values()), counts["killed"], counts["timeout"], survived, untested, other, rate, by_test)
        print(f"{module:<20} " + " ".join(f"{v:>8}" for v in row))
    if args.survivors:
        print("\nsurvivors (inspect one with `.venv/bin/mutmut show NAME`):")
        print("\n".join(f"  {name}" for name in survivors))
    return 0


if __name__ == "__main__":
    sys.exit(main())
