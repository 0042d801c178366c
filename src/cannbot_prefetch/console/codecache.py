"""A cache of the code Python's dataclasses compile at import, for the console script.

`@dataclass` writes the source of each class's `__init__`, `__repr__`, `__eq__`... and compiles
it with `exec` while the module is imported. An `analyze --model-src` imports ~300 dataclasses
(196 of them libcst's syntax nodes) and pays ~1,500 such compiles every run: 0.45 G
instructions, an eighth of what does not grow with the profile (callgrind). The compiled code
depends only on the source text and the interpreter, so it is kept between runs: `dataclasses`
looks `exec` up in its own module globals, where `install` puts a function that compiles each
text once and reuses the code object after. Python's own bytecode cache works the same way.

The cache is one marshal file per interpreter (`cache_tag`, optimization level) and command in
the user's cache folder (cachefiles.py: trusted only if the user's own and not writable by
others, written atomically), saved at exit when something new was compiled; anything
unreadable, foreign or malformed is ignored and the classes are compiled as usual. Only the
console script installs it: the library leaves the interpreter as it finds it.
"""

from __future__ import annotations

import marshal
import sys
from pathlib import Path
from types import CodeType

from .cachefiles import folder, read_trusted, write_atomic

_MAX_ENTRIES = 20_000      # a run of this tool makes ~1,500; more means something else grew it


def cache_file(command: str = "cli") -> Path:
    """One file per interpreter and command: a command loads only the code it uses (an
    analyze ~1,500 texts, every command together ~3,400)."""
    word = "".join(c for c in command.lower() if c.isalnum() or c == "-")[:32] or "cli"
    tag = f"{sys.implementation.cache_tag}-O{sys.flags.optimize}-{word}"
    return folder() / f"dataclass-code-{tag}.marshal"


def command_of(argv) -> str:
    """The command a console run names (`prefetch analyze ...` -> analyze), for its cache."""
    words = [a for a in argv[:2] if not a.startswith("-")]
    return words[-1] if words else "cli"


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
        if self.added:
            write_atomic(self.path, marshal.dumps(self.codes))


def _load(path: Path) -> dict[str, CodeType]:
    data = read_trusted(path)
    if data is None:
        return {}
    try:
        codes = marshal.loads(data)
    except (EOFError, ValueError, TypeError):
        return {}
    if not isinstance(codes, dict) or not all(
            type(k) is str and type(v) is CodeType for k, v in codes.items()):
        return {}
    return codes


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
