"""Benchmark: `analyze` on a 1M-row Level1 kernel_details.csv vs a plain csv-module pass.

Writes a GENERATED kernel_details.csv (the real Level1 + PipeUtilization header of torch_npu;
rows cycle through a decode-like op mix of MatMuls, norms, adds, attention) to a temp folder,
then, in this one process, times
  baseline: Python's csv module reading every row and summing Duration per (Type, Input Shapes)
  analyze:  cannbot_prefetch.pipeline.analyze (load, normalize, roofline, top-N)
and prints the ratio. Peak memory of analyze is measured in a child process (ru_maxrss).
Targets (issue 2): analyze <= 0.5 x the csv pass, peak < 1 GB.

    python benchmarks/bench_analyze.py [--rows 1000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEADER = ("Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),"
          "Duration(us),Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,"
          "Input Data Types,Input Formats,Output Shapes,Output Data Types,Output Formats,Context ID,"
          "aicore_time(us),aic_total_cycles,aic_mac_time(us),aic_mac_ratio,aic_scalar_time(us),"
          "aic_scalar_ratio,aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,"
          "aic_fixpipe_time(us),aic_fixpipe_ratio,aic_icache_miss_rate,aiv_time(us),aiv_total_cycles,"
          "aiv_vec_time(us),aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),"
          "aiv_mte2_ratio,aiv_mte3_time(us),aiv_mte3_ratio,aiv_icache_miss_rate,cube_utilization(%)")

# (name, type, core, input shapes, dtypes, formats, output shape, duration us, mac, mte2)
MIX = [
    ("aclnnRmsNorm_RmsNorm_RmsNorm", "RmsNorm", "AI_VECTOR_CORE", "8,2048;2048", "DT_BF16;DT_BF16", "ND;ND", "8,2048", 6.1, 0, 0),
    ("aclnnMm_MatMulCommon_MatMulV3", "MatMulV3", "AI_CORE", "8,2048;3072,2048", "DT_BF16;DT_BF16", "ND;ND", "8,3072", 11.3, 0.05, 0.91),
    ("aclnnApplyRotaryPosEmb_ApplyRotaryPosEmb_ApplyRotaryPosEmb", "ApplyRotaryPosEmb", "AI_VECTOR_CORE", "8,1,32,64;8,1,8,64", "DT_BF16;DT_BF16", "ND;ND", "8,1,32,64", 4.0, 0, 0),
    ("aclnnFusedInferAttentionScore_FusedInferAttentionScore_FusedInferAttentionScore", "FusedInferAttentionScore", "MIX_AIC", "8,1,2048;8,512,512", "DT_BF16;DT_BF16", "ND;ND", "8,1,2048", 21.0, 0.1, 0.6),
    ("aclnnMm_MatMulCommon_MatMulV3", "MatMulV3", "AI_CORE", "8,2048;2048,2048", "DT_BF16;DT_BF16", "ND;ND", "8,2048", 8.2, 0.05, 0.9),
    ("aclnnAdd_AddAiCore_Add", "Add", "AI_VECTOR_CORE", "8,2048;8,2048", "DT_BF16;DT_BF16", "ND;ND", "8,2048", 3.2, 0, 0),
    ("aclnnMm_MatMulCommon_MatMulV3", "MatMulV3", "AI_CORE", "8,2048;16384,2048", "DT_BF16;DT_BF16", "ND;ND", "8,16384", 44.0, 0.04, 0.95),
    ("aclnnSwiGlu_SwiGlu_SwiGlu", "SwiGlu", "AI_VECTOR_CORE", "8,16384", "DT_BF16", "ND", "8,8192", 4.4, 0, 0),
    ("aclnnMm_MatMulCommon_MatMulV3", "MatMulV3", "AI_CORE", "8,8192;2048,8192", "DT_BF16;DT_BF16", "ND;ND", "8,2048", 23.5, 0.05, 0.94),
    ("aclnnAdd_AddAiCore_Add", "Add", "AI_VECTOR_CORE", "8,2048;8,2048", "DT_BF16;DT_BF16", "ND;ND", "8,2048", 3.1, 0, 0),
]


def write_csv(path: Path, rows: int) -> None:
    t = 1_736_408_883_704_643_212  # ns
    per_step = len(MIX) * 16
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(HEADER + "\n")
        for i in range(rows):
            name, typ, core, ish, idt, ifm, osh, dur, mac, mte2 = MIX[i % len(MIX)]
            us, ns = divmod(t, 1000)
            cube = core != "AI_VECTOR_CORE"
            counters = (f"{dur * 0.95:.3f},{int(dur * 1800)},{dur * mac:.3f},{mac},0.1,0.01,0.2,0.02,"
                        f"{dur * mte2:.3f},{mte2},0.1,0.01,0.001,0,0,0,0,0,0,0,0,0,0,0,0" if cube else
                        f"0,0,0,0,0,0,0,0,0,0,0,0,0,{dur * 0.9:.3f},{int(dur * 1800)},{dur * 0.3:.3f},0.3,"
                        f"0.1,0.02,{dur * 0.5:.3f},0.5,0.2,0.04,0.001,0")
            fh.write(f"{i // per_step + 1},4294967295,{i % 65536},2,{name},{typ},dynamic,{core},"
                     f"{us}.{ns:03d}\t,{dur},0.5,20,0,NO,\"\"\"{ish}\"\"\",{idt},{ifm},"
                     f"\"\"\"{osh}\"\"\",DT_BF16,ND,N/A,{counters}\n")
            t += int(dur * 1000) + 1500


def csv_baseline(path: Path) -> int:
    """What a careful script would do with the csv module: parse, group, sum."""
    totals: dict[tuple[str, str], float] = {}
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        it, ish, idur, ist = (header.index(c) for c in ("Type", "Input Shapes", "Duration(us)", "Start Time(us)"))
        for row in reader:
            int(row[ist].strip().replace(".", ""))
            key = (row[it], row[ish].strip('"'))
            totals[key] = totals.get(key, 0.0) + float(row[idur])
    return len(totals)


def run_analyze(path: Path) -> dict:
    from cannbot_prefetch.pipeline import AnalyzeOptions, analyze

    return analyze(AnalyzeOptions(profile=str(path), hardware="910B3")).doc


def child(path: str) -> None:
    t0 = time.perf_counter()
    doc = run_analyze(Path(path))
    dt = time.perf_counter() - t0
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": dt, "peak_mb": peak_kb / 1024, "rows": doc["profile"]["rows"],
                      "signatures": len(doc["signatures"])}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--keep", help="write the CSV here and keep it")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child)
        return
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="cannbot-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "kernel_details.csv"
    t0 = time.perf_counter()
    write_csv(path, args.rows)
    print(f"wrote {args.rows:,} generated rows ({path.stat().st_size / 1e6:.0f} MB) in "
          f"{time.perf_counter() - t0:.1f} s: {path}")

    # Both sides start with their modules imported (csv is; import ours now), so the ratio
    # compares the work on the file, not interpreter start-up. The CLI adds ~0.5 s of imports.
    import cannbot_prefetch.pipeline  # noqa: F401
    import cannbot_prefetch.roofline.classify  # noqa: F401
    import cannbot_prefetch.profiling.load  # noqa: F401

    t0 = time.perf_counter()
    groups = csv_baseline(path)
    t_csv = time.perf_counter() - t0
    t0 = time.perf_counter()
    doc = run_analyze(path)
    t_an = time.perf_counter() - t0
    print(f"csv module pass : {t_csv:6.2f} s ({groups} groups)")
    print(f"analyze         : {t_an:6.2f} s ({doc['profile']['rows']:,} rows, "
          f"{len(doc['signatures'])} MatMul signatures)")
    print(f"ratio analyze / csv = {t_an / t_csv:.2f} (target <= 0.50)")
    res = subprocess.run([sys.executable, __file__, "--child", str(path)], capture_output=True,
                         text=True, check=True)
    c = json.loads(res.stdout.strip().splitlines()[-1])
    print(f"analyze in a fresh process: {c['seconds']:.2f} s, peak RSS {c['peak_mb']:.0f} MB "
          f"(target < 1024 MB)")
    if not args.keep:
        path.unlink()
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
