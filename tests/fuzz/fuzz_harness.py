"""Shared machinery of the fuzz/fault suite (issue 11 "Tests"): how many inputs, how a run is
classified, the per-input watchdog, the real inputs (transformers files, ../shared samples) and
the tally printed as one summary line at the end of the session (tests/conftest.py).

Outcomes of one input:
- ok: exit 0;  refused: exit 1 or 2 with a one-line `error:` message (no traceback);
- internal: an `internal error`, a traceback, an uncaught exception or any other exit code;
- silent: exit 0 on input the test knows is damaged or invalid, with nothing said about it;
- hang: still running after HANG_S seconds (the watchdog stops it);
- broken: a file left half-written, unparsable, or not reverting byte for byte (kills, writes).
Size: `--fuzz-n N` / CANNBOT_FUZZ_N (inputs, default small for CI) and `--fuzz-kills K` /
CANNBOT_FUZZ_KILLS (SIGKILLs). Seeds are fixed (CANNBOT_FUZZ_SEED changes them).
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLES = Path(os.environ.get("CANNBOT_SAMPLES", REPO.parent / "shared" / "profiling-samples"))
HANG_S = 60
MEMORY_LIMIT_MB = 2048
BAD = ("internal", "silent", "hang", "broken")

# defaults sized for CI on a busy 2-core machine; the big run passes --fuzz-n 400 --fuzz-kills 60
DEFAULT_N = 60
DEFAULT_KILLS = 8
_config = {"n": None, "kills": None}


def fuzz_n() -> int:
    return int(_config["n"] or os.environ.get("CANNBOT_FUZZ_N") or DEFAULT_N)


def fuzz_kills() -> int:
    return int(_config["kills"] or os.environ.get("CANNBOT_FUZZ_KILLS") or DEFAULT_KILLS)


def seed() -> int:
    return int(os.environ.get("CANNBOT_FUZZ_SEED", "20261201"))


def share(fraction: float, least: int = 3) -> int:
    return max(least, round(fuzz_n() * fraction))


# ---------------------------------------------------------------- the tally

@dataclass
class Tally:
    inputs: Counter
    outcomes: Counter
    bad: list
    by_category: Counter = None
    kills: int = 0
    slowest_s: float = 0.0
    child_rss_mb: float = 0.0

    def add(self, category: str, outcome: str, seconds: float = 0.0, detail: str = "") -> None:
        self.inputs[category] += 1
        self.outcomes[outcome] += 1
        self.slowest_s = max(self.slowest_s, seconds)
        if outcome in BAD:
            self.by_category[category, outcome] += 1
            self.bad.append(f"{category}: {outcome}: {' '.join(detail.split())[:240]}")

    def peak_rss_mb(self) -> float:
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        return max(own, kids, self.child_rss_mb)

    def line(self) -> str:
        total = sum(self.inputs.values())
        per = "; ".join(f"{c}: " + (", ".join(f"{o} {self.by_category[c, o]}" for o in BAD
                                               if self.by_category[c, o]) or "none bad")
                        for c in sorted(self.inputs))
        cats = ", ".join(f"{k} {v}" for k, v in sorted(self.inputs.items()))
        outs = ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items()))
        return (f"fuzz/fault suite: {total} inputs ({cats}); {self.kills} kills; outcomes: {outs}; "
                f"internal errors {self.outcomes['internal']}, silent acceptances "
                f"{self.outcomes['silent']}, hangs > {HANG_S} s {self.outcomes['hang']}, "
                f"lost or half-written files {self.outcomes['broken']}; slowest input "
                f"{self.slowest_s:.1f} s; peak RSS {self.peak_rss_mb():.0f} MB "
                f"(limit {MEMORY_LIMIT_MB} MB); by category: {per}")


TALLY = Tally(Counter(), Counter(), [], Counter())


# ---------------------------------------------------------------- one run, watched

class Hang(BaseException):
    """Raised by the watchdog (a BaseException: no `except Exception` in the tool swallows it)."""


@contextlib.contextmanager
def watchdog(seconds: int = HANG_S):
    def fire(signum, frame):
        raise Hang(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Run:
    code: int | None
    output: str          # stdout and stderr together
    seconds: float
    kind: str            # ok | refused | internal | hang
    stdout: str = ""


def cli(args: list[str]) -> Run:
    """`cannbot <args>` in this process (CliRunner), classified."""
    from typer.testing import CliRunner

    from cannbot_prefetch.cli import app

    start = time.monotonic()
    try:
        with watchdog():
            res = CliRunner().invoke(app, args)
    except Hang as exc:
        return Run(None, str(exc), time.monotonic() - start, "hang")
    seconds = time.monotonic() - start
    out = res.output or ""
    try:
        stdout = res.stdout or ""
    except ValueError:
        stdout = out
    exc = res.exception
    if exc is not None and not isinstance(exc, SystemExit):
        return Run(res.exit_code, f"{out}\nuncaught {type(exc).__name__}: {exc}", seconds, "internal")
    if "internal error" in out or "Traceback (most recent call last)" in out:
        return Run(res.exit_code, out, seconds, "internal")
    if res.exit_code == 0:
        return Run(0, out, seconds, "ok", stdout)
    if res.exit_code in (1, 2, 3) and "error" in out.lower() or res.exit_code == 1:
        return Run(res.exit_code, out, seconds, "refused", stdout)
    return Run(res.exit_code, out, seconds, "internal", stdout)


# ---------------------------------------------------------------- real inputs

def site_builder():
    """The `site(...)` Plan-site builder the rewrite tests use (tests/unit/rewrite/sites.py)."""
    import sys
    sys.path.insert(0, str(REPO / "tests" / "unit" / "rewrite"))
    try:
        from sites import site
    finally:
        sys.path.pop(0)
    return site


def transformers_models() -> Path | None:
    try:
        import transformers
    except ImportError:
        return None
    return Path(transformers.__file__).parent / "models"


def copy_model(family: str, dest: Path) -> Path:
    models = transformers_models()
    src = models / family / f"modeling_{family}.py"
    dest.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copyfile(src, dest / src.name))


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and ".cannbot-prefetch" not in p.parts}
