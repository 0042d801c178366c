"""Tiny CSV writers in the real kernel_details header, for the profiling reader tests."""

from __future__ import annotations

from pathlib import Path

# A real Level1 + PipeUtilization header (msinsight pytorch_text_level1 kernel_details.csv).
LEVEL1_HEADER = (
    "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),"
    "Duration(us),Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,"
    "Input Data Types,Input Formats,Output Shapes,Output Data Types,Output Formats,Context ID,"
    "aicore_time(us),aic_total_cycles,aic_mac_time(us),aic_mac_ratio,aic_mte2_time(us),"
    "aic_mte2_ratio,cube_utilization(%)")


def level1_row(step: int, start: str, name: str = "aclnnMatmul_MatMulCommon_MatMulV2",
               type_: str = "MatMulV2", dur: str = "10.5", shapes: str = '"""32,4096;4096,4096"""',
               task: int = 1) -> str:
    return (f"{step},4294967295,{task},2,{name},{type_},dynamic,AI_CORE,{start},{dur},0.5,20,0,NO,"
            f"{shapes},DT_BF16;DT_BF16,ND;FORMAT_ND,\"\"\"32,4096\"\"\",DT_BF16,ND,N/A,"
            "10.0,18000,2.0,0.2,9.0,0.9,20.5")


def write_csv(path: Path, header: str, rows: list[str], eol: str = "\n") -> Path:
    path.write_text(eol.join([header, *rows]) + eol, encoding="utf-8", newline="")
    return path


