"""Chrome trace events: the compact store both trace readers work from, and nesting per thread.

Shared by the Ascend trace_view reader and the PyTorch trace reader. The file is decoded into
small records (trace_decode.py: msgspec a piece at a time, else streamed) and only what the
readers use is kept: complete ('X') events of the categories the readers look at, `async_npu`
flow starts, and process/thread names. The kept events are held as COLUMNS (`Columns`: one
list per field, row r the r-th kept event), filled a decoded piece at a time with a list
comprehension per field and timestamps converted a column at a time (trace_values.py): no
Python object per event, which was half the cost of reading a 10^5-event trace. Repeated
strings (names, call stacks, ids) are stored once. The PyTorch reader, which walks events one
by one, asks `Trace.events` for them as `Event`s (built on first use). Timestamps are decimal
µs (strings in Ascend exports, numbers in torch's), parsed from their text so every digit
reaches the ns conversion. An 'X' event without a usable ts or dur is kept with `bad` set, so
each reader counts it as damage instead of losing it silently.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from .trace_decode import ID_ARGS, TEXT_ARGS, arg_name, record_pieces
from .trace_values import dur_column, ident, id_arg, ns_column, text_arg, usable
from .values import to_int64

STEP_MARKER = re.compile(r"^ProfilerStep#(\d+)$")

# 'X' categories no reader looks at (queueing, runtime API calls): not kept. Everything else
# is, since Ascend's hardware and HCCL events carry no category or one a new release may add.
UNUSED_CATS = frozenset({"enqueue", "dequeue", "cuda_runtime", "cuda_driver", "overhead",
                         "Trace", "gpu_user_annotation"})
_TEXT_INDEX = {k: i for i, k in enumerate(TEXT_ARGS)}
_N_TEXT = len(TEXT_ARGS)
_NO_TEXT = (None,) * _N_TEXT


@dataclass(slots=True)
class Event:
    index: int                 # position in the trace's event list
    cat: str | None
    name: str | None
    pid: int | str | None
    tid: int | str | None
    start: int | None          # ns
    dur_us: float | None
    texts: tuple | None        # the kept text args, in TEXT_ARGS order (None: none present)
    ids: dict | None           # the kept id args (None: none present)
    bad: str | None = None     # why ts/dur are unusable

    @property
    def end(self) -> int:
        return self.start + round(self.dur_us * 1000)

    def arg(self, key: str):
        k = _TEXT_INDEX.get(key)
        if k is not None:
            return None if self.texts is None else self.texts[k]
        return None if self.ids is None else self.ids.get(key)


@dataclass(slots=True)
class Columns:
    """The kept 'X' events, one list per field. `args` holds each event's kept args as
    decoded (trace_decode.Args, its call stack stored once): read them with `text`/`ident`."""
    index: list = field(default_factory=list)     # position in the trace's event list
    cat: list = field(default_factory=list)
    name: list = field(default_factory=list)
    pid: list = field(default_factory=list)
    tid: list = field(default_factory=list)
    start: list = field(default_factory=list)     # ns, None: no valid ts
    dur_us: list = field(default_factory=list)
    bad: list = field(default_factory=list)       # why ts/dur are unusable, else None
    args: list = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.index)

    def text(self, r: int, key: str) -> str | None:
        return text_arg(self.args[r], key)

    def ident(self, r: int, key: str):
        return id_arg(self.args[r], key)

    def end(self, r: int) -> int:
        return self.start[r] + round(self.dur_us[r] * 1000)

    def event(self, r: int, intern=None) -> Event:
        """Row r as an Event (the torch reader's and the tests' view)."""
        args = self.args[r]
        texts = ids = None
        if args is not None:
            kept = tuple(text_arg(args, k) for k in TEXT_ARGS)
            if intern is not None:
                kept = tuple(v if v is None else intern(v, v) for v in kept)
            texts = None if kept == _NO_TEXT else kept
            for key in ID_ARGS:
                v = id_arg(args, key)
                if v is not None:
                    if ids is None:
                        ids = {}
                    ids[key] = v
        return Event(self.index[r], self.cat[r], self.name[r], self.pid[r], self.tid[r],
                     self.start[r], self.dur_us[r], texts, ids, self.bad[r])


@dataclass
class Trace:
    x: Columns                                  # kept 'X' events, in file order
    flavour: str                                # ascend | torch
    procs: dict = field(default_factory=dict)   # pid -> process name
    thread_names: dict = field(default_factory=dict)  # (pid, tid) -> thread name
    flows: dict = field(default_factory=dict)   # async_npu flow id -> ((pid, tid), ts ns)
    _events: list | None = field(default=None, repr=False, compare=False)

    @property
    def events(self) -> list[Event]:
        """The kept events as Event objects (built once, on first use)."""
        if self._events is None:
            strings: dict = {}
            self._events = [self.x.event(r, strings.setdefault) for r in range(len(self.x))]
        return self._events


@dataclass(slots=True)
class Span:
    start: int
    end: int
    event: Event
    parent: int = -1    # index into the thread's span list


def load_trace(path: Path, max_bytes: int) -> Trace:
    """Read a trace file into a Trace; InputError if it is not one (or too big)."""
    top, pieces = record_pieces(path, max_bytes)
    x = Columns()
    ts: list = []
    durs: list = []
    procs: dict = {}
    names: dict = {}
    flow_recs: list = []
    seen_x = False
    strings: dict = {}
    intern = strings.setdefault
    base = 0
    for piece in pieces:
        xs = [(i, e) for i, e in enumerate(piece, base) if e is not None and e.ph == "X"]
        base += len(piece)
        seen_x = seen_x or bool(xs)
        xs = [(i, e, c if type(c := e.cat) is str else None,
               intern(n, n) if type(n := e.name) is str and n else None) for i, e in xs]
        xs = [t for t in xs if t[2] not in UNUSED_CATS or (t[3] and STEP_MARKER.match(t[3]))]
        x.index += [t[0] for t in xs]
        x.cat += [t[2] for t in xs]
        x.name += [t[3] for t in xs]
        x.pid += [intern(p, p) if type(p := t[1].pid) in (int, str) else None for t in xs]
        x.tid += [intern(p, p) if type(p := t[1].tid) in (int, str) else None for t in xs]
        ts += [t[1].ts for t in xs]
        durs += [t[1].dur for t in xs]
        args = [t[1].args for t in xs]
        for a in args:                  # a call stack is ~1 KB and repeats every step
            if a is not None and type(stack := a.a0) is str:
                a.a0 = intern(stack, stack)
        x.args += args
        flow_recs += [e for e in piece if e is not None and e.ph == "s" and e.cat == "async_npu"]
        for e in (e for e in piece if e is not None and e.ph == "M"):
            label = arg_name(e.args)
            if not isinstance(label, str):
                continue
            if e.name == "process_name":
                procs[ident(e.pid)] = label
            elif e.name == "thread_name":
                names[(ident(e.pid), ident(e.tid))] = label
    if not seen_x:
        raise InputError("trace holds no complete ('X') events", path=str(path))
    x.start = ns_column(ts)
    for start, dur in zip(x.start, dur_column(durs)):
        kept, bad = usable(start, dur)
        x.dur_us.append(kept)
        x.bad.append(bad)
    flavour = "ascend" if top == "list" or "Ascend Hardware" in procs.values() else "torch"
    return Trace(x, flavour, procs, names, _flows(flow_recs, intern))


def _flows(recs: list, intern) -> dict:
    """async_npu flow starts: id -> (launching thread, ts ns); a later start of an id wins."""
    flows: dict = {}
    for e, ts in zip(recs, ns_column([e.ts for e in recs])):
        fid = to_int64(e.id)
        if ts is not None and fid is not None:
            thread = (ident(e.pid), ident(e.tid))
            flows[fid] = (intern(thread, thread), ts)
    return flows


def nest(spans: list[Span]) -> list[Span]:
    """Sort one thread's spans and set each span's parent (the innermost span enclosing it)."""
    spans.sort(key=lambda s: (s.start, -s.end))
    stack: list[int] = []
    for k, s in enumerate(spans):
        while stack and spans[stack[-1]].end < s.end:
            stack.pop()
        s.parent = stack[-1] if stack else -1
        stack.append(k)
    return spans


def threads(events: list[Event], keep) -> dict:
    """(pid, tid) -> nested spans of the usable events `keep(e)` accepts."""
    by_thread: dict = {}
    for e in events:
        if e.bad is None and keep(e):
            by_thread.setdefault((e.pid, e.tid), []).append(Span(e.start, e.end, e))
    return {k: nest(v) for k, v in by_thread.items()}


@functools.lru_cache(maxsize=8192)   # a trace repeats the same few stacks every step
def join_stack(text: str | None) -> str | None:
    """`a(1): f;\\r\\nb(2): g` -> `a(1): f;b(2): g`."""
    if not text:
        return None
    frames = [f.strip() for f in str(text).replace("\r", "").split(";")]
    frames = [f for f in frames if f]
    return ";".join(frames) or None
