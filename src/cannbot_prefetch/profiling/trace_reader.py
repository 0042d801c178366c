"""Chrome trace JSON -> normalized rows: Ascend `trace_view.json` here, PyTorch traces in
torch_trace.py.

Ascend: one row per kernel in the "Ascend Hardware" process; the launching `cpu_op` is found
through the `async_npu` flow (flow id == kernel start in ns) and its `Call stack` attached;
the enclosing `ProfilerStep#N` gives the step. Traces are event lists, not tables, so these
readers walk them in Python.
"""

from __future__ import annotations

import bisect
import re
from pathlib import Path

import polars as pl

from ..errors import InputError
from ..gc_pause import gc_paused
from .readout import ReadResult, conform, drop_memset
from .torch_trace import output_dims, torch_rows
from .trace_events import (_TEXT_INDEX, STEP_MARKER, Event, Span, Trace, join_stack, load_trace,
                           threads)
from .values import to_int64

__all__ = ["read_trace_rows", "output_dims"]

_SAMPLES = 5
_TASK_TYPE = _TEXT_INDEX["Task Type"]
_CALL_STACK, _INPUT_DIMS = _TEXT_INDEX["Call stack"], _TEXT_INDEX["Input Dims"]


def read_trace_rows(path: Path, source: str, max_bytes: int) -> ReadResult:
    """A trace file (Ascend trace_view or PyTorch) -> ReadResult; `max_bytes` caps what is
    read (after gzip), so a huge or hostile file is refused instead of filling memory."""
    with gc_paused():
        trace = load_trace(path, max_bytes)
        if trace.flavour == "ascend":
            result = _ascend_rows(trace, source, path)
            result.meta["flavour"] = "trace_view"
        else:
            result = torch_rows(trace, source, path)
            result.meta["flavour"] = "torch_trace"
    return result


_COLUMNS = {"row": pl.Int64, "name": pl.Utf8, "type": pl.Utf8, "core": pl.Utf8,
            "start_ns": pl.Int64, "dur_us": pl.Float64, "stream": pl.Utf8, "task_id": pl.Int64,
            "model_id": pl.Int64, "stack": pl.Utf8, "launch_op": pl.Utf8,
            "launch_input_dims": pl.Utf8, "step": pl.Int64}
_STACK = list(_COLUMNS).index("stack")      # rows carry a code into the distinct stacks


def _ascend_rows(trace: Trace, source: str, path: Path) -> ReadResult:
    hardware = {pid for pid, name in trace.procs.items() if name == "Ascend Hardware"}
    cpu = threads(trace.events, lambda e: e.cat in ("cpu_op", "python_function"))
    stacks: dict[str, int] = {}     # each distinct stack's text once; the column gathers it
    launches = {k: _Launches(v, stacks) for k, v in cpu.items()}

    rows: list[tuple] = []
    bad, samples = 0, []
    kernels = [e for e in trace.events if e.pid in hardware]
    types: dict[str, str | None] = {}
    flows = trace.flows
    none4 = (None, None, None, None)
    for e in kernels:
        name = e.name
        if e.bad is not None or name is None:
            bad += 1
            if len(samples) < _SAMPLES:
                samples.append(f"{source}:event {e.index}: kernel {e.bad or 'without a name'}")
            continue
        ids = e.ids or {}
        stream = ids.get("Physic Stream Id")
        if stream is None:
            stream = ids.get("Stream Id")
        kind = types.get(name, types)
        if kind is types:
            kind = types[name] = _type_from_name(name)
        launch = none4
        flow = flows.get(e.start)
        if flow is not None:
            on = launches.get(flow[0])
            if on is not None:
                launch = on.at(flow[1])
        task = e.texts[_TASK_TYPE] if e.texts is not None else None
        rows.append((e.index, name, kind, task if task else None, e.start, e.dur_us,
                     None if stream is None else str(stream), to_int64(ids.get("Task Id")),
                     to_int64(ids.get("Model Id")), *launch))
    if not kernels:
        raise InputError("trace holds no Ascend Hardware kernels", path=str(path))
    host_bad = [e for e in trace.events if e.bad is not None and e.pid not in hardware
                and e.cat in ("cpu_op", "python_function")]
    rows += _communication_rows(trace)
    columns = list(zip(*rows)) if rows else [()] * len(_COLUMNS)
    data = {c: pl.Series(c, v, dtype=t) for (c, t), v in zip(_COLUMNS.items(), columns)
            if c != "stack"}
    data["stack"] = pl.Series("stack", list(stacks), dtype=pl.Utf8).gather(
        pl.Series(columns[_STACK], dtype=pl.UInt32))
    df = pl.DataFrame({c: data[c] for c in _COLUMNS})
    df = df.with_columns(pl.lit(source).alias("source"))
    df, memsets = drop_memset(df)
    notes = [f"{source}: kernel types derived from aclnn kernel names; no shapes in a trace"]
    if memsets:
        notes.append(f"{source}: {memsets} MemSet helper kernel(s) excluded")
    linked = df["stack"].is_not_null().sum()
    notes.append(f"{source}: call stacks attached to {linked} of {df.height} kernels via async_npu flows")
    if host_bad:
        # Kernel rows keep their hardware times; only the stacks inside these ops are unsure.
        notes.append(f"{source}: {len(host_bad)} host event(s) without a valid ts/dur ignored "
                     "(call stacks of kernels launched inside them may be incomplete)")
        for e in host_bad[:_SAMPLES - len(samples)]:
            samples.append(f"{source}:event {e.index}: {e.cat} {e.name or ''} {e.bad}")
    return ReadResult(conform(df.sort("start_ns")), rows_read=len(kernels) + len(host_bad),
                      skipped=bad + len(host_bad), samples=samples, notes=notes)


def _communication_rows(trace: Trace) -> list[tuple]:
    """HCCL ops as kernel_details shows them (core HCCL, no stream): the events on the HCCL
    process's "Group N Communication" threads; the "Plane" threads hold their sub-tasks."""
    hccl = {pid for pid, name in trace.procs.items() if name == "HCCL"}
    op_threads = {key for key, name in trace.thread_names.items()
                  if key[0] in hccl and "Communication" in name}
    if not op_threads:
        return []
    rows = []
    for e in trace.events:
        if (e.pid, e.tid) not in op_threads or not e.name or e.bad is not None:
            continue
        m = re.match(r"^(hcom_[A-Za-z]+_)", e.name)
        rows.append((e.index, e.name, m.group(1) if m else e.name, "HCCL", e.start, e.dur_us,
                     *(None,) * (len(_COLUMNS) - 6)))
    return rows


class _Launches:
    """One host thread's nested cpu_op / python_function spans, asked what launched a kernel
    at a time: (stack code, launch op, its input dims, step); `stacks` numbers the distinct
    stacks of every thread. Kernels launched inside the same innermost span get the same
    answer, so it is worked out once per span."""

    def __init__(self, spans: list[Span], stacks: dict[str, int]):
        self.spans = spans
        self.starts = [s.start for s in spans]
        self.memo: dict[int, tuple] = {}
        self.up: dict[int, tuple] = {}      # span -> _launch(spans, span)
        self.stacks = stacks

    def at(self, ts: int) -> tuple:
        spans = self.spans
        k = bisect.bisect_right(self.starts, ts) - 1
        while k >= 0 and spans[k].end < ts:
            k = spans[k].parent
        hit = self.memo.get(k)
        if hit is None:
            stack, op, dims, step = self._launch(k)
            code = None if stack is None else self.stacks.setdefault(stack, len(self.stacks))
            hit = self.memo[k] = (code, op, dims, step)
        return hit

    def _launch(self, k: int) -> tuple:
        """`_launch(spans, k)`, kept per span: a named cpu_op (the common span) decides the op,
        its dims and a stack of its own, the rest comes from its parent's answer; any other
        span is walked in full."""
        spans, up = self.spans, self.up
        chain = []
        while k >= 0 and k not in up:
            ev = spans[k].event
            if ev.cat != "cpu_op" or not ev.name or STEP_MARKER.match(ev.name):
                up[k] = _launch(spans, k)
                break
            chain.append(k)
            k = spans[k].parent
        got = up[k] if k >= 0 else (None, None, None, None)
        for k in reversed(chain):
            ev = spans[k].event
            texts = ev.texts
            stack = join_stack(texts[_CALL_STACK]) if texts is not None and texts[_CALL_STACK] \
                else None
            dims = join_stack(texts[_INPUT_DIMS]) if texts is not None else None
            got = (got[0] if stack is None else stack), ev.name, dims, got[3]
            up[k] = got
        return got


def _launch(spans: list[Span], k: int) -> tuple:
    """(stack, launch op, its input dims, step) inside span `k` (and its ancestors): the
    innermost enclosing cpu_op names the launch, the nearest `Call stack` gives the source
    (else the python_function frames), the outermost enclosing `ProfilerStep#N` the step."""
    frames: list[str] = []
    stack = op = dims = step = None
    while k >= 0:
        ev: Event = spans[k].event
        k = spans[k].parent
        marker = STEP_MARKER.match(ev.name or "")
        if marker:
            step = int(marker.group(1))
        elif ev.cat == "cpu_op":
            if op is None:
                op = ev.name
                dims = join_stack(ev.arg("Input Dims"))
            if stack is None and ev.arg("Call stack"):
                stack = join_stack(ev.arg("Call stack"))
        elif ev.cat == "python_function" and ev.name:
            frames.append(ev.name)
    if stack is None and frames:
        stack = ";".join(frames)
    return stack, op, dims, step


def _type_from_name(name: str) -> str | None:
    """aclnn kernels are `<api>_<tiling>_<OpType>`: the last part is the op type."""
    parts = name.split("_")
    if name.startswith("aclnn") and len(parts) >= 3 and parts[-1]:
        return parts[-1]
    return None


