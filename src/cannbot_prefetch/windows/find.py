"""The seed's decision table (3a / 3b / 3c) per instance and per cluster, and `find_windows`."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from functools import partial
from itertools import repeat
from operator import sub, truediv
from typing import Any, Callable, Sequence

from .. import reasons
from ..errors import InputError
from ..gc_pause import gc_paused
from ..i18n import said
from ..profiling.table import KernelTable
from ..policy import Policy
from .classes import WindowRules, default_rules
from .clusters import _cluster, layer_units
from .timeline import _Op, _OtherStreams, _merge_communication, _timelines
from .types import COMM, HEAVY, Candidate, LeadOp, Rejection, TargetSig, Window, WindowResult

LEAD_OPS = 16   # ops before a target kept for placed windows (an insertion further back is refused)


@dataclass
class _Decision:
    ok: bool
    branch: str = ""
    start: str = ""
    start_i: int = -1      # index of start op in preds (nearest = 0)
    raw_us: float = 0.0
    overlap_us: float = 0.0
    code: str = ""
    words: Any = ""        # the reason, or a function giving it (worded when it is shown)
    start_ns: int = 0
    nearer: "_Decision | None" = None   # the nearest light start, when a 3a start beat it

    @property
    def usable(self) -> float:
        return self.raw_us - self.overlap_us

    @property
    def reason(self) -> str:
        """Worded on first use: every instance is decided, one per cluster is shown."""
        if callable(self.words):
            self.words = self.words()
        return self.words


def _walk(seq: list[_Op], j: int, lookback: int, min_us: float, other: "_OtherStreams") -> _Decision:
    """Decide one instance. A light op's input is ready when its producer (the op before it)
    ends, so that is where a prefetch "at its input" starts; when that producer is memory-heavy
    the start is the producer's output (table row 3a), else the light op's input (3b)."""
    target = seq[j]
    preds = seq[max(0, j - lookback):j][::-1]
    if not preds:
        return _Decision(False, code=reasons.NO_SAFE_WINDOW,
                         words="nothing runs before the target in this step")
    last: _Decision | None = None
    nearest: _Decision | None = None     # the nearest light start long enough (3b)
    for i, p in enumerate(preds):
        if p.cls == COMM:
            if nearest is not None:
                return nearest
            return _Decision(False, code=reasons.NO_SAFE_WINDOW, words=lambda p=p, last=last: (
                f"predecessor {p.type} is communication ({p.why}) and what follows it leaves "
                f"{_usable_text(last)} (window rule 3c: no safe window)"))
        if p.cls == HEAVY:
            d = _measure(other, target, p.end, "3a", "output", i)
            if nearest is not None:
                return _longer(d, nearest, p)
            if d.usable >= min_us:
                return d
            return _Decision(False, code=reasons.MEMORY_HEAVY_PREDECESSOR, raw_us=d.raw_us,
                             overlap_us=d.overlap_us, words=lambda p=p, d=d: (
                                 said("said.heavy_too_short", op=p.type, why=p.why, raw=d.raw_us,
                                      usable=d.usable, min_us=min_us)))
        pos = j - 1 - i
        producer = seq[pos - 1] if pos >= 1 else None
        if producer is not None and producer.cls == HEAVY:
            d = _measure(other, target, producer.end, "3a", "output", i + 1)
        else:
            d = _measure(other, target, producer.end if producer is not None else p.start,
                         "3b", "input", i)
        if nearest is not None:
            if d.branch == "3a":
                return _longer(d, nearest, producer)
            continue
        if d.usable >= min_us:
            if d.branch == "3a":
                return d
            nearest = d
            continue
        if d.overlap_us > 0 and d.raw_us >= min_us and other.comm_overlap(d.start_ns, target.start):
            return _Decision(False, code=reasons.COMM_IN_WINDOW, raw_us=d.raw_us,
                             overlap_us=d.overlap_us, words=lambda d=d: (
                                 said("said.comm_in_window", overlap=d.overlap_us, raw=d.raw_us)))
        last = d
    if nearest is not None:
        return nearest
    return _Decision(False, code=reasons.WINDOW_TOO_SHORT,
                     raw_us=last.raw_us if last else 0.0, overlap_us=last.overlap_us if last else 0.0,
                     words=lambda last=last, n=len(preds): (
                         said("said.light_too_short", n=n, left=_usable_text(last), min_us=min_us)))


def _longer(at_output: _Decision, nearest: _Decision, heavy: _Op) -> _Decision:
    """Rule 3a over the nearest light start: a finished memory-bound MatMul's output (its
    bandwidth frees when it ends) starts a window that holds the nearest one and the light ops
    between, so it hides at least as many bytes; any other heavy op (attention over a long KV
    cache) ends the walk at the nearest start."""
    if heavy.sig is None or at_output.usable <= nearest.usable:
        return nearest
    at_output.nearer = nearest
    return at_output


def _usable_text(d: "_Decision | None") -> str:
    return said("part.us", us=d.usable) if d else said("part.no_time")


def _measure(other: "_OtherStreams", target: _Op, start_ns: int, branch: str, start: str,
             start_i: int) -> _Decision:
    raw = (target.start - start_ns) / 1000
    ov = other.overlap(start_ns, target.start, target)
    return _Decision(True, branch, start, start_i, raw, ov, start_ns=start_ns)


def _site_verdict(t: TargetSig, members, per, mean_us: float, hbm_bps: float | None,
                  verdict_pol) -> tuple[str, str, str] | None:
    """The measured verdict of ONE call site from its own instances' counters (duration-weighted
    means; verdict.gemm_verdict), where linears of one shape (q / o, gate / up) share a
    signature; None when its instances carry no counters."""
    from ..roofline.verdict import gemm_verdict, hbm_share
    mac = mte2 = dur = 0.0
    for k, j in members:
        op = per[k][j]
        if op.psum is None or not op.pdur or (op.psum[0] is None and op.psum[1] is None):
            continue
        mac, mte2, dur = mac + (op.psum[0] or 0.0), mte2 + (op.psum[1] or 0.0), dur + op.pdur
    if not dur:
        return None
    read = t.measured_read_bytes
    share = hbm_share(read or t.bytes, mean_us, hbm_bps)
    v, by, why = gemm_verdict(mac / dur, mte2 / dur, ai=t.ai or None, ridge=t.ridge or None,
                              analytic=t.verdict, share=share,
                              basis="measured" if read else "analytic", pol=verdict_pol)
    return (v, by, why) if v is not None else None


def _site_window(t: TargetSig, ci: int, n_clusters: int, members, per, other, lookback, min_us,
            n_steps, rank: int, spans: "_Spans", hbm_bps: float | None, verdict_pol,
            ) -> Candidate | Rejection:
    """The site's candidate from its instances' decisions; where a finished MatMul's output
    (3a) beat the nearest light start, the nearest one rides along as `nearer` (mapping may
    find no legal place at the MatMul's output: plan/build.py keeps the better placed one)."""
    decisions = [(key, j, _walk(per[key], j, lookback, min_us, other)) for key, j in members]
    got = _site_window_by_vote(t, ci, n_clusters, members, per, other, lookback, n_steps, rank, spans,
                   hbm_bps, decisions, verdict_pol)
    if isinstance(got, Candidate) and any(d.nearer is not None for _, _, d in decisions):
        alt = _site_window_by_vote(t, ci, n_clusters, members, per, other, lookback, n_steps, rank, spans,
                       hbm_bps, [(k, j, d.nearer or d) for k, j, d in decisions], verdict_pol)
        if isinstance(alt, Candidate) and alt.window != got.window:
            got = replace(got, nearer=alt)
    return got


def _site_window_by_vote(t: TargetSig, ci: int, n_clusters: int, members, per, other, lookback, n_steps,
             rank: int, spans: "_Spans", hbm_bps: float | None, decisions, verdict_pol,
             ) -> Candidate | Rejection:
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
    site = _site_verdict(t, members, per, mean_us, hbm_bps, verdict_pol) \
        if n_clusters > 1 and t.measured_verdict is not None else None
    if site is not None and site[0] != "memory-bound":
        code = {"latency-bound": reasons.LATENCY_BOUND, "compute-bound": reasons.COMPUTE_BOUND,
                "borderline": reasons.BORDERLINE}.get(site[0], reasons.NOT_MEMORY_BOUND)
        return Rejection(t.label, code,
                         said("said.site_verdict_differs", i=ci + 1, n=n_clusters, k=len(members),
                              verdict=site[0], why=site[2], mean=t.measured_verdict),
                         t, ci, n_clusters, len(members), per_step, mean_us, preds, rep_stack,
                         site_rank=rank)
    if winner[0] == "x":
        why = (said("said.instances_share", reason=d1.reason, n=n_win, total=len(decisions))
               if len(decisions) > 1 else d1.reason)
        return Rejection(t.label, d1.code, why, t, ci, n_clusters, len(members),
                         per_step, mean_us, preds, rep_stack, site_rank=rank)
    usable = [d.usable for _, _, d in agree]
    start_op = seq[j1 - 1 - d1.start_i]
    ops = preds[:d1.start_i + 1] if d1.branch == "3b" else preds[:d1.start_i]
    if d1.branch == "3b":
        why = said("said.window_3b", ops=", ".join(o.type for o in reversed(ops)), op=start_op.type)
    else:
        why = said("said.window_3a", op=start_op.type, why=start_op.why)
    if n_win < len(decisions):
        why += f"; {n_win} of {len(decisions)} instances agree"
    win = Window(d1.branch, d1.start, start_op.pred(), ops, round(statistics.median(usable), 3),
                 round(min(usable), 3), round(statistics.median(d.raw_us for _, _, d in agree), 3),
                 round(statistics.median(d.overlap_us for _, _, d in agree), 3), len(agree), why)
    wstack = tuple(s for s in start_op.stack.split(";") if s) if start_op.stack else ()
    return Candidate(t, ci, n_clusters, len(members), per_step, round(mean_us, 3), win,
                     rep_stack, wstack, preds, key0[1], rank,
                     _lead(per, agree, k1, j1, max(lookback, LEAD_OPS), other, spans),
                     seq[j1].stack)


def _lead(per, agree, k1, j1, n: int, other: "_OtherStreams", spans: "_Spans",
          ) -> tuple[LeadOp, ...]:
    """Up to `n` ops before the target at the representative instance, with medians over the
    agreeing instances of their offsets before the target (a placed window is costed from them
    when the insertion point differs from the measured window's start). An op is kept while
    at least half the instances have it."""
    lead = per[k1][max(0, j1 - n):j1][::-1]
    if not lead:
        return ()
    times = _LeadTimes(per, agree, other, spans)
    out = []
    for i, op in enumerate(lead):
        back = i + 1
        if not times.kept(back):
            break
        # with other streams the times read the timeline: worked out now, not kept alive
        got = _known(times(back)) if times.overlaps else partial(times, back)
        out.append(LeadOp(op.pred(), op.sig is not None, got))
    return tuple(out)


def _known(values: tuple) -> Callable[[], tuple]:
    return lambda: values


class _LeadTimes:
    """One candidate's lead offsets, `(start_us, end_us, overlap_us, min_free_us)` of the op
    `back` ops before the target: medians over the agreeing instances, each worked out when a
    placed window first reads it (a candidate records 16 lead ops; mapping reads one or two).
    On a timeline where no other stream can overlap an instance it keeps only the flat start /
    end lists, not the timeline."""

    def __init__(self, per, agree, other: "_OtherStreams", spans: "_Spans"):
        # per agreeing instance: the target's place in the flat start/end lists; an instance
        # too near its step's start has fewer ops before it
        self.at = [spans.at[k] + j for k, j, _ in agree]
        self.js = [j for _, j, _ in agree]
        self.near = min(self.js)      # up to this many ops back, every instance has the op
        self.starts, self.ends = spans.start, spans.end
        # whether any other stream can overlap an instance at all (one stream: never, and
        # the measure is skipped)
        shared = [other.can_overlap(per[k][j].stream) for k, j, _ in agree]
        self.overlaps = any(shared)
        self._timeline = (per, agree, other, shared) if self.overlaps else None

    def kept(self, back: int) -> bool:
        """Whether at least half the instances have an op `back` ops before the target."""
        return back <= self.near or 2 * sum(j >= back for j in self.js) >= len(self.js)

    def __call__(self, back: int) -> tuple[float, float, float, float]:
        at, starts, ends = self.at, self.starts, self.ends
        if back <= self.near:
            ok = at
        else:
            ok = [a for j, a in zip(self.js, at) if j >= back]
        # (starts[a] - starts[a - back]) / 1000 and the same less ends[a - back], for a in ok:
        # a column at a time (map runs in C)
        ok_start = list(map(starts.__getitem__, ok))
        earlier = list(map(sub, ok, repeat(back)))
        before = list(map(truediv, map(sub, ok_start, map(starts.__getitem__, earlier)),
                          repeat(1000)))
        gap = list(map(truediv, map(sub, ok_start, map(ends.__getitem__, earlier)),
                       repeat(1000)))
        if self._timeline is not None:
            per, agree, other, shared = self._timeline
            over = [other.overlap(per[k][j - back].end, per[k][j].start, per[k][j]) if s
                    else 0.0 for (k, j, _), s in zip(agree, shared) if j >= back]
            least = min(g - o for g, o in zip(gap, over))
            over_us = statistics.median(over)
        else:                   # nothing on another stream: no overlap anywhere
            least, over_us = min(gap), 0.0
        return (round(statistics.median(before), 3), round(statistics.median(gap), 3),
                round(over_us, 3), round(least, 3))


class _Spans:
    """Every op's start and end (ns) on the timeline, one flat list each (`at`: where each
    (step, stream) sequence begins in them), so an offset is read for all the instances of a
    cluster by index."""

    def __init__(self, per: dict[tuple, list[_Op]]):
        self.at: dict[tuple, int] = {}
        self.start: list[int] = []
        self.end: list[int] = []
        for key, seq in per.items():
            self.at[key] = len(self.start)
            self.start.extend(o.start for o in seq)
            self.end.extend(o.end for o in seq)


# ------------------------------------------------------------------------------ main entry

def timeline(df, signatures: Sequence[Any], rules: WindowRules,
             hbm_bps: float | None = None) -> tuple[dict[tuple, list], "_OtherStreams"]:
    """Per (step, stream) op sequences, every op classed when first read (by its counters, else
    roofline time with `hbm_bps`), communication merged in where a stream waits on it, and the other
    streams' heavy work. `signatures`: the roofline's (SignatureCost-like; later ones win), so
    MatMul ops carry their bytes and verdicts. The report measures a plan's sites on this same
    timeline (report/sites.py)."""
    every = {}
    for s in signatures:
        t = TargetSig.of(s)
        every[t.sig_id] = t
    sig_bytes = {k: int(v.bytes) for k, v in every.items() if v.bytes}
    sig_mb = {k: (v.measured_verdict or v.verdict) == "memory-bound" for k, v in every.items()
              if (v.measured_verdict or v.verdict) != "unknown"}
    def classify(op: _Op, explain: bool) -> tuple[str, str]:
        return rules.classify(op.type, op.name, op.core, op.bytes, op.dur_us,
                              is_matmul=True if op.sig is not None else None,
                              memory_bound=sig_mb.get(op.sig) if op.sig is not None else None,
                              pipes=op.pipes, hbm_bps=hbm_bps, explain=explain)

    with gc_paused():
        per = _timelines(df, sig_bytes, classify)     # each op classed when first asked
        other = _OtherStreams(per)
        _merge_communication(per)
    return per, other


def find_windows(table: KernelTable, targets: Sequence[Any], *, lookback: int | None = None,
                 min_window_us: float | None = None, all_signatures: Sequence[Any] = (),
                 rules: WindowRules | None = None, hbm_bps: float | None = None,
                 policy: Policy | None = None) -> WindowResult:
    """Windows for each target signature. `targets`: SignatureCost-like objects (sig_id, type,
    input_shapes, bytes, verdict, ...); `all_signatures` lets MatMul predecessors that are not
    targets use their roofline bytes and verdicts; `hbm_bps` (HBM bytes/s of the part) classes
    ops without counters by roofline time. The table needs an Int64 `sig_id` column.
    `policy`: the run's (a caller that gives none gets the shipped one)."""
    pol = policy or Policy.load()
    lookback = int(lookback if lookback is not None else pol["windows"]["lookback"])
    min_us = float(min_window_us if min_window_us is not None else pol["windows"]["min_window_us"])
    if lookback < 1:
        raise InputError(f"--lookback must be at least 1, not {lookback}")
    rules = rules or default_rules(pol)
    df = table.df
    if "sig_id" not in df.columns:
        raise InputError("kernel table has no sig_id column: run the roofline classifier first")
    tsigs = [TargetSig.of(t) for t in targets]
    per, other = timeline(df, [*all_signatures, *targets], rules, hbm_bps)
    steps = {k[0] for k in per}
    n_steps = max(1, len(steps))

    cands: list[Candidate] = []
    rejs: list[Rejection] = []
    grouped = "launch_op" in df.columns and df["launch_op"].null_count() < df.height
    notes: list[str] = [said("said.windows_note", n=lookback, min_us=min_us,
                             unit=said("said.unit_grouped" if grouped else "said.unit_kernels"))]
    by_sig: dict[int, list[tuple[tuple, int]]] = defaultdict(list)
    for key, seq in per.items():
        if key[1] is not None:
            for j, op in enumerate(seq):
                if op.sig is not None:
                    by_sig[op.sig].append((key, j))
    units = layer_units(per)
    spans = _Spans(per)
    cluster_notes: set[str] = set()
    for t in tsigs:
        inst = by_sig.get(t.sig_id, [])
        if not inst:
            rejs.append(Rejection(t.label, reasons.NO_SHAPES,
                                  "no instance of this signature on the timeline", t))
            continue
        clusters, cnote = _cluster(per, inst, rules.frames, units)
        if cnote:
            cluster_notes.add(cnote)
        for ci, (members, rank) in enumerate(clusters):
            c_or_r = _site_window(t, ci, len(clusters), members, per, other, lookback, min_us, n_steps,
                             rank, spans, hbm_bps, pol["verdict"])
            (cands if isinstance(c_or_r, Candidate) else rejs).append(c_or_r)
    notes += sorted(cluster_notes)
    return WindowResult(tuple(cands), tuple(rejs), tuple(notes))
