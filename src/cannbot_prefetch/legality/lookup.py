"""What a placement names, looked up in one file's view: the insertion class (or why it is not
here), the base class that owns a method, whether a class has an attribute (and whether it is
conditional), and the statements that hold the anchor call."""

from __future__ import annotations

import libcst as cst

from ..pysource import ClassInfo, Method, SourceView, Stmt, call_name, dotted
from .placement import MISSING, UNSAFE, Problem


def strip_forward(path: str) -> str:
    return path[: -len(".forward")] if path.endswith(".forward") else path


def _anchor_matches(call: cst.Call, anchor: str) -> bool:
    d = call_name(call)
    anchor = strip_forward(anchor)
    return d == anchor or strip_forward(d) == anchor


def find_class(view: SourceView, name: str, role: str) -> ClassInfo | Problem:
    cls = view.classes.get(name)
    if cls is not None:
        return cls
    alias = view.aliases.get(name)
    if alias is not None:
        orig = "" if alias.original == name else f" as an alias of {alias.original}"
        return Problem(UNSAFE, f"{role} class {name} is imported from {alias.source}{orig}, not "
                               f"defined in this file: plan the site in that module's file")
    return Problem(MISSING, f"{role} class {name} is not defined in this file")


def base_with(view: SourceView, cls: ClassInfo, method: str) -> str | None:
    seen = set()
    todo = list(cls.bases)
    while todo:
        b = todo.pop(0).split(".")[-1]
        if b in seen:
            continue
        seen.add(b)
        info = view.classes.get(b)
        if info is None:
            continue
        if method in info.methods:
            return b
        todo.extend(info.bases)
    return None


_PLAIN_BASES = {"Module", "object", "nn.Module", "torch.nn.Module"}


def has_attr(view: SourceView, cls: ClassInfo, attr: str) -> bool:
    """`self.<first step of attr> = ...` in the class or a base class of this file; True when a
    base class is defined elsewhere (imported: its attributes are not visible here)."""
    first = attr.split(".")[0].split("[")[0]
    todo, seen = [cls], set()
    while todo:
        c = todo.pop()
        if c.name in seen:
            continue
        seen.add(c.name)
        if first in c.attrs:
            return True
        for b in c.bases:
            info = view.classes.get(b.split(".")[-1])
            if info is not None:
                todo.append(info)
            elif b not in _PLAIN_BASES and b.split(".")[-1] in view.class_bases | view.aliases:
                return True
    return False


def is_conditional(view: SourceView, cls: ClassInfo, attr: str) -> bool:
    first = attr.split(".")[0]
    return first in cls.conditional_attrs


def is_choice(cls: ClassInfo, attr: str) -> bool:
    """`self.<attr> = A(...) if c else B(...)` in __init__: the module is one of two, so a path
    through it (`self.sconv.weight_proj`) may exist in one branch only and is guarded. Only the
    guard reads this; which module the plan names is decided as before."""
    for st in cls.attrs.get(attr.split(".")[0].split("[")[0], []):
        node = st.node
        if isinstance(node, cst.SimpleStatementLine) and any(
                isinstance(sm, (cst.Assign, cst.AnnAssign)) and (
                    isinstance(sm.value, cst.IfExp) or _picked_class(cls, sm.value))
                for sm in node.body):
            return True
    return False


def _picked_class(cls: ClassInfo, value: cst.BaseExpression) -> bool:
    """`self.mlp = mlp_class(...)` after `mlp_class = BailingMLP` / `mlp_class = BailingMoE` in
    branches of __init__ (vLLM's bailing_moe: the first layers dense): a local bound to two or
    more classes, so the module is one of them."""
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name)):
        return False
    init = cls.methods.get("__init__")
    if init is None or init.node is None:
        return False
    local, bound = value.func.value, set()

    class _Bound(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            if any(isinstance(t.target, cst.Name) and t.target.value == local
                   for t in node.targets) and isinstance(node.value, cst.Name) and \
                    node.value.value[:1].isupper():
                bound.add(node.value.value)

    init.node.visit(_Bound())
    return len(bound) >= 2


def find_anchors(cls: ClassInfo, method: Method, anchor: str) -> list[tuple[Method, Stmt]]:
    """Every statement holding the anchor call, in order: in the method, else in the first
    self-method it calls that has one (branches of one step often repeat the same call)."""
    todo, seen = [method], set()
    while todo:
        m = todo.pop(0)
        if m.name in seen:
            continue
        seen.add(m.name)
        holders = [s for s in m.stmts if any(_anchor_matches(c, anchor) for c in s.calls)]
        if holders:
            # a one-line compound statement: insert around the whole line
            return [(m, h) for h in holders]
        for s in m.stmts:
            for c in s.calls:
                d = dotted(c.func) or ""
                if d.startswith("self.") and d.count(".") == 1 and d[5:] in cls.methods:
                    todo.append(cls.methods[d[5:]])
    return []


def enclosing_block_stmt(method: Method, holder: Stmt) -> Stmt:
    """Walk out to the statement that sits directly in an indented block."""
    if holder.in_block:
        return holder
    for s in method.stmts:  # pragma: no cover - every Stmt is created in a block
        if s.start <= holder.start <= s.end and s.in_block:
            return s
    return holder


def whole_chain(method: Method, stmt: Stmt, name: str) -> Stmt | None:
    """The if/elif/else header whose branch holds stmt when every branch (an else included)
    defines `name`: the branches are variants of one step (`if npugraph: h, d, _, ev = f(x, ev=1)`
    / `elif pf: h, d, _ = f(x)` / `else: h, d, _ = g(x)`), so a call after stmt belongs after the
    whole chain, where it runs whichever branch ran (issue 30: in the first branch it ran only on
    the npugraph_ex route)."""
    heads = [s for s in method.stmts if s.header and isinstance(s.node, cst.If)
             and s.start < stmt.start <= s.end and len(s.indent) < len(stmt.indent)]
    if not heads:
        return None
    head = max(heads, key=lambda s: s.start)          # the innermost
    blocks = []
    branch = head.node
    while isinstance(branch, cst.If):
        blocks.append(branch.body)
        branch = branch.orelse
    if not isinstance(branch, cst.Else):
        return None
    blocks.append(branch.body)
    for block in blocks:
        ids = statement_ids(block)
        if not any(name in s.defs for s in method.stmts if id(s.node) in ids):
            return None
    return head


def statement_ids(block) -> set[int]:
    """id() of every statement node in `block`, nested simple statements included: which of a
    method's flattened statements lie inside one branch."""
    ids: set[int] = set()

    class V(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, node) -> None:
            ids.add(id(node))

    for st in getattr(block, "body", []):
        ids.add(id(st))
        st.visit(V())
    return ids
