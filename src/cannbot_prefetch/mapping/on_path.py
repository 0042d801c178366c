"""Whether an insertion runs on every path that runs its target (issue 32).

Seed 003 places the prefetch after its dependency and before its target; both must run in the
same forward. A line in one arm of an `if` fires only when the model takes that arm, so:
- a same-layer insertion must dominate every call of the target in its method (the calls the
  flattened forward makes on the same object): granitemoehybrid's decoder layer runs its MoE in
  both arms of `if self.shared_mlp is None:`, so a prefetch before the call in the first arm
  never fires in a model built with a shared MLP. When it does not, the insertion is hoisted
  before the `if` (`hoisted`), where the dependency is already computed, else refused naming
  the branch;
- a next-layer insertion (after this layer's last MatMul) must lie in a module every layer
  builds as one class (dory's `self.mixer` is attention in one layer, an MLP in the next: the
  next layer's twin may not hold the weight) and run before every return of its method: zaya's MoE block returns from `if not self.is_sequence_parallel:` and runs its
  sequence-parallel path after it, so a line after the second path's experts call never runs
  at TP 1.
Which statements exclude or dominate each other is pysource/paths.py.
"""

from __future__ import annotations

from dataclasses import replace

from ..legality import Placement
from ..legality.lookup import whole_chain
from ..pysource import Method, call_name
from ..pysource.paths import Arm, arms, dominates, on_every_exit, parting
from .source import Event, LinearAttr, ModelSource


def _arm_text(a: Arm) -> str:
    held = " and ".join(t if v else f"not ({t})" for t, v in a.tests[-1:])
    which = "the `if` arm" if a.arm == 0 else "an `elif` arm" if a.arm > 0 else "the `else` path"
    if not a.tests:
        return f"the loop at line {a.line}" if a.arm == 0 else f"a handler of the `try` at line {a.line}"
    return f"{which} of the `if` at line {a.line} (where `{held}`)"


def _at(m: Method, pl: Placement) -> int | None:
    """The statement the insertion's line belongs to: its anchor statement, or the whole
    if/elif/else apply moves an `after` line below (legality.lookup `whole_chain`)."""
    if pl.stmt is None or not 0 <= pl.stmt < len(m.stmts):
        return None
    if pl.insert.position == "after":
        head = whole_chain(m, m.stmts[pl.stmt], pl.dependency.split(".")[0])
        if head is not None:
            return next((k for k, s in enumerate(m.stmts) if s is head), pl.stmt)
    return pl.stmt


def target_stmts(events: list[Event], pl: Placement, lin: LinearAttr) -> list[int]:
    """The statements of the insertion's method that run the target on the same object: the
    call chain above the method as in `pl.callers`, the same module called there
    (`self.self_attn[1]`, not the layer's other attention `self.self_attn[0]`)."""
    k = len(pl.callers) - 1
    h, prefix = pl.callers[-1], tuple(pl.callers[:-1])
    return sorted({e.path[k].stmt for e in events if e.kind == "linear"
                   and (e.owner, e.attr) == (lin.cls, lin.attr) and len(e.path) > k
                   and tuple(e.path[:k]) == prefix
                   and (e.path[k].cls, e.path[k].method, e.path[k].access)
                   == (h.cls, h.method, h.access)})


def off_path(ms: ModelSource, events: list[Event], pl: Placement, lin: LinearAttr) -> str | None:
    """Why `pl`'s line would not run on every path that runs its target (None: it does)."""
    if not pl.callers:
        return None
    h = pl.callers[-1]
    m = ms.method(h.cls, h.method)
    at = _at(m, pl) if m is not None else None
    if at is None:
        return None
    got = arms(m)
    where = f"{pl.insert.cls}.{pl.insert.method}"
    line = m.stmts[at].start
    if pl.scope == "next_layer":
        chosen = _chosen_module(ms, pl.callers)
        if chosen is not None:
            return (f"the next layer's prefetch in {where} lies below {chosen[0]}, which each "
                    f"layer builds as one of {', '.join(chosen[1])}: the next layer's may be the "
                    f"other one, without the target")
        if on_every_exit(m, at, got):
            return None
        return (f"the next layer's prefetch at line {line} of {where} lies in "
                f"{_arm_text(got[at][-1])}: a forward that leaves the method another way never "
                f"runs it")
    for j in target_stmts(events, pl, lin):
        if not dominates(m, at, j, got):
            n = parting(got[at], got[j])
            a = got[j][n] if len(got[j]) > n else got[at][n] if len(got[at]) > n else None
            arm = _arm_text(a) if a is not None else "a path before it"
            return (f"the target also runs at line {m.stmts[j].start} of {where}, in {arm}, which "
                    f"the insertion at line {line} does not reach: it would not fire there")
    return None


def _chosen_module(ms: ModelSource, callers) -> tuple[str, list[str]] | None:
    """(`self.mixer`, its classes) for the first module between the decoder layer and the
    insertion that `__init__` builds as one of several classes (dory's attention-or-MLP mixer):
    a next-layer line below it prefetches the twin module of the next layer, which may be of
    the other class. None when every step is one class."""
    from .place import layer_depth

    ld = layer_depth(ms, callers)
    if ld is None:
        return None
    for h in callers[ld + 1:-1]:
        acc = h.access or ""
        if acc.startswith("self.") and "." not in acc[5:]:
            alts = list(dict.fromkeys(ms.alternatives.get((h.cls, acc[5:].split("[")[0]), [])))
            if len(alts) > 1:
                return acc, alts
    return None


def hoisted(ms: ModelSource, events: list[Event], pl: Placement, lin: LinearAttr
            ) -> Placement | None:
    """`pl` moved before the `if` whose arms run the target (so it dominates every run): right
    after the statement that computes its dependency there, else before the first call that
    runs between that and the `if`. None when no such statement names a call to anchor on."""
    if pl.scope != "same" or not pl.callers or pl.stmt is None:
        return None
    h = pl.callers[-1]
    m = ms.method(h.cls, h.method)
    runs = target_stmts(events, pl, lin)
    if m is None or not runs:
        return None
    got = arms(m)
    common = got[runs[0]]
    for j in runs[1:]:
        common = common[:parting(common, got[j])]
    deeper = next((got[j][len(common)] for j in runs if len(got[j]) > len(common)), None)
    if deeper is None or deeper.chain < 0:
        return None
    head = deeper.chain                 # the `if` (or loop) whose arms part the runs
    dep = pl.dependency.split(".")[0]
    defs = [k for k in range(head) if dep in m.stmts[k].defs and dominates(m, k, head, got)]
    if not defs and dep not in m.params:
        return None
    first = defs[-1] if defs else -1
    for k in range(max(first, 0), head):
        s = m.stmts[k]
        if s.header or not dominates(m, k, head, got):
            continue
        anchor = next((call_name(c) for c in s.calls if call_name(c).startswith("self.")), None)
        if anchor is None:
            continue
        pos = "after" if k == first else "before"
        note = (f"the target runs in more than one arm of the `if` at line {m.stmts[head].start} "
                f"of {h.cls}.{h.method}: the prefetch goes before it, {pos} {anchor}, on "
                f"'{pl.dependency}'")
        return replace(pl, insert=replace(pl.insert, anchor_call=anchor, position=pos),
                       stmt=k, anchor_line=s.start, shift="earlier", note=note)
    return None
