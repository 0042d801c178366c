"""Data flow through returned tuples: which elements of a call's returned tuple are computed from
another element of it inside the callee (issue 30 part 3).

`hidden_states, down_proj, dsq = self.mlps[1](x)` unpacks a tuple whose first element the callee
computes from its second (`mlp_res = down_proj` or an all-reduce of it): a prefetch that depends
on `down_proj` is ordered before whatever consumes `hidden_states`, although the caller never
passes `down_proj` on (seed 003's LongCat-Flash sites: the next layer's q_a/q_b/kv_a at the
dense MLP's down_proj output, experts.w2_weight at `router_logits`, whose top-k feeds the GMM).

Read with the stdlib `ast` over the whole file (the view's `module`), statement by statement in
line order, as the legality rule reads the caller: a name is tainted when a statement computes it
from a tainted name and untainted when one recomputes it from anything else (a branch that
overwrites it, `if force_eplb: topk_indices = cur_topk_list`, breaks the flow). Every return
holding both positions must carry the flow; a callee the file does not show (another file, a
function argument) carries none. This is statement-level, like the caller's rule: conservative
about what a branch may overwrite, never about what it computes."""

from __future__ import annotations

import ast

_MAX_DEPTH = 8      # two per call level (siblings -> derives): deeper chains are not followed


def _methods(module: ast.Module) -> list[tuple[ast.ClassDef, ast.FunctionDef]]:
    return [(c, f) for c in module.body if isinstance(c, ast.ClassDef)
            for f in c.body if isinstance(f, ast.FunctionDef)]


def _self_attr_class(module: ast.Module, cls: ast.ClassDef, attr: str) -> ast.ClassDef | None:
    """The class `self.<attr> = Cls(...)` builds in cls (one class, defined in this file)."""
    classes = {c.name: c for c in module.body if isinstance(c, ast.ClassDef)}
    names: set[str] = set()

    def built(value: ast.AST) -> None:
        names.update(c.func.id for c in ast.walk(value) if isinstance(c, ast.Call)
                     and isinstance(c.func, ast.Name) and c.func.id in classes)

    for fn in (f for f in cls.body if isinstance(f, ast.FunctionDef)):
        for node in ast.walk(fn):
            if not (isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                    and t.value.id == "self" and t.attr == attr for t in node.targets)):
                continue
            # `Cls(...)`, a list of them (`nn.ModuleList([Cls(...) for ...])`), or a local list
            # filled first (`mlps = []; mlps.append(Cls(...)); self.mlps = nn.ModuleList(mlps)`)
            built(node.value)
            local = _names(node.value)
            for other in ast.walk(fn):
                if isinstance(other, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id in local for t in other.targets):
                    built(other.value)
                elif isinstance(other, ast.Call) and isinstance(other.func, ast.Attribute) and \
                        other.func.attr in ("append", "extend") and \
                        isinstance(other.func.value, ast.Name) and other.func.value.id in local:
                    for a in other.args:
                        built(a)
    return classes[names.pop()] if len(names) == 1 else None


def callee(module: ast.Module, cls: ast.ClassDef, call: ast.expr) -> list:
    """The (class, method)s a call may run, when this file shows them (empty: not shown):
    `self.m(...)` (cls's own method), `self.m(...)` bound in `__init__` (`self.mlp_forward =
    self.forward_w8a8int8` or `self.forward_normal`: each), `self.x(...)` / `self.x[1](...)`
    (forward of the class self.x is built from), `self.x[0].m(...)` (the one method of that name
    in the file)."""
    if not isinstance(call, ast.Call):
        return []
    f = call.func
    if isinstance(f, ast.Subscript):              # self.mlps[1](...): a module list's element
        f = f.value
        if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self"):
            return []
        return _forward_of(_self_attr_class(module, cls, f.attr))
    if not isinstance(f, ast.Attribute):
        return []
    if isinstance(f.value, ast.Name) and f.value.id == "self":
        own = [m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == f.attr]
        if own:
            return [(cls, own[0])]
        bound = _bound(cls, f.attr)
        if bound:
            return bound
        return _forward_of(_self_attr_class(module, cls, f.attr))
    if f.attr == "forward":
        return []
    hits = [(c, m) for c, m in _methods(module) if m.name == f.attr]
    return hits if len(hits) == 1 else []


def _forward_of(sub: ast.ClassDef | None) -> list:
    fwd = [m for m in sub.body if isinstance(m, ast.FunctionDef) and m.name == "forward"] if sub else []
    return [(sub, fwd[0])] if fwd else []


def _bound(cls: ast.ClassDef, attr: str) -> list:
    """Methods `self.<attr> = self.<method>` binds anywhere in cls (every one it may hold)."""
    methods = {m.name: m for m in cls.body if isinstance(m, ast.FunctionDef)}
    out = []
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute) and \
                isinstance(node.value.value, ast.Name) and node.value.value.id == "self" and \
                node.value.attr in methods and any(
                    isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                    and t.value.id == "self" and t.attr == attr for t in node.targets):
            out.append((cls, methods[node.value.attr]))
    return out


def _names(node: ast.AST | None) -> set[str]:
    if node is None:
        return set()
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id != "self"}


def _simple_stmts(fn: ast.FunctionDef) -> list[ast.stmt]:
    out = [n for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign,
                                                      ast.Return)) or _collective(n)]
    return sorted(out, key=lambda n: (n.lineno, n.col_offset))


def _collective(node: ast.AST) -> bool:
    """`dist.reduce_scatter_tensor(out, x, ...)` / `dist.all_reduce(x)`: torch.distributed's
    collectives write their first argument in place (output first), from the others."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return False
    f = node.value.func
    return isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
        f.value.id in ("dist", "distributed") and bool(node.value.args) and \
        isinstance(node.value.args[0], ast.Name)


def _targets(node: ast.stmt) -> list[ast.expr]:
    if isinstance(node, ast.Expr):
        return [node.value.args[0]]  # type: ignore[attr-defined]
    if isinstance(node, ast.Assign):
        return node.targets
    return [node.target]  # type: ignore[attr-defined]


def _source_call(fn: ast.FunctionDef, node: ast.stmt) -> ast.expr | None:
    """The call whose tuple a statement unpacks: its value, or `name = call(...)` before it."""
    value = node.value  # type: ignore[attr-defined]
    if isinstance(value, ast.Call):
        return value
    if isinstance(value, ast.Name):
        prior = [s for s in _simple_stmts(fn) if isinstance(s, ast.Assign) and s.lineno < node.lineno
                 and any(isinstance(t, ast.Name) and t.id == value.id for t in s.targets)]
        if prior and isinstance(prior[-1].value, ast.Call):
            return prior[-1].value
    return None


def _tuple_names(target: ast.expr) -> list[str | None]:
    return [e.id if isinstance(e, ast.Name) else None for e in target.elts]  # type: ignore[attr-defined]


def siblings(module: ast.Module, cls: ast.ClassDef, fn: ast.FunctionDef, node: ast.stmt,
             name: str, depth: int = 0) -> set[str]:
    """Names the tuple-unpacking statement `node` assigns that the callee computes from the
    element it assigns to `name` (empty when the callee is not shown or carries no flow)."""
    tup = next((t for t in _targets(node) if isinstance(t, (ast.Tuple, ast.List))), None)
    if tup is None or depth > _MAX_DEPTH:
        return set()
    names = _tuple_names(tup)
    if name not in names:
        return set()
    src = names.index(name)
    got = callee(module, cls, _source_call(fn, node))
    return {n for pos, n in enumerate(names) if n and pos != src and got
            and all(derives(module, c, f, src, pos, depth + 1) for c, f in got)}


def derives(module: ast.Module, cls: ast.ClassDef, fn: ast.FunctionDef, src: int, dst: int,
            depth: int = 0) -> bool:
    """Whether every return of fn that holds positions src and dst computes element dst from
    element src (at least one such return)."""
    if depth > _MAX_DEPTH:
        return False
    src_names: set[str] = set()
    for r in ast.walk(fn):
        if isinstance(r, ast.Return) and isinstance(r.value, ast.Tuple) and \
                len(r.value.elts) > max(src, dst):
            src_names |= _names(r.value.elts[src])
    walk = _Walk(module, cls, fn, src, dst, src_names, depth)
    walk.block(fn.body, set())
    return walk.checked and walk.ok


class _Walk:
    """One pass over a method's statements: the names computed from the source element's value
    (must: after an if/else, those every branch computed; a branch that returns adds nothing)."""

    def __init__(self, module, cls, fn, src, dst, src_names, depth):
        self.module, self.cls, self.fn = module, cls, fn
        self.src, self.dst, self.src_names, self.depth = src, dst, src_names, depth
        self.checked, self.ok = False, True

    def block(self, body, tainted: set[str] | None) -> set[str] | None:
        """The tainted names after body (None: every path through it returned)."""
        for node in body:
            if tainted is None:
                return None
            tainted = self.stmt(node, tainted)
        return tainted

    def stmt(self, node, tainted: set[str]) -> set[str] | None:
        if isinstance(node, ast.If):
            a = self.block(node.body, set(tainted))
            b = self.block(node.orelse, set(tainted))
            return b if a is None else a if b is None else a & b
        if isinstance(node, (ast.With, ast.For, ast.While, ast.Try)):
            got = self.block(node.body, set(tainted))
            for extra in (getattr(node, "orelse", []), getattr(node, "finalbody", [])):
                if got is not None and extra:
                    got = self.block(extra, got)
            if isinstance(node, (ast.For, ast.While)):   # the body may run no time
                return tainted if got is None else got & tainted
            return got
        if isinstance(node, ast.Return):
            self._return(node.value, tainted)
            return None
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) or _collective(node):
            return self._assign(node, tainted)
        return tainted

    def _return(self, value, tainted: set[str]) -> None:
        if isinstance(value, ast.Tuple):
            if len(value.elts) <= max(self.src, self.dst):
                return
            if not (_names(value.elts[self.dst]) & (tainted | _names(value.elts[self.src]))):
                self.ok = False
            self.checked = True
        elif isinstance(value, ast.Call):
            inner = callee(self.module, self.cls, value)
            if not inner or not all(derives(self.module, c, f, self.src, self.dst, self.depth + 1)
                                    for c, f in inner):
                self.ok = False
            self.checked = True

    def _assign(self, node, tainted: set[str]) -> set[str]:
        value = getattr(node, "value", None)
        uses = _names(value) | (_names(node.target) if isinstance(node, ast.AugAssign) else set())
        carried = bool(uses & tainted)      # the statement reads a value computed from the source
        for t in _targets(node):
            if isinstance(t, (ast.Tuple, ast.List)):
                names = _tuple_names(t)
                hit = [n for n in names if n in self.src_names]
                if hit:
                    tainted = set()         # the source is computed anew: earlier values are not it
                flow: set[str] = set()
                for h in hit:
                    flow |= {h} | siblings(self.module, self.cls, self.fn, node, h, self.depth + 1)
                for n in names:
                    if n is None:
                        continue
                    if n in flow or (carried and not hit):
                        tainted.add(n)
                    else:
                        tainted.discard(n)
            elif isinstance(t, ast.Name):
                if isinstance(node, ast.Expr):          # a collective: out from the others
                    if carried:
                        tainted.add(t.id)
                    continue
                if t.id in self.src_names:
                    tainted = set()         # the source is computed anew: earlier values are not it
                    if isinstance(value, ast.Name):
                        tainted.add(value.id)           # `o_proj = attn_output`: one value
                if t.id in self.src_names or carried:
                    tainted.add(t.id)
                else:
                    tainted.discard(t.id)
        return tainted


def flow_siblings(module: ast.Module, cls_name: str, method: str, line: int, name: str) -> set[str]:
    """For the statement of cls_name.method starting at `line` that unpacks a call's tuple into
    `name` and others: the others the callee computes from `name`'s element."""
    for c, f in _methods(module):
        if c.name != cls_name or f.name != method:
            continue
        for node in _simple_stmts(f):
            if node.lineno == line and not isinstance(node, ast.Return):
                return siblings(module, c, f, node, name)
    return set()
