"""torch_npu DB export (`ascend_pytorch_profiler_*.db`, export_type=db) -> normalized rows.

Opened read-only and immutable (no -wal/-shm files beside it, a read-only mount works).
Kernels are COMPUTE_TASK_INFO joined to TASK on globalTaskId, text cells are
STRING_IDS references, counters are TASK_PMU_INFO (name, value) pairs pivoted into columns and
renamed to the text export's names (times there are ns, the CSV's are µs). Communication ops
become HCCL rows, as in kernel_details.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import polars as pl

from ..errors import InputError
from . import columns as C
from .readout import ReadResult, conform, drop_memset
from .scalars import MAX_DURATION_US, MAX_START_NS

MAX_CELL_TEXT = 1 << 16   # characters: the longest STRING_IDS value in the samples is 279
MAX_STACK_TEXT = 64 << 20  # bytes of joined call stacks; the sample's are < 1 MiB
JOIN_FACTOR = 4           # join rows per table row; the sample's stack join makes 563 of 3023
from .cells import clean_text, strip_prefix

_TASK_COLS = {"startNs": "start_ns", "endNs": "end_ns", "deviceId": "device",
              "streamId": "stream", "taskId": "task_id", "modelId": "model_id",
              "connectionId": "connection_id"}
_INFO_COLS = {"name": "name", "opType": "type", "taskType": "core", "blockDim": "block_dim",
              "mixBlockDim": "mix_block_dim", "waitNs": "wait_ns", "inputShapes": "input_shapes",
              "inputDataTypes": "input_dtypes", "inputFormats": "input_formats",
              "outputShapes": "output_shapes", "outputDataTypes": "output_dtypes",
              "outputFormats": "output_formats"}
_STRING_REFS = ("name", "type", "core", "input_shapes", "input_dtypes", "input_formats",
                "output_shapes", "output_dtypes", "output_formats")


def read_db_rows(path: Path, source: str) -> ReadResult:
    """One profiler DB -> ReadResult (BASE_SCHEMA + counters); InputError when unusable."""
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    except sqlite3.Error as exc:
        raise InputError(f"cannot open database ({exc})", path=str(path)) from None
    con.text_factory = lambda b: b.decode("utf-8", errors="replace")
    try:
        return _read(con, path, source)
    except sqlite3.Error as exc:
        raise InputError(f"unreadable or corrupt database ({exc})", path=str(path)) from None
    except (pl.exceptions.PolarsError, OverflowError) as exc:
        # Cells are typed in SQL (_int/_real); this is the backstop for what slips through.
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"unexpected values in the database ({first})", path=str(path)) from None
    finally:
        con.close()


def _int(col: str) -> str:
    """SQL: the cell as an integer, else NULL. SQLite cells take any type whatever the column
    says (a damaged or hand-edited DB puts text where ids belong), so every cell is checked."""
    return (f"(CASE WHEN typeof({col}) = 'integer' THEN {col} "
            f"WHEN typeof({col}) = 'real' AND {col} = CAST({col} AS INTEGER) "
            f"AND abs({col}) < 9.0e18 THEN CAST({col} AS INTEGER) "
            f"WHEN typeof({col}) = 'text' AND length({col}) BETWEEN 1 AND 18 "
            f"AND {col} NOT GLOB '*[^0-9]*' THEN CAST({col} AS INTEGER) END)")


def _real(col: str) -> str:
    """SQL: the cell as a float when it is a number, else NULL."""
    return f"(CASE WHEN typeof({col}) IN ('integer', 'real') THEN CAST({col} AS REAL) END)"


def _read(con: sqlite3.Connection, path: Path, source: str) -> ReadResult:
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    needed = {"COMPUTE_TASK_INFO", "TASK", "STRING_IDS"}
    if not needed <= tables:
        raise InputError("not a torch_npu profiler DB: table(s) "
                         f"{', '.join(sorted(needed - tables))} missing", path=str(path),
                         hint="pass ascend_pytorch_profiler_<rank>.db")
    strings, long_strings = _strings(con)
    _unique_keys(con, path)
    task_cols = _columns(con, "TASK")
    info_cols = _columns(con, "COMPUTE_TASK_INFO")
    sel = [_int("c.globalTaskId")]
    sel += [_int(f"t.{k}") if k in task_cols else "NULL" for k in _TASK_COLS]
    sel += [_int(f"c.{k}") if k in info_cols else "NULL" for k in _INFO_COLS]
    rows = con.execute(f"SELECT {', '.join(sel)} FROM COMPUTE_TASK_INFO c "
                       "JOIN TASK t ON t.globalTaskId = c.globalTaskId ORDER BY t.startNs").fetchall()
    names = ["global_task_id", *_TASK_COLS.values(), *_INFO_COLS.values()]
    df = pl.DataFrame(rows, schema={n: pl.Int64 for n in names}, orient="row")
    rows_read = df.height
    if rows_read == 0:
        raise InputError("database holds no compute tasks", path=str(path))

    df = df.with_columns([pl.col(c).replace_strict(strings, default=None, return_dtype=pl.Utf8)
                          .alias(c) for c in _STRING_REFS])
    df = df.with_columns([clean_text(pl.col(c)).alias(c) for c in _STRING_REFS])
    df = df.with_columns(
        strip_prefix(pl.col("input_dtypes"), "DT_"), strip_prefix(pl.col("output_dtypes"), "DT_"),
        strip_prefix(pl.col("input_formats"), "FORMAT_"),
        strip_prefix(pl.col("output_formats"), "FORMAT_"),
        pl.col("stream").cast(pl.Utf8),
        ((pl.col("end_ns") - pl.col("start_ns")) / 1000.0).alias("dur_us"),
        (pl.col("wait_ns").cast(pl.Float64) / 1000.0).alias("wait_us"),
        pl.lit(source).alias("source"))
    df = df.with_row_index("row", offset=1).with_columns(pl.col("row").cast(pl.Int64))
    damaged = (pl.col("start_ns").is_null() | pl.col("dur_us").is_null()
               | ~pl.col("dur_us").is_between(0, MAX_DURATION_US)
               | ~pl.col("start_ns").is_between(0, MAX_START_NS, closed="left")
               | pl.col("name").is_null())
    bad = df.filter(damaged)
    df = df.filter(~damaged)
    samples = [f"{source}:task {g}: missing or impossible time, or no name"
               for g in bad["global_task_id"].head(5)]

    if "TASK_PMU_INFO" in tables:
        df = df.join(_counters(con, strings), on="global_task_id", how="left")
    if "COMMUNICATION_OP" in tables:
        df = pl.concat([df, _communication(con, strings, source)], how="diagonal_relaxed")
    if "STEP_TIME" in tables:
        df = _assign_steps(con, df)
    stack_note = ""
    if {"PYTORCH_API", "CONNECTION_IDS", "PYTORCH_CALLCHAINS"} <= tables:
        df, stack_note = _attach_stacks(con, strings, df)
    df, memsets = drop_memset(df.drop("end_ns", "wait_ns", "global_task_id", "connection_id",
                                      strict=False))
    notes = [f"{source}: {memsets} MemSet helper kernel(s) excluded"] if memsets else []
    if stack_note:
        notes.append(f"{source}: {stack_note}")
    if long_strings:
        notes.append(f"{source}: {long_strings} STRING_IDS value(s) that are no text or longer "
                     f"than {MAX_CELL_TEXT} characters ignored (damage)")
    result = ReadResult(conform(df.sort("start_ns")), rows_read=rows_read, skipped=bad.height,
                        samples=samples, notes=notes)
    result.meta.update(_facts(con, tables, strings))
    return result


def _strings(con: sqlite3.Connection) -> tuple[dict, int]:
    """STRING_IDS as {id: text}, and how many values were left out: a blob (a zeroblob of
    hundreds of MB costs a few bytes on disk) or a text longer than MAX_CELL_TEXT is damage,
    so what is read is bounded by the file's own size."""
    ok = (f"typeof(value) IN ('text', 'integer', 'real') AND length(value) <= {MAX_CELL_TEXT}")
    strings = dict(con.execute(f"SELECT {_int('id')}, CAST(value AS TEXT) FROM STRING_IDS "
                               f"WHERE {_int('id')} IS NOT NULL AND {ok}"))
    left = con.execute(f"SELECT COUNT(*) FROM STRING_IDS WHERE NOT ({ok})").fetchone()[0]
    return strings, left


def _unique_keys(con: sqlite3.Connection, path: Path) -> None:
    """A task's globalTaskId is unique in TASK and in COMPUTE_TASK_INFO (its primary key in
    torch_npu's schema): a repeated one is damage, and 6000 x 6000 repeats would join to 36 M
    rows. Counted and refused before the join."""
    for table in ("TASK", "COMPUTE_TASK_INFO"):
        dup = con.execute(f"SELECT COUNT(globalTaskId) - COUNT(DISTINCT globalTaskId) "
                          f"FROM {table}").fetchone()[0]
        if dup:
            raise InputError(f"table {table}: {dup} repeated globalTaskId value(s) (each task "
                             f"has one row): a damaged database", path=str(path))


def _join_rows(con: sqlite3.Connection, left: str, lkey: str, right: str, rkey: str) -> int:
    """How many rows `left JOIN right ON lkey = rkey` would make, counted without making them."""
    return con.execute(
        f"SELECT COALESCE(SUM(a.n * b.n), 0) FROM (SELECT {lkey} AS k, COUNT(*) AS n FROM {left} "
        f"GROUP BY k) a JOIN (SELECT {rkey} AS k, COUNT(*) AS n FROM {right} GROUP BY k) b "
        "ON a.k = b.k").fetchone()[0]


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}


def _counters(con: sqlite3.Connection, strings: dict) -> pl.DataFrame:
    """TASK_PMU_INFO pairs -> one column per counter, named and scaled like the CSV export."""
    pmu = pl.DataFrame(con.execute(f"SELECT {_int('globalTaskId')}, {_int('name')}, "
                                   f"{_real('value')} FROM TASK_PMU_INFO").fetchall(),
                       schema={"global_task_id": pl.Int64, "name": pl.Int64, "value": pl.Float64},
                       orient="row")
    # a counter that is no finite number measures nothing
    pmu = pmu.with_columns(pl.when(pl.col("value").is_finite()).then(pl.col("value")))
    if pmu.height == 0:
        return pl.DataFrame(schema={"global_task_id": pl.Int64})
    pmu = pmu.with_columns(pl.col("name").replace_strict(strings, default=None, return_dtype=pl.Utf8))
    wide = pmu.drop_nulls("name").pivot(on="name", index="global_task_id", values="value",
                                        aggregate_function="first")
    renames, scaled = {}, []
    for col in wide.columns:
        if col == "global_task_id":
            continue
        new = C.DB_COUNTER_RENAMES.get(col) or (f"{col}_us" if col.endswith("_time") else col)
        new = C.counter_name(new)
        renames[col] = new
        if new.endswith("_us"):
            scaled.append(new)
    wide = wide.rename(renames)
    return wide.with_columns([(pl.col(c) / 1000.0) for c in scaled])


def _communication(con: sqlite3.Connection, strings: dict, source: str) -> pl.DataFrame:
    cols = _columns(con, "COMMUNICATION_OP")
    op_type = "opType" if "opType" in cols else "NULL"
    op_type = _int(op_type) if op_type != "NULL" else "NULL"
    rows = con.execute(f"SELECT {_int('opName')}, {op_type}, {_int('startNs')}, {_int('endNs')} "
                       "FROM COMMUNICATION_OP").fetchall()
    df = pl.DataFrame(rows, schema={"name": pl.Int64, "type": pl.Int64, "start_ns": pl.Int64,
                                    "end_ns": pl.Int64}, orient="row")
    return df.with_columns(
        pl.col("name").replace_strict(strings, default=None, return_dtype=pl.Utf8),
        pl.col("type").replace_strict(strings, default=None, return_dtype=pl.Utf8),
        pl.lit("HCCL").alias("core"), pl.lit(source).alias("source"),
        ((pl.col("end_ns") - pl.col("start_ns")) / 1000.0).alias("dur_us"),
    ).filter(pl.col("name").is_not_null() & pl.col("start_ns").is_not_null()
             & pl.col("dur_us").is_between(0, MAX_DURATION_US)
             & (pl.col("start_ns") < MAX_START_NS))


def _assign_steps(con: sqlite3.Connection, df: pl.DataFrame) -> pl.DataFrame:
    """STEP_TIME(id, startNs, endNs): a task belongs to the step whose span holds its start."""
    steps = pl.DataFrame(con.execute(f"SELECT {_int('id')}, {_int('startNs')}, {_int('endNs')} "
                                     "FROM STEP_TIME").fetchall(),
                         schema={"step": pl.Int64, "step_start": pl.Int64, "step_end": pl.Int64},
                         orient="row").drop_nulls().sort("step_start")
    if steps.height == 0:
        return df
    df = df.drop("step", strict=False).sort("start_ns")
    joined = df.join_asof(steps, left_on="start_ns", right_on="step_start", strategy="backward")
    inside = pl.col("start_ns") <= pl.col("step_end")
    return joined.with_columns(pl.when(inside).then(pl.col("step")).otherwise(None).alias("step")
                               ).drop("step_start", "step_end")


def _attach_stacks(con: sqlite3.Connection, strings: dict,
                   df: pl.DataFrame) -> tuple[pl.DataFrame, str]:
    """Launching torch op and its Python call stack per task: TASK.connectionId ->
    CONNECTION_IDS -> PYTORCH_API (name, callchainId) -> PYTORCH_CALLCHAINS frames, depth 0
    (innermost) first, like the text export's `Call stack`. A join that would make more than
    JOIN_FACTOR rows per row of its tables (repeated keys: damage) is skipped, said in a note."""
    limit = JOIN_FACTOR * sum(con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                              for t in ("PYTORCH_API", "CONNECTION_IDS"))
    if _join_rows(con, "PYTORCH_API", "connectionId", "CONNECTION_IDS", "id") > limit:
        return df, ("PYTORCH_API and CONNECTION_IDS repeat their connection ids (the join would "
                    f"make more than {JOIN_FACTOR} rows per row): no call stacks read")
    api = pl.DataFrame(con.execute(
        f"SELECT {_int('ci.connectionId')}, {_int('p.name')}, {_int('p.callchainId')} "
        "FROM PYTORCH_API p JOIN CONNECTION_IDS ci ON ci.id = p.connectionId").fetchall(),
        schema={"connection_id": pl.Int64, "launch": pl.Int64, "chain": pl.Int64}, orient="row")
    chains = pl.DataFrame(con.execute(
        f"SELECT {_int('id')}, {_int('stack')}, {_int('stackDepth')} "
        "FROM PYTORCH_CALLCHAINS").fetchall(),
        schema={"chain": pl.Int64, "frame": pl.Int64, "depth": pl.Int64}, orient="row")
    if api.height == 0:
        return df, ""
    frames = (chains.with_columns(pl.col("frame").replace_strict(strings, default=None,
                                                                 return_dtype=pl.Utf8))
              .drop_nulls("frame").sort("chain", "depth")
              .group_by("chain", maintain_order=True).agg(pl.col("frame").str.join(";")
                                                          .alias("__stack")))
    if (frames["__stack"].str.len_bytes().sum() or 0) > MAX_STACK_TEXT:
        return df, (f"PYTORCH_CALLCHAINS makes more than {MAX_STACK_TEXT >> 20} MiB of call "
                    "stacks (frames repeated: damage): no call stacks read")
    api = (api.unique("connection_id", keep="first")
           .with_columns(pl.col("launch").replace_strict(strings, default=None,
                                                         return_dtype=pl.Utf8).alias("launch_op"))
           .join(frames, on="chain", how="left").select("connection_id", "launch_op", "__stack"))
    out = df.join(api, on="connection_id", how="left", maintain_order="left")
    return out.with_columns(pl.col("__stack").alias("stack")).drop("__stack"), ""


def _facts(con: sqlite3.Connection, tables: set[str], strings: dict) -> dict:
    facts: dict = {}
    if "NPU_INFO" in tables:
        row = con.execute(f"SELECT name FROM NPU_INFO WHERE typeof(name) = 'text' AND "
                          f"length(name) <= {MAX_CELL_TEXT} LIMIT 1").fetchone()
        if row and isinstance(row[0], str) and row[0].strip():
            facts["soc"] = row[0].strip()
    if "AICORE_FREQ" in tables:
        row = con.execute(f"SELECT {_real('freq')} AS f FROM AICORE_FREQ WHERE f > 0 "
                          "AND f < 1e5 GROUP BY f ORDER BY COUNT(*) DESC LIMIT 1").fetchone()
        if row and row[0]:
            facts["freq_mhz"] = float(row[0])
    if "RANK_DEVICE_MAP" in tables:
        row = con.execute("SELECT rankId FROM RANK_DEVICE_MAP LIMIT 1").fetchone()
        if row and isinstance(row[0], int) and row[0] >= 0:
            facts["rank"] = row[0]
    return facts
