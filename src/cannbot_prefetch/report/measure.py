"""Measure a plan's sites in one profile, as frozen values the report compares.

For each site of a plan (report/sites.py, on analyze's own timeline and attribution): the
kernels of its call site, the window ops right before each of them on the same stream, and
per-step statistics of both (mean, stdev, n; the table's steps are used as given, so the
warm-up step that `load_profile` drops stays dropped). For the profile as a whole: the critical
path (step time from `step_trace_time.csv`, else the span of each step's kernels, else the span of
the compute stream), the use of every other stream (CMO / prefetch tasks, and how far each
stream runs past the compute stream: its tail; both from streams.py), and L2 hit rates when the
profile has them (`l2_cache.csv` or L2Cache counters).

Only this module (with streams.py and sites.py) touches the DataFrame; the report receives
`ProfileMeasure` values (measurements.py).

    m = measure_profile(profile, plan, label="baseline", step_times=read_step_times(root))
    m.sites[0].target.mean      # us per target kernel, averaged per step
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from ..policy import Policy
from ..profiling.table import Profile
from .sites import measure_site, signature_key
from .streams import (choose_compute_stream, cmo_per_step, critical_path, norm_col,
                      prefetch_tasks, stream_uses)
from .measurements import ProfileMeasure

if TYPE_CHECKING:  # pragma: no cover
    from ..plan import Plan


def _steps_of(df: pl.DataFrame) -> list[int | None]:
    if df.height == 0 or df["step"].null_count() == df.height:
        return [None]
    return sorted(int(s) for s in df["step"].drop_nulls().unique().to_list())


# ---------------------------------------------------------------- L2

def _l2_of_rows(rows: pl.DataFrame, l2: pl.DataFrame | None) -> tuple[float | None, str]:
    hit_cols = [c for c in rows.columns if c.endswith("_cache_hit")]
    miss_cols = [c for c in rows.columns if c.endswith("_cache_miss_allocate")]
    if hit_cols and miss_cols:
        sub = rows.select(pl.sum_horizontal([pl.col(c).cast(pl.Float64, strict=False) for c in hit_cols]).alias("h"),
                          pl.sum_horizontal([pl.col(c).cast(pl.Float64, strict=False) for c in miss_cols]).alias("m"))
        h, m = sub["h"].sum(), sub["m"].sum()
        if h is not None and m is not None and h + m > 0:
            return h / (h + m), "L2Cache counters (*_cache_hit / (hit + miss_allocate))"
    rate_cols = [c for c in rows.columns if c.endswith("hit_rate") and "icache" not in c]
    for c in rate_cols:
        v = rows[c].cast(pl.Float64, strict=False).drop_nulls()
        if v.len():
            return float(v.mean()), f"counter {c}"
    if l2 is not None and l2.height and rows.height:
        if {"stream", "task_id"} <= set(l2.columns):
            keys = rows.select(pl.col("stream").cast(pl.Utf8), pl.col("task_id").cast(pl.Int64)).unique()
            sub = l2.with_columns(pl.col("stream").cast(pl.Utf8), pl.col("task_id").cast(pl.Int64, strict=False)
                                  ).join(keys, on=["stream", "task_id"], how="inner")
            v = sub["hit_rate"].drop_nulls()
            if v.len():
                return float(v.mean()), "l2_cache.csv (Hit Rate, matched by stream and task id)"
        names = set(rows["name"].drop_nulls().to_list())
        sub = l2.filter(pl.col("name").is_in(list(names)))
        v = sub["hit_rate"].drop_nulls()
        if v.len():
            return float(v.mean()), "l2_cache.csv (Hit Rate, matched by op name)"
    return None, ""


def _l2_table(l2: pl.DataFrame | None) -> pl.DataFrame | None:
    if l2 is None or l2.height == 0:
        return None
    df = l2.rename({c: norm_col(c) for c in l2.columns})
    if "op_name" in df.columns and "name" not in df.columns:
        df = df.rename({"op_name": "name"})
    if "hit_rate" not in df.columns or "name" not in df.columns:
        return None
    return df.with_columns(pl.col("hit_rate").cast(pl.Float64, strict=False))


# ---------------------------------------------------------------- entry point

def measure_profile(profile: Profile, plan: "Plan", label: str, *, roofline=None,
                    step_times: pl.DataFrame | None = None, l2_cache: pl.DataFrame | None = None,
                    lookback: int = 3, policy: Policy) -> ProfileMeasure:
    """Every plan site measured in `profile` (see the module docstring). `roofline`: the
    profile's `roofline.classify()` (the report has it for its chart); classified here if None.
    `policy`: the report's."""
    from ..windows import default_rules, timeline

    if roofline is None:
        from ..hardware import resolve
        from ..roofline import classify
        roofline = classify(profile.table, resolve(None, profile.info, policy=policy),
                            policy=policy)
    df = (roofline.table.df.with_row_index("_ix").sort("start_ns", maintain_order=True)
          .with_columns(pl.col("step").fill_null(-1).alias("_sk"),
                        prefetch_tasks(policy.op_classes.get("prefetch_tasks") or ()).alias("_cmo")))
    rules = default_rules(policy)
    per, _ = timeline(df, roofline.signatures, rules,
                      hbm_bps=getattr(roofline.hardware, "hbm_bw_bytes_per_s", None))
    info = profile.info
    steps = _steps_of(df)
    l2 = _l2_table(l2_cache)
    hits_by_site = [measure_site(site, per, roofline.signatures, df, steps, lookback, l2,
                                 _l2_of_rows, rules.frames) for site in plan.sites]
    preferred = [m.stream for m in hits_by_site if m.found and m.stream is not None]
    compute = choose_compute_stream(df, preferred)
    step_stat, step_src = critical_path(df, steps, compute, step_times)
    busy, idle, uses = stream_uses(df, steps, compute)
    cmo_n, cmo_t = cmo_per_step(df, steps)
    l2_rate, l2_src = (None, "")
    if l2 is not None:
        v = l2["hit_rate"].drop_nulls()
        if v.len():
            l2_rate, l2_src = float(v.mean()), "l2_cache.csv (Hit Rate, all ops)"
    if l2_rate is None:
        l2_rate, l2_src = _l2_of_rows(df, None)
    sigs = frozenset(signature_key(s.type, s.input_shapes, s.dtypes)
                     for s in roofline.signatures if s.input_shapes)
    notes = list(info.notes)
    if steps == [None]:
        notes.append("the export has no step ids: statistics are over kernel instances")
    return ProfileMeasure(
        label=label, path=info.path, steps=tuple(s for s in steps if s is not None),
        warmup_excluded=tuple(info.warmup_excluded), step_time=step_stat,
        step_time_source=step_src, compute_stream=compute, compute_busy=busy, compute_idle=idle,
        streams=uses, sites=tuple(hits_by_site), l2_hit_rate=l2_rate, l2_source=l2_src,
        soc=info.soc, cube_cores=info.cube_cores, freq_mhz=info.freq_mhz, signatures=sigs,
        rows=df.height, notes=tuple(notes), cmo_tasks=cmo_n, cmo_us=cmo_t)
