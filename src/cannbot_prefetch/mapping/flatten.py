"""The calls one forward pass runs, in evaluation order (arguments before the call), each with
its path of hops (class, method, statement, call), descending into known submodules, helper
methods and the decoder-layer loop (`for layer in self.layers`, `enumerate(self.layers)`: one
layer stands for all). Fused expert Parameters are used, not called: their first use counts.
"""

from __future__ import annotations

import re

import libcst as cst

from ..pysource import Stmt, code_of, dotted
from .evaluate import LinearAttr
from .source import Event, Hop, ModelSource

NORM_HINTS = ("norm",)
ACT_HINTS = ("act", "silu", "gelu", "swiglu", "relu")


def _post_order_calls(node: cst.CSTNode) -> list[cst.Call]:
    """Calls of a statement in evaluation order (arguments before the call)."""
    out: list[cst.Call] = []

    class V(cst.CSTVisitor):
        def leave_Call(self, original: cst.Call) -> None:
            out.append(original)

        def visit_Lambda(self, node) -> bool:
            return False

        def visit_FunctionDef(self, node) -> bool:
            return False

    node.visit(V())
    return out


def _stmt_calls(s: Stmt) -> list[cst.Call]:
    if s.header:   # compound statement: only its header parts
        return [c for c in s.calls]
    return _post_order_calls(s.node)


def flatten(ms: ModelSource, root: str, method: str = "forward", *, max_depth: int = 12) -> list[Event]:
    """The calls one `root.method` runs, in order, descending into known submodules."""
    out: list[Event] = []
    _walk_method(ms, root, method, (), out, max_depth, set())
    return out


def _walk_method(ms, cls, method, prefix, out, depth, active) -> None:
    m = ms.method(cls, method)
    key = (cls, method)
    if m is None or depth <= 0 or key in active:
        return
    active = active | {key}
    owner = ms.method_owner(cls, method)
    loop_vars: dict[str, str] = {}
    params = {a: lin for (c, a), lin in _all_linears(ms, cls).items() if lin.is_param}
    params_seen: set[str] = set()
    for i, s in enumerate(m.stmts):
        if params:   # fused expert Parameters are used, not called: the first use runs them
            text = code_of(s.node) if not s.header else " ".join(code_of(c) for c in s.calls)
            for a in params:
                if a not in params_seen and re.search(rf"\bself\.{a}\b", text):
                    params_seen.add(a)
                    out.append(Event(prefix + (Hop(owner, method, i, f"self.{a}", s.start),),
                                     "linear", _attr_owner(ms, cls, a), a))
        if s.header and isinstance(s.node, cst.For):
            var, it = _loop_over(s.node)
            if var and it.startswith("self.") and (cls, it[5:]) in ms.list_children:
                loop_vars[var] = ms.children[(cls, it[5:])]
        for call in _stmt_calls(s):
            d = dotted(call.func) or ""
            hop = Hop(owner, method, i, d, s.start)
            path = prefix + (hop,)
            base = d[: -len(".forward")] if d.endswith(".forward") else d
            if base.startswith("self.") and base.count(".") == 1:
                attr = base[5:]
                if (cls, attr) in _all_linears(ms, cls):
                    out.append(Event(path, "linear", _attr_owner(ms, cls, attr), attr))
                    continue
                child = _child(ms, cls, attr)
                if child:
                    kind = "norm" if "norm" in child.lower() else "module"
                    out.append(Event(path, kind, _attr_owner(ms, cls, attr), attr, child))
                    if kind == "module":
                        _walk_method(ms, child, "forward", path, out, depth - 1, active)
                    continue
                if ms.method(cls, attr) is not None:
                    _walk_method(ms, cls, attr, path, out, depth - 1, active)
                    continue
                kind = "act" if any(h in attr.lower() for h in ACT_HINTS) else \
                    "norm" if "norm" in attr.lower() else "module"
                out.append(Event(path, kind, cls, attr))
            elif base in loop_vars:
                child = loop_vars[base]
                out.append(Event(path, "module", cls, base, child))
                _walk_method(ms, child, "forward", path, out, depth - 1, active)
            else:
                name = d.split(".")[-1].lower()
                kind = "act" if any(h in name for h in ACT_HINTS) else \
                    "norm" if "norm" in name else "func"
                out.append(Event(path, kind, "", d))


def _strip_sub(node: cst.BaseExpression) -> cst.BaseExpression:
    return node.value if isinstance(node, cst.Subscript) else node


def _loop_over(node: cst.For) -> tuple[str | None, str]:
    """(loop variable, iterated attribute) of `for x in self.layers[...]` and
    `for i, x in enumerate(self.layers[...])`."""
    it, target = node.iter, node.target
    if isinstance(it, cst.Call) and (dotted(it.func) or "") == "enumerate" and it.args:
        it = it.args[0].value
        if isinstance(target, cst.Tuple) and len(target.elements) == 2:
            target = target.elements[1].value
    var = target.value if isinstance(target, cst.Name) else None
    return var, dotted(_strip_sub(it)) or ""


def _bases_chain(ms: ModelSource, cls: str) -> list[str]:
    out, todo = [], [cls]
    while todo:
        c = todo.pop(0)
        if c in out or c not in ms.classes:
            continue
        out.append(c)
        todo.extend(b.split(".")[-1] for b in ms.classes[c][1].bases)
    return out


def _all_linears(ms: ModelSource, cls: str) -> dict[tuple[str, str], LinearAttr]:
    out = {}
    for c in _bases_chain(ms, cls):
        for (k, a), v in ms.linears.items():
            if k == c:
                out[(cls, a)] = v
    return out


def _attr_owner(ms: ModelSource, cls: str, attr: str) -> str:
    for c in _bases_chain(ms, cls):
        if (c, attr) in ms.linears or (c, attr) in ms.children:
            return c
        info = ms.classes[c][1]
        if attr in info.attrs:
            return c
    return cls


def _child(ms: ModelSource, cls: str, attr: str) -> str | None:
    for c in _bases_chain(ms, cls):
        if (c, attr) in ms.children:
            return ms.children[(c, attr)]
    return None


def roots(ms: ModelSource) -> list[str]:
    """Classes with a forward that no other class instantiates; CausalLM-like ones first."""
    used = set(ms.children.values())
    out = [c for c in ms.classes if c not in used and ms.method(c, "forward") is not None]
    out.sort(key=lambda c: (not c.endswith("ForCausalLM"), -len(flatten(ms, c))))
    return out
