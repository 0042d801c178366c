"""A cache of the code Python's dataclasses compile at import, for the console script.

`@dataclass` writes the source of each class's `__init__`, `__repr__`, `__eq__`... and compiles
it with `exec` while the module is imported. An `analyze --model-src` imports ~300 dataclasses
(196 of them libcst's syntax nodes) and pays ~1,500 such compiles every run: 0.45 G
instructions, an eighth of what does not grow with the profile (callgrind). The compiled code
depends only on the source text and the interpreter, so it is kept between runs: `dataclasses`
looks `exec` up in its own module globals, where `install` puts a function that compiles each
text once and reuses the code object after. Python's own bytecode cache works the same way.

The cache is one marshal file per interpreter (`cache_tag`, optimization level) and command in
the user's cache folder, written atomically at exit when something new was compiled. It is only
trusted when it belongs to the user and nobody else can write it; anything unreadable, foreign
or malformed is ignored and the classes are compiled as usual. Only the console script installs
it: the library leaves the interpreter as it finds it.
"""

from __future__ import annotations

import marshal
import os
import stat
import sys
from pathlib import Path
from types import CodeType

_MAX_ENTRIES = 20_000      # a run of this tool makes ~1,500; more means something else grew it


def cache_file(command: str = "cli") -> Path:
    """One file per interpreter and command: a command loads only the code it uses (an
    analyze ~1,500 texts, every command together ~3,400)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    word = "".join(c for c in command.lower() if c.isalnum() or c == "-")[:32] or "cli"
    tag = f"{sys.implementation.cache_tag}-O{sys.flags.optimize}-{word}"
    return Path(base) / "cannbot-prefetch" / f"dataclass-code-{tag}.marshal"


class CodeCache:
    """Source text -> compiled code, loaded from and saved to `path`."""

    def __init__(self, path: Path):
        self.path = path
        self.codes = _load(path)
        self.added = 0

    def exec(self, source, globals=None, locals=None):   # noqa: A002 (exec's own names)
        """`exec` as dataclasses calls it; text compiled once, anything else passed on."""
        if type(source) is not str:
            return exec(source, globals, locals)
        code = self.codes.get(source)
        if code is None:
            code = compile(source, "<string>", "exec", dont_inherit=True)
            if len(self.codes) < _MAX_ENTRIES:
                self.codes[source] = code
                self.added += 1
        return exec(code, globals, locals)

    def save(self) -> None:
        """Write the cache if this run compiled something new; never fails the command."""
        if not self.added:
            return
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(marshal.dumps(self.codes))
            os.replace(tmp, self.path)
        except (OSError, ValueError):
            try:
                tmp.unlink()
            except OSError:
                pass


def _load(path: Path) -> dict[str, CodeType]:
    try:
        with open(path, "rb") as fh:
            info = os.fstat(fh.fileno())
            if not _trusted(info):
                return {}
            # read whole, then decoded: marshal.load on the file object reads it in small
            # pieces, 0.04 s against 0.007 s for the analyze cache's 1.4 MB (issue 12)
            data = marshal.loads(fh.read())
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if not isinstance(data, dict) or not all(
            type(k) is str and type(v) is CodeType for k, v in data.items()):
        return {}
    return data


def _trusted(info: os.stat_result) -> bool:
    """A regular file of this user that no one else may write (as ssh judges its keys)."""
    if not stat.S_ISREG(info.st_mode) or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return False
    return not hasattr(os, "getuid") or info.st_uid == os.getuid()


def install(path: Path | None = None, command: str = "cli") -> CodeCache | None:
    """Route dataclasses' compiles through a CodeCache (`path`, else the command's file),
    saved at exit; None when this Python's dataclasses does not compile through `exec` (then
    nothing changes)."""
    import atexit
    import dataclasses

    if not hasattr(dataclasses, "_create_fn") and not hasattr(dataclasses, "_FuncBuilder"):
        return None
    current = getattr(dataclasses.__dict__.get("exec"), "__self__", None)
    if isinstance(current, CodeCache):
        return current                  # installed already (main() called twice)
    cache = CodeCache(path or cache_file(command))
    dataclasses.exec = cache.exec
    atexit.register(cache.save)
    return cache
