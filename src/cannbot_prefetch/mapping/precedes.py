"""Which profiled op the inserted call precedes (issue 10 item 4): the index in the candidate's
`lead` (ops before the target, nearest first) of the first op that runs after the insertion
point; -1 when that is the target itself, None when it lies further back than `lead` reaches.
windows/placed.py costs the window from it, so a better placement gives a better window.

With call stacks: an op runs after the insertion when its frame in the insertion method lies at
or after the anchor statement (`before`), or after it (`after`), in the same call of that method
(walking back from the target, a frame line that jumps forward is the previous call). With
`scope: next_layer` the target's own call of the method runs wholly after the insertion, which
sits in the previous call. Ops without a stack (HCCL rows) go with the ops around them.
Without stacks: an exact placement gives the measured window; otherwise the linears between the
insertion and the target are counted back on the timeline (one MatMul kernel each), plus at most
one op per other call before the first of them.
"""

from __future__ import annotations

from typing import Any

from .source import Event, ModelSource
from .stack import model_places

# tensor methods that launch no kernel of their own (views)
_VIEWS = {"view", "reshape", "transpose", "contiguous", "size", "unsqueeze", "squeeze", "expand",
          "flatten", "permute", "to", "float", "type_as", "chunk", "split", "unflatten",
          "view_as", "dim", "numel", "shape"}


def precedes(ms: ModelSource, events: list[Event], src_map, cand: Any, t_idx: int,
             pl: Any, rules: Any) -> tuple[int | None, str]:
    """(index into cand.lead of the first op after the insertion, "stack" | "calls")."""
    if cand.lead_stack and pl.stmt is not None:
        k = _by_stack(ms, src_map, cand, pl)
        if k != "unknown":
            return k, "stack"
    return _by_calls(events, cand, t_idx, pl, rules), "calls"


def _line_in(stack: str, ms: ModelSource, src_map, cls: str, method: str) -> int | None:
    for p in model_places(stack, ms, src_map):
        if (p.cls, p.method) == (cls, method):
            return p.line
    return None


def _by_stack(ms, src_map, cand, pl) -> int | None | str:
    cls, method = pl.insert.cls, pl.insert.method
    m = ms.method(cls, method)
    if m is None or pl.stmt >= len(m.stmts):
        return "unknown"
    st = m.stmts[pl.stmt]
    bound = st.start if pl.insert.position == "before" else st.end + 1
    prev = _line_in(cand.lead_stack, ms, src_map, cls, method)
    if prev is None:
        return "unknown"
    own_call = pl.scope == "next_layer"
    last = -1
    for i, lo in enumerate(cand.lead):
        if not lo.op.stack:
            continue
        line = _line_in(lo.op.stack, ms, src_map, cls, method)
        if line is None:
            return last                     # left the method's call: before the insertion
        if line > prev:                     # the method's previous call
            if not own_call:
                return last
            own_call = False
        prev = line
        if not own_call and line < bound:
            return last
        last = i
    return None


def _invocation(events: list[Event], t_idx: int, cls: str, method: str) -> tuple[int, list[int]]:
    t = events[t_idx]
    d = max((i for i, h in enumerate(t.path) if (h.cls, h.method) == (cls, method)), default=-1)
    if d < 0:
        return -1, []
    pre = t.path[:d]
    return d, [i for i, e in enumerate(events) if len(e.path) > d and e.path[:d] == pre
               and (e.path[d].cls, e.path[d].method) == (cls, method)]


def _kernel_calls(events: list[Event], idx: list[int]) -> list[str]:
    """'linear', 'norm' or 'op' per call that launches a kernel (containers and views left
    out)."""
    out = []
    for i in idx:
        e = events[i]
        if e.kind == "module" and e.child:
            continue
        if e.kind == "func" and e.attr.split(".")[-1] in _VIEWS:
            continue
        norm = e.kind == "norm" or "norm" in (e.attr or e.leaf.call).lower()
        out.append("linear" if e.kind == "linear" else "norm" if norm else "op")
    return out


def _by_calls(events: list[Event], cand, t_idx: int, pl, rules) -> int | None:
    if pl.shift == "exact":
        return len(cand.window.ops) - 1
    d, inv = _invocation(events, t_idx, pl.insert.cls, pl.insert.method)
    if d < 0 or pl.stmt is None:
        return None
    after = (lambda s: s >= pl.stmt) if pl.insert.position == "before" else (lambda s: s > pl.stmt)
    first = next((i for i in inv if after(events[i].path[d].stmt)), None)
    if pl.scope == "next_layer":
        ahead = ([i for i in inv if first is not None and i >= first]
                 + [i for i in inv if i < t_idx])
    else:
        if first is None or first > t_idx:
            return -1
        ahead = [i for i in inv if first <= i < t_idx]
    calls = _kernel_calls(events, ahead)
    n_lin = calls.count("linear")
    lead, k = cand.lead, -1
    for _ in range(n_lin):
        k = next((i for i in range(k + 1, len(lead)) if lead[i].matmul), None)
        if k is None:
            return None
    # the calls before the first linear (nearest the target first) each stand for the next
    # non-MatMul op back; a norm kernel only for a norm call (a call that slices or views,
    # `slice_logits_to_keep`, launches none: windows `norms`)
    for c in reversed(calls[:calls.index("linear")] if n_lin else calls):
        if k + 1 >= len(lead) or lead[k + 1].matmul:
            break
        if rules.is_norm(lead[k + 1].op.type) and c != "norm":
            continue
        k += 1
    return k
