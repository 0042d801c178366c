"""Write a GENERATED torch_npu Level1 + PipeUtilization profile folder in the real export format.

Nothing written here is measured: durations come from timing.py's formula, shapes from models.py.
The layout and the value formatting follow the real exports in ../shared/profiling-samples
(REFERENCE.md §3):

    <name>_<pid>_<17-digit ts>_ascend_pt/
        profiler_info_<rank>.json       _profiler_level Level1, _aic_metrics ACL_AICORE_PIPE_UTILIZATION
        profiler_metadata.json          ENV_VARIABLES + a "synthetic" note (torch_npu's add_metadata)
        PROF_000001_<ts>_<rand>/device_<d>/info.json.<d>   ai_core_num, aiv_num, aic_frequency
        ASCEND_PROFILER_OUTPUT/
            kernel_details.csv          the 46-column Level1 PipeUtilization header, CRLF,
                                        shapes quoted (raw text: 3 double quotes each side),
                                        start times with 3 decimals + TAB
            trace_view.json             JSON array: Python cpu_op events (Input Dims, Input type,
                                        Call stack innermost first), async_npu flows s/f with
                                        id == kernel start in ns, "Ascend Hardware" (one thread per
                                        stream), "HCCL" when there is communication
            step_trace_time.csv

Choices where no real sample shows the thing (documented, so readers can be written against it):
- Prefetch tasks of an "optimized" profile (torch_npu.npu_prefetch -> aclrtCmoAsync on a side
  stream): one row per prefetch, Name "Prefetch", Type "Cmo", Accelerator Core "CMO", Stream ID
  PREFETCH_STREAM (3, the compute stream is 2), Input Shapes = the weight's shape, counters N/A;
  cpu_op "npu::npu_prefetch" launches it; the trace args carry "size(Byte)".
- HCCL all-reduce rows copy the real rows' shape: Task ID and Stream ID N/A, Type
  "hcom_allReduce_", Accelerator Core HCCL, Block Dim 0, everything after N/A.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from . import models as M
from . import timing as T

KERNEL_HEADER = (
    "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),"
    "Duration(us),Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,"
    "Input Formats,Output Shapes,Output Data Types,Output Formats,Context ID,aicore_time(us),"
    "aic_total_cycles,aic_mac_time(us),aic_mac_ratio,aic_scalar_time(us),aic_scalar_ratio,"
    "aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,aic_fixpipe_time(us),"
    "aic_fixpipe_ratio,aic_icache_miss_rate,aiv_time(us),aiv_total_cycles,aiv_vec_time(us),"
    "aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),aiv_mte2_ratio,"
    "aiv_mte3_time(us),aiv_mte3_ratio,aiv_icache_miss_rate,cube_utilization(%)"
).split(",")
COUNTER_COLUMNS = KERNEL_HEADER[21:]
STEP_TRACE_HEADER = ["Step", "Computing", "Communication(Not Overlapped)", "Overlapped",
                     "Communication", "Free", "Stage", "Bubble",
                     "Communication(Not Overlapped and Exclude Receive)", "Preparing"]

MODEL_ID = 4294967295           # single-op (aclnn) mode
COMPUTE_STREAM = 2
PREFETCH_STREAM = 3
HOST_PID = 2718281
HOST_NAME = "synth-host"
# 2026-11-30 21:40:00 UTC, in ns: the start of every generated profile (deterministic).
BASE_NS = 1_796_074_800_000_000_000
SITE_PACKAGES = "/usr/local/lib/python3.10/site-packages"
SCRIPT_PATH = "/home/user/decode.py"
# Lines of the driver script, a plain greedy loop:
#   41: logits = model(input_ids=ids, cache=cache).logits[:, -1].float()
#   42: ids = torch.argmax(logits, dim=-1, keepdim=True)
SCRIPT_LINES = {"model(": 41, "torch.argmax(": 42}
# torch 2.13.0 lines (torch/nn/modules/linear.py, module.py) used in the torch frames.
TORCH_LINES = {"linear.forward": 134, "sparse.forward": 189, "module._call_impl": 1789,
               "module._wrapped_call_impl": 1778}
# transformers 5.24.0 transformers/activations.py: SiLUActivation.forward's return line.
ACT_LINE = 103
PINNED_LINES = Path(__file__).with_name("source_lines.json")
NL = ";\r\n"   # separator of trace arg lists, as in the real trace_view.json


# ----------------------------------------------------------------------------- source lines

def scan_forwards(text: str) -> dict[str, tuple[int, list[tuple[int, str]]]]:
    """Per top-level class: (line of its `def forward`, [(line, text)] of that method's body)."""
    out: dict[str, tuple[int, list[tuple[int, str]]]] = {}
    cls = None
    in_fwd = False
    for no, line in enumerate(text.splitlines(), 1):
        m = re.match(r"class\s+(\w+)", line)
        if m:
            cls, in_fwd = m.group(1), False
            continue
        if line and not line[0].isspace() and not line.startswith((")", "#")):
            cls, in_fwd = None, False
            continue
        if cls is None:
            continue
        if re.match(r"    def forward\b", line):
            out.setdefault(cls, (no, []))
            in_fwd = cls in out and out[cls][0] == no
            continue
        if re.match(r"    (async\s+)?def \w", line) or re.match(r"    @", line):
            in_fwd = False
            continue
        if in_fwd:
            out[cls][1].append((no, line))
    return out


def find_attr_lines(path: str | Path) -> dict[str, int]:
    """`Class.attr` -> line of the first `self.<attr>(` (or `self.<attr>[`) in Class.forward, and
    `Class.forward` -> the `def forward` line. Plain text search, as the brief asks."""
    text = Path(path).read_text(encoding="utf-8")
    res: dict[str, int] = {}
    for cls, (def_line, body) in scan_forwards(text).items():
        res[f"{cls}.forward"] = def_line
        for no, line in body:
            for attr in re.findall(r"self\.(\w+)[(\[]", line):
                res.setdefault(f"{cls}.{attr}", no)
    return res


def frame_key(klass: str, call: str, occurrence: int) -> str:
    return f"{klass}|{call}|{occurrence}"


def find_source_lines(path: str | Path, ops: Iterable[M.Op]) -> dict[str, int]:
    """Line of every model frame the ops need, by plain text search of the model source file:
    the `occurrence`-th line of Class.forward containing the call text (`self.q_proj(`, ...);
    `def forward` frames and calls that are not found fall back to the `def forward` line."""
    text = Path(path).read_text(encoding="utf-8")
    fw = scan_forwards(text)
    res: dict[str, int] = {}
    for cls, (def_line, _) in fw.items():
        res[f"{cls}.forward"] = def_line
    for op in ops:
        for klass, call, occ in op.frames:
            key = frame_key(klass, call, occ)
            if key in res or klass == M.SCRIPT or klass not in fw:
                continue
            def_line, body = fw[klass]
            hits = [no for no, line in body if call in line]
            res[key] = hits[occ - 1] if call != "def forward" and len(hits) >= occ else def_line
    return res


def pinned_lines(spec: M.ModelSpec) -> dict[str, int]:
    """Lines recorded once from the installed transformers (source_lines.json), so committed
    profiles do not depend on which transformers version regenerates them."""
    if not PINNED_LINES.is_file():
        return {}
    data = json.loads(PINNED_LINES.read_text(encoding="utf-8"))
    return dict(data.get("files", {}).get(spec.source, {}))


# ----------------------------------------------------------------------------- timeline

@dataclass
class Kernel:
    """One device task of the generated timeline (one kernel_details row)."""

    step: int
    op: M.Op
    stream: str                  # "2", "3", or "N/A" for HCCL
    task_id: int | None
    start_ns: int
    dur_ns: int
    base_us: float               # the formula (before jitter/warm-up/prefetch effects)
    factor: float                # everything multiplied onto base_us
    t_compute_us: float
    t_memory_us: float
    blocks: int
    launch_ns: int               # host time of the async_npu flow start
    host_span: tuple[int, int]   # outer cpu_op
    inner_span: tuple[int, int]  # launching cpu_op
    wait_ns: int = 0
    counters: dict[str, Any] = field(default_factory=dict)
    prefetch_bytes: int = 0      # for CMO tasks
    mem_scale: float = 1.0

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.dur_ns


def _hccl_op(spec: M.ModelSpec, before: M.Op, m: int, n: int) -> M.Op:
    x = M.Tensor((m, spec.hidden), spec.dtype)
    return M.Op("hcom_allReduce_", f"hcom_allReduce__{n}", "HCCL", (x,), (x,), before.klass,
                f"{before.klass}.all_reduce", before.call, before.layer, "c10d::allreduce_",
                "HcclAllreduce", 0.0, x.nbytes, None, "comm", before.occurrence,
                frames=before.frames, inner="")


def _cmo_op(target: M.Op, window: M.Op, nbytes: int) -> M.Op:
    assert target.weight is not None
    return M.Op("Cmo", "Prefetch", "CMO", (target.weight,), (), window.klass, f"{target.attr}.prefetch",
                window.call, window.layer, "npu::npu_prefetch", "npu::npu_prefetch", 0.0, nbytes,
                target.weight, "cmo", window.occurrence, frames=window.frames, inner="")


def build_timeline(spec: M.ModelSpec, hw: T.Hardware, *, steps: int = 3, decode_tokens: int = 1,
                   layers: int | Sequence[int] | None = None, phase: str = "decode",
                   seq_len: int = 128, context_len: int = 1024,
                   prefetch: Mapping[str, Sequence[Any]] | None = None, prefetch_coef: float = 0.5,
                   comm: Sequence[str] = (), comm_layers: Sequence[int] | None = None,
                   seed: int = 0, prefill_first: bool = False) -> list[Kernel]:
    """All device tasks of `steps` steps, in start order.

    decode_tokens: the batch (M of every decode MatMul); a prefill step has M = decode_tokens * seq_len.

    prefetch: attr -> (speedup, slowdown[, window attr]): the target MatMul's duration is divided
      by speedup, its window op's multiplied by slowdown; a CMO task of prefetch_coef * weight
      bytes runs on PREFETCH_STREAM from the window op's start. The window is the op right before
      the target on the compute stream unless named.
    comm: attrs; an HCCL all-reduce of the hidden state runs right before each op with that attr
      (in comm_layers, default all), and the compute stream waits for it.
    prefill_first: the first step is a prefill of seq_len tokens (then `phase` steps follow).
    """
    prefetch = dict(prefetch or {})
    comm = set(comm)
    kernels: list[Kernel] = []
    task_ids = {COMPUTE_STREAM: 10000, PREFETCH_STREAM: 20000}
    host = BASE_NS
    dev_end = BASE_NS
    hccl_n = 0
    for s in range(1, steps + 1):
        ph = "prefill" if (prefill_first and s == 1) else phase
        ops = M.step_ops(spec, decode_tokens, layers, ph, seq_len, context_len)
        m_rows = decode_tokens * (seq_len if ph == "prefill" else 1)
        # Expand: HCCL before chosen ops, CMO prefetch before the window op.
        seq: list[tuple[M.Op, dict[str, Any]]] = []
        for i, op in enumerate(ops):
            if op.attr in comm and (comm_layers is None or op.layer in comm_layers):
                hccl_n += 1
                seq.append((_hccl_op(spec, op, m_rows, hccl_n), {"key": f"{i}:hccl"}))
            seq.append((op, {"key": str(i)}))
        if prefetch:
            for t_idx in range(len(seq) - 1, -1, -1):
                op, meta = seq[t_idx]
                if op.attr not in prefetch or op.kind != "cube" or op.weight is None:
                    continue
                eff = tuple(prefetch[op.attr])
                speedup, slowdown = float(eff[0]), float(eff[1])
                win_attr = eff[2] if len(eff) > 2 else None
                w_idx = t_idx - 1
                if win_attr:
                    while w_idx >= 0 and not (seq[w_idx][0].attr == win_attr and seq[w_idx][0].layer == op.layer):
                        w_idx -= 1
                while w_idx >= 0 and seq[w_idx][0].kind in ("comm", "cmo"):
                    w_idx -= 1
                if w_idx < 0:
                    continue
                meta["speedup"] = speedup
                seq[w_idx][1]["slowdown"] = seq[w_idx][1].get("slowdown", 1.0) * slowdown
                nbytes = int(op.weight.nbytes * prefetch_coef)
                seq.insert(w_idx, (_cmo_op(op, seq[w_idx][0], nbytes),
                                   {"cmo_for": op.attr, "key": f"{t_idx}:cmo"}))
        step_host0 = host
        h = step_host0 + 5_000
        first = True
        prev_end = None
        cmo_free = 0
        for op, meta in seq:
            launch = h + 1_000
            host_span = (h, h + int(T.HOST_OP_US * 1000) - 500)
            inner_span = (h + 1_000 - 0, h + int(T.HOST_OP_US * 1000) - 1_000)
            h += int(T.HOST_OP_US * 1000)
            # Jitter drawn per (seed, step, op position in the step's op list), so adding
            # prefetch or HCCL tasks leaves every other kernel's jitter unchanged.
            rng = random.Random(f"{seed}:{s}:{meta['key']}")
            u = rng.uniform(-T.JITTER, T.JITTER)
            g = rng.uniform(0.0, T.GAP_JITTER_US)
            gap_ns = int(round((T.GAP_US + g) * 1000))
            earliest = launch + int(T.LAUNCH_LEAD_US * 1000) if first else launch + 2_000
            if op.kind == "cmo":
                dur_us = T.cmo_duration_us(op.bytes)
                # Issued at the window op's input: starts when the compute stream reaches it.
                start = max(earliest, (prev_end + gap_ns) if prev_end is not None else earliest, cmo_free)
                k = Kernel(s, op, str(PREFETCH_STREAM), task_ids[PREFETCH_STREAM], start,
                           int(round(dur_us * 1000)), dur_us, 1.0, 0.0, 0.0, 0, launch, host_span,
                           inner_span, prefetch_bytes=op.bytes)
                task_ids[PREFETCH_STREAM] += 1
                cmo_free = k.end_ns
                kernels.append(k)
                continue
            if op.kind == "comm":
                base = T.hccl_duration_us(op.bytes)
                c = T.Cost(0.0, 0.0, base)
            else:
                c = T.cost(op.flops, op.bytes, hw, "cube" if op.kind == "cube" else "vector")
                base = c.base_us
            factor = 1.0 + u
            if s == 1:
                factor *= T.WARMUP_FACTOR
            factor *= meta.get("slowdown", 1.0)
            mem_scale = 1.0
            if "speedup" in meta:
                factor /= meta["speedup"]
                mem_scale = 1.0 / meta["speedup"]
            dur_us = base * factor
            start = max(earliest, (prev_end + gap_ns) if prev_end is not None else earliest)
            first = False
            dur_ns = int(round(dur_us * 1000))
            if op.kind == "comm":
                k = Kernel(s, op, "N/A", None, start, dur_ns, base, factor, 0.0, 0.0, 0, launch,
                           host_span, inner_span)
            else:
                blocks = T.block_dim(op.kind, op.core, op.bytes // 2, hw)
                k = Kernel(s, op, str(COMPUTE_STREAM), task_ids[COMPUTE_STREAM], start, dur_ns, base,
                           factor, c.t_compute_us, c.t_memory_us, blocks, launch, host_span,
                           inner_span, mem_scale=mem_scale)
                task_ids[COMPUTE_STREAM] += 1
                out_b = sum(t.nbytes for t in op.outputs)
                read_b = max(0, op.bytes - out_b)
                k.counters = T.counters(op.kind, c, dur_ns / 1000, blocks, hw, out_b, out_b, read_b,
                                        1.0 + u, mem_scale)
            kernels.append(k)
            prev_end = k.end_ns
        dev_end = max(k.end_ns for k in kernels)
        host = max(h, dev_end) + int(T.STEP_GAP_US * 1000)
    kernels.sort(key=lambda k: (k.start_ns, k.stream))
    # Wait Time: gap since the previous task on the same stream ended (0 for the first).
    last: dict[str, int] = {}
    for k in kernels:
        prev = last.get(k.stream)
        k.wait_ns = 0 if prev is None else max(0, k.start_ns - prev)
        last[k.stream] = k.end_ns
    return kernels


def step_spans(kernels: list[Kernel]) -> dict[int, tuple[int, int]]:
    """Host span (ProfilerStep#N) of each step."""
    out: dict[int, tuple[int, int]] = {}
    for k in kernels:
        lo, hi = out.get(k.step, (k.host_span[0], k.end_ns))
        out[k.step] = (min(lo, k.host_span[0] - 5_000), max(hi, k.end_ns + 10_000, k.host_span[1]))
    return out


# ----------------------------------------------------------------------------- formatting

def fmt_ts(ns: int) -> str:
    """Microseconds with exactly 3 decimals, from integer ns (never via float)."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def fmt_num(x: float | int) -> str:
    if isinstance(x, int):
        return str(x)
    return repr(round(float(x), 3))


def _shapes(ts: Sequence[M.Tensor | None]) -> str:
    return ";".join("" if t is None else ",".join(str(d) for d in t.shape) for t in ts)


def _dtypes(op: M.Op, ts: Sequence[M.Tensor | None]) -> str:
    empties = iter(M.GMM_EMPTY_DTYPES if op.type == "GroupedMatmul" else ())
    return ";".join(next(empties, op.inputs[0].dtype if op.inputs and op.inputs[0] else "DT_BF16")
                    if t is None else t.dtype for t in ts)


def _formats(ts: Sequence[M.Tensor | None]) -> str:
    return ";".join("ND" if t is None else t.fmt for t in ts)


def kernel_row(k: Kernel) -> list[str]:
    op = k.op
    na = "N/A"
    start = fmt_ts(k.start_ns) + "\t"
    dur = fmt_num(k.dur_ns / 1000)
    wait = "0" if k.wait_ns == 0 else fmt_num(k.wait_ns / 1000)
    if op.kind == "comm":
        return [str(k.step), str(MODEL_ID), na, na, op.name, op.type, na, "HCCL", start, dur, wait,
                "0"] + [na] * (len(KERNEL_HEADER) - 12)
    if op.kind == "cmo":
        return ([str(k.step), str(MODEL_ID), str(k.task_id), k.stream, op.name, op.type, na, op.core,
                 start, dur, wait, "0", na, na, f'"{_shapes(op.inputs)}"', _dtypes(op, op.inputs),
                 _formats(op.inputs), na, na, na, na] + [na] * len(COUNTER_COLUMNS))
    row = [str(k.step), str(MODEL_ID), str(k.task_id), k.stream, op.name, op.type, "dynamic", op.core,
           start, dur, wait, str(k.blocks), "0", "NO", f'"{_shapes(op.inputs)}"',
           _dtypes(op, op.inputs), _formats(op.inputs), f'"{_shapes(op.outputs)}"',
           _dtypes(op, op.outputs), _formats(op.outputs), "0" if op.core == "MIX_AIC" else na]
    row += [fmt_num(k.counters[c]) for c in COUNTER_COLUMNS]
    return row


def kernel_details_csv(kernels: Sequence[Kernel]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(KERNEL_HEADER)
    for k in kernels:
        w.writerow(kernel_row(k))
    return buf.getvalue()


def _interval_union(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _length(iv: list[tuple[int, int]]) -> int:
    return sum(b - a for a, b in iv)


def _intersect(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    tot = 0
    for x0, x1 in a:
        for y0, y1 in b:
            tot += max(0, min(x1, y1) - max(x0, y0))
    return tot


def step_trace_csv(kernels: Sequence[Kernel], spans: Mapping[int, tuple[int, int]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(STEP_TRACE_HEADER)
    for s in sorted(spans):
        ks = [k for k in kernels if k.step == s]
        comp = _interval_union([(k.start_ns, k.end_ns) for k in ks if k.op.kind in ("cube", "vector")])
        comm = _interval_union([(k.start_ns, k.end_ns) for k in ks if k.op.kind == "comm"])
        ov = _intersect(comp, comm)
        first = min(k.start_ns for k in ks)
        stage = max(k.end_ns for k in ks) - first
        comm_no = _length(comm) - ov
        free = stage - _length(comp) - comm_no
        prep = first - spans[s][0]
        vals = [_length(comp), comm_no, ov, _length(comm), free, stage, 0, comm_no, prep]
        w.writerow([str(s)] + [fmt_num(v / 1000) for v in vals])
    return buf.getvalue()


# ----------------------------------------------------------------------------- trace_view.json

def call_stack(op: M.Op, spec: M.ModelSpec, lines: Mapping[str, int], line_mode: str = "calls") -> str:
    """`file(line): func` frames joined by ';\\r\\n', innermost first, starting inside torch."""
    tdir = f"{SITE_PACKAGES}/torch/nn/modules"
    mfile = f"{SITE_PACKAGES}/{spec.source}"
    module_frames = [f"{tdir}/module.py({TORCH_LINES['module._call_impl']}): _call_impl",
                     f"{tdir}/module.py({TORCH_LINES['module._wrapped_call_impl']}): _wrapped_call_impl"]
    frames: list[str] = []
    if op.inner == "linear":
        frames.append(f"{tdir}/linear.py({TORCH_LINES['linear.forward']}): forward")
        frames += module_frames
    elif op.inner == "embedding":
        frames.append(f"{tdir}/sparse.py({TORCH_LINES['sparse.forward']}): forward")
        frames += module_frames
    elif op.inner == "act":
        frames.append(f"{SITE_PACKAGES}/transformers/activations.py({ACT_LINE}): forward")
        frames += module_frames
    for i, (klass, call, occ) in enumerate(op.frames):
        if i > 0:
            frames += module_frames
        if klass == M.SCRIPT:
            frames.append(f"{SCRIPT_PATH}({SCRIPT_LINES.get(call, 1)}): <module>")
            continue
        def_line = lines.get(f"{klass}.forward", 1)
        line = def_line if line_mode == "forward" else lines.get(frame_key(klass, call, occ), def_line)
        frames.append(f"{mfile}({line}): forward")
    return NL.join(frames)


def _torch_type(t: M.Tensor | None) -> str:
    return "None" if t is None else M.TORCH_TYPE_NAMES.get(t.dtype, "c10::BFloat16")


def trace_events(kernels: Sequence[Kernel], spec: M.ModelSpec, lines: Mapping[str, int],
                 line_mode: str = "calls", stacks: str = "all") -> list[dict[str, Any]]:
    """stacks: "all" puts the Call stack on the framework op and on the launching op (as the real
    trace does); "outer" only on the framework op (smaller files)."""
    pid, tid = HOST_PID, HOST_PID
    hw_pid = (HOST_PID << 10) + 13 * 32      # same construction as the real trace's device pids
    hccl_pid = (HOST_PID << 10) + 15 * 32
    ev: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "Python"}},
        {"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": "CPU"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": 0}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": f"Thread {tid}"}},
        {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}},
    ]
    spans = step_spans(list(kernels))
    for s, (a, b) in sorted(spans.items()):
        ev.append({"ph": "X", "name": f"ProfilerStep#{s}", "pid": pid, "tid": tid, "ts": fmt_ts(a),
                   "dur": round((b - a) / 1000, 3), "cat": "cpu_op",
                   "args": {"Sequence number": -1, "Fwd thread id": 0}})
    seqno = 0
    for k in sorted(kernels, key=lambda k: k.host_span[0]):
        op = k.op
        stack = call_stack(op, spec, lines, line_mode)
        ins = op.aten_inputs if op.aten_inputs is not None else op.inputs
        outer_args: dict[str, Any] = {
            "Sequence number": seqno, "Fwd thread id": 0,
            "Input Dims": NL.join("" if t is None else ",".join(map(str, t.shape)) for t in ins),
            "Input type": NL.join(_torch_type(t) for t in ins),
            "Call stack": stack,
        }
        seqno += 1
        ev.append({"ph": "X", "name": op.aten, "pid": pid, "tid": tid, "ts": fmt_ts(k.host_span[0]),
                   "dur": round((k.host_span[1] - k.host_span[0]) / 1000, 3), "cat": "cpu_op",
                   "args": outer_args})
        if op.launcher != op.aten:
            inner_args: dict[str, Any] = {"Sequence number": -1, "Fwd thread id": 0}
            if stacks == "all":
                inner_args["Call stack"] = stack
            ev.append({"ph": "X", "name": op.launcher, "pid": pid, "tid": tid,
                       "ts": fmt_ts(k.inner_span[0]),
                       "dur": round((k.inner_span[1] - k.inner_span[0]) / 1000, 3), "cat": "cpu_op",
                       "args": inner_args})
        dst_pid, dst_tid = (hccl_pid, 0) if op.kind == "comm" else (hw_pid, int(k.stream))
        ev.append({"ph": "s", "bp": "e", "name": "torch_to_npu", "id": k.start_ns, "pid": pid,
                   "tid": tid, "ts": fmt_ts(k.inner_span[0]), "cat": "async_npu"})
        ev.append({"ph": "f", "bp": "e", "name": "torch_to_npu", "id": k.start_ns, "pid": dst_pid,
                   "tid": dst_tid, "ts": fmt_ts(k.start_ns), "cat": "async_npu"})
    streams = sorted({int(k.stream) for k in kernels if k.stream != "N/A"})
    ev.append({"name": "process_name", "pid": hw_pid, "tid": 0, "args": {"name": "Ascend Hardware"}, "ph": "M"})
    for st in streams:
        ev.append({"name": "thread_name", "pid": hw_pid, "tid": st, "args": {"name": f"Stream {st}"}, "ph": "M"})
        ev.append({"name": "thread_sort_index", "pid": hw_pid, "tid": st, "args": {"sort_index": st}, "ph": "M"})
    ev.append({"name": "process_labels", "pid": hw_pid, "tid": 0, "args": {"labels": "NPU"}, "ph": "M"})
    ev.append({"name": "process_sort_index", "pid": hw_pid, "tid": 0, "args": {"sort_index": 13}, "ph": "M"})
    conn = 1000
    has_comm = False
    for k in kernels:
        conn += 1
        if k.op.kind == "comm":
            has_comm = True
            continue
        args: dict[str, Any] = {"Model Id": MODEL_ID, "Task Type": k.op.core,
                                "Physic Stream Id": int(k.stream), "Task Id": k.task_id, "Batch Id": 0,
                                "Subtask Id": 4294967295, "connection_id": conn}
        if k.op.kind == "cmo":
            args["size(Byte)"] = k.prefetch_bytes
        ev.append({"name": k.op.name, "pid": hw_pid, "tid": int(k.stream), "ts": fmt_ts(k.start_ns),
                   "dur": k.dur_ns / 1000, "args": args, "ph": "X"})
    if has_comm:
        ev.append({"name": "process_name", "pid": hccl_pid, "tid": 0, "args": {"name": "HCCL"}, "ph": "M"})
        ev.append({"name": "thread_name", "pid": hccl_pid, "tid": 0, "args": {"name": "Group 0 Communication"}, "ph": "M"})
        ev.append({"name": "thread_sort_index", "pid": hccl_pid, "tid": 0, "args": {"sort_index": 0}, "ph": "M"})
        ev.append({"name": "process_labels", "pid": hccl_pid, "tid": 0, "args": {"labels": "NPU"}, "ph": "M"})
        ev.append({"name": "process_sort_index", "pid": hccl_pid, "tid": 0, "args": {"sort_index": 15}, "ph": "M"})
        conn = 1000
        for k in kernels:
            conn += 1
            if k.op.kind != "comm":
                continue
            x = k.op.inputs[0]
            ev.append({"name": k.op.name, "pid": hccl_pid, "tid": 0, "ts": fmt_ts(k.start_ns),
                       "dur": k.dur_ns / 1000,
                       "args": {"connection_id": conn, "model id": MODEL_ID, "data_type": "BFP16",
                                "alg_type": "MESH", "count": x.numel if x else 0}, "ph": "X"})
    return ev


# ----------------------------------------------------------------------------- the folder

def _ts17(ns: int) -> str:
    """17-digit local-style timestamp used in folder names: YYYYMMDDhhmmssmmm (UTC here)."""
    import datetime as _dt
    d = _dt.datetime.fromtimestamp(ns // 1_000_000_000, tz=_dt.timezone.utc)
    return d.strftime("%Y%m%d%H%M%S") + f"{(ns // 1_000_000) % 1000:03d}"


def _json(obj: Any) -> str:
    return json.dumps(obj, indent=4) + "\n"


def generate(config: str | Path | Mapping[str, Any], out_dir: str | Path, *, hardware: str = "910B3",
             steps: int = 3, decode_tokens: int = 1, layers: int | Sequence[int] | None = None,
             phase: str = "decode", seq_len: int = 128, context_len: int = 1024,
             prefill_first: bool = False,
             prefetch: Mapping[str, Sequence[Any]] | None = None, prefetch_coef: float = 0.5,
             comm: Sequence[str] = (), comm_layers: Sequence[int] | None = None,
             model_src: str | Path | None = None, line_mode: str = "calls", stacks: str = "all",
             seed: int = 0, rank: int = 0, label: str = "") -> Path:
    """Write one generated `<host>_<pid>_<ts>_ascend_pt/` folder under out_dir; return its path.

    Deterministic: the same arguments give the same bytes. Source lines come from `model_src`
    (plain text search) when given, else from the pinned table recorded from transformers
    (source_lines.json); line_mode="forward" puts every model frame at its `def forward` line.
    """
    spec = M.load_config(config)
    hw = T.hardware(hardware)
    kernels = build_timeline(spec, hw, steps=steps, decode_tokens=decode_tokens, layers=layers, phase=phase,
                             seq_len=seq_len, context_len=context_len, prefetch=prefetch,
                             prefetch_coef=prefetch_coef, comm=comm, comm_layers=comm_layers,
                             seed=seed, prefill_first=prefill_first)
    if model_src is not None:
        all_ops = [k.op for k in kernels]
        lines = find_source_lines(model_src, all_ops)
    else:
        lines = pinned_lines(spec)
    spans = step_spans(kernels)
    start, end = min(a for a, _ in spans.values()), max(b for _, b in spans.values())
    rnd = hashlib.sha256(f"{spec}{hardware}{seed}{rank}".encode()).hexdigest()[:8].upper()
    root = Path(out_dir) / f"{HOST_NAME}_{HOST_PID}_{_ts17(start)}_ascend_pt"
    outp = root / "ASCEND_PROFILER_OUTPUT"
    outp.mkdir(parents=True, exist_ok=True)
    (outp / "kernel_details.csv").write_bytes(kernel_details_csv(kernels).encode("utf-8"))
    (outp / "step_trace_time.csv").write_bytes(step_trace_csv(kernels, spans).encode("utf-8"))
    events = trace_events(kernels, spec, lines, line_mode, stacks)
    (outp / "trace_view.json").write_text(json.dumps(events, separators=(",", ":")) + "\n", encoding="utf-8")
    info = {
        "config": {
            "common_config": {
                "activities": ["ProfilerActivity.CPU", "ProfilerActivity.NPU"],
                "schedule": {"wait": 0, "active": steps, "warmup": 1, "repeat": 1, "skip_first": 0},
                "record_shapes": True, "profile_memory": False, "with_stack": True,
                "with_flops": False, "with_modules": False},
            "experimental_config": {
                "_profiler_level": "Level1", "_aic_metrics": "ACL_AICORE_PIPE_UTILIZATION",
                "_l2_cache": False, "_msprof_tx": False, "_data_simplification": True,
                "record_op_args": False, "_export_type": "text", "_op_attr": False,
                "_gc_detect_threshold": None}},
        "start_info": {"syscnt_enable": True, "freq": 100, "start_cnt": start // 10,
                       "start_monotonic": start - BASE_NS + 172_000_000_000_000},
        "end_info": {"collectionTimeEnd": end, "MonotonicTimeEnd": end - BASE_NS + 172_000_000_000_000},
        "rank_id": rank,
    }
    (root / f"profiler_info_{rank}.json").write_text(_json(info), encoding="utf-8")
    meta = {
        "ENV_VARIABLES": {k: "" for k in ("ASCEND_GLOBAL_LOG_LEVEL", "HCCL_RDMA_TC", "HCCL_RDMA_SL",
                                          "ACLNN_CACHE_LIMIT", "HOST_CACHE_CAPACITY",
                                          "ASCEND_ENHANCE_ENABLE", "PYTORCH_NPU_ALLOC_CONF",
                                          "ASCEND_LAUNCH_BLOCKING")},
        "synthetic": ("GENERATED by cannbot-prefetch examples/synth from the documented export "
                      "format and the model's sizes; durations from a stated formula, not measured"),
        "synthetic_model": spec.prefix, "synthetic_hardware": hw.name,
    }
    if label:
        meta["synthetic_label"] = label
    (root / "profiler_metadata.json").write_text(_json(meta), encoding="utf-8")
    dev = rank
    prof = root / f"PROF_000001_{_ts17(start)}_{rnd}" / f"device_{dev}"
    prof.mkdir(parents=True, exist_ok=True)
    device_info = {
        "cpuCores": 1, "cpuNums": 192, "memoryTotal": 1_056_152_984,
        "DeviceInfo": [{"aic_frequency": str(hw.mhz), "ai_cpu": "2,3,4,5,6", "env_type": 3,
                        "ctrl_cpu_id": "ARMv8_Cortex_A55", "ctrl_cpu_core_num": 1, "ai_core_id": 0,
                        "ctrl_cpu": "0", "aiv_frequency": str(hw.mhz), "ctrl_cpu_endian_little": 1,
                        "hwts_frequency": "49.999001", "id": dev, "ts_cpu_core_num": 0,
                        "ai_cpu_core_num": 6, "ai_core_num": hw.cube_cores, "aiv_num": hw.vector_cores,
                        "ai_cpu_core_id": 2, "aicpu_occupy_bitmap": 252}],
        "drvVersion": 467992, "jobInfo": "NA", "rank_id": rank, "version": "1.0", "pid_name": "python",
        "platform_version": "5", "hostname": HOST_NAME, "hwtype": "aarch64", "devices": str(dev),
        "sysClockFreq": 100, "pid": str(HOST_PID),
    }
    (prof / f"info.json.{dev}").write_text(json.dumps(device_info, separators=(",", ":")), encoding="utf-8")
    return root


def lines_table(spec: M.ModelSpec, model_src: str | Path, **kw: Any) -> dict[str, int]:
    """Every frame line the ops of this model need, found in `model_src` (for source_lines.json)."""
    ops: list[M.Op] = []
    for ph in ("decode",):
        ops += M.step_ops(spec, 1, None, ph)
    res = find_source_lines(model_src, ops)
    return dict(sorted(res.items()))


def generate_pair(config: str | Path | Mapping[str, Any], out_dir: str | Path,
                  prefetch: Mapping[str, Sequence[Any]], **kw: Any) -> tuple[Path, Path]:
    """A baseline and an "optimized" profile of the same run: out_dir/baseline/... and
    out_dir/optimized/... (same seed, so every kernel not touched by `prefetch` keeps its jitter).
    kw: any generate() option (hardware, steps, layers, prefetch_coef, comm, ...)."""
    out = Path(out_dir)
    base = generate(config, out / "baseline", **kw)
    opt = generate(config, out / "optimized", prefetch=prefetch, **kw)
    return base, opt
