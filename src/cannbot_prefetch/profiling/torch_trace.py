"""PyTorch profiler traces (CPU/CUDA `export_chrome_trace`) -> normalized rows.

One row per outermost `cpu_op` per thread, so an aten::addmm inside aten::linear is not
counted twice; MatMul-like aten ops get output shapes from their input dims (linear weight is
[N, K]) and the enclosing `python_function` frames, innermost first, become the stack.
`ProfilerStep#N` markers give the step and are not ops.

A trace recorded with a device (CUDA) holds the kernels too, linked to the launching cpu_op:
through the `cuda_runtime` launch with the kernel's `correlation` (the innermost cpu_op around
that call on its thread), else by `External id` (PyTorch >= 2.1 writes the cpu_op's there; ~1.12-
2.0 wrote the correlation id, which only the launch ties to an op): then each row takes the device time of its kernels (first kernel start, summed
kernel durations, the kernels' stream) instead of the host time, host-only ops (views, shape
ops) are dropped, and a note says so. Host durations of a CUDA run measure launch cost, not the
work, so using them for a roofline would be wrong.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import polars as pl

from ..errors import InputError
from .readout import ReadResult, conform
from .scalars import to_int64
from .trace_events import STEP_MARKER, Event, Span, Trace, threads

DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
HOST_CATS = ("cpu_op", "python_function", "user_annotation")
_SAMPLES = 5

# PyTorch's C++ type names -> the dtype spelling of the Ascend exports (REFERENCE.md §3.3).
TORCH_DTYPES = {"c10::BFloat16": "BF16", "c10::Half": "FLOAT16", "float": "FLOAT",
                "double": "DOUBLE", "long int": "INT64", "int": "INT32", "short int": "INT16",
                "signed char": "INT8", "unsigned char": "UINT8", "bool": "BOOL",
                "c10::Float8_e4m3fn": "FLOAT8_E4M3FN", "c10::Float8_e5m2": "FLOAT8_E5M2"}

MATMUL_ATEN = ("aten::linear", "aten::mm", "aten::addmm", "aten::matmul", "aten::bmm",
               "aten::baddbmm")


def torch_rows(trace: Trace, source: str, path: Path) -> ReadResult:
    events = trace.events
    by_thread = threads(events, lambda e: e.cat in ("cpu_op", "python_function", "cuda_runtime")
                        and not STEP_MARKER.match(e.name or ""))
    steps = _step_spans(events)
    launch = _launches(by_thread)
    kernels, bad_kernels, relinked = _device_kernels(events, launch)
    rows, bad, host_only = [], 0, 0
    for (_pid, tid), spans in by_thread.items():
        launched = _kernels_by_outer_op(spans, kernels) if kernels else {}
        for s in spans:
            ev = s.event
            if ev.cat != "cpu_op" or _has_cpu_op_ancestor(spans, s):
                continue
            if kernels and not launched.get(ev.index):
                host_only += 1
                continue
            if not ev.name:
                bad += 1
                continue
            dims = ev.arg("Input Dims")
            out = output_dims(ev.name, dims) if ev.name in MATMUL_ATEN else None
            start, dur_us, stream, core = s.start, (s.end - s.start) / 1000.0, str(tid), "CPU"
            if kernels:
                ks = launched[ev.index]
                start = min(k[0] for k in ks)
                dur_us = sum(k[1] - k[0] for k in ks) / 1000.0
                stream, core = ks[0][2], "GPU"
            rows.append({"row": ev.index, "name": ev.name, "type": ev.name, "core": core,
                         "start_ns": start, "dur_us": dur_us,
                         "stream": stream, "input_shapes": _shapes_text(dims),
                         "input_dtypes": _types_text(ev.arg("Input type")),
                         "output_shapes": None if out is None else ",".join(map(str, out)),
                         "output_dtypes": _first_dtype(ev.arg("Input type")) if out else None,
                         "stack": _python_stack(spans, s),
                         "step": _step_at(steps, s.start),
                         "__thread": (_pid, tid), "__host": s.start,
                         "__ext": {k[3] for k in launched[ev.index]} if kernels else ()})
    rows, dropped, samples = _drop_damaged(rows, events, steps, bad_kernels, source)
    if not rows and not dropped:
        raise InputError(_nothing_read(events, kernels, host_only), path=str(path))
    df = pl.DataFrame(rows, schema_overrides={"row": pl.Int64, "output_shapes": pl.Utf8,
                                              "step": pl.Int64,
                                              "output_dtypes": pl.Utf8, "stack": pl.Utf8,
                                              "input_shapes": pl.Utf8, "input_dtypes": pl.Utf8},
                      infer_schema_length=None) if rows else pl.DataFrame()
    if rows:
        df = df.with_columns(pl.lit(source).alias("source")).sort("start_ns")
    notes = [f"{source}: PyTorch profiler trace: one row per outermost cpu_op per thread"]
    if kernels:
        notes.append(f"{source}: device kernels found: each op is timed by its kernels "
                     f"(device time, not host time); {host_only} host-only op(s) dropped")
    if relinked:
        notes.append(f"{source}: {relinked} kernel(s) tied to their op through the launch's "
                     "correlation id (their External id is not a cpu_op's: PyTorch ~1.12-2.0 "
                     "layout)")
    skipped = bad + dropped
    result = ReadResult(conform(df), rows_read=len(rows) + skipped, skipped=skipped,
                        samples=samples, notes=notes)
    gpu = device_name(path) if kernels else None
    if gpu:     # the part the hardware detection matches by name (configs/hardware aliases)
        result.meta["soc"] = gpu
    return result


_HEAD_BYTES = 1 << 16
_DEVICE_NAME = re.compile(rb'"deviceProperties"\s*:\s*\[\s*\{[^\]]*?"name"\s*:\s*"([^"\\]{1,120})"')


def device_name(path: Path) -> str | None:
    """The first GPU's name in a Kineto trace's top-level `deviceProperties` (written before
    `traceEvents`, so the file's first 64 KiB hold it), or None. Read apart from the event
    decoder, which keeps only events."""
    try:
        if path.name.lower().endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                head = fh.read(_HEAD_BYTES)
        else:
            with open(path, "rb") as fh:
                head = fh.read(_HEAD_BYTES)
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    m = _DEVICE_NAME.search(head)
    return m.group(1).decode("utf-8", "replace").strip() or None if m else None


# Kineto categories of PyTorch before 1.10 (1.8 / 1.9), which this reader does not read.
OLD_CATS = ("Operator", "Kernel", "Runtime", "Memcpy", "Memset")


def _nothing_read(events: list[Event], kernels: dict, host_only: int) -> str:
    """Why a PyTorch trace gave no row, from what it holds (issue 31: never a false 'no cpu_op'
    for a trace with 40k of them)."""
    from collections import Counter
    cats = Counter(e.cat for e in events)
    n_ops = cats.get("cpu_op", 0)
    if n_ops and kernels and host_only:
        n_k = sum(len(v) for v in kernels.values())
        return (f"trace holds {n_ops} cpu_op and {n_k} device kernel event(s), but no kernel "
                "is tied to a cpu_op: neither its `External id` nor a `cuda_runtime` launch with "
                "its `correlation` inside a cpu_op (was the trace filtered?)")
    old = {c: cats[c] for c in OLD_CATS if cats.get(c)}
    if old and not n_ops:
        seen = ", ".join(f"{n} '{c}'" for c, n in old.items())
        return (f"trace holds no cpu_op events but {seen} event(s): the category names of "
                "PyTorch < 1.10 traces, which this reader does not read (profile with "
                "PyTorch >= 1.10)")
    seen = ", ".join(f"{n} '{c}'" for c, n in cats.most_common(4) if c) or "no categorised events"
    return (f"trace holds no cpu_op events ({seen}; record with "
            "torch.profiler.profile(record_shapes=True, with_stack=True))")


def _drop_damaged(rows: list[dict], events: list[Event], steps: list[tuple[int, int, int]],
                  bad_kernels: set, source: str) -> tuple[list[dict], int, list[str]]:
    """Ops whose timing or nesting a damaged event makes unknowable, dropped and counted.

    A host event without a usable ts/dur leaves its children looking outermost (a spurious op)
    and its step short of one: every op of the step it lies in goes (of its thread, when it
    lies in no step). A damaged step marker takes the ops from its start to the next step; a
    damaged device kernel, the op that launched it. Damage is counted like a bad CSV row,
    so the loader's share rule decides whether the rest is usable.
    """
    damaged = [e for e in events if e.bad is not None and e.cat in HOST_CATS + DEVICE_CATS]
    if not damaged:
        for r in rows:
            del r["__thread"], r["__host"], r["__ext"]
        return rows, 0, []
    starts = [st for st, _, _ in steps]
    gone_steps: set[int] = set()
    gone_threads: set = set()
    gone_spans: list[tuple[int, int]] = []
    samples: list[str] = []
    for e in damaged:
        what = f"{source}:event {e.index}: {e.cat or 'event'} {e.name or ''} {e.bad}".replace("  ", " ")
        if e.cat in DEVICE_CATS:
            samples.append(what + "; its op dropped")
            continue
        marker = STEP_MARKER.match(e.name or "")
        if marker and e.start is not None:
            nxt = next((st for st in starts if st > e.start), None)
            gone_spans.append((e.start, nxt if nxt is not None else 2 ** 63))
            samples.append(what + f"; step {marker.group(1)} dropped")
            continue
        step = _step_at(steps, e.start) if e.start is not None else None
        if step is not None and not marker:
            gone_steps.add(step)
            samples.append(what + f"; step {step} dropped")
        else:
            gone_threads.add((e.pid, e.tid))
            samples.append(what + "; its thread's ops dropped")
    kept = []
    for r in rows:
        if (r["step"] in gone_steps or r["__thread"] in gone_threads
                or any(a <= r["__host"] < b for a, b in gone_spans)
                or any(x in bad_kernels for x in r["__ext"])):
            continue
        del r["__thread"], r["__host"], r["__ext"]
        kept.append(r)
    return kept, len(damaged) + len(rows) - len(kept), samples[:_SAMPLES]


def _launches(by_thread: dict) -> dict[int, int]:
    """A `cuda_runtime` launch's correlation id -> the External id of the innermost cpu_op
    around that call on its thread."""
    out: dict[int, int] = {}
    for spans in by_thread.values():
        for s in spans:
            if s.event.cat != "cuda_runtime":
                continue
            corr = to_int64(s.event.arg("correlation"))
            k = s.parent
            while k >= 0 and spans[k].event.cat != "cpu_op":
                k = spans[k].parent
            if corr is not None and k >= 0:
                ext = to_int64(spans[k].event.arg("External id"))
                if ext is not None:
                    out[corr] = ext
    return out


def _device_kernels(events: list[Event], launch: dict[int, int] | None = None,
                    ) -> tuple[dict, set, int]:
    """External id of the launching cpu_op -> [(start_ns, end_ns, stream, ext)] of the device
    kernels it launched, the External ids with a damaged kernel, and how many kernels were tied
    through their launch (`launch`: correlation -> cpu_op External id) rather than their own
    External id."""
    out: dict[int, list[tuple[int, int, str, int]]] = {}
    bad: set[int] = set()
    launch = launch or {}
    relinked = 0
    for e in events:
        if e.cat in DEVICE_CATS:
            ext = to_int64(e.arg("External id"))
            corr = to_int64(e.arg("correlation"))
            op = launch.get(corr) if corr is not None else None
            if op is not None and op != ext:
                ext, relinked = op, relinked + 1
            if ext is None:
                continue
            if e.bad is not None:
                bad.add(ext)
                out.setdefault(ext, [])
                continue
            stream = e.arg("stream")
            out.setdefault(ext, []).append((e.start, e.end, "" if stream is None else str(stream),
                                            ext))
    return out, bad, relinked


def _kernels_by_outer_op(spans: list[Span], kernels: dict) -> dict:
    """Outermost cpu_op's event index -> the kernels launched anywhere inside it."""
    out: dict[int, list[tuple[int, int, str, int]]] = {}
    for s in spans:
        ev = s.event
        if ev.cat != "cpu_op":
            continue
        ext = to_int64(ev.arg("External id"))
        if ext not in kernels:
            continue
        ks = kernels[ext] or [(s.start, s.start, "", ext)]  # only damaged kernels: still its op
        outer, k = s, s.parent
        while k >= 0:
            if spans[k].event.cat == "cpu_op":
                outer = spans[k]
            k = spans[k].parent
        out.setdefault(outer.event.index, []).extend(ks)
    for ks in out.values():
        ks.sort()
    return out


def _step_spans(events: list[Event]) -> list[tuple[int, int, int]]:
    """(start, end, N) of every host `ProfilerStep#N` marker (user_annotation or cpu_op): ops
    are placed by their host time, so the device copies (gpu_user_annotation) do not count."""
    out = []
    for e in events:
        m = STEP_MARKER.match(e.name or "")
        if m and e.bad is None and e.cat in HOST_CATS:
            out.append((e.start, e.end, int(m.group(1))))
    return sorted(out)


def _step_at(steps: list[tuple[int, int, int]], ts: int) -> int | None:
    for start, end, n in steps:
        if start <= ts <= end:
            return n
    return None


def _has_cpu_op_ancestor(spans: list[Span], s: Span) -> bool:
    k = s.parent
    while k >= 0:
        if spans[k].event.cat == "cpu_op":
            return True
        k = spans[k].parent
    return False


def _python_stack(spans: list[Span], s: Span) -> str | None:
    frames = []
    k = s.parent
    while k >= 0:
        ev = spans[k].event
        if ev.cat == "python_function" and ev.name:
            frames.append(ev.name)
        k = spans[k].parent
    return ";".join(frames) or None


def _dims_list(dims) -> list | None:
    if isinstance(dims, list):
        return dims
    if isinstance(dims, str):  # Ascend spelling: "1,16,256;\r\n1024,256"
        out = []
        for part in dims.replace("\r", "").replace("\n", "").split(";"):
            part = part.strip()
            out.append([_int_or_text(x) for x in part.split(",")] if part else [])
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
        types = ";".join(str(t) for t in types)
    if isinstance(types, str):
        return ";".join(TORCH_DTYPES.get(t.strip(), t.strip())
                        for t in types.replace("\r", "").replace("\n", "").split(";"))
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


def _int_or_text(value: str) -> int | str:
    """A dim as written: an integer, or kept as text (a symbolic `s0`) for the caller to judge."""
    n = to_int64(value)
    return value.strip() if n is None else n
