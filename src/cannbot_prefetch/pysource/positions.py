"""Line ranges of libcst statements, read from the stdlib ast of the same source (the C parser
gives the statement lines far cheaper than libcst's PositionProvider)."""

from __future__ import annotations

import ast

import libcst as cst


def _align(cst_body, ast_body, out: dict[int, tuple[int, int]]) -> None:
    """Line ranges of libcst statements, read from the stdlib ast (same statements, same order).

    libcst's PositionProvider costs a second full code generation; the C parser of `ast` gives
    the same statement lines for a fraction of that (see benchmarks/bench_rewrite.py)."""
    i = 0
    for node in cst_body:
        if i >= len(ast_body):
            return
        if isinstance(node, cst.SimpleStatementLine):
            n = len(node.body)
            first, last = ast_body[i], ast_body[min(i + n, len(ast_body)) - 1]
            out[id(node)] = (first.lineno, last.end_lineno)
            i += n
            continue
        a = ast_body[i]
        i += 1
        align_compound(node, a, out)


def _block(body) -> list:
    return list(body.body) if isinstance(body, cst.IndentedBlock) else []


def align_compound(node, a, out) -> None:
    out[id(node)] = (a.lineno, a.end_lineno)
    for child in ("body",):
        body = getattr(node, child, None)
        if isinstance(body, cst.SimpleStatementSuite):
            out[id(body)] = (a.lineno, a.lineno)
    if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.With, cst.For, cst.While, cst.If)):
        _align(_block(node.body), getattr(a, "body", []), out)
    if isinstance(node, (cst.If, cst.For, cst.While)) and node.orelse is not None:
        if isinstance(node.orelse, cst.If) and a.orelse:
            align_compound(node.orelse, a.orelse[0], out)
        elif isinstance(node.orelse, cst.Else):
            _align(_block(node.orelse.body), a.orelse, out)
    if isinstance(node, cst.Try) and isinstance(a, (ast.Try, getattr(ast, "TryStar", ast.Try))):
        _align(_block(node.body), a.body, out)
        for h, ah in zip(node.handlers, a.handlers):
            _align(_block(h.body), ah.body, out)
        if node.orelse is not None:
            _align(_block(node.orelse.body), a.orelse, out)
        if node.finalbody is not None:
            _align(_block(node.finalbody.body), a.finalbody, out)
