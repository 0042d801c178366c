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
whose statement also runs gate/up), the prefetch starts earlier (shift "earlier"). The rewriter's
static check (legality.py) has the last word on legality.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from ..legality import Placement
from ..plan import Insert, Join
from ..pysource import Stmt, assigned_targets, dotted
from .source import Event, LinearAttr, ModelSource


def _stmt(ms: ModelSource, cls: str, method: str, idx: int) -> Stmt:
    return ms.method(cls, method).stmts[idx]  # type: ignore[union-attr]


def _call_node(s: Stmt, call: str) -> cst.Call | None:
    for c in s.calls:
        if (dotted(c.func) or "") == call:
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


def output_of(s: Stmt) -> str | None:
    """The first name a statement assigns (`x, _ = self.o_proj(x)` -> x)."""
    if s.is_return or not isinstance(s.node, cst.SimpleStatementLine):
        return None
    names = (t.value for t in assigned_targets(s) if isinstance(t, cst.Name) and t.value != "_")
    return next(names, None)


def weight_expr(path, depth: int, lin: LinearAttr) -> str | None:
    """`self.a.b.attr(.weight)` for the target's hops from `depth` down; None when a hop is not
    a `self.X` call (a loop variable, a function)."""
    parts = []
    for i in range(depth, len(path)):
        call = path[i].call
        if call.endswith(".forward"):
            call = call[: -len(".forward")]
        if not call.startswith("self.") or call.count(".") != 1:
            return None
        nxt = path[i + 1] if i + 1 < len(path) else None
        if nxt is not None and nxt.cls == path[i].cls and nxt.method == call[5:]:
            continue    # a helper method of the same class: no attribute step
        parts.append(call[5:])
    expr = "self." + ".".join(parts)
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
    lin = ms.linears.get((e.owner, e.attr))
    return e.kind == "linear" and lin is not None and lin.is_param


def _under(events: list[Event], prefix) -> list[int]:
    n = len(prefix)
    return [i for i, e in enumerate(events) if e.path[:n] == prefix]


def place(ms: ModelSource, events: list[Event], t_idx: int, w_idx: int, start: str,
          lin: LinearAttr) -> Placement | str:
    """Placement for a window starting at the input (3b) / output (3a) of events[w_idx]."""
    t, w = events[t_idx], events[w_idx]
    if _is_param_use(ms, w) or _is_param_use(ms, t) and len(t.path) == 1:
        return "fused expert Parameters are used, not called: there is no call to anchor on"
    if w_idx >= t_idx:
        return _cross_layer(ms, events, t_idx, w_idx, start, lin)
    d = common_depth(t.path, w.path)
    if d < 0:
        return "the window op and the target share no calling method"
    th, wh = t.path[d], w.path[d]
    m = ms.method(th.cls, th.method)
    params = list(m.params) if m else []
    wexpr = weight_expr(t.path, d, lin)
    if wexpr is None:
        return (f"the target is reached from {th.cls}.{th.method} through "
                f"'{t.path[d].call}', which is not a module attribute")
    join = Join(th.cls, th.method, "end")
    file = ms.file_of(th.cls) if th.cls in ms.classes else lin.file
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
        return Placement(Insert(th.cls, th.method, th.call, "before"), dep, wexpr, join, file,
                         "earlier" if heavy_before else "exact",
                         f"{th.call} and the window op share one statement: the prefetch goes "
                         f"before it, on its input '{dep}'", stmt=th.stmt)
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
                return Placement(Insert(th.cls, th.method, wh.call, "before"), dep, wexpr, join,
                                 file, "exact", stmt=wh.stmt)
        out = output_of(wstmt)
        if out is None:
            return f"{wh.call} in {th.cls}.{th.method} assigns no value to depend on"
        return Placement(Insert(th.cls, th.method, wh.call, "after"), out, wexpr, join, file,
                         "later", f"the window op runs inside {wh.call} after heavy MatMuls; the "
                                  f"nearest legal start is its output '{out}'", stmt=wh.stmt)
    # ops that run inside the same call after the MatMul are window time the insertion loses
    lost = w_deeper and any(events[i].kind in ("linear", "norm", "act", "module")
                            for i in inner if i > w_idx)
    out = output_of(wstmt)
    if out is None:
        return f"{wh.call} in {th.cls}.{th.method} assigns no value to depend on"
    return Placement(Insert(th.cls, th.method, wh.call, "after"), out, wexpr, join, file,
                     "later" if lost else "exact",
                     f"{wh.call} runs more ops after the window's MatMul; the nearest legal start "
                     f"is its output '{out}'" if lost else "", stmt=wh.stmt)


def layer_depth(ms: ModelSource, path) -> int | None:
    """Index of the hop that runs one decoder layer (`decoder_layer(...)` in the layers loop)."""
    layer_classes = {ms.children[k] for k in ms.list_children}
    for i in range(len(path) - 1):
        if path[i + 1].cls in layer_classes and not path[i].call.startswith("self."):
            return i
    return None


def _cross_layer(ms: ModelSource, events: list[Event], t_idx: int, w_idx: int, start: str,
                 lin: LinearAttr) -> Placement | str:
    """The window op runs late in the layer and the target early: the window is the previous
    layer's op, so the prefetch (of the next layer's weight) goes after it, in the layer's
    forward, as `self.next_layer.<...>` (the rewriter links the layers)."""
    t, w = events[t_idx], events[w_idx]
    ld = layer_depth(ms, t.path)
    if ld is None or w.path[:ld + 1] != t.path[:ld + 1]:
        return "the window op runs after the target and not in the same decoder layer"
    d = ld + 1                                  # the layer's own forward
    th, wh = t.path[d], w.path[d]
    if (th.cls, th.method) != (wh.cls, wh.method) or wh.stmt <= th.stmt:
        return "the window op and the target do not meet in the decoder layer's forward"
    inner = _under(events, w.path[:d + 1])
    w_deeper = len(w.path) > d + 1
    wstmt = _stmt(ms, wh.cls, wh.method, wh.stmt)
    heavy_after = w_deeper and any(events[i].kind == "linear" for i in inner if i > w_idx)
    out = output_of(wstmt)
    if out is None or (start == "input" and heavy_after):
        return f"{wh.call} in {wh.cls}.{wh.method} assigns no value to depend on"
    wexpr = weight_expr(t.path, d, lin)
    if wexpr is None:
        return f"the target is not reached from {th.cls}.{th.method} through module attributes"
    wexpr = "self.next_layer." + wexpr[len("self."):]
    return Placement(Insert(wh.cls, wh.method, wh.call, "after"), out, wexpr,
                     Join(wh.cls, wh.method, "end"), ms.file_of(wh.cls), "exact",
                     f"cross-layer: after {wh.call} of this layer, prefetch the next layer's "
                     f"weight", "next_layer", stmt=wh.stmt)


def nearest_legal(ms: ModelSource, events: list[Event], t_idx: int, lin: LinearAttr,
                  accept=None) -> Placement | str:
    """The latest insertion before the target: from its own method outwards, before the call
    that runs it, on that call's input; the first one `accept(placement)` allows (None = ok)."""
    t = events[t_idx]
    last = "no level of the call path names a local value that feeds the target"
    for d in range(len(t.path) - 1, -1, -1):
        h = t.path[d]
        if d == len(t.path) - 1 and _is_param_use(ms, t):
            continue      # a Parameter use is not a call: anchor on the module call above it
        m = ms.method(h.cls, h.method)
        params = list(m.params) if m else []
        wexpr = weight_expr(t.path, d, lin)
        if wexpr is None:
            continue
        dep = input_of(ms, h.cls, h.method, h.stmt, h.call, params)
        if dep is None:
            continue
        pl = Placement(Insert(h.cls, h.method, h.call, "before"), dep, wexpr,
                       Join(h.cls, h.method, "end"),
                       ms.file_of(h.cls) if h.cls in ms.classes else lin.file, "fallback",
                       f"nearest legal dependency: the input '{dep}' of {h.call} in "
                       f"{h.cls}.{h.method}", stmt=h.stmt)
        problem = accept(pl) if accept else None
        if problem is None:
            return pl
        last = problem
    return last
