"""Build small KernelTables for the roofline tests, and the real rows they quote.

The real rows are copied (values only) from the public samples PROVENANCE.md lists:
- MSTT_MATMULV2: mstt advisor_compute_advice_pipe/kernel_details.csv, first MatMulV2 row
  (BF16, shapes edited by its authors: 81920,4096;8192,512 -> 4096,512; mac 0.824, mte2 0.964).
- VLLM_GMM: vllm-ascend msprof group PipeUtilization op_summary, the GroupedMatmul row (MIX_AIC).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from cannbot_prefetch.profiling.table import BASE_SCHEMA, KernelTable

COUNTERS = {"aic_mac_ratio": pl.Float64, "aic_mte2_ratio": pl.Float64}

MSTT_MATMULV2 = dict(
    step=19, stream="2", name="aclnnMatmul_MatMulCommon_MatMulV2", type="MatMulV2", core="AI_CORE",
    start_ns=1736413971558972912, dur_us=185.504, input_shapes="81920,4096;8192,512",
    input_dtypes="BF16;BF16", input_formats="ND;ND", output_shapes="4096,512",
    output_dtypes="BF16", output_formats="ND", aic_mac_ratio=0.824, aic_mte2_ratio=0.964)

VLLM_GMM = dict(
    stream="46", name="aclnnGroupedMatmulV5_GroupedMatmul_GroupedMatmul", type="GroupedMatmul",
    core="MIX_AIC", start_ns=1787504007019867535, dur_us=26.661,
    input_shapes="512,16;8,2048,16;;;;;;8",
    input_dtypes="BF16;BF16;FLOAT;UINT64;FLOAT;FLOAT16;FLOAT16;INT64",
    input_formats="ND;NCL;ND;ND;ND;ND;ND;ND", output_shapes="512,2048", output_dtypes="BF16",
    output_formats="ND", aic_mac_ratio=0.007, aic_mte2_ratio=0.44)


def make_table(rows: list[dict[str, Any]], counters: bool = True) -> KernelTable:
    schema = dict(BASE_SCHEMA)
    if counters:
        schema.update(COUNTERS)
    data = []
    for i, r in enumerate(rows):
        full = {k: None for k in schema}
        full.update({"row": i + 2, "source": "kernel_details.csv"})
        full.update(r)
        unknown = set(full) - set(schema)
        assert not unknown, unknown
        data.append(full)
    return KernelTable(pl.DataFrame(data, schema=schema, orient="row"))


def mm_row(shapes: str, out: str, *, dtypes: str = "BF16;BF16", formats: str = "ND;ND",
           op_type: str = "MatMulV2", dur: float = 40.0, start_ns: int = 0, **kw: Any) -> dict[str, Any]:
    row = dict(type=op_type, name=f"aclnnMatmul_X_{op_type}", core="AI_CORE", input_shapes=shapes,
               input_dtypes=dtypes, input_formats=formats, output_shapes=out,
               output_dtypes=dtypes.split(";")[0], output_formats="ND", dur_us=dur, start_ns=start_ns,
               stream="2")
    row.update(kw)
    return row
