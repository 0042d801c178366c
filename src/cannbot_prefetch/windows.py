"""Stage 3: dependency windows on the timeline (seed 003, decision table rows 3a / 3b / 3c).

For every instance of a memory-bound MatMul-family target (rows carrying its `sig_id`), walk back
`lookback` predecessors on the same stream within the same step: framework ops where the trace
groups kernels (consecutive kernels with the same `launch_op` and `stack`), else kernels. Each
predecessor is classed with `configs/op_classes.yaml` `window_classes` plus sizes: "large" comes
from bytes moved and duration (policy `windows.large_op_bytes` / `large_op_us`), never the name
alone.

Walk, nearest predecessor first (the seed's window-selection flow):
  light          -> the window may start at its input (3b); taken once the span from that input
                    to the target's start reaches `min_window_us`, else keep walking back;
  memory-heavy   -> its *output* starts the window (3a: the op is done, bandwidth is free); the
                    walk stops there (going further back would overlap it);
  communication  -> stop: "no safe window" (3c) unless a light window was already long enough;
  nothing usable -> 3c with the reason.
The usable time is the span from the start point to the target's start, minus communication or
memory-heavy work on other streams (HCCL rows have no stream) that overlaps it.

Instances are clustered per signature by their call site (the first model frame of the stack)
when stacks exist, else by the types and shapes of their predecessors, so q_proj and o_proj of
one shape become two candidates. A cluster takes its majority decision; the usable time is the
median over the instances that agree, with the minimum alongside. Only frozen values leave this
module, never a DataFrame.
"""

from __future__ import annotations

import bisect
import re
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable, Sequence

import polars as pl

from . import reasons
from .errors import InputError
from .profiling.table import KernelTable
from .settings import op_classes, policy

LIGHT, HEAVY, COMM = "light", "memory_heavy", "communication"


# ------------------------------------------------------------------------------ values out

@dataclass(frozen=True)
class TargetSig:
    """What later stages need of a roofline signature (duck-typed from SignatureCost)."""

    sig_id: int
    type: str
    input_shapes: str
    dtypes: str = ""
    formats: str = ""
    family: str = "matmul"
    m: int = 0
    n: int = 0
    k: int = 0
    batch: int = 1
    weight_shape: tuple[int, ...] = ()
    weight_bytes: int = 0
    bytes: int = 0
    flops: float = 0.0
    count: int = 0
    total_us: float = 0.0
    mean_us: float = 0.0
    share: float = 0.0
    t_memory_us: float = 0.0
    t_compute_us: float = 0.0
    verdict: str = "memory-bound"
    measured_verdict: str | None = None
    compute_dtype: str = "bf16"
    ai: float = 0.0
    ridge: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.type} {self.input_shapes}"

    @staticmethod
    def of(sig: Any) -> "TargetSig":
        if isinstance(sig, TargetSig):
            return sig
        kw = {}
        for f in TargetSig.__dataclass_fields__:
            if hasattr(sig, f):
                v = getattr(sig, f)
                if v is None and f not in ("measured_verdict",):
                    continue
                kw[f] = tuple(v) if f == "weight_shape" else v
        return TargetSig(**kw)


@dataclass(frozen=True)
class PredOp:
    """One predecessor (framework op or kernel) as seen at a representative instance."""

    type: str
    name: str
    cls: str               # light | memory_heavy | communication
    why: str               # how the class was decided
    dur_us: float
    bytes: int
    shapes: str = ""
    stack: str = ""

    def brief(self) -> str:
        return f"{self.type} ({self.cls}, {self.dur_us:.1f} us)"


@dataclass(frozen=True)
class Window:
    branch: str            # "3a" (large MatMul output) | "3b" (light predecessor input)
    start: str             # "input" | "output" of start_op
    start_op: PredOp
    ops: tuple[PredOp, ...]  # predecessors the window covers, nearest first
    time_us: float         # usable time, median over agreeing instances
    min_us: float
    raw_us: float          # median span before subtracting other-stream overlap
    overlap_us: float      # median heavy/comm work on other streams inside the span
    instances: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"branch": self.branch, "start": self.start, "start_op": self.start_op.type,
                "ops": [o.type for o in self.ops], "time_us": round(self.time_us, 3),
                "min_us": round(self.min_us, 3), "raw_us": round(self.raw_us, 3),
                "overlap_us": round(self.overlap_us, 3), "instances": self.instances,
                "reason": self.reason}


@dataclass(frozen=True)
class Candidate:
    target: TargetSig
    cluster: int           # order of this call site among the signature's clusters (first seen first)
    clusters: int          # how many clusters the signature has
    instances: int
    per_step: float
    mean_us: float         # mean duration of this cluster's instances
    window: Window
    stack: tuple[str, ...] = ()         # target's call stack, innermost first
    window_stack: tuple[str, ...] = ()  # the window start op's call stack
    preds: tuple[PredOp, ...] = ()      # all examined predecessors, nearest first
    stream: str | None = None
    site_rank: int = 0     # order among this signature's clusters with the same call-site frame

    @property
    def key(self) -> str:
        return f"{self.target.sig_id}.{self.cluster}"


@dataclass(frozen=True)
class Rejection:
    signature: str
    reason_code: str
    reason: str
    target: TargetSig | None = None
    cluster: int = 0
    clusters: int = 1
    instances: int = 0
    per_step: float = 0.0
    mean_us: float = 0.0
    preds: tuple[PredOp, ...] = ()
    stack: tuple[str, ...] = ()
    site: str = ""         # class.attr when mapping got that far
    site_rank: int = 0

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"signature": self.signature, "reason_code": self.reason_code,
                             "reason": self.reason}
        if self.site:
            d["site"] = self.site
        if self.preds:
            d["predecessors"] = [p.brief() for p in self.preds]
        return d


@dataclass(frozen=True)
class WindowResult:
    candidates: tuple[Candidate, ...]
    rejections: tuple[Rejection, ...]
    notes: tuple[str, ...] = ()


# ------------------------------------------------------------------------------ classes

@dataclass(frozen=True)
class WindowRules:
    comm_cores: frozenset[str]
    communication: tuple[re.Pattern[str], ...]
    matmul: tuple[re.Pattern[str], ...]
    movers: tuple[re.Pattern[str], ...]
    light: tuple[re.Pattern[str], ...]
    large_op_bytes: int
    large_op_us: float

    def classify(self, op_type: str | None, name: str | None, core: str | None, nbytes: int,
                 dur_us: float, is_matmul: bool | None = None, memory_bound: bool | None = None,
                 ) -> tuple[str, str]:
        """(class, why) of one predecessor."""
        kind = self.kind_of(op_type, name, core)
        if kind == COMM:
            return COMM, f"{core} row" if core and core.upper() in self.comm_cores \
                else "communication op"
        large_b = nbytes >= self.large_op_bytes
        long_mb = dur_us >= self.large_op_us and (memory_bound is None or memory_bound)
        size = f"{_mib(nbytes)} moved, {dur_us:.1f} us"
        if is_matmul or (is_matmul is None and kind == "matmul"):
            if large_b or long_mb:
                return HEAVY, f"large MatMul ({size})"
            return LIGHT, f"small MatMul ({size})"
        if kind == "mover":
            return (HEAVY, f"large data movement ({size})") if (large_b or long_mb) else \
                   (LIGHT, f"small data movement ({size})")
        if large_b:
            return HEAVY, f"moves {_mib(nbytes)} (>= {_mib(self.large_op_bytes)})"
        if kind == LIGHT:
            return LIGHT, "light op"
        return LIGHT, f"small op ({size})"

    def kind_of(self, op_type: str | None, name: str | None, core: str | None) -> str:
        """communication | matmul | mover | light | other, from names alone (cached)."""
        return _kind_cached(self, op_type, name, core.upper() if core else None)


_KINDS: dict[tuple, str] = {}


def _kind_cached(rules: "WindowRules", op_type: str | None, name: str | None,
                 core: str | None) -> str:
    key = (id(rules), op_type, name, core)
    hit = _KINDS.get(key)
    if hit is None:
        hit = _KINDS[key] = _kind_of(rules, op_type, name, core)
    return hit


def _kind_of(rules: "WindowRules", op_type: str | None, name: str | None,
             core: str | None) -> str:
    text = (op_type or name or "").strip()
    if core and core in rules.comm_cores:
        return COMM
    if _any(rules.communication, text) or (name and _any(rules.communication, name)):
        return COMM
    if _any(rules.matmul, text):
        return "matmul"
    if _any(rules.movers, text):
        return "mover"
    if _any(rules.light, text):
        return LIGHT
    return "other"


def _any(patterns: Iterable[re.Pattern[str]], text: str) -> bool:
    return any(p.search(text) for p in patterns)


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def rules_from(config: dict[str, Any] | None, pol: dict[str, Any]) -> WindowRules:
    if not isinstance(config, dict):
        raise InputError("op_classes.yaml: window_classes section is missing")

    def rx(key: str) -> tuple[re.Pattern[str], ...]:
        out = []
        for p in config.get(key) or []:
            try:
                out.append(re.compile(str(p), re.IGNORECASE))
            except re.error as exc:
                raise InputError(f"op_classes.yaml: window_classes.{key} pattern {p!r}: {exc}") from None
        return tuple(out)

    w = pol.get("windows", {})
    return WindowRules(
        comm_cores=frozenset(str(c).upper() for c in config.get("communication_cores") or []),
        communication=rx("communication"), matmul=rx("matmul"), movers=rx("movers"),
        light=rx("light"), large_op_bytes=int(w.get("large_op_bytes", 8 * 2**20)),
        large_op_us=float(w.get("large_op_us", 20.0)))


@lru_cache(maxsize=1)
def default_rules() -> WindowRules:
    return rules_from((op_classes() or {}).get("window_classes"), policy())


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

    def pred(self) -> PredOp:
        return PredOp(self.type, self.name, self.cls, self.why, round(self.dur_us, 3), self.bytes,
                      self.shapes, self.stack)


@lru_cache(maxsize=65536)
def _row_bytes(shapes: str | None, dtypes: str | None, formats: str | None,
               out_shapes: str | None, out_dtypes: str | None, out_formats: str | None) -> int:
    """Bytes a non-MatMul op moves: every input and output as stored (roofline.shapes)."""
    from .roofline.shapes import parse_list, parse_shapes, stored_bytes

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
    """Per (step, stream): ops in time order, the kernels of one framework op merged."""
    cols = df.columns
    df = df.filter(pl.col("start_ns").is_not_null()).sort("start_ns")
    names = ("step", "stream", "type", "name", "core", "start_ns", "dur_us", "sig_id",
             "input_shapes", "stack", "launch_op")
    get = [df[c].to_list() if c in cols else [None] * df.height for c in names]
    shape_cols = ("input_shapes", "input_dtypes", "input_formats", "output_shapes",
                  "output_dtypes", "output_formats")
    shapes = list(zip(*(df[c].to_list() if c in cols else [None] * df.height
                        for c in shape_cols)))
    per: dict[tuple, list[_Op]] = defaultdict(list)
    for i, (step, stream, typ, name, core, start, dur, sig, ins, stack, launch) in \
            enumerate(zip(*get)):
        dur = float(dur or 0.0)
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
            continue
        op = _Op(i, typ or name or "?", name or "", core, int(start), end, dur, nbytes, sig,
                 ins or "", stack, step, stream)
        if launch:
            op.group = (launch, stack)
        seq.append(op)
    return per


# ------------------------------------------------------------------------------ main entry

def find_windows(table: KernelTable, targets: Sequence[Any], *, lookback: int | None = None,
                 min_window_us: float | None = None, all_signatures: Sequence[Any] = (),
                 rules: WindowRules | None = None) -> WindowResult:
    """Windows for each target signature. `targets`: SignatureCost-like objects (sig_id, type,
    input_shapes, bytes, verdict, ...); `all_signatures` lets MatMul predecessors that are not
    targets use their roofline bytes and verdicts. The table needs an Int64 `sig_id` column."""
    pol = policy()
    lookback = int(lookback if lookback is not None else pol["windows"]["lookback"])
    min_us = float(min_window_us if min_window_us is not None else pol["windows"]["min_window_us"])
    if lookback < 1:
        raise InputError(f"--lookback must be at least 1, not {lookback}")
    rules = rules or default_rules()
    df = table.df
    if "sig_id" not in df.columns:
        raise InputError("kernel table has no sig_id column: run the roofline classifier first")
    tsigs = [TargetSig.of(t) for t in targets]
    every = {TargetSig.of(s).sig_id: TargetSig.of(s) for s in all_signatures}
    every.update({t.sig_id: t for t in tsigs})
    sig_bytes = {k: int(v.bytes) for k, v in every.items() if v.bytes}
    sig_mb = {k: v.verdict == "memory-bound" for k, v in every.items()}
    per = _timelines(df, sig_bytes)
    for op in (op for seq in per.values() for op in seq):
        op.cls, op.why = rules.classify(
            op.type, op.name, op.core, op.bytes, op.dur_us,
            is_matmul=True if op.sig is not None else None,
            memory_bound=sig_mb.get(op.sig) if op.sig is not None else None)
    other = _OtherStreams(per)
    _merge_communication(per)
    steps = {k[0] for k in per}
    n_steps = max(1, len(steps))

    cands: list[Candidate] = []
    rejs: list[Rejection] = []
    grouped = "launch_op" in df.columns and df["launch_op"].null_count() < df.height
    notes: list[str] = [f"windows: {lookback} predecessor(s) examined, counted in "
                        f"{'framework ops (kernels grouped by launching op)' if grouped else 'kernels'}"
                        f"; min_window_us {min_us:g}"]
    by_sig: dict[int, list[tuple[tuple, int]]] = defaultdict(list)
    for key, seq in per.items():
        if key[1] is not None:
            for j, op in enumerate(seq):
                if op.sig is not None:
                    by_sig[op.sig].append((key, j))
    for t in tsigs:
        inst = by_sig.get(t.sig_id, [])
        if not inst:
            rejs.append(Rejection(t.label, reasons.NO_SHAPES,
                                  "no instance of this signature on the timeline", t))
            continue
        clusters = _cluster(per, inst, lookback)
        for ci, (members, rank) in enumerate(clusters):
            c_or_r = _decide(t, ci, len(clusters), members, per, other, lookback, min_us, n_steps,
                             rank)
            (cands if isinstance(c_or_r, Candidate) else rejs).append(c_or_r)
    return WindowResult(tuple(cands), tuple(rejs), tuple(notes))


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


def _first_model_frame(stack: str) -> str:
    for fr in stack.split(";"):
        fr = fr.strip()
        if fr and "/torch/" not in fr and "site-packages/torch" not in fr and not fr.startswith("<"):
            return fr
    return ""


def _cluster(per, inst, lookback) -> list[tuple[list[tuple[tuple, int]], int]]:
    """Group instances by call site, ordered by first seen; each group with its `site_rank`.

    With stacks the call site is the first model frame; one source line can run the signature
    twice in a row (`self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))`), so an
    instance that follows one of the same frame within `lookback` ops takes the next rank.
    Without stacks the site is told by the types and shapes of the predecessors; small groups
    (layer 0 sees the embedding, not the previous layer) fold into a big group with the same
    nearest predecessor type, and the rank is the group's order."""
    by_frame: dict[Any, list] = defaultdict(list)
    by_preds: dict[Any, list] = defaultdict(list)
    last: dict[tuple, tuple[int, int]] = {}
    for key, j in sorted(inst, key=lambda kj: (kj[0][0] is None, str(kj[0]), kj[1])):
        seq = per[key]
        frame = _first_model_frame(seq[j].stack) if seq[j].stack else ""
        if frame:
            prev = last.get((key, frame))
            rank = prev[1] + 1 if prev is not None and j - prev[0] - 1 <= lookback else 0
            last[(key, frame)] = (j, rank)
            by_frame[(frame, rank)].append((key, j))
        else:
            preds = tuple((p.type, p.shapes) for p in seq[max(0, j - lookback):j][::-1])
            by_preds[("", preds)].append((key, j))
    first = lambda m: min(per[k][j].start for k, j in m)
    # a frame at a `def` line (PyTorch CPU traces) covers several calls: split by the nearest
    # predecessor's type too (q_proj after RmsNorm, o_proj after attention)
    framed: dict[str, list] = defaultdict(list)
    for (frame, _rank), members in by_frame.items():
        near: dict[Any, list] = defaultdict(list)
        for k, j in members:
            near[("", ((per[k][j - 1].type, ""),) if j else ())].append((k, j))
        framed[frame] += list(_merge_minor(near).values())
    out = []
    for frame, groups in framed.items():
        out += [(m, i) for i, m in enumerate(sorted(groups, key=first))]
    merged = sorted(_merge_minor(by_preds).values(), key=first)
    out += [(m, i) for i, m in enumerate(merged)]
    return sorted(out, key=lambda mr: first(mr[0]))


def _merge_minor(groups):
    total = sum(len(v) for v in groups.values())
    big = {k: v for k, v in groups.items() if len(v) > max(1, total // 10)}
    if not big:
        return groups
    out = {k: list(v) for k, v in big.items()}
    for k, v in groups.items():
        if k in big:
            continue
        preds = k[1]
        near = preds[0][0] if preds else None
        home = next((bk for bk in big if bk[1] and bk[1][0][0] == near), None)
        if home is None:
            out[k] = list(v)
        else:
            out[home].extend(v)
    return out


@dataclass
class _Decision:
    ok: bool
    branch: str = ""
    start: str = ""
    start_i: int = -1      # index of start op in preds (nearest = 0)
    raw_us: float = 0.0
    overlap_us: float = 0.0
    code: str = ""
    reason: str = ""
    start_ns: int = 0

    @property
    def usable(self) -> float:
        return self.raw_us - self.overlap_us


def _walk(seq: list[_Op], j: int, lookback: int, min_us: float, other: "_OtherStreams") -> _Decision:
    """Decide one instance. A light op's input is ready when its producer (the op before it)
    ends, so that is where a prefetch "at its input" starts; when that producer is memory-heavy
    the start is the producer's output (table row 3a), else the light op's input (3b)."""
    target = seq[j]
    preds = seq[max(0, j - lookback):j][::-1]
    if not preds:
        return _Decision(False, code=reasons.NO_SAFE_WINDOW,
                         reason="nothing runs before the target in this step")
    last: _Decision | None = None
    for i, p in enumerate(preds):
        if p.cls == COMM:
            return _Decision(False, code=reasons.NO_SAFE_WINDOW,
                             reason=f"predecessor {p.type} is communication ({p.why}) and what "
                                    f"follows it leaves {_fmt(last)} (seed table 3c)")
        if p.cls == HEAVY:
            d = _measure(other, target, p.end, "3a", "output", i)
            if d.usable >= min_us:
                return d
            return _Decision(False, code=reasons.MEMORY_HEAVY_PREDECESSOR, raw_us=d.raw_us,
                             overlap_us=d.overlap_us,
                             reason=f"memory-heavy predecessor {p.type} ({p.why}) ends "
                                    f"{d.raw_us:.1f} us before the target: {d.usable:.1f} us "
                                    f"< min_window_us {min_us:g} (seed table 3c)")
        pos = j - 1 - i
        producer = seq[pos - 1] if pos >= 1 else None
        if producer is not None and producer.cls == HEAVY:
            d = _measure(other, target, producer.end, "3a", "output", i + 1)
        else:
            d = _measure(other, target, producer.end if producer is not None else p.start,
                         "3b", "input", i)
        if d.usable >= min_us:
            return d
        if d.overlap_us > 0 and d.raw_us >= min_us and other.comm_overlap(d.start_ns, target.start):
            return _Decision(False, code=reasons.COMM_IN_WINDOW, raw_us=d.raw_us,
                             overlap_us=d.overlap_us,
                             reason=f"communication on another stream overlaps the window "
                                    f"({d.overlap_us:.1f} of {d.raw_us:.1f} us)")
        last = d
    return _Decision(False, code=reasons.WINDOW_TOO_SHORT,
                     raw_us=last.raw_us if last else 0.0, overlap_us=last.overlap_us if last else 0.0,
                     reason=f"the {len(preds)} light predecessor(s) leave {_fmt(last)} "
                            f"< min_window_us {min_us:g} (seed table 3c)")


def _fmt(d: "_Decision | None") -> str:
    return f"{d.usable:.1f} us" if d else "no time"


def _measure(other: "_OtherStreams", target: _Op, start_ns: int, branch: str, start: str,
             start_i: int) -> _Decision:
    raw = (target.start - start_ns) / 1000
    ov = other.overlap(start_ns, target.start, target)
    return _Decision(True, branch, start, start_i, raw, ov, start_ns=start_ns)


def _decide(t: TargetSig, ci: int, n_clusters: int, members, per, other, lookback, min_us,
            n_steps, rank: int) -> Candidate | Rejection:
    decisions = [(key, j, _walk(per[key], j, lookback, min_us, other)) for key, j in members]
    mean_us = statistics.fmean(per[k][j].dur_us for k, j, _ in decisions)
    per_step = len(members) / n_steps
    key0, j0 = members[0]
    rep_stack = tuple(s for s in per[key0][j0].stack.split(";") if s) if per[key0][j0].stack else ()
    # majority: accepted pattern (branch, start-op type) vs rejection code
    votes = Counter((d.branch, per[k][j - 1 - d.start_i].type) if d.ok else ("x", d.code)
                    for k, j, d in decisions)
    winner, n_win = votes.most_common(1)[0]
    agree = [(k, j, d) for k, j, d in decisions
             if (d.ok and (d.branch, per[k][j - 1 - d.start_i].type) == winner)
             or (not d.ok and ("x", d.code) == winner)]
    k1, j1, d1 = agree[len(agree) // 2]
    seq = per[k1]
    preds = tuple(p.pred() for p in seq[max(0, j1 - lookback):j1][::-1])
    if winner[0] == "x":
        share = f" ({n_win} of {len(decisions)} instances)" if len(decisions) > 1 else ""
        return Rejection(t.label, d1.code, d1.reason + share, t, ci, n_clusters, len(members),
                         per_step, mean_us, preds, rep_stack, site_rank=rank)
    usable = [d.usable for _, _, d in agree]
    start_op = seq[j1 - 1 - d1.start_i]
    ops = preds[:d1.start_i + 1] if d1.branch == "3b" else preds[:d1.start_i]
    if d1.branch == "3b":
        why = (f"light predecessor(s) {', '.join(o.type for o in ops)}: the prefetch starts at "
               f"{start_op.type}'s input (seed table 3b)")
    else:
        why = (f"{start_op.type} is memory-heavy ({start_op.why}) but its output frees the "
               f"bandwidth: the prefetch starts there (seed table 3a)")
    if n_win < len(decisions):
        why += f"; {n_win} of {len(decisions)} instances agree"
    win = Window(d1.branch, d1.start, start_op.pred(), ops, round(statistics.median(usable), 3),
                 round(min(usable), 3), round(statistics.median(d.raw_us for _, _, d in agree), 3),
                 round(statistics.median(d.overlap_us for _, _, d in agree), 3), len(agree), why)
    wstack = tuple(s for s in start_op.stack.split(";") if s) if start_op.stack else ()
    return Candidate(t, ci, n_clusters, len(members), per_step, round(mean_us, 3), win,
                     rep_stack, wstack, preds, key0[1], rank)


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
        for stream, items in busy.items():
            items.sort()
            self.streams[stream] = ([b[0] for b in items], items,
                                    max(b[1] - b[0] for b in items))

    def _hits(self, s: int, e: int, skip_stream: Any = ..., only: str | None = None):
        for stream, (starts, items, max_len) in self.streams.items():
            if stream is not None and stream == skip_stream:
                continue
            lo = bisect.bisect_left(starts, s - max_len)
            hi = bisect.bisect_left(starts, e)
            for bs, be, cls in items[lo:hi]:
                if be <= s or bs >= e or (only and cls != only):
                    continue
                yield max(bs, s), min(be, e)

    def overlap(self, s: int, e: int, target: _Op) -> float:
        """Time (us) in [s, e) covered by heavy/communication work on other streams."""
        if e <= s:
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
