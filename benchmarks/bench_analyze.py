"""Benchmark: `cannbot prefetch analyze` on a 1M-row Level1 kernel_details.csv vs a plain
csv-module pass over the same file, each a whole process (start-up included), as a user runs it.

Writes a GENERATED kernel_details.csv (the real Level1 + PipeUtilization header of torch_npu;
rows cycle through a decode-like op mix of MatMuls, norms, adds, attention) to a temp folder,
then runs, interleaved and repeated (medians; a busy machine slows both sides alike):
  baseline: `python -c` with Python's csv module reading every row and summing Duration per
            (Type, Input Shapes)
  analyze:  `cannbot prefetch analyze FILE --hardware 910B3 --json` (load, normalize, roofline)
and prints the ratio of the medians in wall seconds (the guard, as issue 34 states it; run it on idle cores) and in CPU seconds beside, and each side's peak memory (VmHWM).
Targets (issue 12): analyze <= 0.4 x the csv pass, peak < 1 GB.

    python benchmarks/bench_analyze.py [--rows 1000000] [--repeats 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import Runs, cli_cmd, guard, interleave, line, load_note, python_cmd  # noqa: E402

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


def write_csv(path: Path, rows: int, scale: float = 1.0) -> None:
    """`scale` stretches every duration (a slower rank of the same job)."""
    t = 1_736_408_883_704_643_212  # ns
    per_step = len(MIX) * 16
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(HEADER + "\n")
        for i in range(rows):
            name, typ, core, ish, idt, ifm, osh, dur, mac, mte2 = MIX[i % len(MIX)]
            dur = round(dur * scale, 3)
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


# What a careful script would do with the csv module: parse, group, sum (run as `python -c`).
BASELINE = """
import csv
path = sys.argv[1]
totals = {}
with open(path, encoding="utf-8", newline="") as fh:
    reader = csv.reader(fh)
    header = next(reader)
    it, ish, idur, ist = (header.index(c) for c in ("Type", "Input Shapes", "Duration(us)",
                                                     "Start Time(us)"))
    for row in reader:
        int(row[ist].strip().replace(".", ""))
        key = (row[it], row[ish].strip('"'))
        totals[key] = totals.get(key, 0.0) + float(row[idur])
print(len(totals))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", help="write the CSV here and keep it")
    args = ap.parse_args()
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="cannbot-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "kernel_details.csv"
    if not path.exists():
        t0 = time.perf_counter()
        write_csv(path, args.rows)
        print(f"wrote {args.rows:,} generated rows ({path.stat().st_size / 1e6:.0f} MB) in "
              f"{time.perf_counter() - t0:.1f} s: {path}")
    base = Runs("csv module pass (python -c)")
    cand = Runs("cannbot prefetch analyze")
    interleave([(python_cmd(BASELINE, str(path)), base),
                (cli_cmd("prefetch", "analyze", str(path), "--hardware", "910B3", "--json"),
                 cand)], args.repeats)
    print(line(base))
    print(line(cand))
    print(f"{guard('ratio analyze / csv', cand, base, 0.40, by='wall')}; "
          f"analyze peak {cand.peak:.0f} MB (target < 1024 MB); {load_note()}")
    if not args.keep:
        path.unlink()
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
