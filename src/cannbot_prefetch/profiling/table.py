"""The normalized kernel table: the only wrapper over a DataFrame, and its schema.

Every reader (kernel_details / op_summary CSV, torch_npu DB, Chrome traces) produces exactly
these columns, so nothing downstream knows which layout or version the profile came from.
Optional columns are present and null when the source lacks them. Counter columns keep msprof's
names with units made identifier-safe: `aic_mte2_time(us)` -> `aic_mte2_time_us`,
`cube_utilization(%)` -> `cube_utilization_pct`, `aic_main_mem_read_bw(GB/s)` -> `..._bw_gbps`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

# Always present, in this order. Values are normalized:
#  - shapes unquoted ("32,9216;4096,9216;4096"), "N/A"/"" -> null
#  - dtypes without "DT_" ("BF16;BF16"), formats without "FORMAT_" ("ND;FRACTAL_NZ")
#  - start_ns: integer nanoseconds parsed as a decimal (never via float)
#  - type/core/stream: null where the source says N/A (Level0 Type, HCCL Stream ID)
BASE_SCHEMA: dict[str, pl.DataType] = {
    "row": pl.Int64,            # CSV: line number in the file (header is line 1);
                                # DB: task ordinal; trace: event index in the JSON
    "source": pl.Utf8,          # file the row came from (name relative to the profile root)
    "step": pl.Int64,           # Step Id, null when the export has none
    "device": pl.Int64,         # Device_id, null when absent
    "stream": pl.Utf8,          # Stream ID as text; null for N/A
    "task_id": pl.Int64,
    "name": pl.Utf8,            # kernel / op name, e.g. aclnnAddmm_MatMulCommon_MatMulV2
    "type": pl.Utf8,            # OP Type, e.g. MatMulV2; null when N/A (Level0)
    "core": pl.Utf8,            # Accelerator Core / Task Type: AI_CORE, MIX_AIC, HCCL, ...
    "start_ns": pl.Int64,
    "dur_us": pl.Float64,
    "wait_us": pl.Float64,
    "block_dim": pl.Int64,
    "input_shapes": pl.Utf8,
    "input_dtypes": pl.Utf8,
    "input_formats": pl.Utf8,
    "output_shapes": pl.Utf8,
    "output_dtypes": pl.Utf8,
    "output_formats": pl.Utf8,
    # call stack "file(line): func;..." innermost first, when known: categorical, since a
    # stack (~1 KB) repeats every layer and step: each distinct one held once (40 MB -> 0.2 MB
    # for the 33k kernels of a 120-step Llama trace)
    "stack": pl.Categorical,
}

# Extra columns some layouts add after BASE_SCHEMA (absent where the source has nothing):
#  model_id, mix_block_dim (Int64), op_state, hf32_eligible, context_id (text) from the CSVs;
#  launch_op (the torch op that launched a kernel, e.g. "aclnnAddmm") and, in traces,
#  launch_input_dims, from trace_view flows or the DB's PYTORCH_API; unknown text columns of
#  newer exports keep their normalized header name.

# Counter columns the analysis reads by name, in the order the windows stage keeps their means
# (others are kept too, with normalized names; load_profile(..., counters="analysis") reads only
# these and the counter-group fingerprints).
PIPE_COUNTERS = ("aic_mac_ratio", "aic_mte2_ratio", "aiv_vec_ratio", "aiv_mte2_ratio")
# MemoryAccess counters read as measured bytes (KB as written): what the cube and vector cores
# read from main memory (global memory, through L2), and what MTE2 moved GM -> L1. The verdict
# and the MoE expert-hit share use the main-memory reads (docs/roofline.md).
MAIN_MEMORY_READ_KB = ("aic_read_main_memory_datas_kb", "aiv_read_main_memory_datas_kb")
GM_TO_L1_KB = "aic_gm_to_l1_datas_kb"
MEMORY_COUNTERS = (*MAIN_MEMORY_READ_KB, GM_TO_L1_KB)
# Only Ascend 910 (A1-class) exports write msprof's `memory_bound` column (mte2 / max(mac, vec);
# REFERENCE.md 4.3), beside counters without the aic_ / aiv_ prefix (columns.UNPREFIXED_COUNTERS).
A1_MARKER = "memory_bound"

def end_ns(start: pl.Expr, dur_us: pl.Expr) -> pl.Expr:
    """A kernel's end in integer ns: the duration is scaled and truncated to ns on its own, then
    added. `start + dur * 1000` in float64 would round every end to 256 ns (starts are ~1.8e18
    ns, past float64's exact integers); window sizes are differences of such ends."""
    return start + (dur_us * 1000.0).cast(pl.Int64)


# BASE_SCHEMA columns only the report reads (wait per step, the L2 join on stream + task id):
# load_profile(..., counters="analysis") leaves them null instead of parsing them.
REPORT_ONLY = ("wait_us", "block_dim", "task_id")


@dataclass(frozen=True)
class ProfileInfo:
    """What the export says about itself, and what the reader did with it."""

    path: str                       # what the user passed
    layout: str                     # ascend_pt | ascend_pt_db | msprof | msprof_old | msprof_group |
                                    # kernel_csv | op_summary_csv | trace_view | torch_trace
    files: tuple[str, ...] = ()     # files actually read
    level: str | None = None        # Level0 | Level1 | Level2 | None (unknown)
    aic_metrics: str | None = None  # PipeUtilization | ArithmeticUtilization | Memory | ... | None
    rank: int | None = None
    ranks: tuple[int, ...] = ()     # ranks found beside the chosen one
    run: str | None = None          # counter-group run chosen in an msprof group folder
    runs: tuple[str, ...] = ()
    steps: tuple[int, ...] = ()     # steps kept after selection
    steps_available: tuple[int, ...] = ()
    warmup_excluded: tuple[int, ...] = ()
    rows: int = 0                   # rows kept
    rows_skipped: int = 0
    skipped_samples: tuple[str, ...] = ()  # "file:row: why", at most a handful
    soc: str | None = None          # SoC / part name when the export says it
    cube_cores: int | None = None
    vector_cores: int | None = None
    freq_mhz: float | None = None
    notes: tuple[str, ...] = ()     # one-line facts for the user (e.g. "Level0: no shapes")
    chip_class: str | None = None   # "A1" when the counters are in the Ascend 910 layout

    @property
    def has_shapes(self) -> bool:
        return self.level not in ("Level0",)


@dataclass(frozen=True)
class KernelTable:
    """A DataFrame with BASE_SCHEMA (+ counter columns), one row per device task or op."""

    df: pl.DataFrame

    def __post_init__(self) -> None:
        missing = [c for c in BASE_SCHEMA if c not in self.df.columns]
        if missing:
            raise ValueError(f"KernelTable missing columns: {missing}")

    def __len__(self) -> int:
        return self.df.height

    def has(self, column: str) -> bool:
        return column in self.df.columns and self.df[column].null_count() < self.df.height

    @staticmethod
    def empty() -> "KernelTable":
        return KernelTable(pl.DataFrame(schema=BASE_SCHEMA))


@dataclass(frozen=True)
class Profile:
    table: KernelTable
    info: ProfileInfo
    extras: dict = field(default_factory=dict)  # companion data a later stage may use (paths)
