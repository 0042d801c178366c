"""A recording stand-in for `torch_npu`, installed in this process only, and only while used.

It records every `npu_prefetch(weight, dependency, max_size[, offset])` call and gives CPU torch
the small `torch.npu` stream API the helper uses on a side stream (Stream, current_stream,
stream). The real `torch_npu` is never imported here; when it is importable, verify uses it and
does not install this stub.
"""

from __future__ import annotations

import contextlib
import sys
import types
from dataclasses import dataclass, field
from typing import Any


@dataclass
class PrefetchCall:
    weight: Any
    dependency: Any
    max_size: int
    offset: int | None        # None: no offset argument was passed
    nargs: int
    stream: str               # "side" or "current"


@dataclass
class Recorder:
    calls: list[PrefetchCall] = field(default_factory=list)
    graph_op: Any = None      # when set, each call also runs this op (graph-order check)
    _in_side: int = 0

    def npu_prefetch(self, weight, dependency, max_size, *rest, **kw):
        offset = rest[0] if rest else kw.get("offset")
        self.calls.append(PrefetchCall(weight, dependency, max_size, offset,
                                       3 + len(rest) + len(kw), "side" if self._in_side else "current"))
        if self.graph_op is not None:
            self.graph_op(weight, dependency, max_size)
        return None


class _Stream:
    def __init__(self, rec: Recorder, name: str):
        self.rec, self.name = rec, name

    def wait_stream(self, other) -> None:
        return None

    def record_event(self, event=None):
        return event

    def wait_event(self, event) -> None:
        return None


def _npu_namespace(rec: Recorder) -> types.SimpleNamespace:
    current = _Stream(rec, "current")

    @contextlib.contextmanager
    def stream(s):
        rec._in_side += 1
        try:
            yield s
        finally:
            rec._in_side -= 1

    return types.SimpleNamespace(Stream=lambda *a, **k: _Stream(rec, "side"),
                                 current_stream=lambda *a, **k: current, stream=stream,
                                 is_available=lambda: False)


@contextlib.contextmanager
def stub_torch_npu(rec: Recorder | None = None):
    """Install the stub (`sys.modules['torch_npu']`, `torch.npu`) for the `with` block."""
    import torch

    rec = rec or Recorder()
    mod = types.ModuleType("torch_npu")
    mod.npu_prefetch = rec.npu_prefetch
    mod.__cannbot_stub__ = True
    saved_mod = sys.modules.get("torch_npu")
    had_npu = hasattr(torch, "npu")
    saved_npu = getattr(torch, "npu", None)
    sys.modules["torch_npu"] = mod
    torch.npu = _npu_namespace(rec)
    try:
        yield rec
    finally:
        if saved_mod is None:
            sys.modules.pop("torch_npu", None)
        else:
            sys.modules["torch_npu"] = saved_mod
        if had_npu:
            torch.npu = saved_npu
        else:
            del torch.npu
