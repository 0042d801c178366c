"""The timeline: per (step, stream) op sequences, communication rows merged in where a stream
waits on them, and the heavy / communication work on other streams that overlaps a window."""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass
from itertools import compress, repeat
from operator import truediv
from typing import Any, Sequence

import polars as pl

from ..profiling.table import PIPE_COUNTERS, end_ns
from .types import COMM, HEAVY, PredOp


# ------------------------------------------------------------------------------ timeline

@dataclass(slots=True)    # 10^4-10^5 per timeline
class _Op:
    idx: int
    type: str
    name: str
    core: str | None
    start: int            # ns
    end: int              # ns
    dur_us: float
    bytes: int
    sig: int | None
    shapes: str
    stack: str
    step: Any
    stream: Any = None
    row: int | None = None         # the table's `_ix` of its (first) kernel, when the table has one
    psum: Sequence[float | None] | None = None   # duration-weighted sums of the Pipe ratios
    pdur: float = 0.0                 # ... and the duration they cover
    classed_by: Any = None            # what classes it (`classify`): `cls` and `why` when asked
    _cls: str | None = None
    _why: str | None = None

    @property
    def cls(self) -> str:
        """light / memory-heavy / communication, worked out on first use: a timeline holds
        10^4-10^5 ops, and the decisions read the few before each target and the ones on
        other streams (`_OtherStreams`)."""
        c = self._cls
        if c is None:
            c = self._cls = self.classed_by(self, False)[0] if self.classed_by else ""
        return c

    @property
    def pipes(self) -> tuple[float, ...] | None:
        """(aic_mac, aic_mte2, aiv_vec, aiv_mte2) ratios, duration-weighted over its kernels."""
        if self.psum is None or self.pdur <= 0:
            return None
        return tuple(map(truediv, self.psum, repeat(self.pdur)))

    @property
    def why(self) -> str:
        """Why it has its class, in words (worked out on first use: a timeline classes every
        op, the decision and the design show a few)."""
        if self._why is None:
            self._why = self.classed_by(self, True)[1] if self.classed_by else ""
        return self._why

    def pred(self) -> PredOp:
        return PredOp(self.type, self.name, self.cls, self.why, round(self.dur_us, 3), self.bytes,
                      self.shapes, self.stack)


def _row_bytes(shapes: str | None, dtypes: str | None, formats: str | None,
               out_shapes: str | None, out_dtypes: str | None, out_formats: str | None) -> int:
    """Bytes a non-MatMul op moves: every input and output as stored (roofline.shapes). Worked
    out once per distinct shape combination of a timeline (`_ShapeBytes`, the run's own cache)."""
    from ..roofline.shapes import parse_list, parse_shapes, stored_bytes

    total = 0.0
    for sh, dt, fm in ((shapes, dtypes, formats), (out_shapes, out_dtypes, out_formats)):
        dims = parse_shapes(sh)
        if not dims:
            continue
        dts, fms = parse_list(dt), parse_list(fm)
        default = next((d for d in dts if d), "")
        for i, d in enumerate(dims):
            if d is None:
                continue
            try:
                total += stored_bytes(d, fms[i] if i < len(fms) else "ND",
                                      dts[i] if i < len(dts) and dts[i] else default) or 0
            except Exception:  # unknown dtype: count nothing rather than guess
                continue
    return int(total)


PIPES = PIPE_COUNTERS
_SHAPES = ("input_shapes", "input_dtypes", "input_formats", "output_shapes", "output_dtypes",
           "output_formats")
_WEIGHTED = ("_w", *(f"_w{k}" for k in range(len(PIPE_COUNTERS))))
# an op's fields in _Op's order, from idx to row (`bytes` and `stack` from codes, below)
_FIRST = ("_i", "_type", "_name", "core", "start_ns", "_end", "_dur", "_sb", "_sig",
          "_shapes", "_sk", "_step", "_stream", "_ix")
_TEXTS = ("_type", "_name", "core", "_shapes")
_JOINING = ("_op", "_end", "_sb", "_launch", *_WEIGHTED)
# what `_layout` hands on (the shape, counter and raw text columns are coded or read by then)
_KEPT = tuple(dict.fromkeys((*_FIRST, *_JOINING, "_joins")))


def _timelines(df: pl.DataFrame, sig_bytes: dict[int, int],
               classify=None) -> dict[tuple, list[_Op]]:
    """Per (step, stream): ops in time order, the kernels of one framework op merged, each to
    be classed by `classify` when first asked (`_Op.cls`). The report measures on this same
    timeline (report/measure.py), keeping each op's `_ix` row.

    A kernel joins the op before it on its (step, stream) when neither carries a signature and
    both have the same launching op and stack. Which kernels join is a table pass (`_layout`),
    so Python builds one `_Op` per op, a field at a time (each a table column, or a lookup
    mapped over one), and folds only the joining kernels into theirs."""
    t, shapes, stacks = _layout(df)
    sizes = _ShapeBytes(shapes)
    first, joining = t.filter(~pl.col("_joins")), t.filter(pl.col("_joins"))
    del t
    cols = {c: first[c].to_list() for c in _FIRST}
    # a timeline repeats a few op types, names, cores and shapes 10^4 times: each text once
    # (to_list makes one per row: 8 MB of a 120-step Llama timeline's 24)
    held: dict = {}
    for c in _TEXTS:
        cols[c] = list(map(held.setdefault, cols[c], cols[c]))
    # bytes: a MatMul's from its signature's roofline, any other op's from its shapes
    nbytes = list(map(sizes.__getitem__, cols["_sb"]))
    sigs = cols["_sig"]
    for k in compress(range(len(sigs)), map(sig_bytes.__contains__, sigs)):
        nbytes[k] = sig_bytes[sigs[k]]
    cols["_sb"] = nbytes
    cols["_sk"] = list(map(stacks.__getitem__, cols["_sk"]))
    # an op without counters has weight 0 (its sums are nulls): no pipes (`_Op.pipes`)
    sums = zip(*(first[c].to_list() for c in _WEIGHTED[1:]))
    made = list(map(_Op, *cols.values(), sums, first["_w"].fill_null(0.0).to_list(),
                    repeat(classify)))
    per: dict[tuple, list[_Op]] = defaultdict(list)
    for key, op in zip(zip(cols["_step"], cols["_stream"]), made):
        per[key].append(op)
    ops = dict(zip(cols["_i"], made)) if joining.height else {}
    for i, end, sb, launch, w, *pw in zip(*(joining[c].to_list() for c in _JOINING)):
        last = ops[i]       # same framework op: merge its kernels into one predecessor
        last.end = max(last.end, end)
        last.dur_us = (last.end - last.start) / 1000
        last.bytes += sizes[sb]
        last.type = launch
        if w is not None:
            last.psum = [(0.0 if a is None else a) + x
                         for a, x in zip(last.psum or (None,) * len(PIPES), pw)]
            last.pdur += w
    return per


class _ShapeBytes(dict):
    """Shape-combination code (`_layout`'s `_sb`) -> bytes it moves (`_row_bytes`), worked out
    on its first lookup: a hit is a plain dict lookup, asked for nearly every op."""

    def __init__(self, shapes: list[tuple]):
        super().__init__()
        self.shapes = shapes

    def __missing__(self, code: int) -> int:
        hit = self[code] = _row_bytes(*self.shapes[code])
        return hit


def _layout(df: pl.DataFrame) -> tuple[pl.DataFrame, list[tuple], list[str]]:
    """The kernels with a start, in time order, with what `_timelines` reads: `_joins` (the
    kernel joins the op before it), `_op` (the row that op starts at), `_end` (ns), `_w...`
    (`_weighted_pipes`), and codes into what repeats, returned alongside: `_sb` into the
    distinct shape combinations (each in `_row_bytes` argument order), `_sk` into the stacks
    (each held once)."""
    cols = df.columns

    def col(c: str) -> pl.Expr:
        return pl.col(c) if c in cols else pl.lit(None)

    part = ("_step", "_stream")
    launch, stack, sig = pl.col("_launch"), pl.col("_sk"), pl.col("_sig")
    joins = (launch.is_not_null() & (launch != "") & sig.is_null()
             & sig.is_null().shift(1).over(part) & (launch.shift(1).over(part) == launch)
             & (stack.shift(1).over(part) == stack)).fill_null(False)
    dur = pl.col("dur_us").cast(pl.Float64).fill_null(0.0) if "dur_us" in cols else pl.lit(0.0)
    present = [c for c in _SHAPES if c in cols]
    # the columns read, then filtered and sorted: a sort gathers every column it carries
    t = (df.select("start_ns", *dict.fromkeys([*present, *(c for c in PIPES if c in cols)]),
                   *(col(c).alias(c) for c in ("type", "name", "core", "input_shapes", "_ix")
                     if c not in present),
                   col("step").alias("_step"), col("stream").alias("_stream"),
                   col("launch_op").alias("_launch"), dur.alias("_dur"),
                   col("sig_id").alias("_sig"),
                   col("stack").fill_null("").alias("_stack"))
         .filter(pl.col("start_ns").is_not_null()).sort("start_ns", maintain_order=True))
    # stacks compared by their code: a shifted copy of the text would double its memory
    t, stacks = _coded(t, ["_stack"], "_sk")
    t = (t.drop("_stack")
         .with_columns(pl.int_range(pl.len()).alias("_i"),
                       end_ns(pl.col("start_ns"), pl.col("_dur")).alias("_end"),
                       *_weighted_pipes(cols), joins.alias("_joins"))
         .with_columns(pl.when(pl.col("_joins")).then(None).otherwise(pl.col("_i"))
                       .forward_fill().over(part).alias("_op"), *_shown()))
    if not present:
        return (t.with_columns(pl.lit(0).alias("_sb")).select(_KEPT),
                [(None,) * len(_SHAPES)], stacks)
    t, combos = _coded(t, present, "_sb")
    return (t.select(_KEPT),
            [tuple(dict(zip(present, r)).get(c) for c in _SHAPES) for r in combos], stacks)


def _shown() -> list[pl.Expr]:
    """An op's type (its kernel type, else its name, else "?"), name and shapes as `_Op` holds
    them: text, "" for none."""
    typ, name = pl.col("type").cast(pl.Utf8), pl.col("name").cast(pl.Utf8)
    return [pl.when(typ.is_not_null() & (typ != "")).then(typ)
            .when(name.is_not_null() & (name != "")).then(name).otherwise(pl.lit("?"))
            .alias("_type"),
            name.fill_null("").alias("_name"),
            pl.col("input_shapes").cast(pl.Utf8).fill_null("").alias("_shapes")]


def _coded(t: pl.DataFrame, on: list[str], code: str) -> tuple[pl.DataFrame, list]:
    """`t` with `code` indexing the distinct values of the columns `on` (one value or a tuple
    of them each), listed in order of first appearance. Only `on` goes through the join (a
    join gathers every column it carries: the whole table would be copied)."""
    keys = t.select(on)
    distinct = keys.unique(maintain_order=True).with_row_index(code)
    codes = keys.join(distinct, on=on, how="left", nulls_equal=True, maintain_order="left")
    values = distinct.select(on).rows() if len(on) > 1 else distinct[on[0]].to_list()
    return t.with_columns(codes[code]), values


def _weighted_pipes(cols) -> list[pl.Expr]:
    """`_w`: a kernel's weight, max(dur, 1 ns), and `_w0...`: each PIPES ratio times it (a
    missing or zero ratio counts 0.0); all null when it has none of the counters. An op's
    ratios are these summed over its kernels over the summed weights (`_Op.pipes`)."""
    if not any(c in cols for c in PIPES):
        return [pl.lit(None, pl.Float64).alias(c) for c in _WEIGHTED]
    dur = pl.col("_dur")
    each = [pl.col(c).cast(pl.Float64, strict=False) if c in cols else pl.lit(None, pl.Float64)
            for c in PIPES]
    has = pl.any_horizontal(*(e.is_not_null() for e in each))
    w = pl.when(pl.lit(1e-3) > dur).then(1e-3).otherwise(dur)
    return [pl.when(has).then(w).alias("_w"),
            *(pl.when(has).then(pl.when(e.is_null() | (e == 0)).then(0.0).otherwise(e) * w)
              .alias(f"_w{k}") for k, e in enumerate(each))]


def _merge_communication(per: dict[tuple, list[_Op]]) -> None:
    """HCCL rows carry no stream id, yet a compute stream that idles while one runs waits on it:
    such rows become predecessors in that stream's sequence. Rows that run alongside compute
    only count as overlap (`_OtherStreams`)."""
    comm: dict[Any, list[_Op]] = defaultdict(list)
    for (step, stream), seq in per.items():
        if stream is None:
            comm[step].extend(op for op in seq if op.cls == COMM)
    for (step, stream), seq in per.items():
        if stream is None or not comm.get(step):
            continue
        starts = [o.start for o in seq]
        ins = []
        for c in comm[step]:
            k = bisect.bisect_left(starts, c.start)
            before = seq[k - 1] if k else None
            after = seq[k] if k < len(seq) else None
            # in a gap of this stream (it waits on it): a predecessor; else it runs alongside
            if (before is None or before.end <= c.start) and (after is None or after.start >= c.end):
                ins.append(c)
        if ins:
            seq.extend(ins)
            seq.sort(key=lambda o: (o.start, o.idx))


class _OtherStreams:
    """Communication / memory-heavy intervals per stream, to measure what overlaps a window on
    the other streams (HCCL rows, stream None, always count). A stream's intervals are found
    when a target on another stream first asks (its ops classed then): on a one-stream
    timeline none are."""

    def __init__(self, per: dict[tuple, list[_Op]]):
        self._seqs: dict[Any, list[list[_Op]]] = defaultdict(list)
        for (_step, stream), seq in per.items():     # as they are now: communication merged
            self._seqs[stream].append(list(seq))     # in later is not a stream's own work
        self._busy: dict[Any, tuple | None] = {}
        self._cache: dict[Any, list] = {}

    def _intervals(self, stream: Any) -> tuple | None:
        """(starts, (start, end, class) sorted, longest) of a stream's heavy and communication
        ops; None when it has none."""
        if stream not in self._busy:
            items = [(op.start, op.end, op.cls) for seq in self._seqs[stream] for op in seq
                     if op.cls in (HEAVY, COMM)]
            items.sort()
            self._busy[stream] = ([b[0] for b in items], items,
                                  max(b[1] - b[0] for b in items)) if items else None
        return self._busy[stream]

    def _others(self, skip_stream: Any) -> list:
        """The streams `_hits` looks at when measuring for a target on `skip_stream` (asked
        once per instance and predecessor, so the answer is kept)."""
        hit = self._cache.get(skip_stream)
        if hit is None:
            hit = self._cache[skip_stream] = [
                v for stream in self._seqs if stream is None or stream != skip_stream
                if (v := self._intervals(stream)) is not None]
        return hit

    def can_overlap(self, stream: Any) -> bool:
        """Whether any other stream holds work that could overlap a target on `stream`."""
        return bool(self._others(stream))

    def _hits(self, s: int, e: int, skip_stream: Any = ..., only: str | None = None):
        for starts, items, max_len in self._others(skip_stream):
            lo = bisect.bisect_left(starts, s - max_len)
            hi = bisect.bisect_left(starts, e)
            for bs, be, cls in items[lo:hi]:
                if be <= s or bs >= e or (only and cls != only):
                    continue
                yield max(bs, s), min(be, e)

    def overlap(self, s: int, e: int, target: _Op) -> float:
        """Time (us) in [s, e) covered by heavy/communication work on other streams."""
        if e <= s or not self._others(target.stream):
            return 0.0
        total, cur_s, cur_e = 0, 0, None
        for a, b in sorted(self._hits(s, e, target.stream)):
            if cur_e is None or a > cur_e:
                if cur_e is not None:
                    total += cur_e - cur_s
                cur_s, cur_e = a, b
            else:
                cur_e = max(cur_e, b)
        if cur_e is not None:
            total += cur_e - cur_s
        return total / 1000

    def comm_overlap(self, s: int, e: int) -> float:
        return sum(b - a for a, b in self._hits(s, e, only=COMM)) / 1000
