"""The placed window (issue 10 item 4): the span between where the code really issues the
prefetch and the target call, costed from the ops in it.

Mapping says which profiled op the inserted call precedes (`Candidate.lead[k]`, -1 for the target
itself); the window is then lead[0..k]: it starts when the op before them ends (the dependency is
ready) and ends at the target's start. When that is the measured window the measured numbers
stand. Otherwise the ops decide as in the seed's table: a memory-bound or communication op inside
is never free window time, and moving the insertion earlier only adds ops, so the site has "no
safe window"; a span under `min_window_us` has no window either. The branch follows from what
precedes the span: a memory-heavy op (its output starts it, 3a) or a light one (3b).
"""

from __future__ import annotations

from dataclasses import replace

from .. import reasons
from .types import COMM, HEAVY, Candidate, Window
from ..i18n import said


def measured_first(cand: Candidate) -> int:
    """Index in `lead` of the measured window's first op (-1: the window holds no op)."""
    return len(cand.window.ops) - 1


def placed_window(cand: Candidate, k: int | None, min_us: float, where: str,
                  ) -> Window | tuple[str, str]:
    """The window of an insertion that precedes cand.lead[k] (-1: the target); None = further
    back than the ops recorded. `where` names the insertion for the reasons. Returns the Window
    or (reason code, reason)."""
    if k is None:
        return (reasons.NO_SAFE_WINDOW,
                said("said.too_far", where=where, n=len(cand.lead)))
    if k == measured_first(cand):
        return cand.window
    lead = cand.lead
    ops = tuple(lo.op for lo in lead[:k + 1])
    busy = [o for o in ops if o.cls in (HEAVY, COMM)]
    if busy:
        names = ", ".join(said("part.op_why", op=o.type, why=o.why) for o in reversed(busy))
        return (reasons.NO_SAFE_WINDOW,
                said("said.overlaps_busy", where=where, names=names))
    before = lead[k + 1] if k + 1 < len(lead) else None
    if before is not None:
        raw, overlap, low = before.end_us, before.overlap_us, before.min_free_us
    elif k >= 0:
        raw, overlap, low = lead[k].start_us, 0.0, lead[k].start_us
    else:
        raw, overlap, low = 0.0, 0.0, 0.0
    usable = raw - overlap
    if usable < min_us:
        return (reasons.WINDOW_TOO_SHORT,
                said("said.too_short_ops", where=where, usable=usable, min_us=min_us,
                     ops=", ".join(o.type for o in reversed(ops))) if ops else
                said("said.too_short_none", where=where, usable=usable, min_us=min_us))
    if before is not None and before.op.cls == HEAVY:
        branch, start, start_op = "3a", "output", before.op
        why = said("said.placed_3a", op=start_op.type, why=start_op.why,
                   ops=", ".join(o.type for o in reversed(ops)) or said("part.no_op"))
    elif ops:
        branch, start, start_op = "3b", "input", ops[-1]
        why = said("said.placed_3b", op=start_op.type, ops=", ".join(o.type for o in reversed(ops)))
    else:             # idle time right before the target (a host-bound timeline)
        start_op = before.op if before is not None else cand.window.start_op
        branch, start = "3b", "output"
        why = said("said.placed_idle", op=start_op.type)
    w = cand.window
    return replace(w, branch=branch, start=start, start_op=start_op, ops=ops,
                   time_us=round(usable, 3), min_us=round(min(usable, low), 3),
                   raw_us=round(raw, 3), overlap_us=round(overlap, 3),
                   reason=said("said.placed_was", why=why, branch=w.branch, us=w.time_us))
