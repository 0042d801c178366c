"""Chrome trace events: the compact store both trace readers work from, and nesting per thread.

Shared by the Ascend trace_view reader and the PyTorch trace reader. The file is decoded into
small records (trace_decode.py: msgspec a piece at a time, else streamed) and only what the
readers use is kept: complete ('X') events of the categories the readers look at, `async_npu`
flow starts, and process/thread names. The kept events are held as COLUMNS (`Columns`: one
list per field, row r the r-th kept event), filled a decoded piece at a time a field at a
time, and the timestamps gathered as text and converted once per read (trace_values.py):
no Python object and no function call per event (with the rest of issue 12's trace work, a
third fewer instructions for the call stacks of a 30-step trace, callgrind). Repeated strings
(names, call stacks, ids) are stored once. The PyTorch reader, which walks events one by
one, asks `Trace.events` for them as `Event`s (built on first use). Timestamps are decimal µs
(strings in Ascend exports, numbers in torch's), parsed from their text so every digit reaches
the ns conversion. An 'X' event without a usable ts or dur is kept with `bad` set, so
each reader counts it as damage instead of losing it silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import attrgetter, eq
from pathlib import Path

import polars as pl

from ..errors import InputError
from .scalars import to_int64
from .trace_decode import ID_ARGS, TEXT_ARGS, arg_name, record_pieces
from .trace_values import (dur_column, id_arg, ident, ident_column, ns_series, text_arg,
                           ts_text, usable_columns)

STEP_MARKER = re.compile(r"^ProfilerStep#(\d+)$")

# 'X' categories no reader looks at (queueing, driver calls): not kept. Everything else is,
# since Ascend's hardware and HCCL events carry no category or one a new release may add.
# `cuda_runtime` is kept: a launch's `correlation` ties a kernel to the cpu_op around the call
# (torch_trace.py; PyTorch ~1.12-2.0 traces link kernels no other way).
UNUSED_CATS = frozenset({"enqueue", "dequeue", "cuda_driver", "overhead",
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
    decoded (trace_decode.Args, its text args stored once): read them with `text` /
    trace_values.id_arg."""
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


_BATCH_PIECES = 8    # pieces whose raw values are staged together (~8 MB)


@dataclass(slots=True)
class _Staged:
    """A read's values between its batches and its end: timestamps as text columns (the 'X'
    events' and the flow starts'), converted together by `_finish`; durations as floats; the
    flow starts' ids and launching threads. Each piece's raw records are dropped once staged:
    held for the whole file they were ~20 MB of a 75 MB trace's peak."""
    x_ts: list = field(default_factory=list)        # pl.Series of text, one per batch
    flow_ts: list = field(default_factory=list)     # pl.Series of text, one per batch
    durs: list = field(default_factory=list)        # float µs or None (dur_column)
    flow_ids: list = field(default_factory=list)
    flow_threads: list = field(default_factory=list)


def load_trace(path: Path, max_bytes: int) -> Trace:
    """Read a trace file into a Trace; InputError if it is not one (or too big)."""
    top, pieces = record_pieces(path, max_bytes)
    x = Columns()
    procs: dict = {}
    names: dict = {}
    seen_x = False
    strings: dict = {}
    intern = strings.setdefault
    base = 0
    staged = _Staged()
    # raw ts, dur and flow records wait for a batch of pieces, then are staged and dropped
    ts: list = []
    durs: list = []
    flow_recs: list = []
    for k, piece in enumerate(pieces, 1):
        index, found, starts, metadata = _by_phase(piece, base)
        flow_recs += compress(starts, map(eq, map(_CAT, starts), repeat("async_npu")))
        base += len(piece)
        if found:
            seen_x = True
            _keep_x(x, ts, durs, index, found, intern)
        for e in metadata:
            label = arg_name(e.args)
            if not isinstance(label, str):
                continue
            if e.name == "process_name":
                procs[ident(e.pid)] = label
            elif e.name == "thread_name":
                names[(ident(e.pid), ident(e.tid))] = label
        del piece, found, index, starts, metadata
        if k % _BATCH_PIECES == 0:
            _stage(staged, ts, durs, flow_recs, intern)
    _stage(staged, ts, durs, flow_recs, intern)
    if not seen_x:
        raise InputError("trace holds no complete ('X') events", path=str(path))
    flows = _finish(x, staged)
    flavour = "ascend" if top == "list" or "Ascend Hardware" in procs.values() else "torch"
    return Trace(x, flavour, procs, names, flows)


def _by_phase(piece: list, base: int) -> tuple[list, list, list, list]:
    """A piece's 'X' events and their places in the event list, its flow starts ('s') and its
    metadata ('M'), each picked in a C pass over the piece's phases (no Python step per
    event: 1.7 x 10^5 of them at 120 steps); an entry that is no event object (None) has no
    phase."""
    try:
        phases = list(map(_PH, piece))
    except AttributeError:                  # a None in the piece
        phases = [None if e is None else e.ph for e in piece]
    is_x = list(map(eq, phases, repeat("X")))
    return (list(compress(range(base, base + len(piece)), is_x)), list(compress(piece, is_x)),
            list(compress(piece, map(eq, phases, repeat("s")))),
            list(compress(piece, map(eq, phases, repeat("M")))))


def _stage(staged: _Staged, ts: list, durs: list, flow_recs: list, intern) -> None:
    """The waiting raw values staged (timestamps spelled as text, durations read, the flow
    starts' ids and threads); the raw lists emptied."""
    staged.x_ts.append(ts_text(ts))
    staged.durs += dur_column(durs)
    staged.flow_ts.append(ts_text(list(map(_TS, flow_recs))))
    ids, threads = _flow_keys(flow_recs, intern)
    staged.flow_ids += ids
    staged.flow_threads += threads
    ts.clear()
    durs.clear()
    flow_recs.clear()


def _finish(x: Columns, staged: _Staged) -> dict:
    """Every timestamp of the read converted in ONE call of the rule (a call per batch spent
    ~0.5 ms each on polars' set-up: 72 of them at 480 steps), then the events' usable
    durations and the flows (returned)."""
    n = sum(map(len, staged.x_ts))
    text = pl.concat([*staged.x_ts, *staged.flow_ts], rechunk=False)
    staged.x_ts.clear()       # the text is freed as soon as it is converted
    staged.flow_ts.clear()
    ns = ns_series(text)
    del text
    x.start = ns.head(n).to_list()
    x.dur_us, x.bad = usable_columns(x.start, staged.durs)
    return _flows(staged.flow_ids, staged.flow_threads, ns.slice(n).to_list())


_PH, _CAT = attrgetter("ph"), attrgetter("cat")
_PID, _TID = attrgetter("pid"), attrgetter("tid")
_TS, _ID = attrgetter("ts"), attrgetter("id")
_FIELDS = attrgetter("cat", "name", "pid", "tid", "ts", "dur", "args")
_CLEAN_CAT = {str, type(None)}


def _keep_x(x: Columns, ts: list, durs: list, index: list, recs: list, intern) -> None:
    """Append one piece's 'X' records to the columns, a field at a time (the fields read in
    one C pass over the records, attrgetter and zip); only a field holding a value of an
    unusual type is cleaned value by value: a category or name that is no text (or empty) is
    None, a pid/tid that is no int or text (trace_values.ident_column)."""
    cats, names, pids, tids, stamps, spans, args = zip(*map(_FIELDS, recs))
    if not _CLEAN_CAT.issuperset(map(type, cats)):
        cats = [c if type(c) is str else None for c in cats]
    if set(map(type, names)) != {str} or "" in names:
        names = [n if type(n) is str and n else None for n in names]
    names = list(map(intern, names, names))
    if not UNUSED_CATS.isdisjoint(cats):      # queueing and runtime-API events: not kept
        keep = [k for k, (c, n) in enumerate(zip(cats, names))
                if c not in UNUSED_CATS or (n and STEP_MARKER.match(n))]
        index, cats, names, pids, tids, stamps, spans, args = (
            [col[k] for k in keep]
            for col in (index, cats, names, pids, tids, stamps, spans, args))
    x.index += index
    x.cat += cats
    x.name += names
    for col, ids in ((x.pid, pids), (x.tid, tids)):
        ids = ident_column(ids)
        col += map(intern, ids, ids)
    ts += stamps
    durs += spans
    # the text args (TEXT_ARGS: slots a0-a3 of trace_decode.Args, by its construction) repeat
    # every step (a call stack is ~1 KB): each kept once
    for a in args:
        if a is not None:
            if type(v := a.a0) is str:
                a.a0 = intern(v, v)
            if type(v := a.a1) is str:
                a.a1 = intern(v, v)
            if type(v := a.a2) is str:
                a.a2 = intern(v, v)
            if type(v := a.a3) is str:
                a.a3 = intern(v, v)
    x.args += args


def _flow_keys(recs: list, intern) -> tuple[list, list]:
    """async_npu flow starts' ids (Int64, else None) and launching threads ((pid, tid))."""
    ids = list(map(_ID, recs))
    if not (set(map(type, ids)) <= {int} and ids and -(2 ** 63) <= min(ids)
            and max(ids) < 2 ** 63):
        ids = [to_int64(v) for v in ids]
    pids, tids = ident_column(list(map(_PID, recs))), ident_column(list(map(_TID, recs)))
    if len(set(pids)) == 1 and len(set(tids)) == 1:      # one launching thread: the common trace
        one = (pids[0], tids[0])
        threads = [intern(one, one)] * len(recs)
    else:
        threads = list(zip(pids, tids))
        threads = list(map(intern, threads, threads))
    return ids, threads


def _flows(ids: list, threads: list, ts: list) -> dict:
    """async_npu flow starts: id -> (launching thread, ts ns), in file order, so a later start
    of an id wins; a start without a usable ts or id is not kept."""
    if None in ts or None in ids:
        return {f: (t, s) for f, t, s in zip(ids, threads, ts) if f is not None and s is not None}
    return dict(zip(ids, zip(threads, ts)))


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


def join_stack(text: str | None) -> str | None:
    """`a(1): f;\\r\\nb(2): g` -> `a(1): f;b(2): g` (its callers keep the answers of one read:
    a trace repeats the same few stacks every step)."""
    if not text:
        return None
    frames = [f.strip() for f in str(text).replace("\r", "").split(";")]
    frames = [f for f in frames if f]
    return ";".join(frames) or None
