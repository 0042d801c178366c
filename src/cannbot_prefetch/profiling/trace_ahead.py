"""The trace_view.json beside a kernel table, read by a second process while this one starts.

A stack-carrying trace is the slowest input of `analyze` (decoding it and finding each
kernel's launching host span is most of a 120-step run), yet the analysis needs its call
stacks only once the kernel table is read; until then the command imports polars, libcst and
the stages and reads the CSV, a second or so on a slow host. `start` (called by the console
script from the command's words before typer is imported, console._read_ahead, and by the CLI
once it has parsed them, before the heavy imports; a second call for the same trace keeps the
first reader, one for another trace stops it) forks a reader for the trace that discovery
finds beside the table; the reader computes `trace_kernels.stack_columns` and pipes the lists
back (marshal: plain values, no code runs on load); `take`, asked by
`trace_reader.trace_stacks`, waits for them. The two overlap on a host with two free cores and
cost one fork and one pipe where there is one.

Only a process that has started no thread and imported no polars forks (a forked child holds
no threads, so a thread pool started before it would be missing there), on Linux, with two or
more usable CPUs, and with configs/policy.yaml `profiling.read_trace_ahead` on. The library
never forks unless asked. Whatever goes wrong in the reader (an error, a crash, a signal, the
file changed since it started) leaves `take` None and the trace is read in this process, so
every result and message is the one-process one.
"""

from __future__ import annotations

import atexit
import gc
import marshal
import os
import signal
import sys
import threading
from pathlib import Path

_pending: dict[tuple[str, int], tuple[int, int, tuple]] = {}   # (trace, cap) -> pid, fd, stat


def start(profile: str | os.PathLike | None, rank=None, run: str | None = None) -> bool:
    """Fork a reader for the trace_view.json beside `profile`'s kernel table, found as
    `profiling.load_profile(profile, rank, run)` finds it; True when one was started. Never
    raises: whatever stops it here (a missing file, a bad rank) the load says itself."""
    if profile is None or rank == "all" or not _may_fork():
        return False
    try:
        from ..settings import policy
        from .companion_files import BORROWS_STACKS, find_companions
        from .discover import discover
        from .limits import Limits

        pol = policy()
        if not pol.get("profiling", {}).get("read_trace_ahead", True):
            return False
        disc = discover(Path(profile).expanduser(), rank=rank, run=run)
        if disc.runs or disc.unit.layout not in BORROWS_STACKS:
            return False
        trace = find_companions(disc.unit).get("trace_view")
        cap = Limits.of(pol).trace_bytes
        if trace is None or Path(trace).stat().st_size > cap:
            return False
    except Exception:           # noqa: BLE001 (the load reports it, in this process)
        return False
    if (str(trace), cap) in _pending:       # started already, from the command line's words
        return True
    _discard()                  # one started for another trace: nobody will take it
    return _fork(Path(trace), cap)


def take(trace: Path, max_bytes: int):
    """The reader's `stack_columns(trace, max_bytes)` once it is done; None when no reader was
    started for this file and cap, or it failed, or the file changed since it started."""
    child = _pending.pop((str(trace), max_bytes), None)
    if child is None:
        return None
    pid, fd, before = child
    try:
        with open(fd, "rb") as fh:
            data = fh.read()
        os.waitpid(pid, 0)
        status, found = marshal.loads(data)
    except (OSError, ValueError, EOFError, TypeError, ChildProcessError):
        return None
    if status != "ok" or _identity(trace) != before:
        return None
    return found


def _may_fork() -> bool:
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    if "polars" in sys.modules or threading.active_count() != 1:
        return False
    try:
        return len(os.sched_getaffinity(0)) >= 2
    except OSError:
        return False


def _identity(path: Path) -> tuple:
    try:
        st = path.stat()
    except OSError:
        return ()
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _fork(trace: Path, cap: int) -> bool:
    before = _identity(trace)
    try:
        r, w = os.pipe()
        pid = os.fork()
    except OSError:
        return False
    if pid == 0:                 # the reader: nothing it does reaches the terminal
        try:
            os.close(r)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            # it exits once the lists are written: the collector would only rescan the decoded
            # trace (every object it holds survives until then), ~5 % of the read
            gc.disable()
            try:
                from .trace_kernels import stack_columns
                data = marshal.dumps(("ok", stack_columns(trace, cap)))
            except BaseException:    # noqa: BLE001 (the parent reads the trace itself)
                data = marshal.dumps(("failed", None))
            with open(w, "wb") as fh:
                fh.write(data)
        finally:
            os._exit(0)
    os.close(w)
    _pending[(str(trace), cap)] = (pid, r, before)
    return True


def _discard() -> None:
    """At exit: readers nobody took (the table had stacks, the run failed) are stopped and
    reaped, so none outlives the command."""
    while _pending:
        _, (pid, fd, _) = _pending.popitem()
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.close(fd)
            os.waitpid(pid, 0)
        except OSError:
            pass


atexit.register(_discard)
