"""Where a site goes, and whether its dependency is legal there (static, no torch).

The rule (seed 003 "图模式下的依赖节点", CONTRACTS "Defaults"): the dependency must be defined
before the insertion point in the method that receives the call, and its value must flow into the
call that runs the target, directly or through the statements in between, *after* the insertion
point. A dependency that only reaches the target through a value computed before the prefetch
(the seed's wrong example: `x` feeds `self.attention(x)` whose output feeds the MLP) is refused:
in GE graph mode the Cmo node would hang off a stale node.

One module, imported plainly by both stages that need the rule: mapping/ (the planner proposes
only placements this accepts) and rewrite/ (the rewriter places exactly what this accepts).
`Placement` is the proposal both speak (what a plan Site carries: insert, dependency, weight
expression, join); `dependency_problem(module_code, placement, target)` says whether it is legal;
`locate(view, placement, target)` resolves it to a `Location` (lines in one file) or a `Problem`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from typing import Protocol

from .plan import Insert, Join, Site, grammar
from .pysource import (ClassInfo, Method, SourceView, Stmt, call_name, code_of, dotted,
                       names_and_calls, parse_view)

# kinds: "missing" = the plan names something that is not in the file (bad input, exit 2);
#        "unsafe"  = it is there but there is no safe insertion (the site is refused, others go on)
MISSING, UNSAFE = "missing", "unsafe"


@dataclass(frozen=True)
class Problem:
    kind: str
    message: str


@dataclass(frozen=True)
class Placement:
    """Where a prefetch goes, as the planner proposes it and a plan Site records it."""

    insert: Insert
    dependency: str
    weight_expr: str
    join: Join
    file: str = ""            # file holding insert.cls
    shift: str = "exact"      # exact | earlier | later | fallback (vs the measured window)
    note: str = ""
    scope: str = "same"       # same | next_layer (the weight belongs to the next decoder layer)
    stmt: int | None = None   # mapping: index of the anchor statement in insert.method, which
                              # tells the profiled ops after the insertion (placed window)
    # mapping's own: the call path down to the insertion hop (where a join may go) and the line
    # of the statement it means to anchor on (apply must resolve the anchor to that one)
    callers: tuple = ()
    anchor_line: int = 0

    @classmethod
    def of_site(cls, site: Site) -> "Placement":
        return cls(site.insert, site.dependency, site.target.weight_expr, site.join,
                   site.target.file, scope=site.target.scope)


class TargetRef(Protocol):
    """The weight's owner: a plan Target or the mapping's LinearAttr (class + attribute)."""

    cls: str
    attr: str


@dataclass(frozen=True)
class Location:
    """A legal placement resolved to lines of one file (what the rewriter inserts at)."""

    cls: ClassInfo
    method: Method
    stmt: Stmt                 # the statement the call goes before / after
    line: int                  # insert the new line before this 1-based line number
    indent: str
    guard: str | None          # a path that may be None / absent (conditional module, next layer)
    note: str = ""


def dependency_problem(module_code: str, pl: Placement, target: TargetRef) -> str | None:
    """None when the placement's dependency is legal at its insertion point, else the reason."""
    try:
        view = parse_view(module_code, {target.cls, pl.insert.cls, pl.join.cls})
    except cst.ParserSyntaxError as exc:
        return f"the file does not parse: {str(exc).splitlines()[0]}"
    result = locate(view, pl, target)
    return result.message if isinstance(result, Problem) else None


def _strip_forward(path: str) -> str:
    return path[: -len(".forward")] if path.endswith(".forward") else path


def _anchor_matches(call: cst.Call, anchor: str) -> bool:
    d = call_name(call)
    anchor = _strip_forward(anchor)
    return d == anchor or _strip_forward(d) == anchor


def _find_class(view: SourceView, name: str, role: str) -> ClassInfo | Problem:
    cls = view.classes.get(name)
    if cls is not None:
        return cls
    alias = view.aliases.get(name)
    if alias is not None:
        orig = "" if alias.original == name else f" as an alias of {alias.original}"
        return Problem(UNSAFE, f"{role} class {name} is imported from {alias.source}{orig}, not "
                               f"defined in this file: plan the site in that module's file")
    return Problem(MISSING, f"{role} class {name} is not defined in this file")


def _base_with(view: SourceView, cls: ClassInfo, method: str) -> str | None:
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


def _has_attr(view: SourceView, cls: ClassInfo, attr: str) -> bool:
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


def _is_conditional(view: SourceView, cls: ClassInfo, attr: str) -> bool:
    first = attr.split(".")[0]
    return first in cls.conditional_attrs


def _methods_reaching(cls: ClassInfo, pred) -> set[str]:
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


def _target_refs(weight_expr: str) -> tuple[list[str], str]:
    """Module paths whose call runs the target, and the weight's owner path."""
    steps = _path_steps(weight_expr)
    owner = "".join(steps[:-1]) if steps[-1] == ".weight" else weight_expr
    first = 1 if steps[0] != "self" else 2
    refs = ["".join(steps[:k]) for k in range(first, len(steps) + 1)]
    return refs, owner


def _guard_path(owner: str) -> str:
    """The part of a weight's owner path `_cbp.attr` can walk: up to the first index
    (`self.next_layer.self_attn[0].q_proj` -> `self.next_layer`); list elements exist."""
    return owner.split("[", 1)[0].rsplit(".", 1)[0] if "[" in owner else owner


def _runs_target(call: cst.Call, refs: list[str], owner: str, helpers: set[str]) -> bool:
    d = _strip_forward(call_name(call))
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


def _inherited_elsewhere(view: SourceView, cls: ClassInfo, refs: list[str]) -> set[str]:
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


def _bound_methods(cls: ClassInfo) -> dict[str, set[str]]:
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


def _call_arg_names(call: cst.Call) -> set[str]:
    out: set[str] = set()
    for a in call.args:
        out |= names_and_calls(a.value)[0]
    return out


def _find_anchor(cls: ClassInfo, method: Method, anchor: str) -> tuple[Method, Stmt] | None:
    """The statement holding the anchor call: in the method, else in a self-method it calls."""
    got = _find_anchors(cls, method, anchor)
    return got[0] if got else None


def _find_anchors(cls: ClassInfo, method: Method, anchor: str) -> list[tuple[Method, Stmt]]:
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


def _enclosing_block_stmt(method: Method, holder: Stmt) -> Stmt:
    """Walk out to the statement that sits directly in an indented block."""
    if holder.in_block:
        return holder
    for s in method.stmts:  # pragma: no cover - every Stmt is created in a block
        if s.start <= holder.start <= s.end and s.in_block:
            return s
    return holder


def locate(view: SourceView, pl: Placement, target: TargetRef) -> Location | Problem:
    t, ins, dependency = target, pl.insert, pl.dependency
    weight_expr, scope = pl.weight_expr, pl.scope
    for field, value in (("target.weight_expr", weight_expr), ("insert.anchor_call", ins.anchor_call),
                         ("insert.method", ins.method)):
        msg = grammar.problem(field, value)
        if msg:
            return Problem(MISSING, f"{field} {msg}")
    # the weight's class may be defined in a module this file imports (or that a base class
    # of the insertion class comes from): its attribute is then checked where it was planned
    tcls = view.classes.get(t.cls)
    if tcls is None and t.cls not in view.aliases:
        return Problem(MISSING, f"target class {t.cls} is not defined in this file (nor imported)")
    if tcls is not None and not _has_attr(view, tcls, t.attr):
        return Problem(MISSING, f"class {t.cls} has no attribute '{t.attr.split('.')[0]}' "
                                f"(no `self.{t.attr.split('.')[0]} = ...` in its methods)")
    icls = _find_class(view, ins.cls, "insert")
    if isinstance(icls, Problem):
        return icls
    method = icls.methods.get(ins.method)
    if method is None:
        base = _base_with(view, icls, ins.method)
        if base is not None:
            return Problem(UNSAFE, f"{ins.cls} has no {ins.method} of its own (it inherits "
                                   f"{base}.{ins.method}); inserting into {base} would change every "
                                   f"subclass: plan the site on {base}")
        return Problem(MISSING, f"class {ins.cls} has no method {ins.method}")
    found = _find_anchors(icls, method, ins.anchor_call)
    if not found:
        return Problem(MISSING, f"no call to {ins.anchor_call} in {ins.cls}.{ins.method} "
                                f"(or the helper methods it calls)")
    # the anchor is the first of its calls where the site is legal: the branches of one step
    # (`if npugraph: x, y = f(a, ev=True)` / `else: x, y = f(a)`) call it more than once
    first: Problem | None = None
    for m, holder in found:
        res = _locate_at(view, pl, target, tcls, icls, m, holder)
        if isinstance(res, Location) or res.kind == MISSING:
            return res
        first = first or res
    return first


def _locate_at(view: SourceView, pl: Placement, target: TargetRef, tcls, icls: ClassInfo,
               method: Method, holder: Stmt) -> Location | Problem:
    t, ins, dependency = target, pl.insert, pl.dependency
    weight_expr, scope = pl.weight_expr, pl.scope
    if not isinstance(method.node.body, cst.IndentedBlock):
        return Problem(UNSAFE, f"{ins.cls}.{method.name} is a one-line method (`def ...: ...`): "
                               f"there is no line to insert at without rewriting it")
    stmt = _enclosing_block_stmt(method, holder)
    where = f"{ins.cls}.{method.name}"
    note = "" if method.name == ins.method else f"anchor found in helper method {where}"
    stmts = method.stmts
    k = stmts.index(stmt)
    if ins.position == "after":
        if stmt.is_return:
            return Problem(UNSAFE, f"{ins.anchor_call} is called inside `return` in {where}: "
                                   f"nothing runs after it there; use position: before, or anchor "
                                   f"on the caller")
        if stmt.header:
            return Problem(UNSAFE, f"{ins.anchor_call} is in the header of a compound statement in "
                                   f"{where} (line {stmt.start}); use position: before")
        point = k + 1
        line = stmt.end + 1
    else:
        point = k
        line = stmt.start

    # the dependency: a local name or attribute path (grammar.py), defined before the point
    if not grammar.is_dotted(dependency):
        return Problem(MISSING, f"dependency '{dependency}' is not a local name or attribute path")
    dep_node = cst.parse_expression(dependency)
    dep_names, dep_calls = names_and_calls(dep_node)
    dep_names.discard("self")
    if dep_calls:
        return Problem(UNSAFE, f"dependency '{dependency}' calls a function: name a value "
                               f"that the model already computes")
    if not dep_names:
        return Problem(UNSAFE, f"dependency '{dependency}' is not a local tensor of {where}")
    params = set(method.params)
    def_idx = -1
    for n in dep_names:
        idx = max((i for i in range(point) if n in stmts[i].defs), default=None)
        if idx is None:
            if n in params:
                continue
            later = next((s for s in stmts[point:] if n in s.defs), None)
            if later is not None and later is stmt:
                return Problem(MISSING, f"dependency '{n}' is defined by the anchor statement itself "
                                        f"(line {stmt.start}) in {where}: use position: after")
            extra = f" (first defined at line {later.start}, after it)" if later else ""
            return Problem(MISSING, f"dependency '{n}' is not defined before the insertion point in "
                                    f"{where}{extra}")
        def_idx = max(def_idx, idx)

    # the target and its guard (a module on the weight's path that may be absent or None)
    refs, owner = _target_refs(weight_expr)
    guard = None
    head = weight_expr.split(".")
    if head[0] != "self" and head[0] not in params:
        return Problem(MISSING, f"weight '{weight_expr}' names '{head[0]}', which is neither "
                                f"self nor a parameter of {where}")
    if head[0] == "self" and len(head) > 2 and (
            scope == "next_layer" or tcls is None or _is_conditional(view, tcls, t.attr)
            or head[1].split("[")[0] in icls.conditional_attrs):
        guard = _guard_path(owner)
    elif head[0] != "self" and scope == "next_layer":
        guard = _guard_path(owner)
    if guard is not None and "." not in guard:
        guard = None

    # a tuple is not a tensor: npu_prefetch takes one (`attn_ret` later unpacked)
    for n in dep_names:
        unpack = next((st for st in stmts[max(def_idx, 0):] if _unpacks(st, n)), None)
        if unpack is not None and "." not in dependency:
            return Problem(UNSAFE, f"dependency '{n}' is a tuple (unpacked at line {unpack.start}) "
                                   f"in {where}: npu_prefetch needs one tensor")

    # the flow: from the dependency's definition to the call that runs the target
    helpers = _methods_reaching(icls, lambda c: _runs_target(c, refs, owner, set()))
    helpers |= {a for a, targets in _bound_methods(icls).items() if targets & helpers}
    helpers |= _inherited_elsewhere(view, icls, refs)
    live: dict[str, str] = {n: "dep" for n in dep_names}
    target_seen_before = any(
        any(_runs_target(c, refs, owner, helpers) for c in s.calls) for s in stmts[:point])
    for i in range(def_idx + 1, len(stmts)):
        s = stmts[i]
        after = i >= point
        if scope == "next_layer":
            hit = after and s.is_return
            used = s.uses
        else:
            tcalls = [c for c in s.calls if _runs_target(c, refs, owner, helpers)] if after else []
            hit = bool(tcalls)
            used = set().union(*(_call_arg_names(c) for c in tcalls)) if tcalls else set()
        if hit:
            tags = {live[n] for n in used if n in live}
            what = "the return value" if scope == "next_layer" else "the call that runs " + owner
            if not tags:
                return Problem(UNSAFE, f"dependency '{dependency}' does not flow into {what} "
                                       f"(line {s.start}) in {where}: in graph mode it would not "
                                       f"order the prefetch before the target")
            if tags == {"before"}:
                via = _first_path_stmt(stmts, def_idx, point, live)
                return Problem(UNSAFE, f"dependency '{dependency}' reaches {what} only through "
                                       f"line {via} which runs before the prefetch: it is not the "
                                       f"target's predecessor (the workflow's wrong example: docs/rewrite.md); use the "
                                       f"value computed there")
            return Location(icls, method, stmt, line, stmt.indent, guard, note)
        if s.uses & live.keys():
            fresh = after and any(live[n] in ("dep", "after") for n in s.uses & live.keys())
            for d in s.defs:
                live[d] = "after" if fresh else "before"
        else:
            for d in s.defs:
                live.pop(d, None)
    if scope == "next_layer":
        return Problem(UNSAFE, f"dependency '{dependency}' does not flow into a return of "
                               f"{where}, so the next layer does not depend on it")
    if target_seen_before:
        return Problem(UNSAFE, f"{owner} runs before the insertion point in {where}: the prefetch "
                               f"would come after its target")
    return Problem(UNSAFE, f"no call that runs {owner} after the insertion point in {where}")


def unpacked_from(s: Stmt) -> tuple[str, list[str]] | None:
    """`a, b = name` -> (name, [a, b])."""
    node = s.node
    if not isinstance(node, cst.SimpleStatementLine) or len(node.body) != 1:
        return None
    small = node.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and \
            isinstance(small.value, cst.Name) and isinstance(small.targets[0].target, (cst.Tuple, cst.List)):
        names = [el.value.value for el in small.targets[0].target.elements
                 if isinstance(el.value, cst.Name)]
        return small.value.value, names
    return None


def _unpacks(s: Stmt, name: str) -> bool:
    got = unpacked_from(s)
    return got is not None and got[0] == name


def _first_path_stmt(stmts: list[Stmt], def_idx: int, point: int, live: dict[str, str]) -> int:
    for i in range(def_idx + 1, point):
        if any(live.get(d) == "before" for d in stmts[i].defs):
            return stmts[i].start
    return stmts[max(def_idx, 0)].start
