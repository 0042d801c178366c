"""Shared by the benchmarks: run whole processes, interleaved, and report medians.

Each measurement is a fresh process (start-up included, as a user runs it). Baseline and
candidate alternate within each repeat, so a busy machine slows both alike; the ratio of the
medians is what the benchmarks print. Peak memory is the process's own VmHWM (read from
/proc/self/status at exit), not ru_maxrss, which Linux seeds with the forking parent's size.
VmHWM counts the pages of shared libraries the process touched (polars' is 170 MB), and how
many of those are resident depends on the page cache: 50-90 MB of an analyze, ~30 MB more
right after an install than after a quiet hour. Each run therefore also reports its RssFile
at exit, and `private` is VmHWM minus it: the memory the process itself holds at its peak
(file pages only grow while a command runs, so this is a lower bound within a few MB).
Each run's CPU seconds (user + system of that process and its threads, from the children's
rusage: RUSAGE_CHILDREN read before and after the one child) are kept beside its wall time.
Both ratios are printed (`guard`). CPU seconds count only the command's own work, so the
start-up and trace guards are judged in them and hold beside other work (`nice -n 10`). The
whole-command guards of analyze and `--rank all` are judged in wall seconds, as issue 34 states
them (what the user waits for): polars' pool on two cores saves wall time and adds CPU time, so
their CPU ratio is printed beside and is higher; run those two on idle cores.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

# Wraps a command's Python code so the process reports its own peak memory at exit.
_HWM = """
import atexit, sys
_REPORT = sys.argv.pop(1)
def _hwm():
    with open("/proc/self/status") as fh:
        kb = {ln.split(":")[0]: int(ln.split()[1]) for ln in fh
              if ln.startswith(("VmHWM:", "RssFile:"))}
    with open(_REPORT, "w") as out:
        out.write(f"{kb['VmHWM']} {kb.get('RssFile', 0)}")
atexit.register(_hwm)
"""


@dataclass
class Runs:
    label: str
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)        # user + system seconds
    peak_mb: list[float] = field(default_factory=list)
    file_mb: list[float] = field(default_factory=list)   # RssFile at exit (shared libraries)

    @property
    def median_s(self) -> float:
        return statistics.median(self.seconds)

    @property
    def median_cpu(self) -> float:
        return statistics.median(self.cpu)

    @property
    def peak(self) -> float:
        return max(self.peak_mb) if self.peak_mb else float("nan")

    @property
    def private(self) -> float:
        """The largest VmHWM less that run's file pages (see the module docstring)."""
        if not self.peak_mb:
            return float("nan")
        return max(p - f for p, f in zip(self.peak_mb, self.file_mb))


def python_cmd(code: str, *args: str) -> list[str]:
    """`python -c CODE ARGS` with the peak-memory report wrapped around CODE."""
    return [sys.executable, "-c", _HWM + code, "__HWM__", *args]


_ENTRY = """\
from cannbot_prefetch.cli import main
sys.argv[0] = "cannbot"
main()
"""


def cli_cmd(*args: str) -> list[str]:
    """The `cannbot` console script, run as the installed entry point runs it."""
    return python_cmd(_ENTRY, *args)


def run_once(cmd: list[str], runs: Runs, env: dict | None = None) -> None:
    with tempfile.NamedTemporaryFile(prefix="hwm-", delete=False) as tmp:
        report = tmp.name
    cmd = [report if c == "__HWM__" else c for c in cmd]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    runs.seconds.append(time.perf_counter() - t0)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    runs.cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    if proc.returncode not in (0,):
        raise SystemExit(f"{runs.label}: exit {proc.returncode}: "
                         f"{proc.stderr.decode(errors='replace')[-2000:]}")
    try:
        peak, files = Path(report).read_text().split()
        runs.peak_mb.append(int(peak) / 1024)
        runs.file_mb.append(int(files) / 1024)
    except (OSError, ValueError):
        pass
    finally:
        os.unlink(report)


def compile_package() -> None:
    """Write the package's bytecode cache, as `pip install` does for an installed tool.

    An editable install run under PYTHONDONTWRITEBYTECODE=1 (this machine sets it) never
    caches its own modules, so every process would compile ~200 of them again (~0.1 s) — a
    cost no installed copy pays. compileall writes the cache regardless of that variable.
    """
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("cannbot_prefetch")
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            compileall.compile_dir(folder, quiet=1)


def interleave(pairs: list[tuple[list[str], Runs]], repeats: int) -> None:
    """Run every command once per repeat, in turn, `repeats` times (bytecode cached first)."""
    compile_package()
    for _ in range(repeats):
        for cmd, runs in pairs:
            run_once(cmd, runs)


def line(runs: Runs) -> str:
    spread = f"{min(runs.seconds):.2f}-{max(runs.seconds):.2f}"
    return (f"{runs.label:<34} median {runs.median_s:7.2f} s  (runs {spread} s, n={len(runs.seconds)}, "
            f"CPU {runs.median_cpu:.2f} s)"
            f"  peak {runs.peak:7.0f} MB (private {runs.private:.0f})")


def load_note() -> str:
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return ""
    return f"load average {one:.1f} / {five:.1f} on {os.cpu_count()} CPU(s)"


def guard(what: str, cand: Runs, base: Runs, limit: float, by: str = "cpu") -> str:
    """The guard line: the ratio of the medians of `cand` over `base` against `limit`, judged
    `by` CPU seconds (the default) or wall seconds, the other printed beside. The whole-command
    guards of issue 34 (analyze, `--rank all`) are wall time, as the issue states them: what the
    user waits for, with polars' second thread working; they hold only on idle cores, so their
    line also says the load (`load_note`)."""
    cpu = cand.median_cpu / base.median_cpu
    wall = cand.median_s / base.median_s
    judged, other, other_name = (wall, cpu, "CPU") if by == "wall" else (cpu, wall, "wall")
    unit = "wall seconds" if by == "wall" else "CPU seconds"
    return (f"{what} = {judged:.2f} in {unit} (guard <= {limit:.2f}: "
            f"{'holds' if judged <= limit else 'FAILS'}; {other_name} {other:.2f})")