"""Benchmark: start-up of the `cannbot` command vs `python -c pass`, whole processes.

Runs each command `--repeats` times, interleaved (a busy machine slows all alike), and prints
medians. Target (issue 12): `cannbot --help` and `cannbot prefetch hardware list` <= 0.3 s.
The median of `python -c pass` in the same run says how busy the machine was.

    python benchmarks/bench_startup.py [--repeats 9]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import Runs, cli_cmd, interleave, line, load_note, python_cmd  # noqa: E402

COMMANDS = {
    "python -c pass": python_cmd("pass"),
    "cannbot --help": cli_cmd("--help"),
    "cannbot prefetch hardware list": cli_cmd("prefetch", "hardware", "list"),
    "cannbot prefetch analyze --help": cli_cmd("prefetch", "analyze", "--help"),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args()
    runs = {name: Runs(name) for name in COMMANDS}
    interleave([(cmd, runs[name]) for name, cmd in COMMANDS.items()], args.repeats)
    for r in runs.values():
        print(line(r))
    base = runs["python -c pass"].median_s
    for name in ("cannbot --help", "cannbot prefetch hardware list"):
        m = runs[name].median_s
        print(f"{name}: {m:.2f} s (target <= 0.30 s; {m / base:.1f} x python -c pass)")
    print(load_note())


if __name__ == "__main__":
    main()
