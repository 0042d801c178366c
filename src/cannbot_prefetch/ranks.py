"""All ranks (`analyze --rank all`): per-rank statistics per signature, and plan decisions that
hold across ranks, in memory that does not grow with the rank count.

Every rank is read and classified on its own (a few at a time, `ranks.workers`), then reduced to
a `RankView`: per-signature count / time / verdict / bytes from that rank's own shapes (a
GroupedMatmul's rows differ per rank: its tokens and experts read are the rank's own), and the
rank's step time. Its table is dropped (or, with `--model-src`, parked on disk for the window
pass). What the plan needs of all ranks (`CrossRank`):

- the reference rank, analysed in full for mapping and sizing: the slowest, i.e. the one busy
  longest outside communication (in a synchronized job every rank's step spans alike, since
  the others wait in the collectives for it);
- targets: a signature is planned only when it is memory-bound (its deciding verdict) on every
  rank that sets its pace: the ranks whose time in it is within `ranks.pace_share` of the
  largest; a prefetch cannot shorten a step on a rank where the op is not memory-bound;
- windows: each candidate's usable window is the smallest across the ranks (the same code runs
  on all of them); a rank with no safe window for it rejects it.

Signatures are matched across ranks by type, weight shape (else input shapes) and dtypes, and
candidates by that and their call-site cluster.
"""

from __future__ import annotations

import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from . import reasons
from .errors import InputError
from .policy import Policy


def signature_key(sig: Any) -> tuple:
    """One op across ranks: type, weight shape (else input shapes), dtypes."""
    shape = getattr(sig, "weight_shape", None)
    return (sig.type, tuple(shape) if shape else (getattr(sig, "input_shapes", None) or ""),
            getattr(sig, "dtypes", None) or "")


@dataclass(frozen=True)
class RankSig:
    """One signature as one rank measured it."""

    rank: int
    count: int
    total_us: float
    mean_us: float
    verdict: str            # the deciding verdict (measured where counters exist)
    by: str                 # counters | roofline
    bytes: int | None
    weight_bytes: int | None
    input_shapes: str | None

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "count": self.count, "total_us": round(self.total_us, 3),
                "mean_us": round(self.mean_us, 3), "verdict": self.verdict, "by": self.by,
                "bytes": self.bytes, "weight_bytes": self.weight_bytes,
                "input_shapes": self.input_shapes}


@dataclass
class RankView:
    """What is kept of one rank once its table is dropped."""

    rank: int
    path: str
    rows: int
    rows_skipped: int
    step_us: float | None               # sum of step spans
    busy_us: float                      # kernel time outside communication: what sets the pace
    steps: tuple[int, ...]
    sigs: dict[tuple, RankSig]
    signatures: tuple = ()              # the rank's SignatureCosts (sig_id = its table's)
    parked: Path | None = None          # the rank's classified table, for the window pass
    windows: dict[tuple, tuple[float | None, str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "path": self.path, "rows": self.rows,
                "rows_skipped": self.rows_skipped,
                "step_us": None if self.step_us is None else round(self.step_us, 3),
                "busy_us": round(self.busy_us, 3), "steps": list(self.steps)}


@dataclass(frozen=True)
class CrossRank:
    views: tuple[RankView, ...]          # by rank number
    reference: int                       # the rank analysed in full (the slowest)
    pace_share: float
    skipped: tuple[tuple[int | None, str, str], ...] = ()   # (rank, folder, why) not read

    def view(self, rank: int) -> RankView:
        return next(v for v in self.views if v.rank == rank)

    def spread(self, sig: Any) -> list[RankSig]:
        key = signature_key(sig)
        return [v.sigs[key] for v in self.views if key in v.sigs]

    def pace_ranks(self, sig: Any) -> list[RankSig]:
        """The ranks whose time in this signature is within pace_share of the largest."""
        per = self.spread(sig)
        top = max((r.total_us for r in per), default=0.0)
        return [r for r in per if r.total_us >= self.pace_share * top]

    # ---------------------------------------------------------------- plan hooks (plan/build.py)

    def targets(self, targets: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        """Keep the targets memory-bound on every rank that sets their pace; the rest become
        rejections naming the rank."""
        from .roofline.verdict import Verdict
        from .windows import Rejection, TargetSig

        keep, out = [], []
        for s in targets:
            off = [r for r in self.pace_ranks(s) if r.verdict != Verdict.MEMORY]
            if not off:
                keep.append(s)
                continue
            t = TargetSig.of(s)
            r = off[0]
            out.append(Rejection(t.label, reasons.NOT_MEMORY_BOUND_ON_RANK,
                                 f"{r.verdict} on rank {r.rank} (by its {r.by}; "
                                 f"{r.total_us:.1f} us there, among the ranks that set the "
                                 "pace): a prefetch cannot shorten that rank's step", t))
        return keep, out

    def windows(self, result: Any) -> Any:
        """Each candidate's window: the smallest usable time across the ranks."""
        from .windows import Rejection, WindowResult

        cands, rejs = [], list(result.rejections)
        for c in result.candidates:
            key = (signature_key(c.target), c.cluster)
            seen = [(v.rank, v.windows[key]) for v in self.views if key in v.windows]
            shut = [(r, why) for r, (t, why) in seen if t is None]
            if shut:
                r, why = shut[0]
                rejs.append(Rejection(c.target.label, reasons.NO_SAFE_WINDOW_ON_RANK,
                                      f"no safe window on rank {r}: {why}", c.target, c.cluster,
                                      c.clusters, c.instances, c.per_step, c.mean_us, c.preds,
                                      c.stack, site_rank=c.site_rank))
                continue
            timed = [(t, r) for r, (t, _) in seen if t is not None]
            if not timed:
                cands.append(c)
                continue
            t_min, r_min = min(timed)
            if t_min < c.window.time_us:
                w = replace(c.window, time_us=t_min, min_us=min(c.window.min_us, t_min),
                            reason=f"{c.window.reason}; smallest across {len(timed)} ranks: "
                                   f"{t_min:.1f} us on rank {r_min}")
                c = replace(c, window=w)
            cands.append(c)
        notes = (*result.notes, f"windows: the smallest across {len(self.views)} ranks")
        return WindowResult(tuple(cands), tuple(rejs), notes)

    # ---------------------------------------------------------------- output

    def note(self) -> str:
        slow = self.view(self.reference)
        fast = min(self.views, key=lambda v: (v.busy_us, v.rank))
        read = ", ".join(str(v.rank) for v in self.views)
        skipped = "".join(f"; rank {'?' if r is None else r} skipped ({folder}: {why})"
                          for r, folder, why in self.skipped)
        return (f"--rank all: {len(self.views)} rank(s) read ({read}); rank {slow.rank} analysed "
                f"in full (the slowest: {slow.busy_us:,.1f} us busy outside communication; the "
                f"fastest, rank {fast.rank}: {fast.busy_us:,.1f} us); targets and windows must "
                f"hold on every rank read{skipped}")

    def to_json(self) -> dict[str, Any]:
        return {"reference": self.reference, "pace_share": self.pace_share,
                "ranks": [v.to_json() for v in self.views],
                "skipped": [{"rank": r, "folder": f, "why": w} for r, f, w in self.skipped]}


# -------------------------------------------------------------------- reading every rank

@dataclass
class _Loaded:
    view: RankView
    profile: Any
    roofline: Any


def read_all_ranks(path: str, hardware_for: Callable[[Any], Any], *, run: str | None = None,
                   step: int | None = None, steps: tuple[int, int] | None = None,
                   keep_tables: bool = False, workers: int | None = None, policy: Policy,
                   ) -> tuple[Any, Any, CrossRank, tempfile.TemporaryDirectory | None]:
    """Read and classify every rank; returns (the reference rank's Profile, its Roofline, the
    CrossRank, the folder holding parked tables or None). `hardware_for(ProfileInfo)` gives the
    part a rank ran on. At most `workers` tables plus the slowest so far are in memory."""
    from .profiling.discover import discover_ranks, empty_ranks
    from .profiling.load import load_profile
    from .roofline.classify import classify

    pol = policy
    rp = pol.get("ranks", {})
    workers = int(workers or rp.get("workers", 1))
    units = discover_ranks(Path(path).expanduser(), run=run)
    park = tempfile.TemporaryDirectory(prefix="cannbot-ranks-") if keep_tables else None

    best: list[_Loaded] = []          # the slowest rank so far, kept whole
    lock = threading.Lock()

    def one(item: tuple[int, Path]) -> RankView:
        rank, root = item
        prof = load_profile(root, run=run, step=step, steps=steps, counters="analysis",
                            policy=pol)
        roof = classify(prof.table, hardware_for(prof.info), policy=pol)
        view = _view(rank, prof, roof, pol)
        if park is not None:
            view.parked = Path(park.name) / f"rank{rank}.parquet"
            roof.table.df.write_parquet(view.parked)
        with lock:   # keep this rank whole only while it is the slowest seen
            if not best or _slower(view, best[0].view):
                best[:] = [_Loaded(view, prof, roof)]
        return view

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        views = sorted(pool.map(one, units), key=lambda v: v.rank)
    if not best:
        raise InputError("no rank found", path=str(path))
    ref = best[0]
    root = Path(path).expanduser()
    skipped = tuple((r, str(f.relative_to(root)) if f != root else f.name, why)
                    for r, f, why in empty_ranks(root))
    cross = CrossRank(tuple(views), ref.view.rank, float(rp.get("pace_share", 0.95)), skipped)
    return ref.profile, ref.roofline, cross, park


def _slower(a: RankView, b: RankView) -> bool:
    """a sets the pace over b: busy longer; on a tie, the lower rank."""
    return a.busy_us > b.busy_us or (a.busy_us == b.busy_us and a.rank < b.rank)


def _view(rank: int, prof: Any, roof: Any, pol: Policy) -> RankView:
    from .roofline.verdict import verdict_for

    sigs: dict[tuple, RankSig] = {}
    for s in roof.signatures:
        key = signature_key(s)
        if key in sigs:        # same op, other input shapes (GMM tokens): keep the larger share
            if s.total_us <= sigs[key].total_us:
                continue
        d = verdict_for(s, pol["verdict"])
        sigs[key] = RankSig(rank, s.count, s.total_us, s.mean_us, d.verdict, d.by, s.bytes,
                            s.weight_bytes, s.input_shapes)
    info = prof.info
    return RankView(rank, info.path, info.rows, info.rows_skipped, roof.step_time_us,
                    _busy_us(prof.table.df, pol), tuple(info.steps), sigs, tuple(roof.signatures))


def _busy_us(df: Any, pol: Policy) -> float:
    """Kernel time outside communication (configs/op_classes.yaml, as the windows class it).

    Judged per distinct type, name and core (a rank has a few hundred of each, and a million
    rows): a row is communication when its type, its name or its core is."""
    import polars as pl

    from .windows.classes import default_rules
    from .windows.types import COMM

    rules = default_rules(pol)

    def comm(col: str, at: int) -> list[str]:
        values = df[col].drop_nulls().unique().to_list()
        return [v for v in values
                if rules.kind_of(*(v if i == at else None for i in range(3))) == COMM]

    is_comm = (pl.col("type").is_in(comm("type", 0)) | pl.col("name").is_in(comm("name", 1))
               | pl.col("core").is_in(comm("core", 2))).fill_null(False)
    return float(df.select(pl.col("dur_us").filter(~is_comm).sum()).item() or 0.0)


def measure_windows(cross: CrossRank, target_keys: set[tuple], *, lookback: int | None,
                    min_window_us: float | None, policy: Policy) -> None:
    """Window pass: each parked rank's windows for the targets' signatures (one table at a
    time), recorded per (signature key, cluster): usable µs, or None with the reason."""
    import polars as pl

    from .profiling.table import KernelTable
    from .windows import find_windows

    for v in cross.views:
        if v.parked is None:
            continue
        targets = [s for s in v.signatures if signature_key(s) in target_keys]
        if not targets:
            continue
        df = pl.read_parquet(v.parked)
        res = find_windows(KernelTable(df), targets, lookback=lookback,
                           min_window_us=min_window_us, all_signatures=v.signatures,
                           policy=policy)
        del df
        for c in res.candidates:
            v.windows[(signature_key(c.target), c.cluster)] = (c.window.time_us, c.window.reason)
        for r in res.rejections:
            if r.target is not None:
                v.windows[(signature_key(r.target), r.cluster)] = (None, r.reason)
