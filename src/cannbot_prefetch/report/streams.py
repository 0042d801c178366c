"""The critical path and the use of each stream of one profile, per step.

Step time (`step_trace_time.csv`, else each step's kernel span, else the compute stream's span),
the compute stream's busy and idle time, every other stream's work and tail past the compute
stream, and CMO / prefetch tasks per step. Separate from measure.py (the plan's sites and L2):
these are whole-profile facts that do not depend on the plan.
"""

from __future__ import annotations

import re
from typing import Sequence

import polars as pl

from ..profiling.table import end_ns
from .measurements import Stat, StreamUse


def prefetch_tasks(patterns: Sequence[str]) -> pl.Expr:
    """Rows that are CMO / prefetch tasks (the run's configs/op_classes.yaml `prefetch_tasks`):
    the caller adds it as the `_cmo` column the per-step spans below count."""
    rx = "(?i)" + "|".join(f"(?:{p})" for p in patterns)
    return pl.col("type").fill_null("").str.contains(rx) | pl.col("name").fill_null("").str.contains(rx)


def _end_ns(df: pl.DataFrame) -> pl.Expr:
    return end_ns(pl.col("start_ns"), pl.col("dur_us"))


def choose_compute_stream(df: pl.DataFrame, preferred: Sequence[str]) -> str | None:
    rows = df.filter(pl.col("stream").is_not_null())
    if rows.height == 0:
        return None
    for s in preferred:
        if s is not None:
            return s
    busy = rows.group_by("stream").agg(pl.col("dur_us").sum().alias("busy")).sort("busy", descending=True)
    return busy["stream"][0]


def norm_col(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_")


def step_times_from_trace(step_times: pl.DataFrame | None, steps: Sequence[int | None]
                          ) -> tuple[list[float], str]:
    """Per-step time (us) from step_trace_time.csv: Computing + Communication(Not Overlapped) +
    Free (which is `Stage` when the export fills it), keeping the table's steps."""
    if step_times is None or step_times.height == 0:
        return [], ""
    df = step_times.rename({c: norm_col(c) for c in step_times.columns})
    cols = set(df.columns)

    def num(c: str) -> pl.Expr:
        return pl.col(c).cast(pl.Float64, strict=False).fill_null(0.0)

    parts = [c for c in ("computing", "communication_not_overlapped", "free") if c in cols]
    if "computing" in parts:
        expr = sum((num(c) for c in parts[1:]), num(parts[0]))
        src = "step_trace_time.csv (" + " + ".join(   # column names, as code
            {"computing": "`Computing`", "communication_not_overlapped": "`Communication(Not Overlapped)`",
             "free": "`Free`"}[c] for c in parts) + ")"
    elif "stage" in cols:
        expr, src = num("stage"), "step_trace_time.csv (`Stage`)"
    else:
        return [], ""
    df = df.with_columns(expr.alias("_t"))
    wanted = {s for s in steps if s is not None}
    if "step" in cols and wanted:
        st = df["step"].cast(pl.Int64, strict=False)
        sel = df.filter(st.is_in(list(wanted)))
        if sel.height:
            df = sel
    vals = [v for v in df["_t"].to_list() if v and v > 0]
    return vals, src


def _spans(df: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Per group: first start, last end (ns), busy us, kernels, longest kernel, CMO kernels / us
    (`_cmo`: `prefetch_tasks`, added by the caller)."""
    return (df.with_columns(_end_ns(df).alias("_end"))
            .group_by(by).agg(pl.col("start_ns").min().alias("t0"), pl.col("_end").max().alias("t1"),
                              pl.col("dur_us").sum().alias("busy"), pl.len().alias("n"),
                              pl.col("dur_us").max().alias("longest"),
                              pl.col("_cmo").sum().alias("cmo_n"),
                              pl.col("dur_us").filter(pl.col("_cmo")).sum().alias("cmo_us")))


def critical_path(df: pl.DataFrame, steps: list[int | None], compute: str | None,
                   step_times: pl.DataFrame | None) -> tuple[Stat | None, str]:
    vals, src = step_times_from_trace(step_times, steps)
    if vals:
        return Stat.of(vals, "step"), src
    if steps != [None]:
        sp = _spans(df, ["_sk"]).sort("_sk")
        spans = [(t1 - t0) / 1000.0 for t0, t1 in sp.select("t0", "t1").iter_rows()]
        return Stat.of(spans, "step"), "kernel spans per step (first kernel start to last kernel end)"
    cdf = df.filter(pl.col("stream") == compute) if compute is not None else df
    if cdf.height == 0:
        return None, ""
    span = (cdf.select(_end_ns(cdf).max()).item() - cdf["start_ns"].min()) / 1000.0
    return Stat.of([span], "profile"), "span of the compute stream (the export has no steps)"


def stream_uses(df: pl.DataFrame, steps: list[int | None], compute: str | None
                 ) -> tuple[Stat | None, Stat | None, tuple[StreamUse, ...]]:
    if compute is None:
        return None, None, ()
    sp = _spans(df.filter(pl.col("stream").is_not_null()), ["_sk", "stream"])
    comp = {r["_sk"]: r for r in sp.filter(pl.col("stream") == compute).iter_rows(named=True)}
    busy = [r["busy"] for _, r in sorted(comp.items())]
    idle = [max(0.0, (r["t1"] - r["t0"]) / 1000.0 - r["busy"]) for _, r in sorted(comp.items())]
    per: dict[str, dict[str, float]] = {}
    for r in sp.filter(pl.col("stream") != compute).iter_rows(named=True):
        d = per.setdefault(r["stream"], {"n": 0, "busy": 0.0, "max": 0.0, "cmo_n": 0, "cmo": 0.0, "tail": 0.0})
        d["n"] += r["n"]
        d["busy"] += r["busy"]
        d["max"] = max(d["max"], r["longest"] or 0.0)
        d["cmo_n"] += r["cmo_n"]
        d["cmo"] += r["cmo_us"] or 0.0
        c = comp.get(r["_sk"])
        if c is not None:
            d["tail"] += max(0.0, (r["t1"] - c["t1"]) / 1000.0)
    n = max(1, len(comp))
    uses = tuple(StreamUse(stream, int(d["n"]), d["busy"] / n, d["max"], int(d["cmo_n"]), d["cmo"] / n,
                           d["tail"] / n) for stream, d in sorted(per.items()))
    unit = "step" if steps != [None] else "profile"
    return Stat.of(busy, unit), Stat.of(idle, unit), uses


def cmo_per_step(df: pl.DataFrame, steps: list[int | None]) -> tuple[Stat | None, Stat | None]:
    """CMO / prefetch tasks per step on every stream: how many, and their summed duration."""
    sp = _spans(df, ["_sk"]).sort("_sk")
    if sp.height == 0 or not sp["cmo_n"].sum():
        return None, None
    unit = "step" if steps != [None] else "profile"
    return (Stat.of([float(x) for x in sp["cmo_n"].to_list()], unit),
            Stat.of([float(x or 0.0) for x in sp["cmo_us"].to_list()], unit))
