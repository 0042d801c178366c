"""A recording stand-in for `torch_npu`, installed in this process only, and only while used.

Like the real package it provides `torch.ops.npu.npu_prefetch` as a registered op with a side
effect and a fake kernel (so torch.compile keeps it in the graph, as it keeps the real one), bound
as `torch_npu.npu_prefetch`; its CPU kernel records each call. Its schema differs from the real
one in one place: `offset` defaults to None, so a call that passes no offset is told apart from
one that passes 0. It also gives CPU torch the small `torch.npu` stream API the helper's kernels
use (Stream, current_stream, stream). The real `torch_npu` is never imported here; when it is
importable, verify uses it and does not install this stub.
"""

from __future__ import annotations

import contextlib
import sys
import types
import weakref
from dataclasses import dataclass, field
from typing import Any

from ..rewrite.helper import RUNTIME_STATE

OP_SCHEMA = "npu_prefetch(Tensor self, Tensor? dependency, int max_size, int? offset=None) -> ()"


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
    _in_side: int = 0

    def npu_prefetch(self, weight, dependency, max_size, offset=None):
        self.calls.append(PrefetchCall(weight, dependency, max_size, offset,
                                       3 if offset is None else 4,
                                       "side" if self._in_side else "current"))
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


def release_library(lib) -> None:
    """Undo a `torch.library.Library`'s registrations now, and only now.

    `Library._destroy()` leaves the object's weakref finalizer armed. A library that sits in a
    reference cycle (a module's `_lib`: the module's functions hold its globals) is collected
    later, at whatever moment the cyclic GC runs, and its finalizer then clears
    `torch.ops.<ns>.<op>` once more: by then another library's op of the same name. The next
    lookup builds a new OpOverload that torch.fx does not know as side-effecting, and a compiled
    graph drops every prefetch (a test failed that way, depending on GC timing). Running the
    finalizer itself does the whole cleanup once and disarms it.
    """
    for fin in list(weakref.finalize._registry):  # the stdlib's table of live finalizers
        held = fin.peek()
        if held is not None and held[0] is lib:
            fin()
            return
    lib._destroy()  # no finalizer found (another torch): the registrations still go


def _register(rec: Recorder):
    """`torch.ops.npu.npu_prefetch` on CPU, recording into `rec`; the Library owns it."""
    import torch

    lib = torch.library.Library("npu", "FRAGMENT")
    lib.define(OP_SCHEMA)
    lib.impl("npu_prefetch", rec.npu_prefetch, "CompositeExplicitAutograd")
    torch.library.register_fake("npu::npu_prefetch", lambda *a, **k: None, lib=lib)
    op = torch.ops.npu.npu_prefetch
    torch.fx.node.has_side_effect(op.default)
    return lib, op


@contextlib.contextmanager
def stub_torch_npu(rec: Recorder | None = None):
    """Install the stub (`sys.modules['torch_npu']`, `torch.npu`, `torch.ops.npu.npu_prefetch`)
    for the `with` block."""
    import torch

    rec = rec or Recorder()
    lib, op = _register(rec)
    mod = types.ModuleType("torch_npu")
    mod.npu_prefetch = op
    mod.__cannbot_stub__ = True
    saved_mod = sys.modules.get("torch_npu")
    had_npu = hasattr(torch, "npu")
    saved_npu = getattr(torch, "npu", None)
    sys.modules["torch_npu"] = mod
    torch.npu = _npu_namespace(rec)
    try:
        yield rec
    finally:
        release_library(lib)
        state = sys.modules.get(RUNTIME_STATE)  # the helper's side streams made of stub parts
        if state is not None:
            for key, stream in list(state.side_streams.items()):
                if isinstance(stream, _Stream):
                    del state.side_streams[key]
            state.pending.clear()
        if saved_mod is None:
            sys.modules.pop("torch_npu", None)
        else:
            sys.modules["torch_npu"] = saved_mod
        if had_npu:
            torch.npu = saved_npu
        else:
            del torch.npu
