"""Placements after a step the window call is only part of: after an if/elif/else whose every
branch computes the name (`after_chain`), and where a returned tuple is unpacked
(`after_unpack`), before the next statement that runs a module."""

from __future__ import annotations

import libcst as cst

from ..legality import Placement
from ..legality.lookup import statement_ids
from ..contract.plan import Insert, Join
from ..pysource import call_name
from .source import Hop, ModelSource
from .dataflow import post_calls


def after_chain(ms: ModelSource, wh: Hop, outs: list[str], wexpr: str, join: Join, file: str,
                shift: str, callers) -> list[Placement]:
    """The window call sits in one branch of an if/elif/else whose branches all compute the
    names it assigns (each branch a variant of the same step): the prefetch goes after the whole
    chain, before the next statement that calls something, so it runs whichever branch ran."""
    m = ms.method(wh.cls, wh.method)
    if m is None or not outs:
        return []
    k = wh.stmt
    w = m.stmts[k]
    head = next((j for j in range(k - 1, -1, -1) if m.stmts[j].header
                 and isinstance(m.stmts[j].node, cst.If) and len(m.stmts[j].indent) < len(w.indent)
                 and m.stmts[j].start < w.start <= m.stmts[j].end), None)
    if head is None:
        return []
    h = m.stmts[head]
    branches = _branch_defs(m, head)
    if len(branches) < 2 or not isinstance(_last_orelse(h.node), cst.Else):
        return []
    names = [n for n in outs if all(n in d for d in branches)]
    if not names:
        return []
    counts: dict[str, int] = {}
    for st in m.stmts:
        for c in st.calls:
            counts[call_name(c)] = counts.get(call_name(c), 0) + 1
    # the next statement at the chain's level that calls something only it calls (an anchor
    # apply resolves to that statement)
    nxt, anchor = None, ""
    for st in m.stmts[head + 1:]:
        if st.start <= h.end or not st.calls:
            continue
        if len(st.indent) < len(h.indent):
            break
        if len(st.indent) > len(h.indent):
            continue
        calls = [call_name(c) for c in (st.calls if st.header else post_calls(st.node))]
        anchor = next((c for c in reversed(calls) if counts.get(c) == 1), "")
        nxt = st
        break
    if nxt is None or not anchor:
        return []
    return [Placement(Insert(wh.cls, wh.method, anchor, "before"), n, wexpr, join, file, shift,
                      f"{wh.call} runs in one branch of an if/else whose every branch computes "
                      f"'{n}': the prefetch goes after the whole if/else, before {anchor}",
                      callers=callers, anchor_line=nxt.start, stmt=m.stmts.index(nxt)) for n in names]


def _last_orelse(node: cst.If):
    while isinstance(node, cst.If) and isinstance(node.orelse, cst.If):
        node = node.orelse
    return node.orelse


def _branch_defs(m, head: int) -> list[set[str]]:
    """Names each branch of the if/elif/else at stmts[head] defines."""
    node = m.stmts[head].node
    blocks = []
    branch = node
    while isinstance(branch, cst.If):
        blocks.append(branch.body)
        branch = branch.orelse
    if isinstance(branch, cst.Else):
        blocks.append(branch.body)
    out = []
    for b in blocks:
        ids = statement_ids(b)
        out.append(set().union(*(st.defs for st in m.stmts if id(st.node) in ids)))
    return out


def after_unpack(ms: ModelSource, wh: Hop, outs: list[str], prefer: str, wexpr: str, join: Join,
                  file: str, lost: bool, callers) -> list[Placement]:
    """The window call returns a tuple that the method unpacks next (`attn_ret = ...;
    hidden_states, o_proj = attn_ret`, in if/else too): the same moment, before the next
    statement that runs a module, depending on one of the unpacked tensors."""
    from ..legality import unpacked_from

    m = ms.method(wh.cls, wh.method)
    if m is None or len(outs) != 1:
        return []
    base = m.stmts[wh.stmt]
    names: list[str] = []
    last = None
    for j in range(wh.stmt + 1, len(m.stmts)):
        st = m.stmts[j]
        got = unpacked_from(st)
        if got is not None and got[0] == outs[0]:
            names += [n for n in got[1] if n != "_" and n not in names]
            last = j
        elif outs[0] in st.defs:
            break                 # the name is computed again: later unpacks are another tuple
    if last is None:
        return []
    nxt = next((st for st in m.stmts[last + 1:] if st.indent == base.indent and st.in_block
                and not st.header and any(call_name(c).startswith("self.") for c in st.calls)),
               None)
    if nxt is None:
        return []
    anchor = next(call_name(c) for c in post_calls(nxt.node) if call_name(c).startswith("self."))
    key = prefer.split(".")[-1]
    names.sort(key=lambda n: not (n == key or key in n))
    return [Placement(Insert(wh.cls, wh.method, anchor, "before"), n, wexpr, join, file,
                      "later" if lost else "exact",
                      f"{wh.call} returns a tuple: the prefetch goes where it is unpacked, before "
                      f"{anchor}, depending on '{n}'", callers=callers,
                      anchor_line=nxt.start, stmt=m.stmts.index(nxt))
            for n in names]
