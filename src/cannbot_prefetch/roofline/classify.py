"""Group MatMul-family kernels by signature and give each a roofline verdict (CONTRACTS.md).

A signature is type + input shapes + input dtypes + input formats. For each: count, total and mean
time, share of step time, FLOPs / bytes (cost.py), arithmetic intensity, ridge, t_compute,
t_memory, the analytic verdict, and the measured verdict from PipeUtilization counters when the
profile has them. Disagreements and implausible shapes become a `note`, never an error.

    roof = classify(profile.table, hw)
    for sig in select_top(roof, 10):
        ...
    roof.table.df["sig_id"]   # index into roof.signatures for MatMul-family rows, else null
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import polars as pl

from ..hardware import HardwareProfile
from ..i18n import said
from ..profiling.table import MAIN_MEMORY_READ_KB, KernelTable, end_ns
from ..policy import Policy
from .cost import OpCost, cost_or_reason
from .families import FamilyRules, rules_of
from .verdict import Verdict, analytic_verdict, gemm_verdict, hbm_share, verdict_why


FLAG_INCONSISTENT = "inconsistent_shapes"   # measured faster than the compute roof
FLAG_COMMUNICATION = "contains_communication"

# CONTRACTS.md analyze JSON `signatures[...]` keys, in order, then what decided the measured
# verdict (verdict.gemm_verdict) and the achieved HBM share it read (docs/roofline.md).
JSON_KEYS = ("type", "input_shapes", "dtypes", "formats", "count", "total_us", "mean_us", "share",
             "flops", "bytes", "weight_bytes", "ai", "ridge", "t_compute_us", "t_memory_us",
             "verdict", "measured_verdict", "note", "evidence", "evidence_why", "hbm_share",
             "bytes_basis")


@dataclass(frozen=True)
class SignatureCost:
    sig_id: int
    type: str
    family: str
    input_shapes: str | None
    dtypes: str | None
    formats: str | None
    count: int
    total_us: float
    mean_us: float
    share: float | None             # of total step time (Roofline.share_basis says which)
    flops: float | None
    bytes: int | None
    weight_bytes: int | None
    ai: float | None
    ridge: float | None
    t_compute_us: float | None
    t_memory_us: float | None
    verdict: str                    # analytic (Verdict.*)
    measured_verdict: str | None    # from counters (verdict.gemm_verdict), None without them
    note: str
    m: int | None = None
    n: int | None = None
    k: int | None = None
    batch: int | None = None
    weight_shape: tuple[int, ...] | None = None
    compute_dtype: str | None = None
    peak_tflops: float | None = None
    mean_mac_ratio: float | None = None
    mean_mte2_ratio: float | None = None
    experts: int | None = None
    contains_communication: bool = False
    output_shapes: str | None = None
    name: str | None = None         # first kernel name seen
    flags: tuple[str, ...] = ()
    samples: tuple[str, ...] = ()   # "source:row" of the first rows
    evidence: str | None = None     # what decided the measured verdict (verdict.gemm_verdict)
    evidence_why: str | None = None
    hbm_share: float | None = None  # achieved HBM bandwidth / the part's rate (mean time)
    bytes_basis: str | None = None  # "measured" (MemoryAccess counters) | "analytic"
    measured_read_bytes: float | None = None   # mean bytes read from main memory per call
    other_input_bytes: int = 0      # the inputs other than the weight, as stored

    @property
    def final_verdict(self) -> str:
        """Measured when counters exist, else analytic."""
        return self.measured_verdict or self.verdict

    def to_json(self) -> dict[str, Any]:
        """CONTRACTS.md's signature keys, then the evidence keys."""
        return {k: getattr(self, k) for k in JSON_KEYS}

    def to_dict(self) -> dict[str, Any]:
        """Every field (for debugging and later stages)."""
        d = asdict(self)
        d["weight_shape"] = list(self.weight_shape) if self.weight_shape else None
        d["flags"], d["samples"] = list(self.flags), list(self.samples)
        return d


@dataclass(frozen=True)
class Roofline:
    signatures: tuple[SignatureCost, ...]   # sorted by total time, descending; sig_id = index
    table: KernelTable                       # input table + Int64 `sig_id`
    hardware: HardwareProfile
    step_time_us: float | None
    share_basis: str                         # "steps" | "timeline" | "none"
    notes: tuple[str, ...] = ()


def _signature(sig_id: int, row: dict[str, Any], hw: HardwareProfile, pol: dict[str, Any],
               rules: FamilyRules) -> SignatureCost:
    family = row["__family"]
    cost, reason = cost_or_reason(family, row["__type"], row["input_shapes"], row["input_dtypes"],
                                  row["input_formats"], row["output_shapes"], row["output_dtypes"],
                                  row["output_formats"], rules=rules)
    mean_us = float(row["mean_us"] or 0.0)   # 0.0 when no row has a duration
    mac, mte2 = row.get("mac"), row.get("mte2")
    notes: list[str] = []
    flags: list[str] = []
    fields: dict[str, Any] = {}
    verdict = Verdict.UNKNOWN
    if cost is None:
        notes.append(f"no roofline: {reason}")
    else:
        fields, verdict = _costed(cost, hw, mean_us, pol, notes, flags)
    read = row.get("read_bytes")
    basis = "measured" if read else "analytic"
    moved = read if read else (cost.bytes if cost else None)
    # Shapes measured faster than their compute roof were edited: their intensity and analytic
    # bytes are no evidence (the counters and measured bytes still are).
    trusted = FLAG_INCONSISTENT not in flags
    share = hbm_share(moved, mean_us, hw.hbm_bw_bytes_per_s) if trusted or read else None
    measured, evidence, m_why = gemm_verdict(mac, mte2, ai=fields.get("ai") if trusted else None,
                                             ridge=fields.get("ridge"), analytic=verdict,
                                             share=share, basis=basis, pol=pol)
    if measured is not None and verdict != Verdict.UNKNOWN and measured != verdict:
        a_why = verdict_why(verdict, ai=fields.get("ai"), ridge=fields.get("ridge"),
                     roof_us=max(fields["t_compute_us"], fields["t_memory_us"]), mean_us=mean_us,
                     mac=mac, mte2=mte2, pol=pol, measured=False)
        notes.insert(0, said("said.verdicts_disagree", measured=measured, m_why=m_why,
                             verdict=verdict, a_why=a_why))
    if cost is not None and cost.contains_communication:
        flags.append(FLAG_COMMUNICATION)
    samples = tuple(s for s in (row.get("samples") or []) if s)
    return SignatureCost(
        sig_id=sig_id, type=row["__type"], family=family, input_shapes=row["input_shapes"],
        dtypes=row["input_dtypes"], formats=row["input_formats"], count=int(row["count"]),
        total_us=float(row["total_us"] or 0.0), mean_us=mean_us, share=row.get("share"),
        flops=cost.flops if cost else None, bytes=cost.bytes if cost else None,
        weight_bytes=cost.weight_bytes if cost else None, ai=fields.get("ai"),
        ridge=fields.get("ridge"), t_compute_us=fields.get("t_compute_us"),
        t_memory_us=fields.get("t_memory_us"), verdict=verdict, measured_verdict=measured,
        note="; ".join(notes), m=cost.m if cost else None, n=cost.n if cost else None,
        k=cost.k if cost else None, batch=cost.batch if cost else None,
        weight_shape=cost.weight_shape if cost else None,
        compute_dtype=cost.compute_dtype if cost else None, peak_tflops=fields.get("peak_tflops"),
        mean_mac_ratio=mac, mean_mte2_ratio=mte2, experts=cost.experts if cost else None,
        contains_communication=bool(cost and cost.contains_communication),
        output_shapes=row["output_shapes"], name=row.get("name"), flags=tuple(flags), samples=samples,
        evidence=evidence if measured is not None else None,
        evidence_why=m_why if measured is not None else None, hbm_share=share,
        bytes_basis=basis if moved else None, measured_read_bytes=read,
        other_input_bytes=cost.other_input_bytes if cost else 0)


def _costed(cost: OpCost, hw: HardwareProfile, mean_us: float | None, pol: dict[str, Any],
            notes: list[str], flags: list[str]) -> tuple[dict[str, Any], str]:
    key, stand_in = hw.peak_basis(cost.compute_dtype)
    peak = hw.peaks_tflops[key]
    t_c = cost.flops / (peak * 1e12) * 1e6
    t_m = cost.bytes / hw.hbm_bw_bytes_per_s * 1e6
    ridge = peak * 1e12 / hw.hbm_bw_bytes_per_s
    ai = cost.ai
    verdict = analytic_verdict(ai, ridge, t_c, t_m, mean_us, pol)
    if mean_us and t_c > 0 and mean_us < pol["min_duration_vs_compute_roof"] * t_c:
        flags.append(FLAG_INCONSISTENT)
        notes.append(f"measured {mean_us:.4g} µs is faster than the compute roof {t_c:.4g} µs "
                     f"(x{t_c / mean_us:.1f}): the shapes are inconsistent, the analytic verdict "
                     "is unreliable")
    if stand_in:
        notes.append(stand_in)
    if "ASSUMPTION" in hw.sources.get(f"peaks_tflops.{key}", "").upper():
        notes.append(f"the {key} peak {peak:g} TFLOPS of {hw.name} is an assumption "
                     "(--peak-tflops to set it)")
    notes.extend(cost.notes)
    return {"ai": ai, "ridge": ridge, "t_compute_us": t_c, "t_memory_us": t_m,
            "peak_tflops": peak}, verdict


# --- the table pass --------------------------------------------------------------------------------
_KEYS = ("__type", "input_shapes", "input_dtypes", "input_formats")


def _matmul_mask(df: pl.DataFrame, rules: FamilyRules) -> tuple[pl.Expr, pl.Expr, dict]:
    """(which rows are MatMul-family, their `__type`, as expressions; the family of each
    type). Types and names are judged by the rules once per distinct value, never per row;
    the expressions then pick the rows inside the grouping query, so no filtered copy of the
    table is built."""
    name_map: dict[str, str | None] = {}
    if df["type"].null_count():
        names = df.select("type", "name").filter(pl.col("type").is_null())["name"]
        name_map = {n: rules.type_from_name(n) for n in names.drop_nulls().unique().to_list()}
    named = {n: t for n, t in name_map.items() if t is not None}
    types = set(df["type"].drop_nulls().unique().to_list()) | set(named.values())
    fam_map = {t: rules.family_of_type(t) for t in types}
    mm_types = [t for t, f in fam_map.items() if f is not None]
    mm_names = [n for n, t in named.items() if fam_map.get(t) is not None]
    mask = pl.col("type").is_in(mm_types).fill_null(False)
    if mm_names:
        mask = mask | (pl.col("type").is_null() & pl.col("name").is_in(mm_names).fill_null(False))
    # Excluded names (a helper kernel's suffix), judged once per distinct name of the rows kept.
    if rules.exclude_suffixes:
        kept = df.lazy().select("type", "name").filter(mask).select(pl.col("name").unique())
        excluded = [n for n in kept.collect()["name"].drop_nulls().to_list()
                    if rules.excluded_name(n)]
        if excluded:
            mask = mask & ~pl.col("name").is_in(excluded).fill_null(False)
    op_type = pl.coalesce(pl.col("type"), pl.col("name").replace_strict(
        named, default=None, return_dtype=pl.Utf8) if named else pl.lit(None, dtype=pl.Utf8))
    return mask, op_type.alias("__type"), fam_map


def _counter(df: pl.DataFrame, col: str) -> pl.Expr:
    if col in df.columns:
        return pl.col(col).cast(pl.Float64, strict=False).mean()
    return pl.lit(None, dtype=pl.Float64)


def _read_bytes(df: pl.DataFrame) -> pl.Expr:
    """Mean bytes a call read from main memory (MemoryAccess `*_read_main_memory_datas(KB)`,
    cube + vector side), null without those counters or where no row has a value."""
    cols = [c for c in MAIN_MEMORY_READ_KB if c in df.columns]
    if not cols:
        return pl.lit(None, dtype=pl.Float64)
    kb = pl.sum_horizontal(pl.col(c).cast(pl.Float64, strict=False) for c in cols)
    return (kb * 1024.0).mean()


def _step_spans(df: pl.DataFrame) -> pl.LazyFrame:
    """Per step with a start time: the span from its first start to its last end, summed
    (`span`, ns) over `steps`, the number of such steps (0: none has a Step Id)."""
    end = end_ns(pl.col("start_ns"), pl.col("dur_us").fill_null(0.0))
    return (df.lazy().select("start_ns", "dur_us", "step")
            .filter(pl.col("start_ns").is_not_null() & pl.col("step").is_not_null())
            .group_by("step").agg((end.max() - pl.col("start_ns").min()).alias("span"))
            .select(pl.col("span").sum(), pl.len().alias("steps")))


def _step_time(df: pl.DataFrame, spans: pl.DataFrame) -> tuple[float | None, str, str]:
    """(total step time in us, basis, note), from `_step_spans`' answer."""
    steps = int(spans["steps"][0])
    if steps:
        total = float(spans["span"][0]) / 1000.0
        return total, "steps", said("said.share_steps", steps=steps, total=total)
    end = end_ns(pl.col("start_ns"), pl.col("dur_us").fill_null(0.0))
    line = df.lazy().select((end.max() - pl.col("start_ns").min()).alias("span")).collect()
    if line["span"][0] is None:
        return None, "none", "share not computed: no start times"
    total = float(line["span"][0]) / 1000.0
    return total, "timeline", (f"share = signature time / span of the whole timeline ({total:.6g} µs): "
                               "the profile has no Step Id")


def classify(table: KernelTable, hw: HardwareProfile, *, policy: Policy | None = None,
             rules: FamilyRules | None = None) -> Roofline:
    """Roofline of every MatMul-family signature in `table` on `hw`."""
    policy = policy or Policy.load()
    pol = policy["verdict"]
    rules = rules or rules_of(policy)
    df = table.df
    # The hardware used (and how it was chosen) is in the JSON's `hardware` and its console line;
    # an assumption is warned about once, on stderr: no note repeats it.
    notes: list[str] = []
    if df.height == 0:
        out = df.with_columns(pl.lit(None, dtype=pl.Int64).alias("sig_id"))
        return Roofline((), KernelTable(out), hw, None, "none", tuple(notes + ["empty kernel table"]))
    # MatMul-family rows picked inside one query that reads only the columns it groups and
    # sums: a 1M-row table is not copied. Each signature keeps its rows' positions, which
    # give its first row's values (gathered afterwards: a `first` of text per group costs as
    # much as the grouping) and the table's sig_id column (by position, no join on text
    # keys). The step spans run in the same parallel collect.
    mask, op_type, fam_map = _matmul_mask(df, rules)
    grouped = (df.lazy().with_row_index("__idx").filter(mask).with_columns(op_type)
               .group_by(_KEYS, maintain_order=True).agg(
                   pl.len().alias("count"), pl.col("dur_us").sum().alias("total_us"),
                   pl.col("dur_us").mean().alias("mean_us"),
                   pl.col("start_ns").min().alias("__first"),
                   _counter(df, "aic_mac_ratio").alias("mac"),
                   _counter(df, "aic_mte2_ratio").alias("mte2"),
                   _read_bytes(df).alias("read_bytes"), pl.col("__idx"))
               .sort(["total_us", "__first"], descending=[True, False], nulls_last=True)
               .with_row_index("sig_id"))
    groups, spans = pl.collect_all([grouped, _step_spans(df)])
    step_us, basis, share_note = _step_time(df, spans)
    notes.append(share_note)

    heads = groups["__idx"].list.head(3).to_list()
    firsts = df.select(pl.col("output_shapes", "output_dtypes", "output_formats", "name")
                       .gather([h[0] for h in heads]))
    sampled = df.select(pl.col("source", "row").gather([i for h in heads for i in h]))
    sampled = iter(sampled.iter_rows())
    sigs: list[SignatureCost] = []
    for row, first, head in zip(groups.drop("__idx").iter_rows(named=True),
                                firsts.iter_rows(named=True), heads):
        row.update(first, __family=fam_map[row["__type"]])
        row["samples"] = [f"{src or '?'}:{'?' if r is None else r}"
                          for src, r in (next(sampled) for _ in head)]
        if step_us:
            row["share"] = float(row["total_us"] or 0.0) / step_us
        sigs.append(_signature(int(row["sig_id"]), row, hw, pol, rules))

    pairs = groups.select(pl.col("sig_id").cast(pl.Int64), "__idx").explode("__idx")
    sig_col = pl.Series("sig_id", [None] * 0, dtype=pl.Int64).extend_constant(None, df.height)
    sig_col = sig_col.scatter(pairs["__idx"], pairs["sig_id"]) if pairs.height else sig_col
    table_out = KernelTable(df.with_columns(sig_col))

    if not sigs:
        notes.append("no MatMul-family kernels found (types per configs/op_classes.yaml matmul_family)")
    if (df["type"].null_count() == df.height) and sigs:
        notes.append("op types are missing (Level0 export?): MatMuls recognised by kernel name only")
    flagged = sum(1 for s in sigs if FLAG_INCONSISTENT in s.flags)
    if flagged:
        notes.append(said("said.faster_than_roof", n=flagged))
    return Roofline(tuple(sigs), table_out, hw, step_us, basis, tuple(notes))


def select_top(roofline: Roofline, n: int = 10, verdict: str = Verdict.MEMORY, *,
               by: str = "either") -> list[SignatureCost]:
    """Top `n` signatures with `verdict`, by total time. `by`: "analytic", "measured", "final"
    (measured when counters exist, else analytic) or "either" (default: analytic or measured says
    so; the note explains a disagreement)."""
    def hit(s: SignatureCost) -> bool:
        if by == "analytic":
            return s.verdict == verdict
        if by == "measured":
            return s.measured_verdict == verdict
        if by == "final":
            return s.final_verdict == verdict
        if by == "either":
            return verdict in (s.verdict, s.measured_verdict)
        raise ValueError(f"select_top: unknown by={by!r}")
    chosen = [s for s in roofline.signatures if hit(s)]
    return sorted(chosen, key=lambda s: -s.total_us)[:max(0, n)]
