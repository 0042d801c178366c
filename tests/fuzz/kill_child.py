"""The child process of the kill suites (test_kill_loop.py, test_output_set_kills.py).

    python kill_child.py MODULE:FUNC[,MODULE:FUNC...] UNIT K cannbot-words...

Runs `cannbot prefetch <words>` in this process with each named function wrapped: while one
runs, a profile hook counts calls (UNIT `io`: the C-level file-system calls below; `any`: every
Python or C call) and the process sends itself SIGKILL at the K-th. With K = 0 nothing is
killed and `EVENTS <n>` on stderr says how many calls a full run of each wrapped function made,
so a suite can draw K from 1..n. The functions are wrapped before the CLI is imported, so a
module that imports one by name gets the wrapped one.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys

# File-system calls as the C functions Python calls them (os, io, fcntl, tempfile).
IO = {"open", "write", "replace", "rename", "unlink", "fchmod", "chmod", "close", "fsync",
      "mkdir", "rmdir", "flock", "makedirs", "mkstemp"}


def events(stderr: str) -> int:
    """The calls a K = 0 run counted (the largest over the wrapped functions)."""
    return max(int(ln.split()[1]) for ln in stderr.splitlines() if ln.startswith("EVENTS "))


def _watched(real, unit: str, k: int, count: list[int]):
    def hook(frame, event, arg):
        if unit == "io" and not (event == "c_call" and getattr(arg, "__name__", "") in IO):
            return
        count[0] += 1
        if k and count[0] >= k:
            os.kill(os.getpid(), signal.SIGKILL)

    def run(*a, **kw):
        sys.setprofile(hook)
        try:
            return real(*a, **kw)
        finally:
            sys.setprofile(None)
            if not k:
                sys.stderr.write(f"EVENTS {count[0]}\n")
    return run


def main(argv: list[str]) -> None:
    watch, unit, k, *words = argv
    count = [0]          # one count across the wrapped functions: K is the K-th call of the run
    for spec in watch.split(","):
        name, attr = spec.split(":")
        module = importlib.import_module(name)
        setattr(module, attr, _watched(getattr(module, attr), unit, int(k), count))
    from cannbot_prefetch.cli import app
    app(["prefetch", *words], prog_name="cannbot")


if __name__ == "__main__":
    main(sys.argv[1:])
