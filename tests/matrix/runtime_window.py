"""The tests' own oracle for issue 30 part 2: the window a prefetch really gets is what RUNS
between the inserted call and its target, in evaluation order.

It runs the applied (rewritten) tiny model for one decode step with module hooks and a
TorchDispatchMode, with a recording `torch_npu` stand-in of its own (nothing from
`cannbot_prefetch` is used to observe), and lists every op that runs between each prefetch and
the first op that reads the prefetched weight. Each op is matched to the GENERATED profile's op
it stands for (decodegen's `Op`: by the leaf module that runs it, `LlamaMLP.gate_proj`, else by
the model-file line of its call, `residual + hidden_states`), and the window is costed on the
profile's own timeline: the kernels it holds with the gaps before them, plus the gap before the
target (a window with no op is the launch gap, ~1 µs).
"""

from __future__ import annotations

import contextlib
import re
import sys
import traceback
import types
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean

import torch
from torch.utils._python_dispatch import TorchDispatchMode

LEAF_INNER = ("linear", "embedding", "act")


@dataclass
class Seen:
    """One op that ran: its layer, the leaf module role running it (or ''), the model-file lines
    on its Python stack, and the storages it reads."""

    layer: int | None
    role: str
    lines: frozenset[int]
    reads: frozenset[int]
    prefetch: int | None = None      # storage of the prefetched weight (a prefetch call)


@dataclass
class Window:
    site: str
    layer: int | None
    ops: list[int] = field(default_factory=list)        # indices into Generated.ops
    target: int = -1                                     # index of the target's op


@contextlib.contextmanager
def npu_stand_in():
    """A `torch_npu` that records nothing and a `torch.npu` stream API that does nothing: the
    helper's kernels run on CPU (the prefetch itself is seen by the dispatch mode)."""
    class S:
        def wait_stream(self, other):
            return None

    @contextlib.contextmanager
    def stream(s):
        yield s

    mod = types.ModuleType("torch_npu")
    mod.npu_prefetch = lambda *a, **k: None
    saved = sys.modules.get("torch_npu")
    had = hasattr(torch, "npu")
    old = getattr(torch, "npu", None)
    sys.modules["torch_npu"] = mod
    torch.npu = types.SimpleNamespace(Stream=lambda *a, **k: S(), current_stream=lambda *a, **k: S(),
                                      stream=stream)
    try:
        yield
    finally:
        if saved is None:
            sys.modules.pop("torch_npu", None)
        else:
            sys.modules["torch_npu"] = saved
        if had:
            torch.npu = old
        else:
            del torch.npu


def _storages(x) -> set[int]:
    out: set[int] = set()
    if isinstance(x, torch.Tensor):
        try:
            out.add(x.untyped_storage().data_ptr())
        except Exception:  # noqa: BLE001 - a tensor without storage
            pass
    elif isinstance(x, (list, tuple)):
        for y in x:
            out |= _storages(y)
    elif isinstance(x, dict):
        for y in x.values():
            out |= _storages(y)
    return out


class _Record(TorchDispatchMode):
    def __init__(self, model, model_file: str):
        super().__init__()
        self.events: list[Seen] = []
        self.stack: list = []
        self.file = str(Path(model_file).resolve())
        # the generator's lines are the original file's: the rewritten file has the tool's own
        # lines (`...  # cannbot-prefetch: <tag>`) in between, not counted
        self.orig: dict[int, int] = {}
        added = 0
        for n, text in enumerate(Path(model_file).read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"  # cannbot-prefetch: [a-z0-9_.-]+$", text):
                added += 1
            else:
                self.orig[n] = n - added
        self.names = {id(m): n for n, m in model.named_modules()}
        self.parent = {}
        for n, m in model.named_modules():
            for attr, child in m.named_children():
                self.parent[id(child)] = (type(m).__name__, attr)

    def _layer(self) -> int | None:
        for m in reversed(self.stack):
            got = re.search(r"(?:^|\.)layers\.(\d+)$", self.names.get(id(m), ""))
            if got:
                return int(got.group(1))
        return None

    def _role(self) -> str:
        if not self.stack:
            return ""
        m = self.stack[-1]
        if any(True for _ in m.children()):
            return ""
        owner = self.parent.get(id(m))
        return f"{owner[0]}.{owner[1]}" if owner else ""

    def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func)
        if "cannbot_prefetch" in name:
            if name.split(".")[1:2] == ["prefetch"]:        # cannbot_prefetch.prefetch.default
                self.events.append(Seen(self._layer(), "", frozenset(), frozenset(),
                                        prefetch=min(_storages(args[0]))))
            return func(*args, **kwargs)
        lines = frozenset(self.orig.get(fr.lineno, 0) for fr in traceback.extract_stack()
                          if str(Path(fr.filename).resolve()) == self.file)
        self.events.append(Seen(self._layer(), self._role(), lines,
                                frozenset(_storages(args) | _storages(kwargs))))
        return func(*args, **kwargs)


def record(model, model_file: str, step) -> list[Seen]:
    """Run `step()` (one decode step of `model`) and return the ops it ran, in order."""
    from torch.nn.modules.module import (register_module_forward_hook,
                                         register_module_forward_pre_hook)

    rec = _Record(model, model_file)
    def enter(m, args):
        rec.stack.append(m)

    def leave(m, args, out):          # returns None: the output stays the module's own
        rec.stack.pop()

    pre = register_module_forward_pre_hook(enter)
    post = register_module_forward_hook(leave)
    try:
        with rec:
            step()
    finally:
        pre.remove()
        post.remove()
    return rec.events


def _call_line(gen, op) -> int | None:
    for fr in op.frames:
        if fr[1][0] != "def forward":
            try:
                return gen.lines.line(fr)
            except LookupError:
                return None
    return None


def _gen_ops(gen, ev: Seen, layer: int | None) -> list[int]:
    """The generated ops this runtime op stands for (same layer; by role, else by call line)."""
    here = [i for i, op in enumerate(gen.ops) if op.layer == layer]
    if ev.role:
        byrole = [i for i in here if gen.ops[i].role == ev.role]
        if byrole:
            return byrole
    return [i for i in here if gen.ops[i].inner not in LEAF_INNER and gen.ops[i].type != "RmsNorm"
            and gen.ops[i].weight is None and _call_line(gen, gen.ops[i]) in ev.lines]


def windows(gen, events: list[Seen], weights: dict[int, str]) -> list[Window]:
    """Per prefetch call of a planned weight (`weights`: storage -> site id), the generated ops
    that ran between it and the first op reading that weight."""
    out: list[Window] = []
    for k, ev in enumerate(events):
        if ev.prefetch is None or ev.prefetch not in weights:
            continue
        sid = weights[ev.prefetch]
        t = next((j for j in range(k + 1, len(events)) if ev.prefetch in events[j].reads), None)
        if t is None:
            continue
        tev = events[t]
        w = Window(sid, tev.layer)
        role_t = tev.role
        cands = [i for i, op in enumerate(gen.ops) if op.layer == tev.layer and op.role == role_t]
        w.target = cands[0] if cands else -1
        for j in range(k + 1, t):
            e = events[j]
            if e.prefetch is not None:
                continue
            for i in _gen_ops(gen, e, e.layer):
                if i not in w.ops and i != w.target:
                    w.ops.append(i)
        out.append(w)
    return out


def span_us(gen, w: Window) -> float:
    """The window on the profile's timeline (steps after the warm-up): each op's kernel with the
    gap before it, and the gap before the target."""
    per_step = []
    steps = sorted({k.step for k in gen.kernels})[1:] or [1]
    by = {(k.step, k.index): k for k in gen.kernels}
    for s in steps:
        total = sum((by[(s, i)].dur_ns + by[(s, i)].wait_ns) for i in w.ops)
        if w.target >= 0:
            total += by[(s, w.target)].wait_ns
        per_step.append(total / 1000.0)
    return mean(per_step)
