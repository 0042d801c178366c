"""Shapes of libcst nodes the evaluator's scans look for (`self.X = value`, a callee's name,
the calls inside a statement); shared by the linear scan and the registered-weight scan.
"""

from __future__ import annotations

import libcst as cst

from ...pysource import Stmt, dotted


# transformers' factories that build `cls(config)`: `AudioModel._from_config(config.audio_config)`
# instantiates AudioModel with that sub-config, as `AudioModel(config.audio_config)` would
FACTORIES = ("_from_config", "from_config")


def callee_name(call: cst.Call) -> str:
    parts = (dotted(call.func) or "").split(".")
    if len(parts) >= 2 and parts[-1] in FACTORIES and parts[-2][:1].isupper():
        return parts[-2]
    return parts[-1]


def assign_value(s: Stmt) -> tuple[str, cst.BaseExpression] | None:
    """`self.X = value` (or annotated) -> (X, value)."""
    node = s.node
    if not isinstance(node, cst.SimpleStatementLine) or len(node.body) != 1:
        return None
    small = node.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target, value = small.targets[0].target, small.value
    elif isinstance(small, cst.AnnAssign) and small.value is not None:
        target, value = small.target, small.value
    else:
        return None
    d = dotted(target) if isinstance(target, cst.Attribute) else None
    if not d or not d.startswith("self.") or d.count(".") != 1:
        return None
    return d[5:], value


def local_assign(s: Stmt) -> tuple[str, cst.BaseExpression] | None:
    node = s.node
    if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 and \
            isinstance(node.body[0], cst.Assign) and len(node.body[0].targets) == 1 and \
            isinstance(node.body[0].targets[0].target, cst.Name):
        return node.body[0].targets[0].target.value, node.body[0].value
    return None


def calls_in(node: cst.CSTNode) -> list[cst.Call]:
    out: list[cst.Call] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            out.append(n)

    node.visit(V())
    return out
