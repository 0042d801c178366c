"""libcst node helpers every reader of model source shares: a node's code, its dotted name,
a call's callee as written, the names and calls an expression reads, the names an assignment target defines and reads."""

from __future__ import annotations

import re

import libcst as cst

_EMPTY = cst.Module(body=[])
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\n|\r)|[^\r\n]+\Z")


def source_lines(code: str) -> list[str]:
    """Lines with their endings, split where Python splits them (\\n, \\r\\n, \\r) and not at
    form feeds or other characters `str.splitlines` also breaks at, so line numbers agree with
    the parser's."""
    return _LINE.findall(code)


def code_of(node: cst.CSTNode) -> str:
    return _EMPTY.code_for_node(node)


def dotted(node: cst.CSTNode) -> str | None:
    """`self.mlp.gate_proj` for Name/Attribute chains, else None."""
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


def call_name(call: cst.Call) -> str:
    """The callee of a call as written, without whitespace (`self.mlps[0]`, `self.attn.forward`):
    how mapping names an anchor and how the rewriter finds it again."""
    return re.sub(r"\s+", "", code_of(call.func))


class _Names(cst.CSTVisitor):
    """Names read by an expression (not attribute names, not keyword names)."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.calls: list[cst.Call] = []

    def visit_Name(self, node: cst.Name) -> bool:
        self.names.add(node.value)
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False

    def visit_Call(self, node: cst.Call) -> bool:
        self.calls.append(node)
        return True

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        node.body.visit(self)
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False


def names_and_calls(node: cst.CSTNode | None) -> tuple[set[str], list[cst.Call]]:
    if node is None:
        return set(), []
    v = _Names()
    node.visit(v)
    return v.names, v.calls


def target_names(t: cst.BaseExpression) -> tuple[set[str], set[str]]:
    """(defined, read) by an assignment target."""
    if isinstance(t, cst.Name):
        return {t.value}, set()
    if isinstance(t, (cst.Tuple, cst.List)):
        d, r = set(), set()
        for el in t.elements:
            dd, rr = target_names(el.value)
            d |= dd
            r |= rr
        return d, r
    if isinstance(t, cst.StarredElement):
        return target_names(t.value)
    if isinstance(t, (cst.Attribute, cst.Subscript)):
        # x[i] = y / x.a = y updates x: it is both read and (re)defined
        base = t.value
        while isinstance(base, (cst.Attribute, cst.Subscript)):
            base = base.value
        names, _ = names_and_calls(t)
        if isinstance(base, cst.Name) and base.value != "self":
            return {base.value}, names
        return set(), names
    return set(), names_and_calls(t)[0]
