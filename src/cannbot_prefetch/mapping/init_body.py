"""What a class's construction runs, as mapping reads it: the `__init__`'s statements with the
body of each helper method it calls as a statement (`self._init_ffn_block()`, vLLM's minicpm)
in place, so submodules and sizes set there are seen like those set in `__init__` itself."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from ..pysource import Stmt, dotted

if TYPE_CHECKING:  # pragma: no cover
    from .source import ModelSource

MAX_DEPTH = 3     # helpers calling helpers; deeper (or recursive) calls are not followed


def init_statements(ms: ModelSource, cls: str) -> list[Stmt]:
    """The `__init__` statements of `cls` (through its bases, as `ms.method` finds it), helpers
    inlined; [] when it has none. Cached per class on the source."""
    cache = ms.init_bodies
    if cls not in cache:
        init = ms.method(cls, "__init__")
        cache[cls] = _inline(ms, cls, init.stmts, 0, {"__init__"}) if init else []
    return cache[cls]


def _inline(ms: ModelSource, cls: str, stmts: list[Stmt], depth: int, seen: set[str]
            ) -> list[Stmt]:
    out: list[Stmt] = []
    for s in stmts:
        out.append(s)
        name = _helper_called(s)
        if name is None or name in seen or depth >= MAX_DEPTH:
            continue
        helper = ms.method(cls, name)
        if helper is not None and helper.node is not None:
            out += _inline(ms, cls, helper.stmts, depth + 1, seen | {name})
    return out


def _helper_called(s: Stmt) -> str | None:
    """`self.name()` / `self.name(args)` as a whole statement -> name."""
    node = s.node
    if not (isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1
            and isinstance(node.body[0], cst.Expr) and isinstance(node.body[0].value, cst.Call)):
        return None
    d = dotted(node.body[0].value.func) or ""
    parts = d.split(".")
    return parts[1] if len(parts) == 2 and parts[0] == "self" and parts[1] != "forward" else None
