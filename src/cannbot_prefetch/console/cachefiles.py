"""The console script's cache files: where they live, when one is trusted, how one is written.

One folder in the user's cache (`$XDG_CACHE_HOME/cannbot-prefetch`, else `~/.cache/...`). A
file there holds compiled code that is executed, so it is only read when it is a regular file
of this user that no one else may write (as ssh judges its keys), and written atomically
(atomic.py: a temporary file beside it renamed over it), so a reader never sees half a file.
Neither reading nor writing ever fails a command: a cache that cannot be used is not used.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .. import atomic     # standard library only: safe to import before the bytecode hook


def folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cannbot-prefetch"


def read_trusted(path: Path) -> bytes | None:
    """The file's bytes, None when it is missing, unreadable or not trusted."""
    try:
        with open(path, "rb") as fh:
            if not _trusted(os.fstat(fh.fileno())):
                return None
            return fh.read()      # whole: marshal.load on the file object reads in small pieces
    except OSError:
        return None


def write_atomic(path: Path, data: bytes) -> None:
    """The project's atomic write (atomic.py), private to the user (folder 0700, file 0600);
    nothing on failure."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic.write_atomic(path, data, mode=0o600)
    except (OSError, ValueError):
        pass


def _trusted(info: os.stat_result) -> bool:
    if not stat.S_ISREG(info.st_mode) or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return False
    return not hasattr(os, "getuid") or info.st_uid == os.getuid()
