"""Measure a plan's sites in one profile, as frozen values the report compares.

For each site of a plan (report/sites.py, on analyze's own timeline and attribution): the
kernels of its call site, the window ops right before each of them on the same stream, and
per-step statistics of both (mean, stdev, n; the table's steps are used as given, so the
warm-up step that `load_profile` drops stays dropped). For the profile as a whole: the critical
path (step time from `step_trace_time.csv`, else the span of each step's kernels, else the span of
the compute stream), the use of every other stream (CMO / prefetch tasks, and how far each
stream runs past the compute stream: its tail), and L2 hit rates when the profile has them
(`l2_cache.csv` or L2Cache counters).

Only this module touches the DataFrame; the report receives `ProfileMeasure` values.

    m = measure_profile(profile, plan, label="baseline", step_times=read_step_times(root))
    m.sites[0].target.mean      # us per target kernel, averaged per step
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import polars as pl

from ..profiling.table import Profile, end_ns
from ..settings import op_classes
from .sites import measure_site, signature_key  # noqa: F401  (signature_key: report's key)

if TYPE_CHECKING:  # pragma: no cover
    from ..plan import Plan



def _prefetch_tasks() -> pl.Expr:
    """Rows that are CMO / prefetch tasks (configs/op_classes.yaml `prefetch_tasks`)."""
    rx = "(?i)" + "|".join(f"(?:{p})" for p in (op_classes() or {}).get("prefetch_tasks") or [])
    return pl.col("type").fill_null("").str.contains(rx) | pl.col("name").fill_null("").str.contains(rx)


# ---------------------------------------------------------------- values

@dataclass(frozen=True)
class Stat:
    """Summary of one quantity: `n` samples (steps, or kernel instances when there are no steps)."""

    mean: float
    stdev: float
    n: int
    min: float
    max: float
    unit: str = "step"      # step | instance | profile

    @staticmethod
    def of(values: Iterable[float], unit: str = "step") -> "Stat | None":
        vals = [float(v) for v in values if v is not None and not math.isnan(float(v))]
        if not vals:
            return None
        mean = sum(vals) / len(vals)
        var = sum((v - mean) ** 2 for v in vals) / (len(vals) - 1) if len(vals) > 1 else 0.0
        return Stat(mean, math.sqrt(var), len(vals), min(vals), max(vals), unit)

    def to_json(self) -> dict[str, Any]:
        return {"mean": self.mean, "stdev": self.stdev, "n": self.n, "min": self.min,
                "max": self.max, "unit": self.unit}


@dataclass(frozen=True)
class SiteMeasure:
    """One plan site as found (or not) in one profile."""

    site_id: str
    found: bool
    matched_by: str = ""                 # signature | shapes (type differs) | ""
    kernel_type: str = ""
    instances: int = 0                   # target kernels matched (all kept steps)
    per_step: float = 0.0                # target kernels per step
    stream: str | None = None
    target: Stat | None = None           # us per target kernel (per-step mean of instances)
    target_total: Stat | None = None     # us of all target kernels in a step
    window: Stat | None = None           # us of the window ops before one target kernel
    window_ops: tuple[str, ...] = ()     # window op types that were found before the target
    window_gap: Stat | None = None       # us from the first window op's start to the target start
    wait: Stat | None = None             # the target's wait time (us), when the export has it
    l2_hit_rate: float | None = None     # mean over target kernels (0..1)
    l2_source: str = ""
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        def j(s: Stat | None):
            return s.to_json() if s else None
        return {"site_id": self.site_id, "found": self.found, "matched_by": self.matched_by,
                "kernel_type": self.kernel_type, "instances": self.instances,
                "per_step": self.per_step, "stream": self.stream, "target_us": j(self.target),
                "target_total_us": j(self.target_total), "window_us": j(self.window),
                "window_ops": list(self.window_ops), "window_gap_us": j(self.window_gap),
                "wait_us": j(self.wait), "l2_hit_rate": self.l2_hit_rate,
                "l2_source": self.l2_source, "note": self.note}


@dataclass(frozen=True)
class StreamUse:
    """Work on one stream other than the compute stream (per step means)."""

    stream: str
    kernels: int                 # kernels in all kept steps
    busy_us: float               # mean per step
    max_us: float                # longest single kernel
    cmo_kernels: int             # CMO / prefetch tasks among them
    cmo_us: float                # mean per step
    tail_us: float               # mean per step: how far this stream ends after the compute stream

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ProfileMeasure:
    label: str                           # baseline | optimized
    path: str
    steps: tuple[int, ...]
    warmup_excluded: tuple[int, ...]
    step_time: Stat | None               # the critical path, us per step
    step_time_source: str
    compute_stream: str | None
    compute_busy: Stat | None            # us of kernels on the compute stream per step
    compute_idle: Stat | None            # us of gaps on the compute stream per step (waiting)
    streams: tuple[StreamUse, ...]
    sites: tuple[SiteMeasure, ...]
    l2_hit_rate: float | None            # whole profile, when known
    l2_source: str
    soc: str | None
    cube_cores: int | None
    freq_mhz: float | None
    signatures: frozenset[str]           # MatMul-family "type|shapes|dtypes" seen (model fingerprint)
    rows: int
    notes: tuple[str, ...] = field(default_factory=tuple)
    cmo_tasks: Stat | None = None        # CMO / prefetch tasks per step, any stream
    cmo_us: Stat | None = None           # their summed duration per step (us)

    def site(self, site_id: str) -> SiteMeasure | None:
        return next((s for s in self.sites if s.site_id == site_id), None)

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "path": self.path, "steps": list(self.steps),
                "warmup_excluded": list(self.warmup_excluded),
                "step_time_us": self.step_time.to_json() if self.step_time else None,
                "step_time_source": self.step_time_source,
                "compute_stream": self.compute_stream,
                "compute_busy_us": self.compute_busy.to_json() if self.compute_busy else None,
                "compute_idle_us": self.compute_idle.to_json() if self.compute_idle else None,
                "streams": [s.to_json() for s in self.streams],
                "sites": [s.to_json() for s in self.sites],
                "l2_hit_rate": self.l2_hit_rate, "l2_source": self.l2_source,
                "soc": self.soc, "cube_cores": self.cube_cores, "freq_mhz": self.freq_mhz,
                "rows": self.rows, "notes": list(self.notes),
                "cmo_tasks": self.cmo_tasks.to_json() if self.cmo_tasks else None,
                "cmo_us": self.cmo_us.to_json() if self.cmo_us else None}


# ---------------------------------------------------------------- helpers

def shape_overlap(a: frozenset[str], b: frozenset[str]) -> float | None:
    """Share of MatMul signatures two profiles have in common (Jaccard); None when either has none."""
    if not a or not b:
        return None
    return len(a & b) / len(a | b)


def _steps_of(df: pl.DataFrame) -> list[int | None]:
    if df.height == 0 or df["step"].null_count() == df.height:
        return [None]
    return sorted(int(s) for s in df["step"].drop_nulls().unique().to_list())


def _end_ns(df: pl.DataFrame) -> pl.Expr:
    return end_ns(pl.col("start_ns"), pl.col("dur_us"))


def _choose_compute_stream(df: pl.DataFrame, preferred: Sequence[str]) -> str | None:
    rows = df.filter(pl.col("stream").is_not_null())
    if rows.height == 0:
        return None
    for s in preferred:
        if s is not None:
            return s
    busy = rows.group_by("stream").agg(pl.col("dur_us").sum().alias("busy")).sort("busy", descending=True)
    return busy["stream"][0]


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


# ---------------------------------------------------------------- critical path and streams

def _norm_col(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_")


def step_times_from_trace(step_times: pl.DataFrame | None, steps: Sequence[int | None]
                          ) -> tuple[list[float], str]:
    """Per-step time (us) from step_trace_time.csv: Computing + Communication(Not Overlapped) +
    Free (which is `Stage` when the export fills it), keeping the table's steps."""
    if step_times is None or step_times.height == 0:
        return [], ""
    df = step_times.rename({c: _norm_col(c) for c in step_times.columns})
    cols = set(df.columns)

    def num(c: str) -> pl.Expr:
        return pl.col(c).cast(pl.Float64, strict=False).fill_null(0.0)

    parts = [c for c in ("computing", "communication_not_overlapped", "free") if c in cols]
    if "computing" in parts:
        expr = sum((num(c) for c in parts[1:]), num(parts[0]))
        src = "step_trace_time.csv (" + " + ".join(
            {"computing": "Computing", "communication_not_overlapped": "Communication(Not Overlapped)",
             "free": "Free"}[c] for c in parts) + ")"
    elif "stage" in cols:
        expr, src = num("stage"), "step_trace_time.csv (Stage)"
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
    """Per group: first start, last end (ns), busy us, kernels, longest kernel, CMO kernels / us."""
    cmo = _prefetch_tasks()
    return (df.with_columns(_end_ns(df).alias("_end"), cmo.alias("_cmo"))
            .group_by(by).agg(pl.col("start_ns").min().alias("t0"), pl.col("_end").max().alias("t1"),
                              pl.col("dur_us").sum().alias("busy"), pl.len().alias("n"),
                              pl.col("dur_us").max().alias("longest"),
                              pl.col("_cmo").sum().alias("cmo_n"),
                              pl.col("dur_us").filter(pl.col("_cmo")).sum().alias("cmo_us")))


def _critical_path(df: pl.DataFrame, steps: list[int | None], compute: str | None,
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


def _stream_uses(df: pl.DataFrame, steps: list[int | None], compute: str | None
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


def _cmo_per_step(df: pl.DataFrame, steps: list[int | None]) -> tuple[Stat | None, Stat | None]:
    """CMO / prefetch tasks per step on every stream: how many, and their summed duration."""
    sp = _spans(df, ["_sk"]).sort("_sk")
    if sp.height == 0 or not sp["cmo_n"].sum():
        return None, None
    unit = "step" if steps != [None] else "profile"
    return (Stat.of([float(x) for x in sp["cmo_n"].to_list()], unit),
            Stat.of([float(x or 0.0) for x in sp["cmo_us"].to_list()], unit))


# ---------------------------------------------------------------- entry point

def _l2_table(l2: pl.DataFrame | None) -> pl.DataFrame | None:
    if l2 is None or l2.height == 0:
        return None
    df = l2.rename({c: _norm_col(c) for c in l2.columns})
    if "op_name" in df.columns and "name" not in df.columns:
        df = df.rename({"op_name": "name"})
    if "hit_rate" not in df.columns or "name" not in df.columns:
        return None
    return df.with_columns(pl.col("hit_rate").cast(pl.Float64, strict=False))


def measure_profile(profile: Profile, plan: "Plan", label: str, *, roofline=None,
                    step_times: pl.DataFrame | None = None, l2_cache: pl.DataFrame | None = None,
                    lookback: int = 3) -> ProfileMeasure:
    """Every plan site measured in `profile` (see the module docstring). `roofline`: the
    profile's `roofline.classify()` (the report has it for its chart); classified here if None."""
    from ..windows import timeline

    if roofline is None:
        from ..hardware import resolve
        from ..roofline import classify
        roofline = classify(profile.table, resolve(None, profile.info))
    df = (roofline.table.df.with_row_index("_ix").sort("start_ns", maintain_order=True)
          .with_columns(pl.col("step").fill_null(-1).alias("_sk")))
    per, _ = timeline(df, roofline.signatures,
                      hbm_bps=getattr(roofline.hardware, "hbm_bw_bytes_per_s", None))
    info = profile.info
    steps = _steps_of(df)
    l2 = _l2_table(l2_cache)
    hits_by_site = [measure_site(site, per, roofline.signatures, df, steps, lookback, l2,
                                 _l2_of_rows) for site in plan.sites]
    preferred = [m.stream for m in hits_by_site if m.found and m.stream is not None]
    compute = _choose_compute_stream(df, preferred)
    step_stat, step_src = _critical_path(df, steps, compute, step_times)
    busy, idle, uses = _stream_uses(df, steps, compute)
    cmo_n, cmo_t = _cmo_per_step(df, steps)
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
