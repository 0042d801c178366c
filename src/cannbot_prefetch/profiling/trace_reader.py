"""Chrome trace JSON -> normalized rows: Ascend `trace_view.json` and PyTorch profiler traces.

Ascend: one row per kernel in the "Ascend Hardware" process; the launching `cpu_op` is found
through the `async_npu` flow (flow id == kernel start in ns) and its `Call stack` attached.
PyTorch (CPU/CUDA `export_chrome_trace`): one row per outermost `cpu_op` per thread, so an
aten::addmm inside aten::linear is not counted twice; MatMul-like ops get output shapes from
their input dims and the enclosing `python_function` frames become the stack.
Traces are event lists, not tables, so this reader walks them in Python.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from ..errors import InputError
from .readout import ReadResult, conform, drop_memset
from .values import text_to_ns, to_number

_STEP = re.compile(r"^ProfilerStep#(\d+)$")

MATMUL_ATEN = ("aten::linear", "aten::mm", "aten::addmm", "aten::matmul", "aten::bmm",
               "aten::baddbmm")


@dataclass
class _Span:
    start: int
    end: int
    index: int          # position in the event list
    parent: int = -1    # index into the thread's span list


def load_trace_events(path: Path) -> tuple[list[dict], str]:
    """Parse a trace file -> (events, flavour 'ascend' | 'torch'); InputError if not a trace."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            data = json.load(fh, parse_float=str)  # keep every digit of µs timestamps
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror or exc})", path=str(path)) from None
    except ValueError as exc:
        raise InputError(f"not valid JSON ({exc})", path=str(path)) from None
    if isinstance(data, dict) and isinstance(data.get("traceEvents"), list):
        events, flavour = data["traceEvents"], "torch"
    elif isinstance(data, list):
        events, flavour = data, "ascend"
    else:
        raise InputError("JSON is not a Chrome trace (no event list or traceEvents)", path=str(path))
    events = [c for c in (_sanitize(e) for e in events) if c is not None]
    if not any(e.get("ph") == "X" for e in events):
        raise InputError("trace holds no complete ('X') events", path=str(path))
    if "Ascend Hardware" in _process_names(events).values():
        flavour = "ascend"
    return events, flavour


def _sanitize(event) -> dict | None:
    """An event with the fields this reader uses in usable types (hand-edited or damaged
    traces put lists where ids belong); anything else is ignored."""
    if not isinstance(event, dict):
        return None
    out = dict(event)
    for key in ("pid", "tid"):
        if not isinstance(out.get(key), (int, str)) or isinstance(out.get(key), bool):
            out[key] = None
    for key in ("name", "cat", "ph"):
        if not isinstance(out.get(key), str):
            out[key] = None
    if not isinstance(out.get("args"), dict):
        out["args"] = {}
    return out


def read_trace_rows(path: Path, source: str) -> ReadResult:
    events, flavour = load_trace_events(path)
    if flavour == "ascend":
        result = _ascend_rows(events, source, path)
        result.meta["flavour"] = "trace_view"
    else:
        result = _torch_rows(events, source, path)
        result.meta["flavour"] = "torch_trace"
    return result


# ---------------------------------------------------------------- shared: nesting per thread

def _process_names(events: list[dict]) -> dict:
    return {e.get("pid"): e["args"].get("name") for e in events
            if e.get("ph") == "M" and e.get("name") == "process_name"
            and isinstance(e["args"].get("name"), str)}


def _span(e: dict, i: int) -> _Span | None:
    start = text_to_ns(e.get("ts"))
    dur = to_number(e.get("dur"))
    if start is None or dur is None or dur < 0:
        return None
    return _Span(start, start + round(dur * 1000), i)


def _nest(spans: list[_Span]) -> list[_Span]:
    """Sort one thread's spans and set each span's parent (the innermost span enclosing it)."""
    spans.sort(key=lambda s: (s.start, -s.end))
    stack: list[int] = []
    for k, s in enumerate(spans):
        while stack and spans[stack[-1]].end < s.end:
            stack.pop()
        s.parent = stack[-1] if stack else -1
        stack.append(k)
    return spans


def _enclosing(spans: list[_Span], starts: list[int], ts: int) -> list[_Span]:
    """Spans that contain time `ts`, innermost first."""
    k = bisect.bisect_right(starts, ts) - 1
    while k >= 0 and spans[k].end < ts:
        k = spans[k].parent
    out = []
    while k >= 0:
        out.append(spans[k])
        k = spans[k].parent
    return out


def _threads(events: list[dict], keep) -> dict:
    """(pid, tid) -> nested spans of the events `keep(e)` accepts."""
    by_thread: dict = {}
    for i, e in enumerate(events):
        if e.get("ph") == "X" and keep(e):
            s = _span(e, i)
            if s is not None:
                by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(s)
    return {k: _nest(v) for k, v in by_thread.items()}


def _join_stack(text: str | None) -> str | None:
    """`a(1): f;\\r\\nb(2): g` -> `a(1): f;b(2): g`."""
    if not text:
        return None
    frames = [f.strip() for f in str(text).replace("\r", "").split(";")]
    frames = [f for f in frames if f]
    return ";".join(frames) or None


# ---------------------------------------------------------------- Ascend trace_view.json

def _ascend_rows(events: list[dict], source: str, path: Path) -> ReadResult:
    procs = _process_names(events)
    hardware = {pid for pid, name in procs.items() if name == "Ascend Hardware"}
    flows = {}
    for e in events:
        if e.get("cat") == "async_npu" and e.get("ph") == "s":
            ts = text_to_ns(e.get("ts"))
            fid = _flow_id(e.get("id"))
            if ts is not None and fid is not None:
                flows[fid] = ((e.get("pid"), e.get("tid")), ts)
    cpu = _threads(events, lambda e: e.get("cat") in ("cpu_op", "python_function"))
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


def _flow_id(value) -> int | None:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def _attach_launch(row: dict, events: list[dict], spans: list[_Span], starts: list[int],
                   ts: int) -> None:
    """Innermost enclosing cpu_op names the launch; the nearest `Call stack` gives the source."""
    frames: list[str] = []
    for s in _enclosing(spans, starts, ts):
        ev = events[s.index]
        args = ev.get("args") or {}
        step = _STEP.match(ev.get("name") or "")
        if step:
            row["step"] = int(step.group(1))
        elif ev.get("cat") == "cpu_op":
            if row["launch_op"] is None:
                row["launch_op"] = ev.get("name")
                row["launch_input_dims"] = _join_stack(args.get("Input Dims"))
            if row["stack"] is None and args.get("Call stack"):
                row["stack"] = _join_stack(args.get("Call stack"))
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
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------- PyTorch profiler trace

def _torch_rows(events: list[dict], source: str, path: Path) -> ReadResult:
    threads = _threads(events, lambda e: e.get("cat") in ("cpu_op", "python_function")
                       and not _STEP.match(e.get("name") or ""))
    steps = _step_spans(events)
    rows, bad = [], 0
    for (pid, tid), spans in threads.items():
        for s in spans:
            ev = events[s.index]
            if ev.get("cat") != "cpu_op" or _has_cpu_op_ancestor(events, spans, s):
                continue
            args = ev.get("args") or {}
            name = ev.get("name")
            if not name:
                bad += 1
                continue
            dims = args.get("Input Dims")
            shapes = _shapes_text(dims)
            dtypes = _types_text(args.get("Input type"))
            out = output_dims(str(name), dims) if str(name) in MATMUL_ATEN else None
            rows.append({"row": s.index, "name": str(name), "type": str(name), "core": "CPU",
                         "start_ns": s.start, "dur_us": (s.end - s.start) / 1000.0,
                         "stream": str(tid), "input_shapes": shapes, "input_dtypes": dtypes,
                         "output_shapes": None if out is None else ",".join(map(str, out)),
                         "output_dtypes": _first_dtype(args.get("Input type")) if out else None,
                         "stack": _python_stack(events, spans, s),
                         "step": _step_at(steps, s.start)})
    if not rows:
        raise InputError("trace holds no cpu_op events (record with "
                         "torch.profiler.profile(record_shapes=True, with_stack=True))",
                         path=str(path))
    df = pl.DataFrame(rows, schema_overrides={"row": pl.Int64, "output_shapes": pl.Utf8,
                                              "step": pl.Int64,
                                              "output_dtypes": pl.Utf8, "stack": pl.Utf8,
                                              "input_shapes": pl.Utf8, "input_dtypes": pl.Utf8},
                      infer_schema_length=None)
    df = df.with_columns(pl.lit(source).alias("source")).sort("start_ns")
    notes = [f"{source}: PyTorch profiler trace: one row per outermost cpu_op per thread"]
    return ReadResult(conform(df), rows_read=len(rows) + bad, skipped=bad, notes=notes)


def _step_spans(events: list[dict]) -> list[tuple[int, int, int]]:
    """(start, end, N) of every `ProfilerStep#N` marker (user_annotation or cpu_op)."""
    out = []
    for i, e in enumerate(events):
        m = _STEP.match(e.get("name") or "")
        if m and e.get("ph") == "X":
            s = _span(e, i)
            if s is not None:
                out.append((s.start, s.end, int(m.group(1))))
    return sorted(out)


def _step_at(steps: list[tuple[int, int, int]], ts: int) -> int | None:
    for start, end, n in steps:
        if start <= ts <= end:
            return n
    return None


def _has_cpu_op_ancestor(events: list[dict], spans: list[_Span], s: _Span) -> bool:
    k = s.parent
    while k >= 0:
        if events[spans[k].index].get("cat") == "cpu_op":
            return True
        k = spans[k].parent
    return False


def _python_stack(events: list[dict], spans: list[_Span], s: _Span) -> str | None:
    frames = []
    k = s.parent
    while k >= 0:
        ev = events[spans[k].index]
        if ev.get("cat") == "python_function" and ev.get("name"):
            frames.append(str(ev["name"]))
        k = spans[k].parent
    return ";".join(frames) or None


def _dims_list(dims) -> list | None:
    if isinstance(dims, list):
        return dims
    if isinstance(dims, str):  # Ascend spelling: "1,16,256;\r\n1024,256"
        out = []
        for part in dims.replace("\r", "").replace("\n", "").split(";"):
            part = part.strip()
            out.append([_int(x) for x in part.split(",")] if part else [])
        return out
    return None


def _shapes_text(dims) -> str | None:
    lst = _dims_list(dims)
    if lst is None:
        return None
    parts = []
    for d in lst:
        if isinstance(d, list) and all(isinstance(x, (int, str)) and not isinstance(x, bool)
                                       for x in d):
            parts.append(",".join(str(x) for x in d))
        else:
            parts.append("")
    return ";".join(parts)


def _types_text(types) -> str | None:
    if isinstance(types, list):
        return ";".join(str(t) for t in types)
    if isinstance(types, str):
        return ";".join(t.strip() for t in types.replace("\r", "").split(";"))
    return None


def _first_dtype(types) -> str | None:
    text = _types_text(types)
    if not text:
        return None
    return next((t for t in text.split(";") if t and t not in ("None", "Scalar")), None)


def output_dims(op: str, dims) -> list[int] | None:
    """Output shape of a MatMul-like aten op from its input dims; None when it cannot tell."""
    lst = _dims_list(dims)
    if not lst:
        return None
    try:
        tensors = [[int(x) for x in d] if isinstance(d, list) else [] for d in lst]
    except (TypeError, ValueError):
        return None
    if op == "aten::linear" and len(tensors) >= 2:
        x, w = tensors[0], tensors[1]
        if len(x) >= 1 and len(w) == 2 and x[-1] == w[1]:
            return x[:-1] + [w[0]]
        return None
    if op in ("aten::mm", "aten::bmm", "aten::matmul"):
        return _matmul(tensors[0], tensors[1]) if len(tensors) >= 2 else None
    if op in ("aten::addmm", "aten::baddbmm") and len(tensors) >= 3:
        return _matmul(tensors[1], tensors[2])
    return None


def _matmul(a: list[int], b: list[int]) -> list[int] | None:
    """torch.matmul shape rules (1-D promotion, batch broadcasting)."""
    if not a or not b:
        return None
    a1, b1 = len(a) == 1, len(b) == 1
    a2 = [1] + a if a1 else a
    b2 = b + [1] if b1 else b
    if a2[-1] != b2[-2]:
        return None
    batch_a, batch_b = a2[:-2], b2[:-2]
    n = max(len(batch_a), len(batch_b))
    batch_a = [1] * (n - len(batch_a)) + batch_a
    batch_b = [1] * (n - len(batch_b)) + batch_b
    batch = []
    for x, y in zip(batch_a, batch_b):
        if x != y and 1 not in (x, y):
            return None
        batch.append(max(x, y))
    out = batch + [a2[-2], b2[-1]]
    if a1:
        out.pop(-2)
    if b1:
        out.pop(-1)
    return out
