"""Where the prefetch goes: the target's call, the window's call, their lowest common caller.

Given the target's event and the window start op's event in the flattened forward pass:
  - the lowest common caller is the deepest method both call paths pass through with the same
    call chain above it (o_proj in the attention and gate_proj in the MLP meet in the decoder
    layer's forward);
  - 3b (light op, "input"): insert before the statement at that level that runs the window op,
    the dependency is that call's input;
  - 3a (large MatMul, "output"): insert after it, the dependency is the value it assigns;
  - the weight expression is the target's attribute chain seen from that method
    (`self.mlp.gate_proj.weight`; fused expert Parameters have no `.weight`).
When the window op sits deeper inside a call that also runs heavy MatMuls before it (the final
norm inside `self.model`, seen from the LM head), the nearest legal insertion comes later than
the window (shift "later"); when the only named value is earlier (down_proj: the MLP input `x`,
whose statement also runs gate/up), the prefetch starts earlier (shift "earlier"). apply's own
checks (`rewrite.engine.check_site`, legality's rule and more) have the last word: the callers try each candidate
placement, and each join point (`join_candidates`), until apply accepts one.

Insertions go only into the files the user named (`ModelSource.primary`); files loaded because
the model imports them are read, never edited.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterator

import libcst as cst

from ..legality import Placement
from ..plan import Insert, Join
from ..pysource import Stmt, assigned_targets, call_name, dotted
from .source import Event, Hop, LinearAttr, ModelSource


def join_candidates(pl: Placement) -> Iterator[Join]:
    """Where the side stream may rejoin, innermost first: the end of the method holding the
    prefetch; else (its value is computed inside `return`) right after the call that runs that
    method in its caller, or that caller's end, outwards."""
    yield pl.join
    hops = pl.callers
    for i in range(len(hops) - 2, -1, -1):
        h = hops[i]
        yield Join(h.cls, h.method, f"after:{h.call}")
        yield Join(h.cls, h.method, "end")


def _stmt(ms: ModelSource, cls: str, method: str, idx: int) -> Stmt:
    return ms.method(cls, method).stmts[idx]  # type: ignore[union-attr]


def _call_node(s: Stmt, call: str) -> cst.Call | None:
    for c in s.calls:
        if call_name(c) == call:
            return c
    return None


def _first_name(nodes) -> str | None:
    for n in nodes:
        if isinstance(n, cst.Name) and n.value not in ("self", "None", "True", "False"):
            return n.value
        for sub in _names_in(n):
            return sub
    return None


def _names_in(node: cst.CSTNode) -> list[str]:
    out: list[str] = []

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            if n.value not in ("self", "None", "True", "False"):
                out.append(n.value)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            # `self.x` is not a local; `a.b` starts with the local `a`
            d = dotted(n) or ""
            if d.startswith("self."):
                return False
            return True

        def visit_Call(self, n: cst.Call) -> bool:
            # a method's receiver first: in `out.transpose(1, 2).to(dtype)` the value that
            # flows on is `out`, not the argument `dtype`
            if isinstance(n.func, cst.Attribute) and not (dotted(n.func) or "").startswith("self."):
                n.func.value.visit(self)
            for a in n.args:
                a.value.visit(self)
            return False

    node.visit(V())
    return out


def input_of(ms: ModelSource, hop_cls: str, method: str, idx: int, call: str,
             params: list[str]) -> str | None:
    """The local value a call consumes: its first positional Name argument, else the first
    local name its arguments read, else the first one the statement reads."""
    s = _stmt(ms, hop_cls, method, idx)
    node = _call_node(s, call)
    if node is not None:
        for a in node.args:
            if isinstance(a.value, cst.Name) and a.value.value != "self":
                return a.value.value
        for a in node.args:
            names = _names_in(a.value)
            if names:
                return names[0]
    names = [n for n in _names_in(s.node) if n in s.uses or n in params]
    return names[0] if names else None


def outputs_of(s: Stmt, prefer: str = "") -> list[str]:
    """The names a statement assigns, the one named like `prefer` (the window op:
    `h, down_proj, _ = self.mlp(x)`) first, then in order (`x, _ = self.o_proj(x)` -> [x])."""
    if s.is_return or not isinstance(s.node, cst.SimpleStatementLine):
        return []
    names = [t.value for t in assigned_targets(s) if isinstance(t, cst.Name) and t.value != "_"]
    key = prefer.split(".")[-1]
    return sorted(dict.fromkeys(names), key=lambda n: not (key and (n == key or key in n)))


def output_of(s: Stmt, prefer: str = "") -> str | None:
    got = outputs_of(s, prefer)
    return got[0] if got else None


def weight_expr(path, depth: int, lin: LinearAttr) -> str | None:
    """`self.a.b.attr(.weight)` for the target's hops from `depth` down (each hop's module path
    from its method's self, `self.mlps[0]` included); None when a hop is not a fixed path (a
    loop variable, a function)."""
    expr = "self"
    for i in range(depth, len(path)):
        acc = path[i].access
        if acc is None or not acc.startswith("self"):
            return None
        expr += acc[len("self"):]
    return expr if lin.is_param else expr + ".weight"


def common_depth(a, b) -> int:
    """Index of the lowest common caller's hop (same method, same call chain above it)."""
    d = -1
    for i in range(min(len(a), len(b))):
        if (a[i].cls, a[i].method) != (b[i].cls, b[i].method):
            break
        d = i
        if (a[i].stmt, a[i].call) != (b[i].stmt, b[i].call):
            break
    return d


def _is_param_use(ms: ModelSource, e: Event) -> bool:
    """A weight read in an expression (`self.gate_up_proj[idx]`), not a call to anchor on
    (a module call that runs registered weights, `self.experts(...)`, is one)."""
    lin = ms.linears.get((e.owner, e.attr))
    if e.kind != "linear" or lin is None or (not lin.is_param and e.leaf.call != e.leaf.access):
        return False
    h = e.leaf
    return _call_node(_stmt(ms, h.cls, h.method, h.stmt), h.call) is None


def _under(events: list[Event], prefix) -> list[int]:
    n = len(prefix)
    return [i for i, e in enumerate(events) if e.path[:n] == prefix]


def _editable(ms: ModelSource, cls: str) -> bool:
    return cls in ms.classes and ms.file_of(cls) in ms.primary


def _post_calls(node) -> list[cst.Call]:
    out: list[cst.Call] = []

    class V(cst.CSTVisitor):
        def leave_Call(self, original: cst.Call) -> None:
            out.append(original)

    node.visit(V())
    return out


def place(ms: ModelSource, events: list[Event], t_idx: int, w_idx: int, start: str,
          lin: LinearAttr) -> Placement | str:
    """The preferred placement for a window starting at the input (3b) / output (3a) of
    events[w_idx] (`place_all` gives the alternatives too)."""
    got = place_all(ms, events, t_idx, w_idx, start, lin)
    return got if isinstance(got, str) else got[0]


def place_all(ms: ModelSource, events: list[Event], t_idx: int, w_idx: int, start: str,
              lin: LinearAttr, prefer_cls: str = "") -> list[Placement] | str:
    """Placements for a window starting at the input (3b) / output (3a) of events[w_idx], best
    first (a statement assigning several names offers each as the dependency)."""
    t, w = events[t_idx], events[w_idx]
    if _is_param_use(ms, w) or _is_param_use(ms, t) and len(t.path) == 1:
        return "fused expert Parameters are used, not called: there is no call to anchor on"
    if w_idx >= t_idx:
        return _cross_layer(ms, events, t_idx, w_idx, start, lin, prefer_cls)
    d = common_depth(t.path, w.path)
    if d < 0:
        return "the window op and the target share no calling method"
    th, wh = t.path[d], w.path[d]
    if not _editable(ms, th.cls):
        return (f"the window op and the target meet in {th.cls}.{th.method}, which is not in the "
                f"model source named by --model-src (imported code is not edited)")
    m = ms.method(th.cls, th.method)
    params = list(m.params) if m else []
    wexpr = weight_expr(t.path, d, lin)
    if wexpr is None:
        return (f"the target is reached from {th.cls}.{th.method} through "
                f"'{t.path[d].call}', which is not a fixed module path")
    join = Join(th.cls, th.method, "end")
    file = ms.file_of(th.cls)
    callers = tuple(t.path[:d + 1])
    w_deeper = len(w.path) > d + 1
    if th.stmt == wh.stmt:
        # one statement runs both (the nested MLP line): before it, on its input
        dep = input_of(ms, th.cls, th.method, th.stmt, th.call, params)
        if dep is None:
            return f"no local value feeds {th.call} in {th.cls}.{th.method}"
        inside = [i for i in _under(events, t.path[:d]) if len(events[i].path) > d
                  and events[i].path[d] == th]
        # a 3a start (a MatMul's output) in this statement always lies after the insertion
        heavy_before = start == "output" or any(events[i].kind == "linear" for i in inside
                                                 if i < w_idx)
        return [Placement(Insert(th.cls, th.method, th.call, "before"), dep, wexpr, join, file,
                          "earlier" if heavy_before else "exact",
                          f"{th.call} and the window op share one statement: the prefetch goes "
                          f"before it, on its input '{dep}'", callers=callers,
                          anchor_line=th.line, stmt=th.stmt)]
    if wh.stmt > th.stmt:
        return "the window op runs after the target's statement"
    wstmt = _stmt(ms, wh.cls, wh.method, wh.stmt)
    inner = _under(events, w.path[:d + 1])
    if start == "input":
        # a call that runs modules or MatMuls before the window op is too early a start
        heavy_before = w_deeper and any(events[i].kind in ("linear", "module")
                                        for i in inner if i < w_idx)
        if not heavy_before:
            dep = input_of(ms, wh.cls, wh.method, wh.stmt, wh.call, params)
            if dep is not None:
                return [Placement(Insert(th.cls, th.method, wh.call, "before"), dep, wexpr, join,
                                  file, "exact", callers=callers, anchor_line=wh.line, stmt=wh.stmt)]
        outs = outputs_of(wstmt, w.attr)
        if not outs:
            return f"{wh.call} in {th.cls}.{th.method} assigns no value to depend on"
        return [Placement(Insert(th.cls, th.method, wh.call, "after"), out, wexpr, join, file,
                          "later", f"the window op runs inside {wh.call} after heavy MatMuls; "
                                   f"the nearest legal start is its output '{out}'",
                          callers=callers, anchor_line=wh.line, stmt=wh.stmt) for out in outs]
    # ops that run inside the same call after the MatMul are window time the insertion loses
    lost = w_deeper and any(events[i].kind in ("linear", "norm", "act", "module")
                            for i in inner if i > w_idx)
    outs = outputs_of(wstmt, w.attr)
    if not outs:
        return f"{wh.call} in {th.cls}.{th.method} assigns no value to depend on"
    note = (f"{wh.call} runs more ops after the window's MatMul; the nearest legal start is its "
            f"output '{{}}'" if lost else "")
    got = [Placement(Insert(th.cls, th.method, wh.call, "after"), out, wexpr, join, file,
                     "later" if lost else "exact", note.format(out), callers=callers,
                     anchor_line=wh.line, stmt=wh.stmt) for out in outs]
    return (after_chain(ms, wh, outs, wexpr, join, file, "later" if lost else "exact", callers)
            + got + _after_unpack(ms, wh, outs, w.attr, wexpr, join, file, lost, callers))


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
        calls = [call_name(c) for c in (st.calls if st.header else _post_calls(st.node))]
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
        ids = _ids_in(b)
        out.append(set().union(*(st.defs for st in m.stmts if id(st.node) in ids)))
    return out


def _ids_in(block) -> set[int]:
    ids: set[int] = set()

    class V(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, node) -> None:
            ids.add(id(node))

    for st in getattr(block, "body", []):
        ids.add(id(st))
        st.visit(V())
    return ids


def _after_unpack(ms: ModelSource, wh: Hop, outs: list[str], prefer: str, wexpr: str, join: Join,
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
    anchor = next(call_name(c) for c in _post_calls(nxt.node) if call_name(c).startswith("self."))
    key = prefer.split(".")[-1]
    names.sort(key=lambda n: not (n == key or key in n))
    return [Placement(Insert(wh.cls, wh.method, anchor, "before"), n, wexpr, join, file,
                      "later" if lost else "exact",
                      f"{wh.call} returns a tuple: the prefetch goes where it is unpacked, before "
                      f"{anchor}, depending on '{n}'", callers=callers,
                      anchor_line=nxt.start, stmt=m.stmts.index(nxt))
            for n in names]


def layer_depth(ms: ModelSource, path) -> int | None:
    """Index of the hop that runs one decoder layer: the outermost call of a module-list
    element through a variable (`for layer in self.layers: layer(...)`, `self.layers[i](...)`)."""
    for i, h in enumerate(path):
        if h.via_list:
            return i
    return None


def _cross_layer(ms: ModelSource, events: list[Event], t_idx: int, w_idx: int, start: str,
                 lin: LinearAttr, prefer_cls: str = "") -> list[Placement] | str:
    """The window op runs late in the layer and the target early: the window is the previous
    layer's op, so the prefetch of the next layer's weight goes right after it, in a module of
    the layer that holds both (the layer, or its MoE block for the next layer's router), as
    `self.next_layer.<...>`: apply links each such module to its twin in the next layer where
    the layer stack is built, and the prefetch is skipped on the last layer.

    The levels tried: where the two call paths part (the window's statement after the
    target's), then every caller above down to the layer, after the statement that runs both
    (one fused call that runs w13 then w2); the class the user named (`prefer_cls`) first."""
    t, w = events[t_idx], events[w_idx]
    ld = layer_depth(ms, t.path)
    if ld is None or w.path[:ld + 1] != t.path[:ld + 1]:
        return "the window op runs after the target and not in the same decoder layer"
    d = common_depth(t.path, w.path)
    if d <= ld:
        return "the window op and the target do not meet inside the decoder layer"
    levels = [k for k in range(d, ld, -1) if w.path[k].stmt >= t.path[k].stmt]
    if not levels or (levels == [d] and w.path[d].stmt == t.path[d].stmt and
                      len(w.path) == d + 1):
        return "the window op does not run after the target in the method where they meet"
    levels.sort(key=lambda k: t.path[k].cls != prefer_cls)
    out: list[Placement] = []
    why = "the window op's statement assigns no value to depend on"
    for k in levels:
        th, wh = t.path[k], w.path[k]
        if not _editable(ms, wh.cls):
            why = f"{wh.cls}.{wh.method} is not in the model source named by --model-src"
            continue
        inner = _under(events, w.path[:k + 1])
        w_deeper = len(w.path) > k + 1
        wstmt = _stmt(ms, wh.cls, wh.method, wh.stmt)
        heavy_after = w_deeper and any(events[i].kind == "linear" for i in inner if i > w_idx)
        outs = outputs_of(wstmt, w.attr)
        if not outs or (start == "input" and heavy_after):
            continue
        wexpr = weight_expr(t.path, k, lin)
        if wexpr is None:
            why = f"the target is not reached from {th.cls}.{th.method} through module attributes"
            continue
        wexpr = "self.next_layer." + wexpr[len("self."):]
        join = Join(wh.cls, wh.method, "end")
        callers = tuple(w.path[:k + 1])
        shift = "later" if heavy_after or wh.stmt == th.stmt else "exact"
        note = f"cross-layer: after {wh.call} of this layer, prefetch the next layer's weight"
        chain = after_chain(ms, wh, outs, wexpr, join, ms.file_of(wh.cls), shift, callers)
        out += [replace(pl, scope="next_layer", note=note) for pl in chain] + [
            Placement(Insert(wh.cls, wh.method, wh.call, "after"), o, wexpr, join,
                      ms.file_of(wh.cls), shift, note, "next_layer", callers=callers,
                      anchor_line=wh.line, stmt=wh.stmt) for o in outs]
    return out or why


def nearest_legal(ms: ModelSource, events: list[Event], t_idx: int, lin: LinearAttr,
                  accept=None) -> Placement | str:
    """The latest insertion before the target: from its own method outwards, before the call
    that runs it, on that call's input; the first one `accept(placement)` takes (it returns the
    placement to use, or apply's reason to refuse it)."""
    t = events[t_idx]
    last = "no level of the call path names a local value that feeds the target"
    for d in range(len(t.path) - 1, -1, -1):
        h = t.path[d]
        if d == len(t.path) - 1 and _is_param_use(ms, t):
            continue      # a Parameter use is not a call: anchor on the module call above it
        if not _editable(ms, h.cls):
            continue
        m = ms.method(h.cls, h.method)
        params = list(m.params) if m else []
        wexpr = weight_expr(t.path, d, lin)
        if wexpr is None:
            continue
        dep = input_of(ms, h.cls, h.method, h.stmt, h.call, params)
        if dep is None:
            continue
        pl = Placement(Insert(h.cls, h.method, h.call, "before"), dep, wexpr,
                       Join(h.cls, h.method, "end"), ms.file_of(h.cls), "fallback",
                       f"nearest legal dependency: the input '{dep}' of {h.call} in "
                       f"{h.cls}.{h.method}", callers=tuple(t.path[:d + 1]),
                       anchor_line=h.line, stmt=h.stmt)
        got = accept(pl) if accept else pl
        if isinstance(got, Placement):
            return got
        last = got
    return last
