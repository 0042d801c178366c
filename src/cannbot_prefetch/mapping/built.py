"""Whether the config builds each module on a prefetch's weight path: `self.mlp.gate_up_proj`
exists only when the `__init__` branch that assigns `self.mlp = MiniCPMMLP(...)` is the one the
config takes (vLLM's minicpm builds MiniCPMMoE when `num_experts != 0`; deepseek_v2's MLA
attention builds `kv_a_proj_with_mqa` only when `q_lora_rank is None`). A prefetch of a weight
the model never builds raises AttributeError with the switch on, so the site is planned only
when every step is built: the branch conditions are decided with the config by the safe
evaluator (`evaluate.static_truth`), and a step built only under a condition it cannot decide
is refused, naming the condition."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

import libcst as cst

from ..pysource import code_of, dotted
from .evaluate import static_truth
from .evaluate.syntax import callee_name
from .init_body import MAX_DEPTH
from .structure import class_defaults, module_calls

if TYPE_CHECKING:  # pragma: no cover
    from .source import ModelSource

Cond = tuple[cst.BaseExpression, bool]     # a branch test and the value it needs


@dataclass(frozen=True)
class _Build:
    conds: tuple[Cond, ...]                # the tests on the way to the assignment
    classes: tuple[str, ...]               # classes the assigned value builds ("" unknown)
    node: cst.BaseExpression | None = None  # the assigned value


def _assignments(ms: ModelSource, cls: str, attr: str) -> list[_Build]:
    """Every `self.<attr> = ...` of `cls`'s construction (`__init__` and the helper methods it
    calls as a statement, as init_body.py inlines them) with the branch tests around it."""
    init = ms.method(cls, "__init__")
    if init is None or init.node is None:
        return []
    locals_ = class_defaults(init)
    out: list[_Build] = []

    def value_builds(value: cst.BaseExpression, conds: tuple[Cond, ...]) -> None:
        if isinstance(value, cst.IfExp):      # `A(...) if c else B(...)`
            value_builds(value.body, conds + ((value.test, True),))
            value_builds(value.orelse, conds + ((value.test, False),))
            return
        if isinstance(value, cst.Name) and value.value == "None":
            return                            # `self.x = None`: nothing built
        names: list[str] = []
        for call, _ in module_calls(value):
            name = callee_name(call)
            names += locals_.get(name, [name])
        out.append(_Build(conds, tuple(names) or ("",), value))

    def block(stmts, conds: tuple[Cond, ...], depth: int, seen: frozenset[str]) -> None:
        for st in stmts:
            stmt(st, conds, depth, seen)

    def stmt(node: cst.CSTNode, conds, depth, seen) -> None:
        if isinstance(node, cst.If):
            block(node.body.body, conds + ((node.test, True),), depth, seen)
            if isinstance(node.orelse, cst.If):
                stmt(node.orelse, conds + ((node.test, False),), depth, seen)
            elif node.orelse is not None:
                block(node.orelse.body.body, conds + ((node.test, False),), depth, seen)
            return
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None:
                    targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) \
                        else [small.target]
                    if any(dotted(t) == f"self.{attr}" for t in targets):
                        value_builds(small.value, conds)
                elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                    d = (dotted(small.value.func) or "").split(".")
                    if len(d) == 2 and d[0] == "self" and d[1] not in seen and depth < MAX_DEPTH:
                        helper = ms.method(cls, d[1])
                        if helper is not None and helper.node is not None and \
                                isinstance(helper.node.body, cst.IndentedBlock):
                            block(helper.node.body.body, conds, depth + 1, seen | {d[1]})
            return
        body = getattr(node, "body", None)    # for / with / try: their blocks run
        if isinstance(body, cst.IndentedBlock):
            block(body.body, conds, depth, seen)

    if isinstance(init.node.body, cst.IndentedBlock):
        block(init.node.body.body, (), 0, frozenset({"__init__"}))
    return out


def builds_under(ms: ModelSource, cls: str, attr: str, alt: str,
                 held: set[tuple[str, bool]]) -> bool:
    """Whether some assignment of `self.<attr>` in `cls`'s construction may build `alt` where
    the branch tests `held` hold (as `pysource.paths.conditions` spells them): dory's
    `if self.is_attention: self.mixer = DoryAttention(...) else: self.mixer = DoryMLP(...)`
    builds no DoryMLP in forward's `if self.is_attention:` arm. True when no assignment names
    `alt` (built elsewhere: nothing rules it out)."""
    from ..pysource.paths import branch_test

    def ruled_out(t, v) -> bool:         # the forward's arm holds this test's opposite
        text, value = branch_test(t, v)
        return (text, not value) in held

    named = [b for b in _assignments(ms, cls, attr) if alt in b.classes]
    return not named or any(not any(ruled_out(t, v) for t, v in b.conds) for b in named)


def _steps(weight_expr: str) -> Iterator[tuple[str, str]]:
    """(attribute, the path's text up to it) for each step after `self`."""
    parts = weight_expr.split(".")
    for k, part in enumerate(parts[1:], start=1):
        name = part.split("[")[0]
        if name != "next_layer":               # the next layer is the same class
            yield name, ".".join(parts[:k] + [name])


@dataclass(frozen=True)
class Unbuilt:
    why: str
    decided: bool        # the config rules the branch out (else: a test it cannot decide)
    prefix: str          # the path up to the step that may be absent (`self.mlp`)


def unbuilt(ms: ModelSource, cls: str, weight_expr: str, leaf_cls: str) -> Unbuilt | None:
    """Why `weight_expr` (`self.mlp.gate_up_proj.weight`, read in class `cls`) may not exist
    under the run's config, or None when every step the source shows is built. `leaf_cls` is
    the class that owns the target linear (the path's class at its last module step)."""
    steps = list(_steps(weight_expr))
    cur, site = cls, None
    for i, (name, prefix) in enumerate(steps):
        if cur not in ms.classes:
            return None                        # a library class: not read here
        builds = _assignments(ms, cur, name)
        if not builds:
            return None                        # set in a base class elsewhere, or by a call
        nxt = _next_class(ms, cur, name, [n for n, _ in steps[i + 1:]], leaf_cls)
        why = _judge(ms, cur, site, name, nxt, builds)
        if why:
            return Unbuilt(why[0], why[1], prefix)
        site, cur = (cur, name), nxt
        if cur is None:
            return None
    return None


def unguarded(ms: ModelSource, cls: str, paths: tuple[str, ...], guards: tuple[str | None, ...],
              leaf_cls: str) -> str | None:
    """Why a site whose weight paths are `paths` (each run only when its guard, a module path
    the rewrite checks present, is) may raise with the switch on or never fire; None when one
    path is built under the config or, built under a test the config does not decide, guarded
    (the rewrite's presence check is the safety net: locate.py, `rewrite/concerns.py`)."""
    ok, first = False, None
    for path, guard in zip(paths, guards):
        u = unbuilt(ms, cls, path, leaf_cls)
        if u is None:
            ok = True
            continue
        if guard and (guard == u.prefix or guard.startswith(u.prefix + ".")):
            ok = ok or not u.decided           # a decided-out guarded path never fires
            first = first or u.why
            continue
        return u.why                           # may be absent and nothing checks it
    return None if ok else first


def never_built(ms: ModelSource, cls: str) -> str | None:
    """Why the model never builds `cls` under the config (vLLM's minicpm with num_experts 8
    never builds MiniCPMMLP: a site in its forward would never run), or None. Only when every
    call of the class in the source is an assignment the config rules out; a class built
    anywhere else (a factory, a list comprehension the scan does not read) is never refused."""
    import re

    sites = [(p, a) for (p, a), alts in ms.alternatives.items() if cls in alts]
    if not sites:
        return None
    calls = sum(len(re.findall(rf"(?<![\w.])(?<!class ){re.escape(cls)}\(", v.code))
                for v in ms.files.values())
    seen: set[int] = set()
    whys: list[str] = []
    for parent, attr in sites:
        builds = [b for b in _assignments(ms, parent, attr) if cls in b.classes]
        j = _judge(ms, parent, None, attr, cls, builds) if builds else None
        if j is None or not j[1]:
            return None                        # built, or under a test it cannot decide
        seen |= {id(b.node) for b in builds}
        whys.append(j[0])
    if len(seen) != calls:
        return None
    return f"the model never builds {cls} under this config ({whys[0]})"


def _next_class(ms: ModelSource, cls: str, name: str, rest: list[str], leaf: str) -> str | None:
    """The class the path goes on in: the one of the attribute's alternatives that owns the
    target (or the next step); None when the attribute is not a class of the source."""
    alts = ms.alternatives.get((cls, name)) or ([ms.children[(cls, name)]]
                                                if (cls, name) in ms.children else [])
    if not alts:
        return None
    if leaf in alts and len(rest) <= 2:
        return leaf
    if rest:
        for a in alts:
            if _assignments(ms, a, rest[0]):
                return a
    return alts[0]


def _judge(ms: ModelSource, cls: str, site, name: str, child: str | None,
           builds: list[_Build]) -> tuple[str, bool] | None:
    """None when some assignment that builds `child` runs under the config; else why not."""
    wanted = [b for b in builds if child is None or child in b.classes or "" in b.classes]
    if not wanted:
        return (f"{cls}.{name} is never built as {child} in {cls}.__init__ (it is built as "
                f"{', '.join(sorted({c for b in builds for c in b.classes}))})", True)
    undecided: list[str] = []
    ruled_out: list[str] = []
    for b in wanted:
        state = True
        for test, need in b.conds:
            v = static_truth(ms, cls, site, test)
            if v is None:
                undecided.append(_text(test, need))
                state = None
                break
            if v != need:
                ruled_out.append(_text(test, need))
                state = False
                break
        if state is True:
            return None
    what = f"{cls}.{name}" + (f" ({child})" if child else "")
    if undecided:
        return (f"{what} is built only when `{undecided[0]}`, which the config does not "
                f"decide: with the switch on the prefetch would raise AttributeError when it "
                f"does not hold", False)
    return (f"{what} is not built under this config: it is built only when "
            f"`{ruled_out[0]}`, which the config makes false", True)


def _text(test: cst.BaseExpression, need: bool) -> str:
    code = code_of(test)
    return code if need else f"not ({code})"
