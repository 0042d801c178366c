"""What a name or access path in a method of the model source refers to (`Ref`): a submodule,
a module list and its element class, a linear-like weight, a method (or an attribute bound to
one), through the class's bases; what flatten.py resolves each callee with."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from .evaluate import LinearAttr
from .source import ModelSource


@dataclass(frozen=True)
class Ref:
    """What an expression in a method names."""

    kind: str                  # module | list | linear | method | unknown
    cls: str | None            # module class (element class for a list); method's class
    access: str | None         # path from the method's `self`; None through a loop / variable index
    attr: str = ""             # linear attribute, method name, or the last attribute step
    owner: str = ""            # class that declares attr
    via_list: bool = False     # an element of a module list reached through a variable
    alts: tuple["Ref", ...] = ()   # a local bound to one of several methods (if/else)


# ------------------------------------------------------------------------------ class lookups

def bases_chain(ms: ModelSource, cls: str) -> list[str]:
    out, todo = [], [cls]
    while todo:
        c = todo.pop(0)
        if c in out or c not in ms.classes:
            continue
        out.append(c)
        todo.extend(b.split(".")[-1] for b in ms.classes[c][1].bases)
    return out


def find_linear(ms: ModelSource, cls: str, attr: str) -> LinearAttr | None:
    for c in bases_chain(ms, cls):
        lin = ms.linears.get((c, attr))
        if lin is not None:
            return lin
    return None


def find_child(ms: ModelSource, cls: str, attr: str) -> tuple[str | None, str, bool]:
    """(child class, declaring class, is a list) of `self.<attr>`, through the base classes."""
    for c in bases_chain(ms, cls):
        if (c, attr) in ms.children:
            return ms.children[(c, attr)], c, (c, attr) in ms.list_children
    return None, "", False


def module_paths(ms: ModelSource, start: str, owner: str, depth: int = 4) -> list[str]:
    """Every attribute path (`mlp`, `mlp.shared_experts`) by which a module of class `start`
    may hold a module of class `owner` (or a subclass), through every class an attribute may
    be built as (`self.mlp = MoE(...) if ... else MLP(...)`), base classes included; module
    lists are skipped (an element is not a fixed path). Shortest first, at most `depth` steps."""
    out: list[str] = []
    todo = [(start, "", (start,))]
    while todo:
        cls, path, seen = todo.pop(0)
        for c in bases_chain(ms, cls):
            for (k, attr), kids in ms.alternatives.items():
                if k != c or (k, attr) in ms.list_children:
                    continue
                p = f"{path}.{attr}" if path else attr
                for kid in kids:
                    if owner in bases_chain(ms, kid):
                        if p not in out:
                            out.append(p)
                    elif kid not in seen and p.count(".") + 1 < depth:
                        todo.append((kid, p, seen + (kid,)))
    return out


def sub_linears(ms: ModelSource, cls: str, attr: str) -> list[LinearAttr]:
    """Weights of `self.<attr>` known only by name (`experts.w13_weight` of a FusedMoE)."""
    for c in bases_chain(ms, cls):
        subs = [lin for (k, a), lin in ms.linears.items() if k == c and a.startswith(attr + ".")]
        if subs:
            return sorted(subs, key=lambda lin: lin.line)
    return []


def handed_linears(ms: ModelSource, cls: str, attr: str) -> list[LinearAttr]:
    """Linears of `cls` handed to the constructor of a library layer held as `self.<attr>`:
    `self.mla_attn = MultiHeadLatentAttentionWrapper(..., mla_modules)` with `mla_modules =
    MLAModules(kv_b_proj=self.kv_b_proj, o_proj=self.o_proj, ...)` (vLLM's MLA: the wrapper
    runs them). They run when `self.<attr>(...)` runs, in the order the class builds them."""
    from .evaluate.syntax import assign_value, local_assign
    from .init_body import init_statements

    for c in bases_chain(ms, cls):
        stmts = init_statements(ms, c)
        locals_: dict[str, cst.BaseExpression] = {}
        for st in stmts:
            bound = local_assign(st)
            if bound is not None:
                locals_[bound[0]] = bound[1]
            got = assign_value(st)
            if got is None or got[0] != attr or not isinstance(got[1], cst.Call):
                continue
            names: list[str] = []
            for a in got[1].args:
                val = a.value
                if isinstance(val, cst.Name) and isinstance(locals_.get(val.value), cst.Call):
                    val = locals_[val.value]             # handed on through a local
                names += _self_attrs(val)
            found = {lin.attr: lin for n in names
                     if (lin := find_linear(ms, cls, n)) is not None and not lin.is_param}
            if found:
                return sorted(found.values(), key=lambda lin: lin.line)
    return []


def _self_attrs(node: cst.CSTNode) -> list[str]:
    """X of every `self.X` in an expression."""
    out: list[str] = []

    class V(cst.CSTVisitor):
        def visit_Attribute(self, n: cst.Attribute) -> None:
            if isinstance(n.value, cst.Name) and n.value.value == "self":
                out.append(n.attr.value)

    node.visit(V())
    return out


def method_targets(ms: ModelSource, cls: str, attr: str) -> list[str]:
    """Methods `self.<attr>` is bound to in `__init__` (`self.mlp_forward = self.forward_x`)."""
    for c in bases_chain(ms, cls):
        got = ms.method_aliases.get((c, attr))
        if got:
            return got
    return []


def holds_linears(ms: ModelSource, cls: str, depth: int = 3) -> bool:
    for c in bases_chain(ms, cls):
        if any(k == c for (k, _) in ms.linears):
            return True
        if depth > 0 and any(holds_linears(ms, child, depth - 1)
                             for (k, _), child in ms.children.items() if k == c):
            return True
    return False


def own_params(ms: ModelSource, cls: str) -> list[LinearAttr]:
    got = [lin for c in bases_chain(ms, cls) for (k, a), lin in ms.linears.items()
           if k == c and lin.is_param and "." not in a]
    return sorted(got, key=lambda lin: lin.line)


def attr_owner(ms: ModelSource, cls: str, attr: str) -> str:
    for c in bases_chain(ms, cls):
        if (c, attr) in ms.linears or (c, attr) in ms.children:
            return c
        if attr in ms.classes[c][1].attrs:
            return c
    return cls


# ------------------------------------------------------------------------------ resolving

def _index(node: cst.Subscript) -> str | None:
    """`0` for x[0] (a literal index), None for anything else (a variable, a slice, a dict key:
    the element's class is known, but it is no fixed path a plan's weight may name)."""
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    v = node.slice[0].slice.value
    return v.value if isinstance(v, cst.Integer) else None


def resolve(ms: ModelSource, cls: str, node: cst.BaseExpression, local: dict[str, Ref]) -> Ref | None:
    """What `node` names inside a method of `cls` (None: not a module path)."""
    if isinstance(node, cst.Name):
        if node.value == "self":
            return Ref("module", cls, "self")
        return local.get(node.value)
    if isinstance(node, cst.Subscript):
        base = resolve(ms, cls, node.value, local)
        if base is None or base.kind != "list":
            return None
        is_slice = len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Slice)
        if is_slice:
            return base
        idx = _index(node)
        acc = f"{base.access}[{idx}]" if base.access is not None and idx is not None else None
        return Ref("module", base.cls, acc, base.attr, base.owner, via_list=acc is None)
    if isinstance(node, cst.Attribute):
        base = resolve(ms, cls, node.value, local)
        if base is None or base.kind != "module" or base.cls is None:
            return None
        a = node.attr.value
        acc = f"{base.access}.{a}" if base.access is not None else None
        lin = find_linear(ms, base.cls, a)
        if lin is not None:
            return Ref("linear", None, acc, a, lin.cls)
        child, owner, is_list = find_child(ms, base.cls, a)
        if child is not None:
            return Ref("list" if is_list else "module", child, acc, a, owner)
        if ms.method(base.cls, a) is not None:
            return Ref("method", base.cls, base.access, a, base.cls, base.via_list)
        bound = method_targets(ms, base.cls, a)
        if bound:
            return Ref("method", base.cls, base.access, bound[0], base.cls, base.via_list)
        return Ref("unknown", None, acc, a, attr_owner(ms, base.cls, a))
    return None
