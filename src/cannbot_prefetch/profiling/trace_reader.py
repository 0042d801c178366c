"""Chrome trace JSON -> normalized rows: Ascend `trace_view.json` here, PyTorch traces in
torch_trace.py.

Ascend: one row per kernel in the "Ascend Hardware" process; the launching `cpu_op` is found
through the `async_npu` flow (flow id == kernel start in ns) and its `Call stack` attached;
the enclosing `ProfilerStep#N` gives the step. Traces are event lists, not tables, so these
readers walk them in Python.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from ..errors import InputError
from .readout import ReadResult, conform, drop_memset
from .torch_trace import output_dims, torch_rows
from .trace_events import (STEP_MARKER, Span, enclosing, join_stack, load_trace_events,
                           process_names, threads)
from .values import text_to_ns, to_int64, to_number

__all__ = ["read_trace_rows", "output_dims"]


def read_trace_rows(path: Path, source: str) -> ReadResult:
    events, flavour = load_trace_events(path)
    if flavour == "ascend":
        result = _ascend_rows(events, source, path)
        result.meta["flavour"] = "trace_view"
    else:
        result = torch_rows(events, source, path)
        result.meta["flavour"] = "torch_trace"
    return result



def _ascend_rows(events: list[dict], source: str, path: Path) -> ReadResult:
    procs = process_names(events)
    hardware = {pid for pid, name in procs.items() if name == "Ascend Hardware"}
    flows = {}
    for e in events:
        if e.get("cat") == "async_npu" and e.get("ph") == "s":
            ts = text_to_ns(e.get("ts"))
            fid = _flow_id(e.get("id"))
            if ts is not None and fid is not None:
                flows[fid] = ((e.get("pid"), e.get("tid")), ts)
    cpu = threads(events, lambda e: e.get("cat") in ("cpu_op", "python_function"))
    cpu_starts = {k: [s.start for s in v] for k, v in cpu.items()}

    rows, bad, samples = [], 0, []
    kernels = [(i, e) for i, e in enumerate(events)
               if e.get("ph") == "X" and e.get("pid") in hardware]
    for i, e in kernels:
        args = e.get("args") or {}
        start = text_to_ns(e.get("ts"))
        dur = to_number(e.get("dur"))
        if start is None or dur is None or dur < 0 or not e.get("name"):
            bad += 1
            if len(samples) < 5:
                samples.append(f"{source}:event {i}: kernel without name/ts/dur")
            continue
        name = str(e["name"])
        stream = args.get("Physic Stream Id", args.get("Stream Id"))
        row = {"row": i, "name": name, "type": _type_from_name(name),
               "core": _text(args.get("Task Type")), "start_ns": start, "dur_us": dur,
               "stream": None if stream is None else str(stream),
               "task_id": _int(args.get("Task Id")), "model_id": _int(args.get("Model Id")),
               "stack": None, "launch_op": None, "launch_input_dims": None, "step": None}
        flow = flows.get(start)
        if flow is not None and flow[0] in cpu:
            _attach_launch(row, events, cpu[flow[0]], cpu_starts[flow[0]], flow[1])
        rows.append(row)
    if not rows:
        raise InputError("trace holds no Ascend Hardware kernels", path=str(path))
    rows.extend(_communication_rows(events, procs))
    df = pl.DataFrame(rows, schema_overrides={"row": pl.Int64, "task_id": pl.Int64, "step": pl.Int64,
                                              "model_id": pl.Int64, "stream": pl.Utf8,
                                              "core": pl.Utf8, "type": pl.Utf8, "stack": pl.Utf8,
                                              "launch_op": pl.Utf8, "launch_input_dims": pl.Utf8},
                      infer_schema_length=None)
    df = df.with_columns(pl.lit(source).alias("source"))
    df, memsets = drop_memset(df)
    notes = [f"{source}: kernel types derived from aclnn kernel names; no shapes in a trace"]
    if memsets:
        notes.append(f"{source}: {memsets} MemSet helper kernel(s) excluded")
    linked = df["stack"].is_not_null().sum()
    notes.append(f"{source}: call stacks attached to {linked} of {df.height} kernels via async_npu flows")
    return ReadResult(conform(df.sort("start_ns")), rows_read=len(kernels), skipped=bad,
                      samples=samples, notes=notes)


def _communication_rows(events: list[dict], procs: dict) -> list[dict]:
    """HCCL ops as kernel_details shows them (core HCCL, no stream): the events on the HCCL
    process's "Group N Communication" threads; the "Plane" threads hold their sub-tasks."""
    hccl = {pid for pid, name in procs.items() if name == "HCCL"}
    op_threads = {(e.get("pid"), e.get("tid")) for e in events
                  if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("pid") in hccl
                  and "Communication" in str(e["args"].get("name", ""))}
    rows = []
    for i, e in enumerate(events):
        if e.get("ph") != "X" or (e.get("pid"), e.get("tid")) not in op_threads or not e.get("name"):
            continue
        start, dur = text_to_ns(e.get("ts")), to_number(e.get("dur"))
        if start is None or dur is None or dur < 0:
            continue
        m = re.match(r"^(hcom_[A-Za-z]+_)", e["name"])
        rows.append({"row": i, "name": e["name"], "type": m.group(1) if m else e["name"],
                     "core": "HCCL", "start_ns": start, "dur_us": dur, "stream": None,
                     "task_id": None, "model_id": None, "stack": None, "launch_op": None,
                     "launch_input_dims": None, "step": None})
    return rows


def _flow_id(value) -> int | None:
    return to_int64(value)


def _attach_launch(row: dict, events: list[dict], spans: list[Span], starts: list[int],
                   ts: int) -> None:
    """Innermost enclosing cpu_op names the launch; the nearest `Call stack` gives the source."""
    frames: list[str] = []
    for s in enclosing(spans, starts, ts):
        ev = events[s.index]
        args = ev.get("args") or {}
        step = STEP_MARKER.match(ev.get("name") or "")
        if step:
            row["step"] = int(step.group(1))
        elif ev.get("cat") == "cpu_op":
            if row["launch_op"] is None:
                row["launch_op"] = ev.get("name")
                row["launch_input_dims"] = join_stack(args.get("Input Dims"))
            if row["stack"] is None and args.get("Call stack"):
                row["stack"] = join_stack(args.get("Call stack"))
        elif ev.get("cat") == "python_function" and ev.get("name"):
            frames.append(str(ev["name"]))
    if row["stack"] is None and frames:
        row["stack"] = ";".join(frames)


def _type_from_name(name: str) -> str | None:
    """aclnn kernels are `<api>_<tiling>_<OpType>`: the last part is the op type."""
    parts = name.split("_")
    if name.startswith("aclnn") and len(parts) >= 3 and parts[-1]:
        return parts[-1]
    return None


def _text(value) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value) -> int | None:
    return to_int64(value)
