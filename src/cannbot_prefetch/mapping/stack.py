"""Call stacks -> places in the model source (REFERENCE.md §3.5).

A stack is "file(line): func;..." innermost first (trace_view `Call stack`, or the enclosing
`python_function` events of a PyTorch CPU trace, whose line is the function's `def`). The stack
starts inside torch (`linear.py`), so the first frame that lies in the user's model source is
taken; profiles recorded on another host need a path prefix map (`--src-map OLD=NEW`). A frame
matches a source file by its real path after the map, else by the longest common path suffix.
Positions come from libcst (the rewriter's SourceView line ranges).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import InputError
from .source import ModelSource

_FRAME = re.compile(r"^\s*(?P<file>.+?)\((?P<line>\d+)\)\s*:?\s*(?P<func>[^;]*)$")


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    func: str


@dataclass(frozen=True)
class SourcePlace:
    file: str          # model source file (as loaded)
    cls: str
    method: str
    stmt: int | None   # statement index in the method, None for a `def` line (python_function)
    line: int


def parse_src_map(items: tuple[str, ...] | list[str] | None) -> tuple[tuple[str, str], ...]:
    out = []
    for it in items or ():
        if "=" not in it:
            raise InputError(f"--src-map must be OLD=NEW, not {it!r}")
        old, new = it.split("=", 1)
        if not old:
            raise InputError(f"--src-map OLD prefix is empty in {it!r}")
        out.append((old, new))
    return tuple(out)


def parse_stack(stack: str | tuple[str, ...] | None) -> list[Frame]:
    if not stack:
        return []
    items = stack.split(";") if isinstance(stack, str) else list(stack)
    out = []
    for it in items:
        m = _FRAME.match(it.strip())
        if m:
            out.append(Frame(m["file"].strip(), int(m["line"]), m["func"].strip()))
    return out


def _mapped(path: str, src_map) -> str:
    for old, new in src_map:
        if path.startswith(old):
            return new + path[len(old):]
    return path


def _suffix_len(a: str, b: str) -> int:
    pa, pb = PurePosixPath(a.replace("\\", "/")).parts, PurePosixPath(b.replace("\\", "/")).parts
    n = 0
    while n < min(len(pa), len(pb)) and pa[-1 - n] == pb[-1 - n]:
        n += 1
    return n


def match_file(frame_file: str, ms: ModelSource, src_map=()) -> str | None:
    """The model source file a frame's file is, None when it is none of them. Kept per
    ModelSource: a stack repeats the same few files in every frame of every target, and each
    resolve walks the path (~10 lstat calls: 0.04 s of a 3-step analyze, issue 12)."""
    key = (frame_file, tuple(src_map))
    if key not in ms.frame_files:
        ms.frame_files[key] = _match_file(frame_file, ms, src_map)
    return ms.frame_files[key]


def _real(path: str) -> str:
    try:
        return str(Path(path).resolve())
    except OSError:
        return path


def _match_file(frame_file: str, ms: ModelSource, src_map) -> str | None:
    path = _mapped(frame_file, src_map)
    real = _real(path)
    best, best_n = None, 0
    if ms.real_files is None:       # the loaded files' real paths, each resolved once
        ms.real_files = {_real(f): f for f in reversed(ms.files)}
    if real in ms.real_files:
        return ms.real_files[real]
    if ms.frames.is_framework(path):
        return None           # torch's own frames (linear.py, module.py) are never the model
    for f in ms.files:
        n = _suffix_len(path, f)
        if n > best_n:
            best, best_n = f, n
    return best


def place_of(frame: Frame, file: str, ms: ModelSource) -> SourcePlace | None:
    view = ms.files[file]
    for cname, info in view.classes.items():
        for mname, m in info.methods.items():
            if not (m.start <= frame.line <= m.end):
                continue
            best, span = None, None
            for i, s in enumerate(m.stmts):
                if s.start <= frame.line <= s.end and (span is None or s.end - s.start < span):
                    best, span = i, s.end - s.start
            return SourcePlace(file, cname, mname, best, frame.line)
    return None


def model_places(stack, ms: ModelSource, src_map=()) -> list[SourcePlace]:
    """Frames of a stack that lie in the model source, innermost first."""
    out = []
    for fr in parse_stack(stack):
        f = match_file(fr.file, ms, src_map)
        if f is None:
            continue
        pl = place_of(fr, f, ms)
        if pl is not None:
            out.append(pl)
    return out
