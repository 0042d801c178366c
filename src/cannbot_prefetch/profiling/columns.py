"""The one column-alias table: export header names -> normalized column names.

Headers are matched by name (after trimming spaces, TABs and quotes), never by position, so
kernel_details (torch_npu) and op_summary (msprof) of every version map to the same columns.
Anything not listed is a counter (or an unknown extra) and keeps msprof's name made
identifier-safe by `counter_name`.
"""

from __future__ import annotations

import re

# normalized name -> (header spellings seen in real exports, kind)
# kind: text | int | float | start (decimal µs -> integer ns)
ALIASES: dict[str, tuple[tuple[str, ...], str]] = {
    "step": (("Step Id", "Step ID"), "int"),
    "device": (("Device_id", "Device ID", "Device Id"), "int"),
    "model_id": (("Model ID", "Model Id"), "int"),
    "task_id": (("Task ID", "Task Id"), "int"),
    "stream": (("Stream ID", "Stream Id", "Physic Stream Id"), "text"),
    "name": (("Name", "Op Name", "OP Name"), "text"),
    "type": (("Type", "OP Type", "Op Type"), "text"),
    "op_state": (("OP State", "Op State"), "text"),
    "core": (("Accelerator Core", "Task Type"), "text"),
    "start_ns": (("Start Time(us)", "Task Start Time(us)"), "start"),
    "dur_us": (("Duration(us)", "Task Duration(us)"), "float"),
    "wait_us": (("Wait Time(us)", "Task Wait Time(us)"), "float"),
    "block_dim": (("Block Dim", "Block Num"), "int"),
    "mix_block_dim": (("Mix Block Dim", "Mix Block Num"), "int"),
    "hf32_eligible": (("HF32 Eligible",), "text"),
    "context_id": (("Context ID", "Context Id"), "text"),
    "input_shapes": (("Input Shapes",), "text"),
    "input_dtypes": (("Input Data Types",), "text"),
    "input_formats": (("Input Formats",), "text"),
    "output_shapes": (("Output Shapes",), "text"),
    "output_dtypes": (("Output Data Types",), "text"),
    "output_formats": (("Output Formats",), "text"),
}

# Without these a kernel table is meaningless (CONTRACTS.md: a required column missing -> exit 2).
REQUIRED = ("name", "start_ns", "dur_us")

# Columns whose values carry msprof prefixes to strip.
DTYPE_COLUMNS = ("input_dtypes", "output_dtypes")
FORMAT_COLUMNS = ("input_formats", "output_formats")
SHAPE_COLUMNS = ("input_shapes", "output_shapes")

_LOOKUP = {h.lower(): canon for canon, (heads, _) in ALIASES.items() for h in heads}

# torch_npu DB export (TASK_PMU_INFO) counter names -> text export names; values in ns there.
DB_COUNTER_RENAMES = {"aic_total_time": "aicore_time_us", "aiv_total_time": "aiv_time_us"}

# Counter-group fingerprints: a column that only that --aic-metrics group writes.
METRIC_FINGERPRINTS: tuple[tuple[str, str], ...] = (
    ("aic_mte2_ratio", "PipeUtilization"),
    ("aiv_vec_ratio", "PipeUtilization"),
    ("aic_mac_fp16_ratio", "ArithmeticUtilization"),
    ("aiv_vec_fp16_ratio", "ArithmeticUtilization"),
    ("aic_main_mem_read_bw_gbps", "Memory"),
    ("aiv_main_mem_read_bw_gbps", "Memory"),
    ("aic_l0a_read_bw_gbps", "MemoryL0"),
    ("aiv_ub_read_bw_vector_gbps", "MemoryUB"),
    ("aic_r0_read_cache_hit", "L2Cache"),
    ("aic_read_main_memory_datas_kb", "MemoryAccess"),
    ("aic_gm_to_l1_datas_kb", "MemoryAccess"),
    ("aiv_r0_read_cache_hit", "L2Cache"),
    ("aiv_vec_bank_cflt_ratio", "ResourceConflictRatio"),
)

# profiler_info `_aic_metrics` (ACL enum names) -> msprof group names.
ACL_METRICS = {
    "ACL_AICORE_PIPE_UTILIZATION": "PipeUtilization",
    "ACL_AICORE_ARITHMETIC_UTILIZATION": "ArithmeticUtilization",
    "ACL_AICORE_MEMORY_BANDWIDTH": "Memory",
    "ACL_AICORE_L0B_AND_WIDTH": "MemoryL0",
    "ACL_AICORE_MEMORY_UB": "MemoryUB",
    "ACL_AICORE_L2_CACHE": "L2Cache",
    "ACL_AICORE_RESOURCE_CONFLICT_RATIO": "ResourceConflictRatio",
    "ACL_AICORE_MEMORY_ACCESS": "MemoryAccess",
    "ACL_AICORE_NONE": None,
}


def clean_header(header: str) -> str:
    """A header cell as written, minus the quotes/TABs/CR (and a UTF-8 BOM on the first cell)
    some exports and editors leave around it."""
    return header.lstrip("\ufeff").strip().strip('"').strip()


def canonical(header: str) -> str | None:
    """The normalized name for a known header, else None (a counter or unknown extra)."""
    return _LOOKUP.get(clean_header(header).lower())


def counter_name(header: str) -> str:
    """`aic_mte2_time(us)` -> `aic_mte2_time_us`, `(%)` -> `_pct`, `(GB/s)` -> `_gbps`."""
    name = clean_header(header).lower()
    name = name.replace("(us)", "_us").replace("(ns)", "_ns").replace("(%)", "_pct")
    name = name.replace("(gb/s)", "_gbps").replace("(mb/s)", "_mbps")
    name = re.sub(r"[^0-9a-z]+", "_", name).strip("_")
    name = re.sub(r"_+", "_", name)
    return UNPREFIXED_COUNTERS.get(name, name) or "unnamed"


# Ascend 910 (A1-class) exports name the PipeUtilization counters without the aic_/aiv_ prefix
# (one AI Core holds cube and vector, MTE2 feeds both; docs/roofline.md "A1"): read as the
# prefixed names the analysis uses. `memory_bound` and `cube_utilization(%)` keep their names.
UNPREFIXED_COUNTERS = {
    "total_cycles": "aic_total_cycles",
    "mac_time_us": "aic_mac_time_us", "mac_ratio": "aic_mac_ratio",
    "mte1_time_us": "aic_mte1_time_us", "mte1_ratio": "aic_mte1_ratio",
    "mte2_time_us": "aic_mte2_time_us", "mte2_ratio": "aic_mte2_ratio",
    "scalar_time_us": "aic_scalar_time_us", "scalar_ratio": "aic_scalar_ratio",
    "vec_time_us": "aiv_vec_time_us", "vec_ratio": "aiv_vec_ratio",
    "mte3_time_us": "aiv_mte3_time_us", "mte3_ratio": "aiv_mte3_ratio",
}


def metrics_from_columns(columns: list[str] | tuple[str, ...]) -> str | None:
    """Which counter group wrote these (normalized) columns, when no metadata says so."""
    present = set(columns)
    for column, group in METRIC_FINGERPRINTS:
        if column in present:
            return group
    return None
