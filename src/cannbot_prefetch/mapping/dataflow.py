"""Data flow through one statement of the model source, as placement needs it: the local a
call reads (the dependency before it), the names a statement assigns (after it), and the calls
inside a statement in the order they run."""

from __future__ import annotations

import libcst as cst

from ..pysource import Stmt, assigned_targets, call_name, dotted
from .source import ModelSource


def stmt_at(ms: ModelSource, cls: str, method: str, idx: int) -> Stmt:
    return ms.method(cls, method).stmts[idx]  # type: ignore[union-attr]


def call_node(s: Stmt, call: str) -> cst.Call | None:
    for c in s.calls:
        if call_name(c) == call:
            return c
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
    """The local value a call consumes: its first Name argument that is not token positions
    (configs/serving_layers.yaml `position_args`), else the first local name its arguments
    read, else the first one the statement reads."""
    s = stmt_at(ms, hop_cls, method, idx)
    node = call_node(s, call)
    if node is not None:
        names = [a.value.value for a in node.args
                 if isinstance(a.value, cst.Name) and a.value.value != "self"]
        # token positions feed only the rotary embedding, never a linear's input: vLLM's
        # `self.self_attn(positions, hidden_states)` consumes hidden_states
        acts = [n for n in names if n not in ms.serving.position_args]
        if acts or names:
            return (acts or names)[0]
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


def post_calls(node) -> list[cst.Call]:
    out: list[cst.Call] = []

    class V(cst.CSTVisitor):
        def leave_Call(self, original: cst.Call) -> None:
            out.append(original)

    node.visit(V())
    return out


def carrier_first(ms: ModelSource, path, k: int, outs: list[str]) -> list[str]:
    """`outs` with the names that receive the window op's own output first: the call at
    path[k] returns a tuple, and the callee (path[k + 1]) returns at some position the name its
    statement running the window op assigns (`hidden = self.experts(...)`; `return combined,
    hidden` -> the caller's `result, gmm2_out = ...` -> gmm2_out, GMM2's output, not the combine's
    `result`: seed 003's dependency for the next layer's router and w13)."""
    if k + 1 >= len(path) or len(outs) < 2:
        return outs
    inner = path[k + 1]
    m = ms.method(inner.cls, inner.method)
    caller = ms.method(path[k].cls, path[k].method)
    if m is None or caller is None:
        return outs
    own = {t.value for t in assigned_targets(m.stmts[inner.stmt]) if isinstance(t, cst.Name)}
    positions: set[int] = set()
    for s in m.stmts:
        if not s.is_return or not isinstance(s.node, cst.SimpleStatementLine):
            continue
        ret = s.node.body[0]
        if isinstance(ret, cst.Return) and isinstance(ret.value, cst.Tuple):
            positions |= {i for i, el in enumerate(ret.value.elements)
                          if isinstance(el.value, cst.Name) and el.value.value in own}
    targets = assigned_targets(caller.stmts[path[k].stmt])
    carried = {t.value for i, t in enumerate(targets) if i in positions and isinstance(t, cst.Name)}
    return sorted(outs, key=lambda n: n not in carried)
