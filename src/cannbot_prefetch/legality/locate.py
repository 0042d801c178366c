"""The rule itself: `locate` resolves a placement to a `Location` when its dependency is defined
before the insertion point and flows into the call that runs the target after it, else a
`Problem`; `dependency_problem` asks the same of a module's source text."""

from __future__ import annotations

import libcst as cst

from ..contract import grammar
from ..pysource import ClassInfo, Method, SourceView, Stmt, names_and_calls, parse_view
from .kinds import not_a_tensor, tensor_field
from .lookup import (base_with, enclosing_block_stmt, find_anchors, find_class, has_attr,
                     is_choice, is_conditional, whole_chain)
from .placement import MISSING, UNSAFE, Location, Placement, Problem, TargetRef
from .tuples import flow_siblings
from .reach import (bound_methods, call_arg_names, guard_path, inherited_elsewhere,
                    methods_reaching, runs_target, target_refs, handed_to)


def dependency_problem(module_code: str, pl: Placement, target: TargetRef) -> str | None:
    """None when the placement's dependency is legal at its insertion point, else the reason."""
    try:
        view = parse_view(module_code, {target.cls, pl.insert.cls, pl.join.cls})
    except cst.ParserSyntaxError as exc:
        return f"the file does not parse: {str(exc).splitlines()[0]}"
    result = locate(view, pl, target)
    return result.message if isinstance(result, Problem) else None


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
    if tcls is not None and not has_attr(view, tcls, t.attr):
        return Problem(MISSING, f"class {t.cls} has no attribute '{t.attr.split('.')[0]}' "
                                f"(no `self.{t.attr.split('.')[0]} = ...` in its methods)")
    icls = find_class(view, ins.cls, "insert")
    if isinstance(icls, Problem):
        return icls
    method = icls.methods.get(ins.method)
    if method is None:
        base = base_with(view, icls, ins.method)
        if base is not None:
            return Problem(UNSAFE, f"{ins.cls} has no {ins.method} of its own (it inherits "
                                   f"{base}.{ins.method}); inserting into {base} would change every "
                                   f"subclass: plan the site on {base}")
        return Problem(MISSING, f"class {ins.cls} has no method {ins.method}")
    found = find_anchors(icls, method, ins.anchor_call)
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
    stmt = enclosing_block_stmt(method, holder)
    where = f"{ins.cls}.{method.name}"
    note = "" if method.name == ins.method else f"anchor found in helper method {where}"
    stmts = method.stmts
    k = stmts.index(stmt)
    chain = None
    if ins.position == "after":
        if stmt.is_return:
            return Problem(UNSAFE, f"{ins.anchor_call} is called inside `return` in {where}: "
                                   f"nothing runs after it there; use position: before, or anchor "
                                   f"on the caller")
        if stmt.header:
            return Problem(UNSAFE, f"{ins.anchor_call} is in the header of a compound statement in "
                                   f"{where} (line {stmt.start}); use position: before")
        chain = whole_chain(method, stmt, dependency.split(".")[0])
        if chain is not None:
            stmt, note = chain, note or f"after the whole if/elif/else at line {chain.start}"
        point = next((i for i, s in enumerate(stmts) if s.start > stmt.end), len(stmts))
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

    why = _input_on_some_path(method, stmts, point, dep_names, params)
    if why:
        return Problem(UNSAFE, f"{why} in {where}: on that path the prefetch is ordered after "
                               f"nothing (the window starts before the layer does); depend on a "
                               f"value every path computes")

    # the target and its guard (a module on the weight's path that may be absent or None)
    refs, owner = target_refs(weight_expr)
    refs += handed_to(icls, owner)            # a library layer handed the target runs it
    guard = None
    head = weight_expr.split(".")
    if head[0] != "self" and head[0] not in params:
        return Problem(MISSING, f"weight '{weight_expr}' names '{head[0]}', which is neither "
                                f"self nor a parameter of {where}")
    if head[0] == "self" and len(head) > 2 and (
            scope == "next_layer" or tcls is None or is_conditional(view, tcls, t.attr)
            or head[1].split("[")[0] in icls.conditional_attrs or is_choice(icls, head[1])):
        guard = guard_path(owner)
    elif head[0] != "self" and scope == "next_layer":
        guard = guard_path(owner)
    if guard is not None and "." not in guard:
        guard = None

    # a tuple is not a tensor: npu_prefetch takes one (`attn_ret` later unpacked), nor is a
    # model output object (kinds.py); a field of one (`outputs.last_hidden_state`) may be
    if "." not in dependency:
        why = not_a_tensor(view, icls, method, point, dependency)
        if why:
            alt = tensor_field(method, def_idx + 1, dependency) if def_idx >= 0 else None
            return Problem(UNSAFE, f"dependency '{dependency}' is not a tensor in {where}: {why}; "
                                   f"npu_prefetch needs one tensor"
                                   + (f" (the method reads '{alt}' from it)" if alt else ""))
    for n in dep_names:
        unpack = next((st for st in stmts[max(def_idx, 0):] if _unpacks(st, n)), None)
        if unpack is not None and "." not in dependency:
            return Problem(UNSAFE, f"dependency '{n}' is a tuple (unpacked at line {unpack.start}) "
                                   f"in {where}: npu_prefetch needs one tensor")

    # the flow: from the dependency's definition to the call that runs the target
    helpers = methods_reaching(icls, lambda c: runs_target(c, refs, owner, set()))
    helpers |= {a for a, targets in bound_methods(icls).items() if targets & helpers}
    helpers |= inherited_elsewhere(view, icls, refs)
    live: dict[str, str] = {n: "dep" for n in dep_names}
    # an element of a returned tuple: the elements the callee computes from it carry it on
    # (after a whole if/elif/else: what every branch's unpack carries)
    for n in dep_names:
        defs = [i for i in range(point) if n in stmts[i].defs]
        defs = [i for i in defs if stmts[i].start > chain.start] if chain else defs[-1:]
        sibs = [flow_siblings(view.module, icls.name, method.name, stmts[i].start, n)
                for i in defs]
        if sibs:
            live.update({s: "dep" for s in set.intersection(*sibs)})
    target_seen_before = any(
        any(runs_target(c, refs, owner, helpers) for c in s.calls) for s in stmts[:point])
    for i in range(def_idx + 1, len(stmts)):
        s = stmts[i]
        after = i >= point
        if scope == "next_layer":
            hit = after and s.is_return
            used = s.uses
        else:
            tcalls = [c for c in s.calls if runs_target(c, refs, owner, helpers)] if after else []
            hit = bool(tcalls)
            used = set().union(*(call_arg_names(c) for c in tcalls)) if tcalls else set()
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


def _input_on_some_path(method: Method, stmts: list[Stmt], point: int, names: set[str],
                        params: set[str]) -> str | None:
    """A dependency computed on one path and set to a forward input on another
    (`topk_ids = self.router(x)`, then `if self.force_eplb: topk_ids = cur_topk_list`, issue 30):
    the definitions that may reach the point are the last one at the method's own level and the
    branch ones after it."""
    for n in names:
        defs = [i for i in range(point) if n in stmts[i].defs]
        level = [i for i in defs if stmts[i].indent == method.body_indent]
        reach = [i for i in defs if not level or i >= level[-1]]
        inputs = [i for i in reach if not stmts[i].calls and stmts[i].uses
                  and stmts[i].uses <= params]
        if inputs and len(inputs) < len(reach):
            s = stmts[inputs[0]]
            return (f"dependency '{n}' may be the forward input "
                    f"'{', '.join(sorted(s.uses))}' (line {s.start} sets it so)")
    return None
