"""Write a GENERATED torch_npu Level1 + PipeUtilization `*_ascend_pt` folder (REFERENCE.md §3).

Layout and value formats follow the real exports in ../shared/profiling-samples:

    GENERATED-decodegen_<pid>_<17-digit ts>_ascend_pt/
        GENERATED.txt                  what made it (this package), the spec, "not measured"
        profiler_info_0.json           Level1, ACL_AICORE_PIPE_UTILIZATION, with_stack
        profiler_metadata.json         ENV_VARIABLES + a "GENERATED" note
        PROF_000001_<ts>_<rand>/device_0/info.json.0     ai_core_num, aiv_num, aic_frequency
        ASCEND_PROFILER_OUTPUT/
            kernel_details.csv         the 46-column Level1 PipeUtilization header, CRLF, shapes
                                       quoted (raw text: 3 double quotes each side), DT_BF16, start times in µs
                                       with 3 decimals + TAB; HCCL rows with Task/Stream ID N/A
                                       and N/A after Block Dim, like the real rows
            trace_view.json            JSON array: Python cpu_op events (Input Dims, Input type,
                                       Call stack innermost first, entries joined by ';\\r\\n'),
                                       async_npu flows s/f with id == kernel start in ns,
                                       "Ascend Hardware" (one thread per stream), "HCCL"
            step_trace_time.csv

Timeline: compute stream 2; each kernel starts GAP_US + U(0, GAP_JITTER_US) after the previous
one ends (the stream waits for HCCL too), never before 2 µs after its host launch; host launches
take HOST_OP_US each and start LAUNCH_LEAD_US before the step's first kernel; steps are
STEP_GAP_US apart. Durations and counters: physics.py.
"""

from __future__ import annotations

import csv
import datetime as _dt
import hashlib
import io
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from . import physics as P
from .ops import SCRIPT, Op, Tensor, TORCH_TYPE
from .source import Lines

KERNEL_HEADER = (
    "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),"
    "Duration(us),Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,"
    "Input Formats,Output Shapes,Output Data Types,Output Formats,Context ID,aicore_time(us),"
    "aic_total_cycles,aic_mac_time(us),aic_mac_ratio,aic_scalar_time(us),aic_scalar_ratio,"
    "aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,aic_fixpipe_time(us),"
    "aic_fixpipe_ratio,aic_icache_miss_rate,aiv_time(us),aiv_total_cycles,aiv_vec_time(us),"
    "aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),aiv_mte2_ratio,"
    "aiv_mte3_time(us),aiv_mte3_ratio,aiv_icache_miss_rate,cube_utilization(%)").split(",")
COUNTERS = KERNEL_HEADER[21:]
STEP_TRACE_HEADER = ["Step", "Computing", "Communication(Not Overlapped)", "Overlapped",
                     "Communication", "Free", "Stage", "Bubble",
                     "Communication(Not Overlapped and Exclude Receive)", "Preparing"]

MODEL_ID = 4294967295          # single-op (aclnn) mode
STREAM = 2
HOST = "GENERATED-decodegen"
PID = 3141592
BASE_NS = 1_798_761_600_000_000_000    # 2027-01-01 00:00:00 UTC: every profile starts here
GAP_US, GAP_JITTER_US = 1.0, 0.5
HOST_OP_US, LAUNCH_LEAD_US, STEP_GAP_US = 3.0, 30.0, 200.0
SITE = "/usr/local/lib/python3.10/site-packages"   # the recording host's paths (--src-map-free:
SCRIPT_PATH = "/home/user/decode.py"               # readers match frames by path suffix)
TORCH_LINES = {"linear": 134, "sparse": 189, "call_impl": 1789, "wrapped": 1778}
ACT_LINE = 103
NL = ";\r\n"


@dataclass(frozen=True)
class Kernel:
    """One task of the generated timeline (one kernel_details row)."""

    step: int
    index: int          # position of its op in the step
    op: Op
    task_id: int | None
    start_ns: int
    dur_ns: int
    wait_ns: int
    f: float            # jitter (and warm-up) factor on every time of the op
    host: tuple[int, int]     # outer cpu_op span
    launch: tuple[int, int]   # launching cpu_op span

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.dur_ns


def timeline(ops: Sequence[Op], steps: int, seed: int) -> list[Kernel]:
    out: list[Kernel] = []
    task = 10_000
    end = BASE_NS
    for s in range(1, steps + 1):
        h = end + int(STEP_GAP_US * 1000)
        prev_end = None
        for i, op in enumerate(ops):
            rng = random.Random(f"{seed}:{s}:{i}")
            f = (1.0 + rng.uniform(-P.JITTER, P.JITTER)) * (P.WARMUP if s == 1 else 1.0)
            gap = int(round((GAP_US + rng.uniform(0.0, GAP_JITTER_US)) * 1000))
            host = (h, h + int(HOST_OP_US * 1000) - 200)
            launch = (h + 500, h + int(HOST_OP_US * 1000) - 700)
            h += int(HOST_OP_US * 1000)
            earliest = launch[0] + (int(LAUNCH_LEAD_US * 1000) if prev_end is None else 2000)
            start = max(earliest, prev_end + gap) if prev_end is not None else earliest
            dur = int(round(op.base_us * f * 1000))
            wait = 0 if prev_end is None else start - prev_end
            tid = None
            if op.kind != "comm":
                tid, task = task, task + 1
            out.append(Kernel(s, i, op, tid, start, dur, wait, f, host, launch))
            prev_end = start + dur
        end = prev_end
    return out


# ----------------------------------------------------------------------------- kernel_details

def _num(x: float) -> str:
    return f"{x:.3f}".rstrip("0").rstrip(".") if x != int(x) else f"{x:.1f}"


def _ts(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def _shapes(ts: Sequence[Tensor | None]) -> str:
    return '"' + ";".join("" if t is None else t.dims for t in ts) + '"'


def _blocks(op: Op, hw: P.Part) -> tuple[int, int]:
    if op.core == "MIX_AIC":
        return hw.cube_cores, hw.vector_cores
    if op.core == "AI_CORE":
        return hw.cube_cores, 0
    elems = max(t.numel for t in op.outputs)
    return max(1, min(hw.vector_cores, -(-elems // 2048))), 0


def kernel_details(kernels: Sequence[Kernel], hw: P.Part) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(KERNEL_HEADER)
    for k in kernels:
        op = k.op
        head = [k.step, MODEL_ID, "N/A" if k.task_id is None else k.task_id,
                "N/A" if op.kind == "comm" else STREAM, op.name, op.type]
        times = [_ts(k.start_ns) + "\t", _num(k.dur_ns / 1000), _num(k.wait_ns / 1000)]
        if op.kind == "comm":
            w.writerow(head + ["N/A", "HCCL"] + times + [0] + ["N/A"] * (len(KERNEL_HEADER) - 12))
            continue
        blocks, mix = _blocks(op, hw)
        dtypes = op.input_dtypes or tuple("" if t is None else t.dtype for t in op.inputs)
        row = head + ["dynamic", op.core] + times + [
            blocks, mix, "NO", _shapes(op.inputs), ";".join(dtypes),
            ";".join("ND" if t is None else t.fmt for t in op.inputs), _shapes(op.outputs),
            ";".join(t.dtype for t in op.outputs), ";".join(t.fmt for t in op.outputs), "N/A"]
        assert op.pipes is not None
        vals = P.counters(op.pipes, k.f, blocks, hw)
        row += [vals[c] for c in COUNTERS]
        w.writerow(row)
    return buf.getvalue()


def step_spans(kernels: Sequence[Kernel]) -> dict[int, tuple[int, int]]:
    spans: dict[int, tuple[int, int]] = {}
    for k in kernels:
        a, b = spans.get(k.step, (k.host[0], k.end_ns))
        spans[k.step] = (min(a, k.host[0]), max(b, k.end_ns))
    return spans


def step_trace(kernels: Sequence[Kernel]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(STEP_TRACE_HEADER)
    for s, (a, _) in sorted(step_spans(kernels).items()):
        ks = [k for k in kernels if k.step == s]
        comp = sum(k.dur_ns for k in ks if k.op.kind != "comm")     # serial stream: no overlap
        comm = sum(k.dur_ns for k in ks if k.op.kind == "comm")
        first, last = min(k.start_ns for k in ks), max(k.end_ns for k in ks)
        stage = last - first
        vals = [comp, comm, 0, comm, stage - comp - comm, stage, 0, comm, first - a]
        w.writerow([s] + [_num(v / 1000) for v in vals])
    return buf.getvalue()


# ----------------------------------------------------------------------------- trace_view.json

def call_stack(op: Op, lines: Lines, model_file: str) -> str:
    tdir = f"{SITE}/torch/nn/modules"
    module = [f"{tdir}/module.py({TORCH_LINES['call_impl']}): _call_impl",
              f"{tdir}/module.py({TORCH_LINES['wrapped']}): _wrapped_call_impl"]
    frames = {"linear": [f"{tdir}/linear.py({TORCH_LINES['linear']}): forward"] + module,
              "embedding": [f"{tdir}/sparse.py({TORCH_LINES['sparse']}): forward"] + module,
              "act": [f"{SITE}/transformers/activations.py({ACT_LINE}): forward"] + module,
              "module": list(module), "": []}[op.inner]
    for i, fr in enumerate(op.frames):
        if fr[0] == SCRIPT:
            frames.append(f"{SCRIPT_PATH}({lines.line(fr)}): <module>")
            continue
        if i > 0:
            frames += module
        frames.append(f"{model_file}({lines.line(fr)}): forward")
    return NL.join(frames)


def trace_view(kernels: Sequence[Kernel], lines: Lines, model_file: str) -> list[dict[str, Any]]:
    hw_pid, hccl_pid = (PID << 10) + 13 * 32, (PID << 10) + 15 * 32
    ev: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "Python"}},
        {"ph": "M", "name": "process_labels", "pid": PID, "tid": 0, "args": {"labels": "CPU"}},
        {"ph": "M", "name": "process_sort_index", "pid": PID, "tid": 0, "args": {"sort_index": 0}},
        {"ph": "M", "name": "thread_name", "pid": PID, "tid": PID, "args": {"name": f"Thread {PID}"}},
        {"ph": "M", "name": "thread_sort_index", "pid": PID, "tid": PID, "args": {"sort_index": PID}},
    ]
    for s, (a, b) in sorted(step_spans(kernels).items()):
        ev.append({"ph": "X", "name": f"ProfilerStep#{s}", "pid": PID, "tid": PID, "ts": _ts(a),
                   "dur": round((b - a) / 1000, 3), "cat": "cpu_op",
                   "args": {"Sequence number": -1, "Fwd thread id": 0}})
    stacks: dict[int, str] = {}
    for n, k in enumerate(kernels):
        op = k.op
        stack = stacks.get(k.index)
        if stack is None:
            stack = stacks[k.index] = call_stack(op, lines, model_file)
        ins = op.aten_inputs if op.aten_inputs is not None else op.inputs
        ev.append({"ph": "X", "name": op.aten, "pid": PID, "tid": PID, "ts": _ts(k.host[0]),
                   "dur": round((k.host[1] - k.host[0]) / 1000, 3), "cat": "cpu_op",
                   "args": {"Sequence number": n, "Fwd thread id": 0,
                            "Input Dims": NL.join("" if t is None else t.dims for t in ins),
                            "Input type": NL.join("None" if t is None else TORCH_TYPE[t.dtype] for t in ins),
                            "Call stack": stack}})
        ev.append({"ph": "X", "name": op.launcher, "pid": PID, "tid": PID, "ts": _ts(k.launch[0]),
                   "dur": round((k.launch[1] - k.launch[0]) / 1000, 3), "cat": "cpu_op",
                   "args": {"Sequence number": -1, "Fwd thread id": 0}})
        dst = (hccl_pid, 0) if op.kind == "comm" else (hw_pid, STREAM)
        ev.append({"ph": "s", "bp": "e", "name": "torch_to_npu", "id": k.start_ns, "pid": PID,
                   "tid": PID, "ts": _ts(k.launch[0] + 100), "cat": "async_npu"})
        ev.append({"ph": "f", "bp": "e", "name": "torch_to_npu", "id": k.start_ns, "pid": dst[0],
                   "tid": dst[1], "ts": _ts(k.start_ns), "cat": "async_npu"})
    ev += [{"name": "process_name", "pid": hw_pid, "tid": 0, "args": {"name": "Ascend Hardware"}, "ph": "M"},
           {"name": "process_labels", "pid": hw_pid, "tid": 0, "args": {"labels": "NPU"}, "ph": "M"},
           {"name": "process_sort_index", "pid": hw_pid, "tid": 0, "args": {"sort_index": 13}, "ph": "M"},
           {"name": "thread_name", "pid": hw_pid, "tid": STREAM, "args": {"name": f"Stream {STREAM}"}, "ph": "M"},
           {"name": "thread_sort_index", "pid": hw_pid, "tid": STREAM, "args": {"sort_index": STREAM}, "ph": "M"}]
    comm = [k for k in kernels if k.op.kind == "comm"]
    if comm:
        ev += [{"name": "process_name", "pid": hccl_pid, "tid": 0, "args": {"name": "HCCL"}, "ph": "M"},
               {"name": "thread_name", "pid": hccl_pid, "tid": 0,
                "args": {"name": "Group 0 Communication"}, "ph": "M"}]
    for n, k in enumerate(kernels):
        if k.op.kind == "comm":
            x = k.op.inputs[0]
            ev.append({"name": k.op.name, "pid": hccl_pid, "tid": 0, "ts": _ts(k.start_ns),
                       "dur": k.dur_ns / 1000, "ph": "X",
                       "args": {"connection_id": 1000 + n, "model id": MODEL_ID, "data_type": "BFP16",
                                "alg_type": "MESH", "count": x.numel if x else 0}})
        else:
            ev.append({"name": k.op.name, "pid": hw_pid, "tid": STREAM, "ts": _ts(k.start_ns),
                       "dur": k.dur_ns / 1000, "ph": "X",
                       "args": {"Model Id": MODEL_ID, "Task Type": k.op.core, "Physic Stream Id": STREAM,
                                "Task Id": k.task_id, "Batch Id": 0, "Subtask Id": 4294967295,
                                "connection_id": 1000 + n}})
    return ev


# ----------------------------------------------------------------------------- the folder

def ts17(ns: int) -> str:
    d = _dt.datetime.fromtimestamp(ns // 1_000_000_000, tz=_dt.timezone.utc)
    return d.strftime("%Y%m%d%H%M%S") + f"{(ns // 1_000_000) % 1000:03d}"


def _json(obj: Any) -> str:
    return json.dumps(obj, indent=4) + "\n"


def write_folder(out_dir: Path, kernels: Sequence[Kernel], hw: P.Part, lines: Lines, model_file: str,
                 label: str, steps: int, stacks: bool = True) -> Path:
    """`stacks=False`: no trace_view.json (a Level0-like export: kernels without call stacks)."""
    spans = step_spans(kernels)
    start = min(a for a, _ in spans.values())
    end = max(b for _, b in spans.values())
    root = out_dir / f"{HOST}_{PID}_{ts17(start)}_ascend_pt"
    outp = root / "ASCEND_PROFILER_OUTPUT"
    outp.mkdir(parents=True, exist_ok=True)
    (outp / "kernel_details.csv").write_bytes(kernel_details(kernels, hw).encode("utf-8"))
    (outp / "step_trace_time.csv").write_bytes(step_trace(kernels).encode("utf-8"))
    if stacks:
        (outp / "trace_view.json").write_text(json.dumps(trace_view(kernels, lines, model_file),
                                                         separators=(",", ":")) + "\n",
                                              encoding="utf-8")
    note = ("GENERATED by cannbot-prefetch tests/matrix/decodegen from the documented export format "
            "and the model's real sizes; durations and counters from a stated formula "
            "(decodegen/physics.py), NOT measured")
    (root / "GENERATED.txt").write_text(f"{note}.\n{label}\n", encoding="utf-8")
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
                       "start_monotonic": start - BASE_NS + 170_000_000_000_000},
        "end_info": {"collectionTimeEnd": end, "MonotonicTimeEnd": end - BASE_NS + 170_000_000_000_000},
        "rank_id": 0,
    }
    (root / "profiler_info_0.json").write_text(_json(info), encoding="utf-8")
    meta = {"ENV_VARIABLES": {k: "" for k in ("ASCEND_GLOBAL_LOG_LEVEL", "HCCL_RDMA_TC",
                                              "ACLNN_CACHE_LIMIT", "ASCEND_LAUNCH_BLOCKING")},
            "GENERATED": note, "generated_profile": label}
    (root / "profiler_metadata.json").write_text(_json(meta), encoding="utf-8")
    rnd = hashlib.sha256(label.encode()).hexdigest()[:8].upper()
    dev = root / f"PROF_000001_{ts17(start)}_{rnd}" / "device_0"
    dev.mkdir(parents=True, exist_ok=True)
    device_info = {
        "DeviceInfo": [{"id": 0, "ai_core_num": hw.cube_cores, "aiv_num": hw.vector_cores,
                        "aic_frequency": str(hw.mhz), "aiv_frequency": str(hw.mhz),
                        "ai_cpu_core_num": 6, "hwts_frequency": "49.999001", "env_type": 3}],
        "devices": "0", "hostname": HOST, "pid": str(PID), "rank_id": 0, "version": "1.0",
        "platform_version": "5", "hwtype": "aarch64", "drvVersion": 467992,
    }
    (dev / "info.json.0").write_text(json.dumps(device_info, separators=(",", ":")), encoding="utf-8")
    return root
