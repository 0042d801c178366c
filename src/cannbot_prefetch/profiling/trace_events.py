"""Chrome trace events: the compact store both trace readers work from, and nesting per thread.

Shared by the Ascend trace_view reader and the PyTorch trace reader. The file is decoded into
small records (trace_decode.py: one msgspec pass, else streamed) and only what the readers use
is kept, as slotted `Event`s with repeated strings (names, call stacks, shapes) stored once:
complete ('X') events of the categories the readers look at, `async_npu` flow starts, and process/thread names. Timestamps are decimal µs
(strings in Ascend exports, numbers in torch's), parsed from their text so every digit reaches
the ns conversion. An 'X' event without a usable ts or dur is kept with `bad` set, so each
reader counts it as damage instead of losing it silently.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

from msgspec.structs import astuple

from ..errors import InputError
from .trace_decode import ID_ARGS, TEXT_ARGS, Rec, arg_name, records
from .values import MAX_DURATION_US, MAX_START_NS, text_to_ns, to_int64

STEP_MARKER = re.compile(r"^ProfilerStep#(\d+)$")

# 'X' categories no reader looks at (queueing, runtime API calls): not kept. Everything else
# is, since Ascend's hardware and HCCL events carry no category or one a new release may add.
UNUSED_CATS = frozenset({"enqueue", "dequeue", "cuda_runtime", "cuda_driver", "overhead",
                         "Trace", "gpu_user_annotation"})
_TEXT_INDEX = {k: i for i, k in enumerate(TEXT_ARGS)}
_N_TEXT = len(TEXT_ARGS)
_NO_TEXT, _NO_TEXT_LIST = (None,) * _N_TEXT, [None] * _N_TEXT


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


@dataclass
class Trace:
    events: list[Event]                         # kept 'X' events, in file order
    flavour: str                                # ascend | torch
    procs: dict = field(default_factory=dict)   # pid -> process name
    thread_names: dict = field(default_factory=dict)  # (pid, tid) -> thread name
    flows: dict = field(default_factory=dict)   # async_npu flow id -> ((pid, tid), ts ns)


@dataclass(slots=True)
class Span:
    start: int
    end: int
    event: Event
    parent: int = -1    # index into the thread's span list


def load_trace(path: Path, max_bytes: int) -> Trace:
    """Read a trace file into a Trace; InputError if it is not one (or too big)."""
    top, recs = records(path, max_bytes)
    keep: list[Event] = []
    procs: dict = {}
    names: dict = {}
    flows: dict = {}
    seen_x = False
    strings: dict = {}
    intern = strings.setdefault
    for i, e in enumerate(recs):
        if e is None:
            continue
        ph = e.ph
        if ph == "X":
            seen_x = True
            cat, name = e.cat, e.name
            cat = cat if type(cat) is str else None
            name = intern(name, name) if type(name) is str and name else None
            if cat in UNUSED_CATS and not (name and STEP_MARKER.match(name)):
                continue
            keep.append(_event(i, e, cat, name, intern))
        elif ph == "s" and e.cat == "async_npu":
            ts, fid = _ns(e.ts), to_int64(e.id)
            if ts is not None and fid is not None:
                thread = (_ident(e.pid), _ident(e.tid))
                flows[fid] = (intern(thread, thread), ts)
        elif ph == "M":
            label = arg_name(e.args)
            if not isinstance(label, str):
                continue
            if e.name == "process_name":
                procs[_ident(e.pid)] = label
            elif e.name == "thread_name":
                names[(_ident(e.pid), _ident(e.tid))] = label
    if not seen_x:
        raise InputError("trace holds no complete ('X') events", path=str(path))
    flavour = "ascend" if top == "list" or "Ascend Hardware" in procs.values() else "torch"
    return Trace(keep, flavour, procs, names, flows)


def _ns(ts) -> int | None:
    """text_to_ns with the spelling every exporter writes (`digits.ddd`) inlined: a trace holds
    one timestamp per event."""
    if type(ts) is str:
        n = len(ts) - 4
        if 0 < n <= 16 and ts[n] == ".":
            digits = ts[:n] + ts[n + 1:]
            if digits.isdigit() and digits.isascii():
                ns = int(digits)
                return ns if ns < MAX_START_NS else None
    return text_to_ns(ts)


def _event(i: int, e: Rec, cat: str | None, name: str | None, intern) -> Event:
    start = _ns(e.ts)
    dur = e.dur
    kind = type(dur)
    if kind is str:
        try:
            dur = float(dur)
        except ValueError:
            dur = None
    elif kind is int:
        dur = float(dur) if -10**300 < dur < 10**300 else None   # float() would overflow
    elif kind is not float:
        dur = None
    bad = None
    if start is None:
        bad = "no valid ts"
    elif dur is None or not 0 <= dur <= MAX_DURATION_US:   # NaN fails both comparisons
        bad = "no valid dur"
        dur = None
    texts = ids = None
    if e.args is not None:
        vals = astuple(e.args)          # TEXT_ARGS, then ID_ARGS, then name
        if vals[:_N_TEXT] != _NO_TEXT:
            kept = [None] * _N_TEXT
            for k in range(_N_TEXT):
                v = vals[k]
                if v is None:
                    continue
                if type(v) is not str:
                    v = _listed_text(TEXT_ARGS[k], v)
                    if v is None:
                        continue
                kept[k] = intern(v, v)
            if kept != _NO_TEXT_LIST:
                texts = tuple(kept)
        for key, v in zip(ID_ARGS, vals[_N_TEXT:]):
            if v is not None and type(v) in (int, str):
                if ids is None:
                    ids = {}
                ids[key] = v
    pid, tid = e.pid, e.tid   # stored once each, like the strings
    return Event(i, cat, name, intern(pid, pid) if type(pid) in (int, str) else None,
                 intern(tid, tid) if type(tid) in (int, str) else None, start, dur, texts, ids,
                 bad)


def _listed_text(key: str, value) -> str | None:
    """torch writes Input Dims / Input type as lists: kept as the Ascend text spelling
    (`1,16,256;1024,256`, `c10::BFloat16;long int`), so equal values are stored once."""
    if not isinstance(value, list):
        return None
    if key == "Input Dims":
        parts = []
        for d in value:
            ok = isinstance(d, list) and all(isinstance(x, (int, str)) and not isinstance(x, bool)
                                             for x in d)
            parts.append(",".join(str(x) for x in d) if ok else "")
        return ";".join(parts)
    if key == "Input type":
        return ";".join(str(t) for t in value)
    return None


def _ident(value):
    """pid/tid as written (int or text); anything else (lists, floats) is no id."""
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        return value
    return None


def span(e: Event) -> Span | None:
    if e.bad is not None:
        return None
    return Span(e.start, e.end, e)


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
