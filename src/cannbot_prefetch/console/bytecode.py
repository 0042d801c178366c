"""This package's compiled modules kept in the user's cache when Python keeps none.

With PYTHONDONTWRITEBYTECODE=1 (set in many container images, and on this project's machines)
Python writes no `__pycache__`, so in a checkout or an editable install, where nothing else
compiled the package, every command compiles its ~150 modules from source: ~0.2 s of a 0.4 s
analyze (issue 12, measured by removing the `.pyc` files). A wheel install is compiled by pip
and unaffected; so is a Python that writes bytecode, for which nothing is installed.

`install` puts a path hook in front for this package's own folders only: their modules load
through `_Loader`, which keeps each module's code in `<cache>/pyc-<tag>-O<n>/` (cachefiles.py:
trusted only if the user's own, written atomically), keyed by the source's hash as in a
hash-based `.pyc` (PEP 552), so an edited source is recompiled whatever its mtime. Every other
module imports as before. The library never installs it: only the console script does.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import marshal
import os
import sys
from pathlib import Path
from types import CodeType

from .cachefiles import folder, read_trusted, write_atomic

_HEADER = len(importlib.util.MAGIC_NUMBER) + 8     # magic, then the source's 8-byte hash


def install(root: str | Path | None = None, cache: str | Path | None = None) -> bool:
    """Load the modules under `root` (default: this package) through the cache folder `cache`
    (default: the user's); False, and nothing changed, when Python writes bytecode itself or
    the hook is in place already."""
    if not sys.dont_write_bytecode:
        return False
    # as the import system spells the package folder (its __path__), not resolved
    top = str(root) if root is not None else os.path.dirname(os.path.dirname(__file__))
    if any(getattr(h, "root", None) == top for h in sys.path_hooks):
        return False
    where = (Path(cache) if cache is not None
             else folder() / f"pyc-{sys.implementation.cache_tag}-O{sys.flags.optimize}")
    sys.path_hooks.insert(0, _Hook(top, where))
    for path in [p for p in sys.path_importer_cache if _under(p, top)]:
        del sys.path_importer_cache[path]       # folders already seen: found again, by the hook
    return True


def _under(path: object, top: str) -> bool:
    return isinstance(path, str) and (path == top or path.startswith(top + os.sep))


class _Hook:
    """A path hook: a FileFinder loading through `_Loader` for the folders under `root`."""

    def __init__(self, root: str, cache: Path):
        self.root = root
        self.loader = type("Loader", (_Loader,), {"folder": cache})

    def __call__(self, path: str):
        if not _under(path, self.root):
            raise ImportError("not this package's folder")     # the next hook takes it
        return importlib.machinery.FileFinder(
            path, (self.loader, importlib.machinery.SOURCE_SUFFIXES))


class _Loader(importlib.machinery.SourceFileLoader):
    """A source loader whose compiled code lives in `folder`, one file per source path."""

    folder: Path

    def get_code(self, fullname: str) -> CodeType:
        path = self.get_filename(fullname)
        source = self.get_data(path)
        key = importlib.util.source_hash(source)
        digest = hashlib.sha1(path.encode(), usedforsecurity=False).hexdigest()[:16]
        file = self.folder / f"{Path(path).stem}-{digest}.pyc"    # one per source path
        data = read_trusted(file)
        if data is not None and data[:_HEADER] == importlib.util.MAGIC_NUMBER + key:
            try:
                code = marshal.loads(memoryview(data)[_HEADER:])
                if type(code) is CodeType:
                    return code
            except (EOFError, ValueError, TypeError):
                pass                            # damaged: compiled again below
        code = self.source_to_code(source, path)
        write_atomic(file, importlib.util.MAGIC_NUMBER + key + marshal.dumps(code))
        return code
