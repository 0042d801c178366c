"""Issue 31 (f): a Triton GEMM in an msprof op_summary (OP Type = the kernel's name,
`matmul_kernel`) is a MatMul-family row by configurable name pattern (configs/op_classes.yaml
matmul_family.matmul.patterns) and its shapes; another Triton kernel is not.

The op_summary CSV is GENERATED in the real msprof layout (the vllm-ascend msprof group
sample's header, abbreviated to the columns the reader needs): a 16 x 4096 x 4096 fp16 GEMM."""

from __future__ import annotations

from cannbot_prefetch import hardware
from cannbot_prefetch.profiling.load import load_profile
from cannbot_prefetch.roofline import classify

HEADER = ("Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,"
          "Task Start Time(us),Task Duration(us),Task Wait Time(us),Block Num,Mix Block Num,"
          "HF32 Eligible,Input Shapes,Input Data Types,Input Formats,Output Shapes,"
          "Output Data Types,Output Formats,Context ID,aic_mac_ratio,aic_mte2_ratio")


def test_triton_matmul_kernel_is_a_gemm(tmp_path):
    rows = []
    for i in range(4):
        t = 1796074800000000.0 + i * 100.0
        rows.append(f"0,1,{i * 2},2,matmul_kernel,matmul_kernel,static,AI_CORE,{t:.3f}\t,60.0,0,20,0,"
                    'NO,"16,4096;4096,4096",FLOAT16;FLOAT16,ND;ND,"16,4096",FLOAT16,ND,N/A,0.02,0.93')
        rows.append(f"0,1,{i * 2 + 1},2,softmax_kernel,softmax_kernel,static,AI_VECTOR_CORE,"
                    f"{t + 70:.3f}\t,5.0,0,20,0,NO,\"16,4096\",FLOAT16,ND,\"16,4096\",FLOAT16,ND,N/A,0,0")
    f = tmp_path / "op_summary_generated.csv"
    f.write_text("\n".join([HEADER, *rows]) + "\n", encoding="utf-8")   # GENERATED
    prof = load_profile(f)
    (s,) = classify(prof.table, hardware.load("910B3")).signatures
    assert (s.type, s.family) == ("matmul_kernel", "matmul")
    assert (s.m, s.n, s.k) == (16, 4096, 4096)
    assert s.flops == 2 * 16 * 4096 * 4096
    assert s.weight_bytes == 4096 * 4096 * 2                 # the second input, fp16
    assert s.measured_verdict == "memory-bound"              # mte2 0.93 > mac, AI ~16 < ridge
