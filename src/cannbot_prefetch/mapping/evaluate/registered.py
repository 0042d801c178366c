"""Weights registered by call rather than assignment: `self.register_parameter("w", P)` and the
`layer.register_parameter(...)` inside a quantisation method's `create_weights(self, ...)`,
with the callee's parameters bound to the call's values.
"""

from __future__ import annotations

import libcst as cst

from ...pysource import Stmt, code_of, dotted
from .bounds import EVAL_ERRORS, MissingKey
from .env import Env, bind_args, exec_assign
from .syntax import callee_name, calls_in, local_assign


def registered_weights(s: Stmt, env: "Env") -> list[tuple[str, cst.BaseExpression, "Env"]]:
    """Weights a statement registers on this module: `self.register_parameter("w", P)`, and
    those a quantisation method registers on it (`self.quant_method.create_weights(self, ...)`
    whose body calls `layer.register_parameter("w", P)`)."""
    out: list[tuple[str, cst.BaseExpression, Env]] = []
    node = s.node
    if not isinstance(node, cst.SimpleStatementLine) or s.header:
        return out
    for small in node.body:
        call = small.value if isinstance(small, cst.Expr) else None
        if not isinstance(call, cst.Call):
            continue
        d = dotted(call.func) or code_of(call.func)
        if d == "self.register_parameter" and len(call.args) >= 2:
            name = call.args[0].value
            if isinstance(name, cst.SimpleString) and name.evaluated_value.isidentifier():
                out.append((name.evaluated_value, call.args[1].value, env))
        elif d.endswith(".create_weights") or d == "create_weights":
            out += _created_weights(env, call)
    return out


def _created_weights(env: "Env", call: cst.Call) -> list[tuple[str, cst.BaseExpression, "Env"]]:
    """`layer.register_parameter(...)` inside the create_weights the call reaches, with the
    callee's parameters bound to the call's values (evaluated here) and its locals followed."""
    ms = env.ms
    holder = dotted(call.func.value) if isinstance(call.func, cst.Attribute) else None
    classes = _method_holders(env, holder)
    for k in classes:
        m = ms.method(k, "create_weights")
        if m is None:
            continue
        params = [p for p in m.params if p != "self"]
        sub = Env(ms, k)
        sub.self_vals, sub.local, sub.missing = {}, {}, {}
        layer_name = None
        for name, a in bind_args(call.args, params):
            if code_of(a.value) == "self":
                layer_name = name
                continue
            try:
                sub.local[name] = env.eval(a.value)
            except (MissingKey, *EVAL_ERRORS):
                pass
        if layer_name is None:
            continue
        out = []
        exprs: dict[str, cst.BaseExpression] = {}
        for st in m.stmts:
            node = st.node
            if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 and \
                    isinstance(node.body[0], cst.Expr) and isinstance(node.body[0].value, cst.Call):
                c = node.body[0].value
                if (dotted(c.func) or "") == f"{layer_name}.register_parameter" and len(c.args) >= 2:
                    nm = c.args[0].value
                    val = c.args[1].value
                    if isinstance(val, cst.Name) and val.value in exprs:
                        val = exprs[val.value]
                    if isinstance(nm, cst.SimpleString) and nm.evaluated_value.isidentifier():
                        out.append((nm.evaluated_value, val, sub))
                        continue
            b = local_assign(st)
            if b is not None:
                exprs[b[0]] = b[1]
            exec_assign(sub, st)
        if out:
            return out
    return []


def _method_holders(env: "Env", holder: str | None) -> list[str]:
    """Classes `self.quant_method` may hold: every `self.quant_method = Cls(...)` in __init__
    of a class in the source (the unquantised branch is as good a shape source as any)."""
    ms = env.ms
    if not holder or not holder.startswith("self.") or holder.count(".") != 1:
        return []
    attr = holder[5:]
    out = []
    for c, info in ((c, ms.classes[c][1]) for c in [env.cls] if c in ms.classes):
        for st in info.attrs.get(attr, []):
            for call in calls_in(st.node):
                n = callee_name(call)
                if n in ms.classes and n not in out:
                    out.append(n)
    return out
