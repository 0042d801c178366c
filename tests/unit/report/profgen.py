"""GENERATED test profiles: small torch_npu Level1 folders in the real kernel_details.csv header.

Nothing here is measured. Each step runs `layers` copies of one decoder-layer pattern on the
compute stream "2": Add, RmsNorm, MatMulV3 gate (the plan's target), Silu, MatMulV3 down.
An "optimized" variant multiplies the target's and the window's durations by given factors,
adds CMO prefetch tasks on side stream "7" and may add idle time (waiting) per layer. Durations
jitter by a fixed seed so the steps have a spread.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

# Header text of the real sample msinsight/pytorch_text_level1/.../kernel_details.csv.
HEADER = ("Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),"
          "Duration(us),Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,"
          "Input Data Types,Input Formats,Output Shapes,Output Data Types,Output Formats,Context ID,"
          "aicore_time(us),aic_total_cycles,aic_mac_time(us),aic_mac_ratio,aic_scalar_time(us),"
          "aic_scalar_ratio,aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,"
          "aic_fixpipe_time(us),aic_fixpipe_ratio,aic_icache_miss_rate,aiv_time(us),"
          "aiv_total_cycles,aiv_vec_time(us),aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,"
          "aiv_mte2_time(us),aiv_mte2_ratio,aiv_mte3_time(us),aiv_mte3_ratio,aiv_icache_miss_rate,"
          "cube_utilization(%)")

GATE = ("MatMulV3", "1,2048;8192,2048", "DT_BF16;DT_BF16", "1,8192")
DOWN = ("MatMulV3", "1,8192;2048,8192", "DT_BF16;DT_BF16", "1,2048")
OTHER_MODEL_GATE = ("MatMulV3", "1,4096;11008,4096", "DT_BF16;DT_BF16", "1,11008")


@dataclass(frozen=True)
class Variant:
    target_factor: float = 1.0     # gate MatMul duration multiplier
    window_factor: float = 1.0     # Add / RmsNorm duration multiplier
    idle_us: float = 0.0           # extra wait inserted before each gate MatMul (waiting moved)
    cmo_us: float = 0.0            # a CMO task of this length per layer on stream 7 (0 = none)
    cmo_tail_us: float = 0.0       # extra CMO task at the end of each step, running past compute
    other_model: bool = False      # different MatMul shapes (another model)
    drop_target: bool = False      # the target kernel is absent
    twin: bool = False             # an "up" MatMul with the target's signature after Silu


def _row(step, task, stream, name, typ, core, start_us, dur, shapes="", dtypes="", out="",
         mte2=0.0, mac=0.0):
    quoted = (lambda s: f'"""{s}"""' if s else "N/A")
    start = f"{start_us:.3f}\t"
    cols = [str(step), "4294967295", str(task), stream, name, typ, "dynamic", core, start,
            f"{dur:.3f}", "0", "20", "0", "NO", quoted(shapes), dtypes or "N/A", "ND;ND" if shapes else "N/A",
            quoted(out), "DT_BF16" if out else "N/A", "ND" if out else "N/A", "N/A",
            f"{dur:.3f}", "1000", f"{dur * mac:.3f}", f"{mac}", "0.1", "0.01", "0.1", "0.01",
            f"{dur * mte2:.3f}", f"{mte2}", "0.1", "0.01", "0.0"]
    cols += ["0.0"] * 11 + ["50"]
    return ",".join(f'"{c}"' if "\t" in c else c for c in cols)


def write_profile(folder: Path, variant: Variant = Variant(), *, steps: int = 6, layers: int = 4,
                  seed: int = 1, step_trace: bool = True, cores: int = 20, mhz: float = 1800,
                  l2_hit: float | None = None) -> Path:
    """Write `folder/gen_ascend_pt/` (kernel_details.csv, step_trace_time.csv, info.json) and
    return that `*_ascend_pt` folder. Step 1 is the warm-up step the loader drops."""
    rnd = random.Random(seed)
    root = folder / "gen_ascend_pt"
    out = root / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True, exist_ok=True)
    rows, l2_rows, trace = [HEADER], ["Stream Id,Task Id,Hit Rate,Victim Rate,Op Name"], []
    t = 1_736_408_883_000_000.0
    task = 100
    gate = OTHER_MODEL_GATE if variant.other_model else GATE
    for step in range(1, steps + 1):
        step_start, busy, cmo_end = t, 0.0, t
        for _ in range(layers):
            j = lambda: 1.0 + rnd.uniform(-0.01, 0.01)  # noqa: E731
            seq = [("2", "aclnnAdd_AddAiCore_Add", "Add", "AI_VECTOR_CORE", 2.0 * variant.window_factor * j(), "", "", "", 0.3, 0.0),
                   ("2", "aclnnRmsNorm_RmsNorm_RmsNorm", "RmsNorm", "AI_VECTOR_CORE", 6.0 * variant.window_factor * j(), "", "", "", 0.3, 0.0)]
            if not variant.drop_target:
                seq.append(("2", "aclnnMm_MatMulV3Common_MatMulV3", gate[0], "AI_CORE", 40.0 * variant.target_factor * j(), gate[1], gate[2], gate[3], 0.95, 0.05))
            seq += [("2", "aclnnSilu_SiluAiCore_Silu", "Silu", "AI_VECTOR_CORE", 3.0 * j(), "", "", "", 0.2, 0.0)]
            if variant.twin:
                seq.append(("2", "aclnnMm_MatMulV3Common_MatMulV3", gate[0], "AI_CORE", 55.0 * j(), gate[1], gate[2], gate[3], 0.95, 0.05))
            seq += [
                    ("2", "aclnnMm_MatMulV3Common_MatMulV3", DOWN[0], "AI_CORE", 40.0 * j(), DOWN[1], DOWN[2], DOWN[3], 0.95, 0.05)]
            for k, (stream, name, typ, core, dur, shp, dts, o, mte2, mac) in enumerate(seq):
                if k == 2 and variant.cmo_us:
                    rows.append(_row(step, task, "7", "Cmo_Prefetch", "Cmo", "AI_CORE", t - variant.cmo_us - 8, variant.cmo_us))
                    task += 1
                if typ == "MatMulV3" and shp == gate[1] and variant.idle_us:
                    t += variant.idle_us
                rows.append(_row(step, task, stream, name, typ, core, t, dur, shp, dts, o, mte2, mac))
                if l2_hit is not None:
                    l2_rows.append(f"2,{task},{l2_hit if shp == gate[1] else 0.5},0.1,{name}")
                task += 1
                t += dur + 1.0
                busy += dur
        if variant.cmo_tail_us:
            rows.append(_row(step, task, "7", "Cmo_Prefetch", "Cmo", "AI_CORE", t - 5, variant.cmo_tail_us))
            task += 1
            cmo_end = t - 5 + variant.cmo_tail_us
        step_end = max(t, cmo_end)
        trace.append((step, busy, (step_end - step_start) - busy))
        t = step_end + 50.0
    (out / "kernel_details.csv").write_text("\r\n".join(rows) + "\r\n", encoding="utf-8")
    if step_trace:
        lines = ["Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,"
                 "Bubble,Communication(Not Overlapped and Exclude Receive),Preparing"]
        for step, busy, free in trace:
            lines.append(f"{step},{busy:.3f},0,0,0,{free:.3f},{busy + free:.3f},0,0,0")
        (out / "step_trace_time.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if l2_hit is not None:
        (out / "l2_cache.csv").write_text("\n".join(l2_rows) + "\n", encoding="utf-8")
    info = {"config": {"experimental_config": {"_profiler_level": "Level1",
                                               "_aic_metrics": "ACL_AICORE_PIPE_UTILIZATION"}},
            "rank_id": 0}
    (root / "profiler_info_0.json").write_text(json.dumps(info), encoding="utf-8")
    dev = root / "device_0"
    dev.mkdir(exist_ok=True)
    (dev / "info.json.0").write_text(json.dumps(
        {"DeviceInfo": [{"ai_core_num": cores, "aiv_num": cores * 2, "aic_frequency": str(mhz)}]}),
        encoding="utf-8")
    return root


def plan_dict(window_ops=("Add", "RmsNorm"), coefficient=0.5, shapes=GATE[1], sites=1,
              bound_by="coefficient", cap_bytes=None, saving=(3.0, 6.0, 9.0),
              cap_name="cmo_rate_x_window", cap_binding=True, call_site=None) -> dict:
    """`saving`: per target kernel (evidence.saving_per_op_us); saving_us is per step (x 4)."""
    """A plan (CONTRACTS.md keys) whose one site targets the generated gate MatMul."""
    weight = 8192 * 2048 * 2
    caps = [{"name": "weight", "bytes": weight, "note": "8192x2048 bf16"},
            {"name": cap_name, "bytes": cap_bytes or 60_000_000, "note": "285 GB/s x window"}]
    if not cap_binding:
        caps[1]["binding"] = False
    site = {
        "id": "llama-mlp-gate_proj",
        "target": {"file": "modeling_llama.py", "class": "LlamaMLP", "attr": "gate_proj",
                   "weight_expr": "self.mlp.gate_proj.weight", "scope": "same"},
        "insert": {"class": "LlamaDecoderLayer", "method": "forward", "anchor_call": "self.mlp",
                   "position": "before"},
        "dependency": {"expr": "hidden_states"},
        "join": {"class": "LlamaDecoderLayer", "method": "forward", "where": "end"},
        "max_size": int(min(weight * coefficient, cap_bytes if cap_bytes and cap_binding else 1e18)),
        "max_tokens": 64,
        "basis": {"dims": [8192, 2048], "dtype_bytes": 2, "coefficient": coefficient,
                  "formula": "I*H*b*c", "bound_by": bound_by, "caps": caps},
        "ladder": {"up": [x for x in (0.7, 1.0) if x > coefficient],
                   "down": [x for x in (0.5, 0.3, 0.1) if x < coefficient]},
        "mapping": "stack",
        "evidence": {"signature": {"type": "MatMulV3", "input_shapes": shapes,
                                   "dtypes": "BF16;BF16"},
                     "mean_us": 40.0, "verdict": "memory-bound", "measured_verdict": "memory-bound",
                     "instances_per_step": 4.0,
                     "saving_per_op_us": dict(zip(("low", "mid", "high"), saving)),
                     "window": {"ops": list(window_ops), "start": "input", "time_us": 10.0,
                                "reason": "light predecessors"}},
        "saving_us": dict(zip(("low", "mid", "high"), (4 * x for x in saving))),   # per step: 4 layers
        "source_sha256": "0" * 64,
    }
    if call_site is not None:      # (cluster, clusters): which same-shape call site the plan means
        site["evidence"]["call_site"] = {"cluster": call_site[0], "clusters": call_site[1],
                                         "rank": call_site[0]}
    out_sites = [site]
    for k in range(1, sites):
        s2 = json.loads(json.dumps(site))
        s2["id"] = f"site-{k}"
        out_sites.append(s2)
    return {"version": 1, "tool_version": "0.1.0", "status": "applied",
            "created_from": {"profile": "generated", "hardware": "910B3"}, "mode": "eager",
            "switch": {"name": "enable_prefetch", "default": False, "config_path": "enable_prefetch"},
            "sites": out_sites, "rejections": []}


def write_plan(folder: Path, **kw) -> Path:
    import yaml
    p = folder / "prefetch_plan.yaml"
    p.write_text(yaml.safe_dump(plan_dict(**kw), sort_keys=False), encoding="utf-8")
    return p
