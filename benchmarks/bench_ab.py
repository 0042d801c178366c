"""Benchmark: this checkout against an earlier commit, the same command, interleaved.

On a machine whose speed drifts (this one: up to a third within an hour), a ratio between two
versions of the tool run turn about is steadier than any ratio against a different program.
The commit is checked out into a temporary `git worktree` and put first on PYTHONPATH; both
sides run the console script as a user does (start-up included), alternately, `--repeats`
times, and the medians and their ratio are printed (below 1: this checkout is faster).

    python benchmarks/bench_ab.py --base 4e6dc1d [--repeats 7] -- prefetch analyze PROFILE ...

Paths in the command are used as given by both sides; `--out` is set per side.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import Runs, cli_cmd, line, load_note, run_once  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="the commit to compare with")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then the cannbot arguments")
    args = ap.parse_args()
    command = [a for a in args.command if a != "--"]
    if not command:
        raise SystemExit("give the cannbot arguments after --")
    tmp = Path(tempfile.mkdtemp(prefix="cannbot-ab-"))
    base = tmp / "base"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(base),
                    args.base], check=True)
    try:
        import compileall
        for src in (base / "src", REPO / "src"):
            compileall.compile_dir(str(src), quiet=1)
        sides = {"base": (Runs(f"{args.base}"), str(base / "src")),
                 "this": (Runs("this checkout"), str(REPO / "src"))}
        for _ in range(args.repeats):
            for name, (runs, src) in sides.items():
                env = dict(os.environ, PYTHONPATH=src)
                run_once(cli_cmd(*command, "--out", str(tmp / f"out-{name}")), runs, env=env)
        for runs, _ in sides.values():
            print(line(runs))
        b, t = sides["base"][0].median_s, sides["this"][0].median_s
        print(f"this / {args.base} = {t / b:.3f}; {load_note()}")
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)],
                       check=False)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
