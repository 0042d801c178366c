"""Chrome trace JSON -> normalized rows: Ascend `trace_view.json` here, PyTorch traces in
torch_trace.py.

Ascend: one row per kernel in the "Ascend Hardware" process; the launching host thread and
time are found through the `async_npu` flow (flow id == kernel start in ns), and what the host
spans there say (trace_launch.py: launch op, `Call stack`, `ProfilerStep#N`) is attached.
`trace_stacks` is the part a kernel_details table borrows, without the per-kernel rows.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from ..errors import InputError
from ..gc_pause import gc_paused
from .readout import ReadResult, conform, drop_memset
from .scalars import to_int64
from .torch_trace import output_dims, torch_rows
from .trace_events import Trace, join_stack, load_trace
from .trace_launch import HOST, NONE4, host_threads
from .trace_values import id_arg, text_arg

__all__ = ["read_trace_rows", "output_dims"]

_SAMPLES = 5


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


def trace_stacks(path: Path, max_bytes: int) -> pl.DataFrame | None:
    """What kernel_details rows borrow from the trace_view beside them: `start_ns`, `stack`
    and `launch_op` of every kernel start with a stack (rows match exactly on start_ns). The
    same kernels and answers as `read_trace_rows` (damaged, unnamed and MemSet kernels left
    out), without building its per-kernel rows. None when it is not an Ascend trace."""
    found = _stack_columns(path, max_bytes)
    if found is None:
        return None
    starts, names, codes, ops, stacks = found
    df = pl.DataFrame({"start_ns": pl.Series(starts, dtype=pl.Int64),
                       "name": pl.Series(names, dtype=pl.Utf8),
                       "type": pl.Series(_types_of(names), dtype=pl.Utf8),
                       "stack": _gathered(stacks, codes),
                       "launch_op": pl.Series(ops, dtype=pl.Utf8)})
    return (drop_memset(df)[0].select("start_ns", "stack", "launch_op")
            .unique("start_ns", keep="first", maintain_order=True))


def _types_of(names: list) -> list:
    """`type_from_name` of each name, worked out once per distinct name (a trace has a few
    hundred names over 10^5 kernels)."""
    kinds = {n: type_from_name(n) for n in set(names)}
    return [kinds[n] for n in names]


def _gathered(stacks, codes: list) -> pl.Series:
    """The stack of each row from the distinct stacks and a code per row, each held once."""
    return pl.Series("stack", list(stacks), dtype=pl.Utf8).cast(pl.Categorical).gather(
        pl.Series(codes, dtype=pl.UInt32))


def _ascend_rows(trace: Trace, source: str, path: Path) -> ReadResult:
    x = trace.x
    hardware = hardware_pids(trace)
    kernels = kernel_rows(trace, path)
    launch, stacks = launcher(trace)
    rows: list[tuple] = []
    bad, samples = 0, []
    names, starts, durs, index, args = x.name, x.start, x.dur_us, x.index, x.args
    # per distinct kernel name and input-dims text, worked out once for this read (a trace
    # repeats a few hundred of each every step)
    kinds: dict[str, str | None] = {}
    joined: dict[str | None, str | None] = {}
    for r in kernels:
        name = names[r]
        why = x.bad[r]
        if why is not None or name is None:
            bad += 1
            if len(samples) < _SAMPLES:
                samples.append(f"{source}:event {index[r]}: kernel {why or 'without a name'}")
            continue
        a = args[r]
        stream = id_arg(a, "Physic Stream Id")
        if stream is None:
            stream = id_arg(a, "Stream Id")
        kind = kinds.get(name, kinds)
        if kind is kinds:
            kind = kinds[name] = type_from_name(name)
        code, op, dims, step = launch(starts[r])
        shown = joined.get(dims, joined)
        if shown is joined:
            shown = joined[dims] = join_stack(dims)
        task = text_arg(a, "Task Type")
        rows.append((index[r], name, kind, task if task else None, starts[r], durs[r],
                     None if stream is None else str(stream), to_int64(id_arg(a, "Task Id")),
                     to_int64(id_arg(a, "Model Id")), code, op, shown, step))
    host_bad = [r for r, why in enumerate(x.bad) if why is not None
                and x.pid[r] not in hardware and x.cat[r] in HOST]
    rows += _communication_rows(trace)
    columns = list(zip(*rows)) if rows else [()] * len(_COLUMNS)
    data = {c: pl.Series(c, v, dtype=t) for (c, t), v in zip(_COLUMNS.items(), columns)
            if c != "stack"}
    data["stack"] = _gathered(stacks, columns[_STACK])
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
        for r in host_bad[:_SAMPLES - len(samples)]:
            samples.append(f"{source}:event {index[r]}: {x.cat[r]} {names[r] or ''} {x.bad[r]}")
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
    x = trace.x
    rows = []
    for r, (pid, tid, name) in enumerate(zip(x.pid, x.tid, x.name)):
        if (pid, tid) not in op_threads or not name or x.bad[r] is not None:
            continue
        m = re.match(r"^(hcom_[A-Za-z]+_)", name)
        rows.append((x.index[r], name, m.group(1) if m else name, "HCCL", x.start[r],
                     x.dur_us[r], *(None,) * (len(_COLUMNS) - 6)))
    return rows


def _stack_columns(path: Path, max_bytes: int) -> tuple[list, list, list, list, list] | None:
    """(start ns, name, stack code, launch op) of each named, undamaged kernel with a stack,
    and the distinct stacks a code indexes. None when it is not an Ascend trace."""
    with gc_paused():
        trace = load_trace(path, max_bytes)
        if trace.flavour != "ascend":
            return None
        x = trace.x
        kernels = kernel_rows(trace, path)
        launch, stacks = launcher(trace)
        starts, names, codes, ops = [], [], [], []
        for r in kernels:
            start, name = x.start[r], x.name[r]
            if x.bad[r] is not None or name is None:
                continue
            code, op, _, _ = launch(start)
            if code is not None:
                starts.append(start)
                names.append(name)
                codes.append(code)
                ops.append(op)
    return starts, names, codes, ops, list(stacks)


def hardware_pids(trace: Trace) -> set:
    return {pid for pid, name in trace.procs.items() if name == "Ascend Hardware"}


def kernel_rows(trace: Trace, path: Path) -> list[int]:
    """The rows of the "Ascend Hardware" process's events; InputError when there are none."""
    hardware = hardware_pids(trace)
    kernels = [r for r, pid in enumerate(trace.x.pid) if pid in hardware]
    if not kernels:
        raise InputError("trace holds no Ascend Hardware kernels", path=str(path))
    return kernels


def launcher(trace: Trace):
    """(launch(kernel start ns) -> (stack code, launch op, its input dims as written, step),
    the distinct stacks by code): the async_npu flow whose id is the kernel's start names the
    launching thread and time, that thread's nesting what enclosed the launch."""
    stacks: dict[str, int] = {}     # each distinct stack's text once; the column gathers it
    threads = host_threads(trace.x)
    flows = trace.flows

    def launch(start: int) -> tuple:
        flow = flows.get(start)
        if flow is not None:
            on = threads.get(flow[0])
            if on is not None:
                stack, op, dims, step = on.launch(flow[1])
                code = None if stack is None else stacks.setdefault(stack, len(stacks))
                return code, op, dims, step       # dims as written: join_stack() to show
        return NONE4
    return launch, stacks


def type_from_name(name: str) -> str | None:
    """aclnn kernels are `<api>_<tiling>_<OpType>`: the last part is the op type."""
    parts = name.split("_")
    if name.startswith("aclnn") and len(parts) >= 3 and parts[-1]:
        return parts[-1]
    return None
