"""The calls one forward pass runs, in evaluation order (arguments before the call), each with
its path of hops (class, method, statement, call), descending into known submodules, helper
methods and the decoder-layer loop (one layer stands for all).

A callee is resolved as an access path from the method's `self`: `self.mlp`, `self.model.decoder`
(a chain of submodules), `self.mlps[0]` (a ModuleList / ModuleDict element at a literal index),
`self.self_attn[0].forward_absorb` (an explicit method of a submodule), `self.mlp_forward` (an
attribute bound to a method in `__init__`), `layer` (a loop variable over `self.layers`, or a local
bound to `self.layers[i]`: the element class is known, the access is not a fixed path). Fused
expert Parameters are used, not called: their first use counts, and a call to a module known only
by its fused weights (`self.experts(...)` of a vLLM FusedMoE) runs them, and so does a library
layer the class handed its own linears to (`self.mla_attn(...)`: vLLM's MLA wrapper, built with
`MLAModules(kv_b_proj=self.kv_b_proj, ...)`).

What each callee names is refs.py's `resolve`.
"""

from __future__ import annotations

import libcst as cst

from ..pysource import Stmt, call_name, code_of
from ..pysource.paths import arms, conditions
from .built import builds_under
from .evaluate import LinearAttr
from .evaluate.syntax import local_assign
from .refs import (Ref, bases_chain, handed_linears, holds_linears, own_params, resolve,
                   sub_linears)
from .source import Event, Hop, ModelSource

NORM_HINTS = ("norm",)
ACT_HINTS = ("act", "silu", "gelu", "swiglu", "relu")


def _post_order_calls(node: cst.CSTNode) -> list[cst.Call]:
    """Calls of a statement in evaluation order (arguments before the call)."""
    out: list[cst.Call] = []

    class V(cst.CSTVisitor):
        def leave_Call(self, original: cst.Call) -> None:
            out.append(original)

        def visit_Lambda(self, node) -> bool:
            return False

        def visit_FunctionDef(self, node) -> bool:
            return False

    node.visit(V())
    return out


def _stmt_calls(s: Stmt) -> list[cst.Call]:
    if s.header:   # compound statement: only its header parts
        return [c for c in s.calls]
    return _post_order_calls(s.node)


def _loop_var(node: cst.For) -> tuple[str | None, cst.BaseExpression]:
    """(loop variable, iterated expression) of `for x in it` / `for i, x in enumerate(it)`, and
    of `islice(it, ...)` (within either), of the module list among `zip(...)`'s arguments (`for kind, layer in zip(self.config.
    layer_types, self.layers)`, ergo): the variable at the list's position."""
    it, target = node.iter, node.target
    while isinstance(it, cst.Call) and it.args and code_of(it.func) in ("enumerate", *_SLICES):
        # in either order: `enumerate(islice(...))`, `islice(enumerate(self.layers), s, e)`
        # (vLLM's cohere_compass); islice keeps the elements as they are, some of them
        if code_of(it.func) == "enumerate":
            if not (isinstance(target, cst.Tuple) and len(target.elements) == 2):
                break
            target = target.elements[1].value
        it = it.args[0].value
    if isinstance(it, cst.Call) and code_of(it.func) == "zip" and isinstance(target, cst.Tuple):
        args = [a for a in it.args if a.keyword is None]      # `strict=True` is no iterable
        if len(args) == len(target.elements) and not any(a.star for a in args):
            return None, _ZipArgs((el.value, a.value) for el, a in zip(target.elements, args))
    return (target.value if isinstance(target, cst.Name) else None), it


# iterators over some of a sequence's elements, in order (vLLM's decoder loops:
# `for layer in islice(self.layers, self.start_layer, self.end_layer)`)
_SLICES = ("islice", "itertools.islice")


class _ZipArgs(list):
    """The (target, iterated) pairs of a `for a, b in zip(x, y)` loop."""


# ------------------------------------------------------------------------------ the walk

def flatten(ms: ModelSource, root: str, method: str = "forward", *, max_depth: int = 12) -> list[Event]:
    """The calls one `root.method` runs, in order, descending into known submodules."""
    out: list[Event] = []
    _walk_method(ms, root, method, (), out, max_depth, set(), None)
    return out


def _block_stmts(block) -> set[int]:
    """ids of every statement node inside a block (nested ones included)."""
    out: set[int] = set()

    class V(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, node) -> None:
            out.add(id(node))

        def visit_BaseCompoundStatement(self, node) -> None:
            out.add(id(node))

    if block is not None:
        for st in getattr(block, "body", []):
            out.add(id(st))
            st.visit(V())
    return out


def _dead_branches(ms: ModelSource, cls: str, site, node: cst.If) -> set[int]:
    """Statements of an if/elif/else chain that cannot run for this instance: the conditions
    that read only __init__ values, the config, the decode phase or the prefetch switch (on:
    a branch that runs only with it off never runs a prefetch) decide them."""
    from .evaluate import static_truth

    skip: set[int] = set()
    branch: cst.If | cst.Else | None = node
    decided = False
    while branch is not None:
        if decided:
            skip |= _block_stmts(branch.body)
        elif isinstance(branch, cst.If):
            v = static_truth(ms, cls, site, branch.test)
            if v is True:
                decided = True          # the later branches never run
            elif v is False:
                skip |= _block_stmts(branch.body)
        if isinstance(branch, cst.Else):
            break
        branch = branch.orelse
    return skip


def _kind_by_name(name: str) -> str:
    low = name.lower()
    if any(h in low for h in ACT_HINTS):
        return "act"
    if "norm" in low:
        return "norm"
    return "module"


def _walk_method(ms, cls, method, prefix, out, depth, active, site) -> None:
    m = ms.method(cls, method)
    key = (cls, method)
    if m is None or depth <= 0 or key in active:
        return
    active = active | {key}
    dead: set[int] = set()
    owner = ms.method_owner(cls, method)
    local: dict[str, Ref] = {}
    params = {lin.attr: lin for c in bases_chain(ms, cls) for (k, a), lin in ms.linears.items()
              if k == c and "." not in a}
    params_seen: set[str] = set()
    got = arms(m)
    for i, s in enumerate(m.stmts):
        if id(s.node) in dead:
            continue
        if s.header and isinstance(s.node, cst.If):
            dead |= _dead_branches(ms, cls, site, s.node)
        if params:   # weights used, not called (fused expert Parameters; `self.q_proj.weight`
            #          handed to a fused op such as MLAProlog): the first use runs them
            for a in _param_uses(s, params):
                if a not in params_seen:
                    params_seen.add(a)
                    out.append(Event(prefix + (Hop(owner, method, i, f"self.{a}", s.start,
                                                   f"self.{a}"),), "linear", params[a].cls, a))
        if s.header and isinstance(s.node, cst.For):
            var, it = _loop_var(s.node)
            pairs = it if isinstance(it, _ZipArgs) else [(cst.Name(var) if var else None, it)]
            for target, iterated in pairs:
                r = resolve(ms, cls, iterated, local)
                if isinstance(target, cst.Name) and r is not None and r.kind == "list":
                    local[target.value] = Ref("module", r.cls, None, r.attr, r.owner,
                                              via_list=True)
        bound = local_assign(s)
        if bound is not None:
            r = resolve(ms, cls, bound[1], local)
            if r is not None and r.kind in ("module", "list", "linear"):
                local[bound[0]] = r
            elif r is not None and r.kind == "method":
                # `fn = self.mla_prolog` / `fn = self.prepare_qkv` in if/else: every one may run
                prev = local.get(bound[0])
                alts = (prev.alts if prev is not None and prev.kind == "method" else ()) + (r,)
                local[bound[0]] = Ref("method", r.cls, r.access, r.attr, r.owner, r.via_list, alts)
            else:
                local.pop(bound[0], None)
        held = set(conditions(m, i, got))
        for call in _stmt_calls(s):
            _call_event(ms, cls, owner, method, i, s, call, local, prefix, out, depth, active,
                        site, held)


def _param_uses(s: Stmt, params: dict[str, LinearAttr]) -> list[str]:
    nodes = [s.node] if not s.header else list(s.calls)
    found: list[str] = []

    class V(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            # self.<param> (a fused Parameter), self.<linear>.weight (a weight read directly)
            inner = node.value
            if isinstance(inner, cst.Attribute) and node.attr.value == "weight":
                name = inner.attr.value if isinstance(inner.value, cst.Name) and \
                    inner.value.value == "self" else None
                if name in params and not params[name].is_param and name not in found:
                    found.append(name)
            elif isinstance(inner, cst.Name) and inner.value == "self" \
                    and node.attr.value in params and params[node.attr.value].is_param \
                    and node.attr.value not in found:
                found.append(node.attr.value)

    for n in nodes:
        n.visit(V())
    return found


def _call_event(ms, cls, owner, method, i, s, call, local, prefix, out, depth, active,
                site, held=frozenset()) -> None:
    text = call_name(call)
    r = resolve(ms, cls, call.func, local)
    hop = Hop(owner, method, i, text, s.start, r.access if r is not None else None,
              bool(r is not None and r.via_list))
    path = prefix + (hop,)
    if r is None:
        name = text.split(".")[-1].lower()
        kind = "act" if any(h in name for h in ACT_HINTS) else "norm" if "norm" in name else "func"
        out.append(Event(path, kind, "", text))
        # a method handed to a function runs there: apply_chunking_to_forward(self.ff_chunk, ..)
        for a in call.args:
            ra = resolve(ms, cls, a.value, local)
            if ra is not None and ra.kind == "method" and ra.cls is not None:
                apath = prefix + (Hop(owner, method, i, text, s.start, ra.access, ra.via_list),)
                for alt in ra.alts or (ra,):
                    _walk_method(ms, alt.cls, alt.attr, apath, out, depth - 1, active,
                                 site if alt.access == "self" else None)
        return
    if r.kind == "linear":
        out.append(Event(path, "linear", r.owner, r.attr))
        return
    if r.kind == "module" and r.cls is not None:
        kind = "norm" if "norm" in r.cls.lower() else "module"
        out.append(Event(path, kind, r.owner or cls, r.attr, r.cls))
        if kind == "module" or holds_linears(ms, r.cls):
            # every class the attribute may hold (if/else in __init__); a norm only when it runs
            # linears of its own (a gated norm), else it stays one light op
            alts = ms.alternatives.get((r.owner, r.attr), [r.cls])
            if held and len(alts) > 1 and r.access == f"self.{r.attr}":
                # the arm of forward's `if self.is_attention:` runs the class __init__ built
                # under the same test (pysource/paths.py): not the other one
                alts = [a for a in alts if builds_under(ms, r.owner, r.attr, a, held)] or alts
            start = len(out)
            for alt in alts:
                _walk_method(ms, alt, "forward", path, out, depth - 1, active,
                             (r.owner, r.attr) if r.owner else None)
            # weights its forward never names (registered by a quantisation method and read
            # by it: `layer.w13_weight`) run when the module runs
            seen = {(e.owner, e.attr) for e in out[start:] if e.kind == "linear"}
            for alt in alts:
                for lin in own_params(ms, alt):
                    if (lin.cls, lin.attr) not in seen:
                        seen.add((lin.cls, lin.attr))
                        out.append(Event(prefix + (Hop(owner, method, i, text, s.start,
                                                       f"{r.access}.{lin.attr}" if r.access
                                                       else None, r.via_list),),
                                         "linear", lin.cls, lin.attr))
        return
    if r.kind == "method" and r.cls is not None:
        if r.access != "self":     # an explicit method of a submodule: self.attn.forward_x(...)
            out.append(Event(path, "module", r.owner or cls, r.attr, r.cls))
        for alt in r.alts or (r,):
            _walk_method(ms, alt.cls, alt.attr, path, out, depth - 1, active,
                         site if alt.access == "self" else None)
        return
    # a module known only by name (ACT2FN[...], a library layer): its fused weights, if any
    subs = sub_linears(ms, cls if r.access == f"self.{r.attr}" else r.owner, r.attr) \
        if r.kind == "unknown" else []
    if subs:
        # the router a fused-MoE layer is handed (`FusedMoE(gate=self.gate, ...)`) runs first
        if r.access == f"self.{r.attr}":
            for lin in handed_linears(ms, cls, r.attr):
                out.append(Event(prefix + (Hop(owner, method, i, text, s.start,
                                               f"self.{lin.attr}"),), "linear", lin.cls, lin.attr))
        for lin in subs:
            sub = lin.attr[len(r.attr) + 1:]
            out.append(Event(prefix + (Hop(owner, method, i, text, s.start,
                                           f"{r.access}.{sub}" if r.access else None),),
                             "linear", lin.cls, lin.attr))
        return
    # a library layer the class handed its own linears to (vLLM's MLA wrapper): it runs them
    handed = handed_linears(ms, cls, r.attr) \
        if r.kind == "unknown" and r.access == f"self.{r.attr}" else []
    if handed:
        out.append(Event(path, _kind_by_name(r.attr), r.owner or cls, r.attr))
        for lin in handed:
            out.append(Event(prefix + (Hop(owner, method, i, text, s.start, f"self.{lin.attr}"),),
                             "linear", lin.cls, lin.attr))
        return
    out.append(Event(path, _kind_by_name(r.attr), r.owner or cls, r.attr))


def roots(ms: ModelSource, flat: dict[str, list[Event]] | None = None) -> list[str]:
    """Classes with a forward that no other class instantiates (any of the classes an attribute
    may hold counts: if/else, a dict of classes); CausalLM-like ones first.
    Classes of files loaded only because the model imports them are never roots. `flat`
    keeps each root's flattened forward (the caller's next question is the first one's)."""
    flat = {} if flat is None else flat
    used = set(ms.children.values()) | {c for alts in ms.alternatives.values() for c in alts}
    out = [c for c in ms.classes if c not in used and ms.method(c, "forward") is not None
           and ms.file_of(c) in ms.primary]
    for c in out:
        if c not in flat:
            flat[c] = flatten(ms, c)
    out.sort(key=lambda c: (not c.endswith("ForCausalLM"), -len(flat[c])))
    # a serving engine's decoder stack (`make_layers`) whose owner no root's forward reaches (a
    # wrapper calling `self.language_model.model(...)`, a path the flattener does not follow):
    # its owner is a root after them, so the layers it runs are still planned where they run
    reached = {h.cls for c in out for e in flat[c] for h in e.path}
    late = sorted({owner for owner, _ in ms.built_stacks
                   if owner not in reached and owner not in out and owner in ms.classes
                   and ms.method(owner, "forward") is not None
                   and ms.file_of(owner) in ms.primary})
    for c in late:
        if c not in flat:
            flat[c] = flatten(ms, c)
    return out + late
