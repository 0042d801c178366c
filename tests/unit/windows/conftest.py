"""Hand-built kernel tables (clearly labelled: HAND-BUILT, not measured) for the windows stage."""

from __future__ import annotations

import polars as pl
import pytest

from cannbot_prefetch.profiling.table import BASE_SCHEMA, KernelTable


def build_table(ops, *, step=1, stream="2", t0_ns=1_000_000, gap_us=0.0):
    """HAND-BUILT timeline. `ops`: dicts with type, dur (us), optional gap (us idle before),
    shapes, dtypes, sig, stream, core, name, stack, start (us, absolute; skips the running clock).
    Kernels on `stream` run back to back (plus gaps); others need an explicit start."""
    rows, clock = [], t0_ns
    for i, op in enumerate(ops):
        if "start" in op:
            start = t0_ns + int(op["start"] * 1000)
        else:
            clock += int((op.get("gap", gap_us)) * 1000)
            start = clock
            clock += int(op["dur"] * 1000)
        rows.append({
            "row": i + 2, "source": "hand-built", "step": op.get("step", step), "device": 0,
            "stream": op.get("stream", stream), "task_id": i, "name": op.get("name", op["type"]),
            "type": op["type"], "core": op.get("core", "AI_CORE"), "start_ns": start,
            "dur_us": float(op["dur"]), "wait_us": 0.0, "block_dim": 20,
            "input_shapes": op.get("shapes"), "input_dtypes": op.get("dtypes", "BF16;BF16"),
            "input_formats": None, "output_shapes": op.get("out"), "output_dtypes": None,
            "output_formats": None, "stack": op.get("stack"), "sig_id": op.get("sig"),
        })
    schema = dict(BASE_SCHEMA)
    schema["sig_id"] = pl.Int64
    return KernelTable(pl.DataFrame(rows, schema=schema))


@pytest.fixture
def table():
    return build_table
