"""Whether an insertion runs once per step: a method called from two places of one step.

A prefetch hides the weight's first read in a step (seed 003: after the dependency, before the
target); a second read of the same weight later in that step is an L2 question, not a second
prefetch. The insertion is planned on the call path of the target's first run, so it precedes
that run; what remains is that its line runs once. A line in a method the step calls from two
places (gemma3n's `Gemma3nAltUp._compute_router_modalities`, called by `predict` and by
`correct` of one decoder-layer call, the second time after the target already ran) fires each
time: twice per step, the second prefetch after the first read. Such a placement is refused with
the reason; the candidates further out (the caller that runs once, before the first call) are
tried next, as for any placement apply refuses.

A step is the flattened forward pass (flatten.py: one decoder layer stands for all, so a call
twice in it is twice per layer call). The same method called on two different objects (two MLP
instances) runs once on each and is no repeat. Two calls in the two branches of one if/else run
one at a time and are no repeat either, nor are a call in an `if` arm that returns and one after
that `if` (dory's decoder layer: `if self.is_attention: out = self.mixer(...); return ...` then
`out = self.mixer(hidden_states)`): pysource/paths.py decides which statements exclude each
other.
"""

from __future__ import annotations

from ..i18n import said
from ..legality import Placement
from ..pysource.paths import exclusive, parting
from .source import Event, Hop, ModelSource


def object_path(path, n: int) -> tuple:
    """The module the first `n` hops of `path` reach, as the attribute steps from the root's
    `self` with the class each runs (`self.altup` then `self` then `self.modality_router` ->
    (("altup", "Gemma3nAltUp"), ("modality_router", "")); a hop with no fixed path (a
    layer-loop variable) stands for itself. Two classes behind one step are two objects: a
    layer of one kind or the other, a module built as one class or another."""
    out: list = []
    for k, h in enumerate(path[:n]):
        cls = path[k + 1].cls if k + 1 < len(path) else ""
        acc = h.access
        if acc is None:
            out.append(((h.cls, h.method, h.stmt, h.call), cls))
        elif acc != "self":
            out.append((acc[len("self."):] if acc.startswith("self.") else acc, cls))
    return tuple(out)


def invocations(events: list[Event], cls: str, method: str, obj: tuple) -> list[tuple[Hop, ...]]:
    """The distinct call chains in `events` that run `cls.method` on the object `obj`, in
    order: one per place of the step that calls it."""
    seen: dict[tuple, None] = {}
    for e in events:
        for k, h in enumerate(e.path):
            if (h.cls, h.method) == (cls, method) and object_path(e.path, k) == obj:
                seen.setdefault(tuple(e.path[:k]), None)
                break
    return list(seen)


def exclusive_paths(ms: ModelSource, a: tuple[Hop, ...], b: tuple[Hop, ...]) -> bool:
    """The two chains part at statements in two arms of one if/elif/else, an `if` whose arm
    returns and the code after it included (pysource/paths.py `exclusive`)."""
    k = parting(a, b)
    if k == min(len(a), len(b)) or (a[k].cls, a[k].method) != (b[k].cls, b[k].method):
        return False
    m = ms.method(a[k].cls, a[k].method)
    if m is None:
        return False
    i, j = sorted((a[k].stmt, b[k].stmt))
    if i == j or not (0 <= i < j < len(m.stmts)):
        return False
    return exclusive(m, i, j) is not None


def repeated(ms: ModelSource, events: list[Event], pl: Placement) -> str | None:
    """Why `pl`'s line would run more than once per step (None: once). Its method's object is
    the one the planned call path (`pl.callers`) reaches."""
    if not pl.callers:
        return None
    ins = pl.insert
    obj = object_path(pl.callers, len(pl.callers) - 1)
    chains = invocations(events, ins.cls, ins.method, obj)
    if not chains:
        return None
    first = next((c for c in chains if c == tuple(pl.callers[:-1])), chains[0])
    again = [c for c in chains if c != first and not exclusive_paths(ms, first, c)]
    if not again:
        return None

    def caller(c):
        return f"{c[-1].cls}.{c[-1].method} line {c[-1].line}" if c else "the root"

    k = next((i for i, (x, y) in enumerate(zip(first, again[0])) if x != y), 0)
    step = f"{first[k].cls}.{first[k].method}" if first else "the forward pass"
    return said("said.called_again", fn=f"{ins.cls}.{ins.method}", n=len(again) + 1, step=step,
                callers=", ".join(caller(c) for c in [first, *again]))


def target_runs(events: list[Event], t_idx: int) -> list[int]:
    """The events that run the target's own module (the first run's object) in one step."""
    t = events[t_idx]
    obj = object_path(t.path, len(t.path))
    return [i for i, e in enumerate(events) if (e.kind, e.owner, e.attr) == (t.kind, t.owner, t.attr)
            and object_path(e.path, len(e.path)) == obj]


def runs_note(events: list[Event], t_idx: int, ms: ModelSource | None = None) -> str | None:
    """A plan note when the target runs more than once per step: it is prefetched once, before
    its first run (None when it runs once). Runs on exclusive paths (`ms` given: two arms of
    one `if`) are one run each way, not a repeat."""
    runs = target_runs(events, t_idx)
    if ms is not None:
        first = events[runs[0]].path if runs else ()
        runs = runs[:1] + [i for i in runs[1:] if not exclusive_paths(ms, first, events[i].path)]
    if len(runs) < 2:
        return None
    t = events[t_idx]
    where = ", ".join(dict.fromkeys(f"{events[i].path[-2].cls}.{events[i].path[-2].method}"
                                    if len(events[i].path) > 1 else "the root" for i in runs))
    return said("said.runs_again", target=f"{t.owner}.{t.attr}", n=len(runs), where=where)
