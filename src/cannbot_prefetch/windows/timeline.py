"""The timeline: per (step, stream) op sequences, communication rows merged in where a stream
waits on them, and the heavy / communication work on other streams that overlaps a window."""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import polars as pl

from ..profiling.table import PIPE_COUNTERS
from .types import COMM, HEAVY, PredOp


# ------------------------------------------------------------------------------ timeline

@dataclass
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
    cls: str = ""
    why: str = ""
    group: tuple | None = None     # (launch_op, stack) of the framework op it belongs to
    row: int | None = None         # the table's `_ix` of its (first) kernel, when the table has one
    psum: list[float] | None = None   # duration-weighted sums of the PipeUtilization ratios
    pdur: float = 0.0                 # ... and the duration they cover

    @property
    def pipes(self) -> tuple[float, ...] | None:
        """(aic_mac, aic_mte2, aiv_vec, aiv_mte2) ratios, duration-weighted over its kernels."""
        if self.psum is None or self.pdur <= 0:
            return None
        return tuple(x / self.pdur for x in self.psum)

    def pred(self) -> PredOp:
        return PredOp(self.type, self.name, self.cls, self.why, round(self.dur_us, 3), self.bytes,
                      self.shapes, self.stack)


@lru_cache(maxsize=65536)
def _row_bytes(shapes: str | None, dtypes: str | None, formats: str | None,
               out_shapes: str | None, out_dtypes: str | None, out_formats: str | None) -> int:
    """Bytes a non-MatMul op moves: every input and output as stored (roofline.shapes)."""
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


def _timelines(df: pl.DataFrame, sig_bytes: dict[int, int]) -> dict[tuple, list[_Op]]:
    """Per (step, stream): ops in time order, the kernels of one framework op merged. The
    report measures on this same timeline (report/measure.py), keeping each op's `_ix` row."""
    cols = df.columns
    df = df.filter(pl.col("start_ns").is_not_null()).sort("start_ns", maintain_order=True)
    names = ("step", "stream", "type", "name", "core", "start_ns", "dur_us", "sig_id",
             "input_shapes", "stack", "launch_op", "_ix")
    get = [df[c].to_list() if c in cols else [None] * df.height for c in names]
    shape_cols = ("input_shapes", "input_dtypes", "input_formats", "output_shapes",
                  "output_dtypes", "output_formats")
    shapes = list(zip(*(df[c].to_list() if c in cols else [None] * df.height
                        for c in shape_cols)))
    counters = [c for c in PIPES if c in cols]
    if counters:   # a kernel's ratios, or None when it has none of them
        each = [pl.col(c).cast(pl.Float64, strict=False) if c in cols
                else pl.lit(None, pl.Float64) for c in PIPES]
        ratios = df.select(pl.when(pl.any_horizontal(e.is_not_null() for e in each))
                           .then(pl.concat_list(each)))
        pipes = [None if r is None else tuple(r) for r in ratios.to_series().to_list()]
    else:
        pipes = [None] * df.height
    per: dict[tuple, list[_Op]] = defaultdict(list)
    for i, (step, stream, typ, name, core, start, dur, sig, ins, stack, launch, ix) in \
            enumerate(zip(*get)):
        dur = float(dur or 0.0)
        pr = pipes[i]
        nbytes = sig_bytes[sig] if sig is not None and sig in sig_bytes else _row_bytes(*shapes[i])
        seq = per[(step, stream)]
        stack = stack or ""
        end = int(start + dur * 1000)
        if launch and seq and sig is None and seq[-1].sig is None \
                and seq[-1].group == (launch, stack):
            last = seq[-1]      # same framework op: merge its kernels into one predecessor
            last.end = max(last.end, end)
            last.dur_us = (last.end - last.start) / 1000
            last.bytes += nbytes
            last.type = launch
            _add_pipes(last, pr, dur)
            continue
        op = _Op(i, typ or name or "?", name or "", core, int(start), end, dur, nbytes, sig,
                 ins or "", stack, step, stream, row=ix)
        if launch:
            op.group = (launch, stack)
        _add_pipes(op, pr, dur)
        seq.append(op)
    return per


PIPES = PIPE_COUNTERS


def _add_pipes(op: _Op, pr, dur: float) -> None:
    if pr is None:
        return
    w = max(dur, 1e-3)
    op.psum = [(0.0 if a is None else a) + (x or 0.0) * w
               for a, x in zip(op.psum or (None,) * len(PIPES), pr)]
    op.pdur += w

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
    the other streams (HCCL rows, stream None, always count)."""

    def __init__(self, per: dict[tuple, list[_Op]]):
        busy: dict[Any, list[tuple[int, int, str]]] = defaultdict(list)
        for (_step, stream), seq in per.items():
            for op in seq:
                if op.cls in (HEAVY, COMM):
                    busy[stream].append((op.start, op.end, op.cls))
        self.streams = {}
        self._cache: dict[Any, list] = {}
        for stream, items in busy.items():
            items.sort()
            self.streams[stream] = ([b[0] for b in items], items,
                                    max(b[1] - b[0] for b in items))

    def _others(self, skip_stream: Any) -> list:
        """The streams `_hits` looks at when measuring for a target on `skip_stream` (asked
        once per instance and predecessor, so the answer is kept)."""
        hit = self._cache.get(skip_stream)
        if hit is None:
            hit = self._cache[skip_stream] = [
                v for stream, v in self.streams.items()
                if stream is None or stream != skip_stream]
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
