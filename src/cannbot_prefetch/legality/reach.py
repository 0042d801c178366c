"""Which calls run the target weight's module: the module paths on the weight's path, calls of
them (or of a method that reaches them, a method bound to an attribute, a base defined in another
file), and the names a call passes in."""

from __future__ import annotations

import re

import libcst as cst

from ..pysource import ClassInfo, SourceView, call_name, code_of, dotted, names_and_calls
from .lookup import strip_forward


def methods_reaching(cls: ClassInfo, pred) -> set[str]:
    """Methods of cls whose body (or a self-method it calls) has a call satisfying pred."""
    direct = {name for name, m in cls.methods.items() if any(pred(c) for s in m.stmts for c in s.calls)}
    changed = True
    while changed:
        changed = False
        for name, m in cls.methods.items():
            if name in direct:
                continue
            for s in m.stmts:
                for c in s.calls:
                    d = dotted(c.func) or ""
                    if d.startswith("self.") and d.count(".") == 1 and d[5:] in direct:
                        direct.add(name)
                        changed = True
                        break
                if name in direct:
                    break
    return direct


def _path_steps(expr: str) -> list[str]:
    """`self.mlps[0].down_proj` -> ["self", ".mlps", "[0]", ".down_proj"]."""
    return re.findall(r"^[A-Za-z_]\w*|\.[A-Za-z_]\w*|\[[^\]]*\]", expr)


def target_refs(weight_expr: str) -> tuple[list[str], str]:
    """Module paths whose call runs the target, and the weight's owner path."""
    steps = _path_steps(weight_expr)
    owner = "".join(steps[:-1]) if steps[-1] == ".weight" else weight_expr
    first = 1 if steps[0] != "self" else 2
    refs = ["".join(steps[:k]) for k in range(first, len(steps) + 1)]
    return refs, owner


def guard_path(owner: str) -> str:
    """The part of a weight's owner path `_cbp.attr` can walk: up to the first index
    (`self.next_layer.self_attn[0].q_proj` -> `self.next_layer`); list elements exist."""
    return owner.split("[", 1)[0].rsplit(".", 1)[0] if "[" in owner else owner


def handed_to(cls: ClassInfo, owner: str) -> list[str]:
    """`self.X` for each library layer `__init__` builds with the target's module handed in
    (`self.mla_attn = MultiHeadLatentAttentionWrapper(..., mla_modules)` after `mla_modules =
    MLAModules(kv_b_proj=self.kv_b_proj, ...)`, vLLM's MLA): a call of it runs the target."""
    init = cls.methods.get("__init__")
    if init is None or not owner.startswith("self.") or owner.count(".") != 1:
        return []
    word = re.compile(re.escape(owner) + r"(?![\w.\[])")
    carriers: set[str] = set()
    out: list[str] = []
    for st in init.stmts:
        node = st.node
        if not isinstance(node, cst.SimpleStatementLine) or len(node.body) != 1 or \
                not isinstance(node.body[0], cst.Assign) or len(node.body[0].targets) != 1 or \
                not isinstance(node.body[0].value, cst.Call):
            continue
        target, text = node.body[0].targets[0].target, code_of(node.body[0].value)
        hands = bool(word.search(text)) or any(
            re.search(rf"\b{re.escape(c)}\b", text) for c in carriers)
        if not hands:
            continue
        if isinstance(target, cst.Name):
            carriers.add(target.value)                   # handed on through a local
        elif dotted(target) and dotted(target).startswith("self.") and \
                dotted(target).count(".") == 1 and dotted(target) != owner:
            out.append(dotted(target))
    return out


def runs_target(call: cst.Call, refs: list[str], owner: str, helpers: set[str]) -> bool:
    d = strip_forward(call_name(call))
    if d in refs:
        return True
    if d.startswith("self.") and d.count(".") == 1 and d[5:] in helpers:
        return True
    # an explicit method of a module on the path: self.attn[0].forward_absorb(...)
    base, _, meth = d.rpartition(".")
    if base in refs and meth.lstrip("_").startswith("forward"):
        return True
    for a in call.args:
        text = code_of(a.value)
        if text == owner or text.startswith(owner + ".") or text.startswith(owner + "["):
            return True
    return False


def inherited_elsewhere(view: SourceView, cls: ClassInfo, refs: list[str]) -> set[str]:
    """Methods the class calls on itself that a base class defined in another file provides
    (`self.moe_infer_dispatch_combine(...)` of an imported MoE base): this file cannot show
    what they run, so one that the weight's module belongs to (the target is an attribute set by
    that base too) may run the target. Only for weights of modules this file never assigns."""
    if any(info is not None for info in (view.classes.get(b.split(".")[-1]) for b in cls.bases)):
        return set()
    if not any(b.split(".")[-1] in view.aliases for b in cls.bases):
        return set()
    first = refs[0].split(".")[1].split("[")[0] if refs and refs[0].count(".") else ""
    if not first or first in cls.attrs:
        return set()
    out = set()
    for m in cls.methods.values():
        for st in m.stmts:
            for c in st.calls:
                d = dotted(c.func) or ""
                if d.startswith("self.") and d.count(".") == 1 and d[5:] not in cls.methods \
                        and d[5:] not in cls.attrs:
                    out.add(d[5:])
    return out


def bound_methods(cls: ClassInfo) -> dict[str, set[str]]:
    """Attributes bound to methods (`self.mlp_forward = self.forward_w8a8int8` in __init__)."""
    out: dict[str, set[str]] = {}
    for attr, stmts in cls.attrs.items():
        for st in stmts:
            node = st.node
            if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 and \
                    isinstance(node.body[0], cst.Assign):
                d = dotted(node.body[0].value) or ""
                if d.startswith("self.") and d[5:] in cls.methods:
                    out.setdefault(attr, set()).add(d[5:])
    return out


def call_arg_names(call: cst.Call) -> set[str]:
    out: set[str] = set()
    for a in call.args:
        out |= names_and_calls(a.value)[0]
    return out
