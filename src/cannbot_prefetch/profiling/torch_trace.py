"""PyTorch profiler traces (CPU/CUDA `export_chrome_trace`) -> normalized rows.

One row per outermost `cpu_op` per thread, so an aten::addmm inside aten::linear is not
counted twice; MatMul-like aten ops get output shapes from their input dims (linear weight is
[N, K]) and the enclosing `python_function` frames, innermost first, become the stack.
`ProfilerStep#N` markers give the step and are not ops.

A trace recorded with a device (CUDA) holds the kernels too, linked to the launching cpu_op by
`External id`: then each row takes the device time of its kernels (first kernel start, summed
kernel durations, the kernels' stream) instead of the host time, host-only ops (views, shape
ops) are dropped, and a note says so. Host durations of a CUDA run measure launch cost, not the
work, so using them for a roofline would be wrong.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ..errors import InputError
from .readout import ReadResult, conform
from .trace_events import STEP_MARKER, Span, span, threads
from .values import to_int64

DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")

# PyTorch's C++ type names -> the dtype spelling of the Ascend exports (REFERENCE.md §3.3).
TORCH_DTYPES = {"c10::BFloat16": "BF16", "c10::Half": "FLOAT16", "float": "FLOAT",
                "double": "DOUBLE", "long int": "INT64", "int": "INT32", "short int": "INT16",
                "signed char": "INT8", "unsigned char": "UINT8", "bool": "BOOL",
                "c10::Float8_e4m3fn": "FLOAT8_E4M3FN", "c10::Float8_e5m2": "FLOAT8_E5M2"}

MATMUL_ATEN = ("aten::linear", "aten::mm", "aten::addmm", "aten::matmul", "aten::bmm",
               "aten::baddbmm")


def torch_rows(events: list[dict], source: str, path: Path) -> ReadResult:
    by_thread = threads(events, lambda e: e.get("cat") in ("cpu_op", "python_function")
                        and not STEP_MARKER.match(e.get("name") or ""))
    steps = _step_spans(events)
    kernels = _device_kernels(events)
    rows, bad, host_only = [], 0, 0
    for (_pid, tid), spans in by_thread.items():
        launched = _kernels_by_outer_op(events, spans, kernels) if kernels else {}
        for s in spans:
            ev = events[s.index]
            if ev.get("cat") != "cpu_op" or _has_cpu_op_ancestor(events, spans, s):
                continue
            if kernels and not launched.get(s.index):
                host_only += 1
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
            start, dur_us, stream, core = s.start, (s.end - s.start) / 1000.0, str(tid), "CPU"
            if kernels:
                ks = launched[s.index]
                start = min(k[0] for k in ks)
                dur_us = sum(k[1] - k[0] for k in ks) / 1000.0
                stream, core = ks[0][2], "GPU"
            rows.append({"row": s.index, "name": str(name), "type": str(name), "core": core,
                         "start_ns": start, "dur_us": dur_us,
                         "stream": stream, "input_shapes": shapes, "input_dtypes": dtypes,
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
    if kernels:
        notes.append(f"{source}: device kernels found: each op is timed by its kernels "
                     f"(device time, not host time); {host_only} host-only op(s) dropped")
    return ReadResult(conform(df), rows_read=len(rows) + bad, skipped=bad, notes=notes)


def _device_kernels(events: list[dict]) -> dict[int, list[tuple[int, int, str]]]:
    """External id -> [(start_ns, end_ns, stream)] of the device kernels it launched."""
    out: dict[int, list[tuple[int, int, str]]] = {}
    for i, e in enumerate(events):
        if e.get("cat") in DEVICE_CATS and e.get("ph") == "X":
            args = e.get("args") or {}
            ext = to_int64(args.get("External id"))
            sp = span(e, i)
            if ext is not None and sp is not None:
                out.setdefault(ext, []).append((sp.start, sp.end, str(args.get("stream", ""))))
    return out


def _kernels_by_outer_op(events: list[dict], spans: list[Span], kernels: dict) -> dict:
    """Outermost cpu_op's event index -> the kernels launched anywhere inside it."""
    out: dict[int, list[tuple[int, int, str]]] = {}
    for s in spans:
        ev = events[s.index]
        if ev.get("cat") != "cpu_op":
            continue
        ks = kernels.get(to_int64((ev.get("args") or {}).get("External id")))
        if not ks:
            continue
        outer, k = s, s.parent
        while k >= 0:
            if events[spans[k].index].get("cat") == "cpu_op":
                outer = spans[k]
            k = spans[k].parent
        out.setdefault(outer.index, []).extend(ks)
    for ks in out.values():
        ks.sort()
    return out


def _step_spans(events: list[dict]) -> list[tuple[int, int, int]]:
    """(start, end, N) of every `ProfilerStep#N` marker (user_annotation or cpu_op)."""
    out = []
    for i, e in enumerate(events):
        m = STEP_MARKER.match(e.get("name") or "")
        if m and e.get("ph") == "X":
            s = span(e, i)
            if s is not None:
                out.append((s.start, s.end, int(m.group(1))))
    return sorted(out)


def _step_at(steps: list[tuple[int, int, int]], ts: int) -> int | None:
    for start, end, n in steps:
        if start <= ts <= end:
            return n
    return None


def _has_cpu_op_ancestor(events: list[dict], spans: list[Span], s: Span) -> bool:
    k = s.parent
    while k >= 0:
        if events[spans[k].index].get("cat") == "cpu_op":
            return True
        k = spans[k].parent
    return False


def _python_stack(events: list[dict], spans: list[Span], s: Span) -> str | None:
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
        return ";".join(TORCH_DTYPES.get(str(t), str(t)) for t in types)
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


def _int(value) -> int | None:
    return to_int64(value)
