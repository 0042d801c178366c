"""A class's methods as statements in program order: each with its line range, indentation, the
names it defines and uses and the calls it makes (compound statements: their header, then the
block's statements), their assignment targets, and the `self.X` attributes each method assigns."""

from __future__ import annotations

import libcst as cst

from .nodes import code_of, dotted, names_and_calls, target_names
from .view import ClassInfo, Method, Stmt


class Builder:
    def __init__(self, view_lines: list[str], positions) -> None:
        self.lines = view_lines
        self.pos = positions

    def line_range(self, node: cst.CSTNode) -> tuple[int, int]:
        return self.pos[id(node)]

    def indent_of(self, line: int) -> str:
        text = self.lines[line - 1]
        return text[: len(text) - len(text.lstrip(" \t"))]

    def stmts(self, body, out: list[Stmt], in_block: bool = True) -> None:
        items = body.body if isinstance(body, (cst.IndentedBlock, cst.Module)) else [body]
        for st in items:
            self.stmt(st, out, in_block)

    def stmt(self, st: cst.CSTNode, out: list[Stmt], in_block: bool) -> None:
        start, end = self.line_range(st)
        s = Stmt(st, start, end, self.indent_of(start), in_block=in_block)
        if isinstance(st, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            for small in st.body:
                self.small(small, s)
            out.append(s)
            return
        if isinstance(st, (cst.FunctionDef, cst.ClassDef)):
            s.defs.add(st.name.value)
            out.append(s)
            return
        s.header = True
        header_parts: list[cst.CSTNode] = []
        blocks: list[cst.CSTNode] = []
        if isinstance(st, (cst.If, cst.While)):
            header_parts.append(st.test)
            blocks.append(st.body)
            orelse = st.orelse
            while orelse is not None:
                if isinstance(orelse, cst.If):
                    header_parts.append(orelse.test)
                    blocks.append(orelse.body)
                    orelse = orelse.orelse
                else:
                    blocks.append(orelse.body)
                    orelse = None
        elif isinstance(st, cst.For):
            header_parts.append(st.iter)
            d, r = target_names(st.target)
            s.defs |= d
            s.uses |= r
            blocks.append(st.body)
            if st.orelse is not None:
                blocks.append(st.orelse.body)
        elif isinstance(st, cst.With):
            for item in st.items:
                header_parts.append(item.item)
                if item.asname is not None:
                    d, r = target_names(item.asname.name)
                    s.defs |= d
            blocks.append(st.body)
        elif isinstance(st, cst.Try):
            blocks.append(st.body)
            for h in st.handlers:
                blocks.append(h.body)
            if st.orelse is not None:
                blocks.append(st.orelse.body)
            if st.finalbody is not None:
                blocks.append(st.finalbody.body)
        else:  # match and anything newer: opaque
            names, calls = names_and_calls(st)
            s.uses |= names
            s.calls += calls
            out.append(s)
            return
        for part in header_parts:
            names, calls = names_and_calls(part)
            s.uses |= names
            s.calls += calls
        out.append(s)
        for b in blocks:
            if isinstance(b, cst.IndentedBlock):
                self.stmts(b, out, True)
            else:  # one-line suite: part of the header line
                for small in b.body:
                    self.small(small, s)

    def small(self, small: cst.BaseSmallStatement, s: Stmt) -> None:
        if isinstance(small, cst.Assign):
            for t in small.targets:
                d, r = target_names(t.target)
                s.defs |= d
                s.uses |= r
            value = small.value
        elif isinstance(small, cst.AnnAssign):
            d, r = target_names(small.target)
            s.defs |= d
            s.uses |= r
            value = small.value
        elif isinstance(small, cst.AugAssign):
            d, r = target_names(small.target)
            s.defs |= d
            s.uses |= r | d
            value = small.value
        elif isinstance(small, cst.Return):
            s.is_return = True
            value = small.value
        elif isinstance(small, cst.Expr):
            value = small.value
        elif isinstance(small, (cst.Import, cst.ImportFrom)):
            names = small.names if not isinstance(small.names, cst.ImportStar) else []
            for a in names:
                local = a.asname.name if a.asname else a.name
                if isinstance(local, cst.Name):
                    s.defs.add(local.value)
                elif isinstance(local, cst.Attribute):
                    s.defs.add(dotted(local).split(".")[0])
            return
        else:
            value = small
        names, calls = names_and_calls(value)
        s.uses |= names
        s.calls += calls


def _params(fn: cst.FunctionDef) -> list[str]:
    p = fn.params
    out = [x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)]
    if isinstance(p.star_arg, cst.Param):
        out.append(p.star_arg.name.value)
    if p.star_kwarg is not None:
        out.append(p.star_kwarg.name.value)
    return out


def assigned_targets(s: Stmt) -> list[cst.BaseExpression]:
    """Every assignment target of a simple statement, tuples unpacked, in order
    (`x, _ = self.o_proj(x)` -> [x, _])."""
    node = s.node
    if not isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        return []
    out: list[cst.BaseExpression] = []
    for small in node.body:
        targets = []
        if isinstance(small, cst.Assign):
            targets = [t.target for t in small.targets]
        elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
            targets = [small.target]
        for t in targets:
            for el in (t.elements if isinstance(t, (cst.Tuple, cst.List)) else [t]):
                out.append(el.value if isinstance(el, (cst.Element, cst.StarredElement)) else el)
    return out


def _self_attr_targets(s: Stmt) -> set[str]:
    out = set()
    for el in assigned_targets(s):
        d = dotted(el) if isinstance(el, cst.Attribute) else None
        if d and d.startswith("self.") and d.count(".") == 1:
            out.add(d.split(".")[1])
    return out


def _assigns_none(s: Stmt) -> set[str]:
    node = s.node
    out = set()
    if isinstance(node, cst.SimpleStatementLine):
        for small in node.body:
            if isinstance(small, cst.Assign) and isinstance(small.value, cst.Name) \
                    and small.value.value == "None":
                for t in small.targets:
                    d = dotted(t.target)
                    if d and d.startswith("self.") and d.count(".") == 1:
                        out.add(d.split(".")[1])
    return out


def class_info(b: Builder, node: cst.ClassDef, layers: list) -> ClassInfo:
    methods: dict[str, Method] = {}
    attrs: dict[str, list[Stmt]] = {}
    conditional: set[str] = set()
    body = node.body
    for item in (body.body if isinstance(body, cst.IndentedBlock) else []):
        fn = item
        if not isinstance(fn, cst.FunctionDef):
            continue
        stmts: list[Stmt] = []
        b.stmts(fn.body, stmts)
        start, end = b.line_range(fn)
        first_body = fn.body.body[0] if isinstance(fn.body, cst.IndentedBlock) and fn.body.body else None
        body_indent = b.indent_of(b.line_range(first_body)[0]) if first_body is not None else ""
        m = Method(fn.name.value, fn, _params(fn), stmts, start, end, body_indent)
        methods[m.name] = m
        top_level = {id(x) for x in (fn.body.body if isinstance(fn.body, cst.IndentedBlock) else [])}
        for s in stmts:
            for a in _self_attr_targets(s):
                attrs.setdefault(a, []).append(s)
                if fn.name.value == "__init__" and id(s.node) not in top_level:
                    conditional.add(a)
                if a == "layers" and fn.name.value == "__init__":
                    layers.append((node.name.value, s))
            conditional |= _assigns_none(s)
    bases = [dotted(a.value) or code_of(a.value) for a in node.bases]
    return ClassInfo(node.name.value, node, bases, methods, attrs, conditional, b.line_range(node)[0])
