"""Benchmark: start-up of the `cannbot` command vs `python -c pass`, whole processes.

Runs each command `--repeats` times, interleaved (a busy machine slows all alike), and prints
medians of wall and CPU time. Guard (issues 12, 34): `cannbot --help` <= 0.3 s CPU (user +
system) with the package's bytecode cached as a pip install leaves it; `hardware list` is printed
beside it. The median of `python -c pass` in the same run says how busy the machine was.

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
        m, cpu = runs[name].median_s, runs[name].median_cpu
        verdict = "holds" if cpu <= 0.30 else "FAILS"
        print(f"{name}: {cpu:.2f} s CPU, {m:.2f} s wall (guard <= 0.30 s CPU: {verdict}; "
              f"{m / base:.1f} x python -c pass)")
    print(load_note())


if __name__ == "__main__":
    main()
