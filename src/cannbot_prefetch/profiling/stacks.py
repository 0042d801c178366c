"""Call stacks for kernel_details rows, borrowed from the trace_view.json beside them.

kernel_details has no stacks; the trace of the same export has them per kernel (via the
async_npu flows), and both write the same start time, so rows match exactly on start_ns.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ..errors import InputError


def attach_trace_stacks(df: pl.DataFrame, trace_path: Path,
                        max_bytes: int) -> tuple[pl.DataFrame, int]:
    """Fill `stack` (and add `launch_op`) where a trace kernel starts at the same ns."""
    from .trace_reader import read_trace_rows
    try:
        trace = read_trace_rows(trace_path, trace_path.name, max_bytes)
    except InputError:
        return df, 0
    if trace.meta.get("flavour") != "trace_view":
        return df, 0
    found = (trace.df.filter(pl.col("stack").is_not_null())
             .select("start_ns", pl.col("stack").alias("__stack"), pl.col("launch_op").alias("__op"))
             .unique("start_ns", keep="first"))
    if found.height == 0:
        return df, 0
    out = df.join(found, on="start_ns", how="left", maintain_order="left")
    attached = int(out["__stack"].is_not_null().sum())
    out = out.with_columns(pl.coalesce("stack", "__stack").alias("stack"),
                           pl.col("__op").alias("launch_op")).drop("__stack", "__op")
    return out, attached
