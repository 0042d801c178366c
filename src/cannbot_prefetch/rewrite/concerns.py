"""What the rewrite writes for each concern, and where: the site call (`site_line`), the switch
threaded through `__init__` (`switch_lines`), the side-stream join (`join_lines`), the link to
the next layer (`link_lines`) and the helper import (`import_lines`).

A plan is data (CONTRACTS "Plan fields are data"): every generated line is built as libcst
nodes from pieces plan/grammar.py has parsed (identifiers and integers, never the plan's text).
"""

from __future__ import annotations

import ast

import libcst as cst

from ..legality import Location
from ..legality.reach import guard_path, target_refs
from ..plan import POSITIONS, Site, Switch, grammar
from ..pysource import ClassInfo, Method, SourceView, Stmt, call_name, code_of, dotted
from .markers import ALIAS

# ---------------------------------------------------------------- code built as nodes

def _path(dotted_name: str) -> cst.BaseExpression:
    """`self.mlps[0].gate_proj.weight` as Name/Attribute/Subscript nodes (the text passed
    grammar.is_access_path: identifiers and integer indices only)."""
    steps = grammar.access_steps(dotted_name)
    if steps is None:
        raise ValueError(f"not an attribute path: {dotted_name!r}")
    node: cst.BaseExpression = cst.Name(steps[0])
    for st in steps[1:]:
        if isinstance(st, int):
            node = cst.Subscript(value=node, slice=[cst.SubscriptElement(cst.Index(_int(st)))])
        else:
            node = cst.Attribute(value=node, attr=cst.Name(st))
    return node


def _call(func: str, *args: cst.BaseExpression, **kwargs: cst.BaseExpression) -> cst.Call:
    return cst.Call(func=_path(func), args=[cst.Arg(a) for a in args] +
                    [cst.Arg(v, keyword=cst.Name(k), equal=_EQ) for k, v in kwargs.items()])


_EQ = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                      whitespace_after=cst.SimpleWhitespace(""))


def _int(n: int) -> cst.Integer:
    return cst.Integer(str(int(n)))


def _signed(n: int) -> cst.BaseExpression:
    """An int literal that may be negative (`-2` is a unary minus on 2 in Python's grammar)."""
    n = int(n)
    return _int(n) if n >= 0 else cst.UnaryOperation(cst.Minus(), _int(-n))


def _str(text: str) -> cst.SimpleString:
    """A string literal of a grammar-checked dotted name (no quote or backslash can occur)."""
    if not grammar.is_dotted(text):
        raise ValueError(f"not a dotted name: {text!r}")
    return cst.SimpleString(f'"{text}"')


def _render(stmt: cst.BaseStatement | cst.BaseSmallStatement) -> str:
    if isinstance(stmt, cst.BaseSmallStatement):
        stmt = cst.SimpleStatementLine([stmt])
    text = cst.Module(body=[stmt]).code.rstrip("\n")
    if "\n" in text or "\r" in text:
        raise ValueError("a generated statement spans more than one line")
    return text


# ---------------------------------------------------------------- the concerns

def _flag(cls: ClassInfo, switch: Switch) -> cst.BaseExpression:
    return _path(f"self.{switch.name}") if "__init__" in cls.methods else _call(f"{ALIAS}.enabled")


def site_lines(s: Site, loc: Location, switch: Switch) -> list[str]:
    """The site's call; for a weight with other paths (`target.alt_weight_exprs`), one call per
    path, each run only when the module holds that path and none before it, so one weight is
    prefetched per layer whichever branch built it."""
    if not s.target.alt_weight_exprs:
        return [site_line(s, loc, switch)]
    paths = (s.target.weight_expr, *s.target.alt_weight_exprs)
    guards = [guard_path(target_refs(p)[1]) for p in paths]
    return [site_line(s, loc, switch, p, guards[k], guards[:k]) for k, p in enumerate(paths)]


def _present(path: str, absent: bool = False) -> cst.Comparison:
    """`_cbp.attr(self, "a.b") is not None` (is None with `absent`): a module path present."""
    root, _, rest = path.partition(".")
    op = cst.Is() if absent else cst.IsNot()
    return cst.Comparison(_call(f"{ALIAS}.attr", _path(root), _str(rest)),
                          [cst.ComparisonTarget(op, cst.Name("None"))])


def site_line(s: Site, loc: Location, switch: Switch, weight: str | None = None,
              guard: str | None = None, before: list[str] | tuple = ()) -> str:
    """One call of the site (`weight`, `guard`: another path of its weight; `before`: the
    paths that, when present, take precedence)."""
    weight = weight or s.target.weight_expr
    guard = guard or loc.guard
    flag = _flag(loc.cls, switch)
    g = s.guard  # decode guard: the helper prefetches while `expr.shape[dim] <= max_len`
    extra = {"guard": cst.Tuple([cst.Element(_path(g.expr)), cst.Element(_signed(g.dim)),
                                 cst.Element(_int(g.max_len))])} if g is not None else {}
    if not grammar.is_site_id(s.id):
        raise ValueError(f"not a site id: {s.id!r}")
    extra["site"] = cst.SimpleString(f'"{s.id}"')   # its run-time size, if one is given
    call = _call(f"{ALIAS}.npu_prefetch", flag, _path(weight), _path(s.dependency),
                 _int(s.max_size), **extra)
    if not guard:
        return _render(cst.Expr(call))
    test: cst.BaseExpression = cst.BooleanOperation(_flag(loc.cls, switch), cst.And(),
                                                    _present(guard))
    for earlier in before:
        test = cst.BooleanOperation(test, cst.And(), _present(earlier, absent=True))
    return _render(cst.If(test=test, body=cst.SimpleStatementSuite([cst.Expr(call)])))


def guard_problem(site: Site, loc: Location) -> str | None:
    """The decode guard's tensor, like the dependency, must exist at the insertion point: a
    parameter, `self...`, or a name defined by a statement before it."""
    if site.guard is None:
        return None
    root = site.guard.expr.split(".")[0]
    stmts = loc.method.stmts
    point = stmts.index(loc.stmt) + (1 if site.insert.position == "after" else 0)
    if root == "self" or root in loc.method.params or any(root in s.defs for s in stmts[:point]):
        return None
    return (f"guard tensor '{site.guard.expr}' is not defined before the insertion point in "
            f"{loc.cls.name}.{loc.method.name}")


def _config_param(init: Method) -> str | None:
    fn = init.node
    for prm in (*fn.params.params, *fn.params.kwonly_params):
        name = prm.name.value
        if name == "config":
            return name
    for prm in (*fn.params.params, *fn.params.kwonly_params):
        ann = dotted(prm.annotation.annotation) if prm.annotation is not None else None
        if ann and ann.split(".")[-1].endswith("Config") and not any(
                w in ann.split(".")[-1].lower() for w in ("quant", "cache", "parallel", "lora")):
            return prm.name.value
    return None


def switch_lines(cls: ClassInfo, switch: Switch) -> tuple[int, str, str] | None:
    """(line to insert before, indent, code) that sets self.<switch> in __init__, or None."""
    init = cls.methods.get("__init__")
    if init is None or switch.name in cls.attrs:
        return None
    body = [s for s in init.stmts if s.in_block and s.indent == init.body_indent]
    if not body:
        return None
    anchor_line = None
    for s in body:
        if any(code_of(c.func).endswith("__init__") for c in s.calls) and not s.header:
            anchor_line = s.end + 1
            break
    if anchor_line is None:
        first = body[0]
        is_doc = isinstance(first.node, cst.SimpleStatementLine) and isinstance(
            first.node.body[0], cst.Expr) and isinstance(first.node.body[0].value,
                                                         (cst.SimpleString, cst.ConcatenatedString))
        anchor_line = first.end + 1 if is_doc and len(body) > 1 else first.start
    cfg = _config_param(init) or "None"
    extra = {"default": cst.Name("True")} if switch.default else {}
    code = _render(cst.Assign([cst.AssignTarget(_path(f"self.{switch.name}"))],
                              _call(f"{ALIAS}.read_switch", cst.Name(cfg),
                                    _str(switch.config_path), **extra)))
    return anchor_line, init.body_indent, code


def _stmt_with_call(method: Method, call: str) -> Stmt | None:
    for s in method.stmts:
        for c in s.calls:
            d = call_name(c)
            if d == call or d == call + ".forward":
                return s if s.in_block else None
    return None


def _runs_module(call: cst.Call) -> bool:
    """A call that may run a module's weights (self.<x>(...), or self.<...> passed in)."""
    d = call_name(call)
    if d.startswith("self."):
        return True
    return any(code_of(a.value).startswith("self.") for a in call.args)


def join_lines(view: SourceView, cls_name: str, method_name: str, join_position: str,
                switch: Switch) -> list[tuple[int, str, str]] | str:
    cls = view.classes.get(cls_name)
    if cls is None:
        return f"join class {cls_name} is not defined in this file"
    m = cls.methods.get(method_name)
    if m is None:
        return f"join method {cls_name}.{method_name} is not defined in this file"
    code = _render(cst.Expr(_call(f"{ALIAS}.join", _flag(cls, switch))))
    if not isinstance(m.node.body, cst.IndentedBlock):
        return f"join method {cls_name}.{method_name} is a one-line method: no line to join at"
    if join_position == "end":
        for s in m.stmts:
            if s.is_return and any(_runs_module(c) for c in s.calls):
                return (f"join at the end of {cls_name}.{method_name}: line {s.start} computes its "
                        f"value inside `return`, so a join before it would run before that work; "
                        f"set join.method to the method that holds the prefetch, or join.where to "
                        f"before:<call> / after:<call>")
        out = [(s.start, s.indent, code) for s in m.stmts if s.is_return and s.in_block]
        top = [s for s in m.stmts if s.in_block and s.indent == m.body_indent]
        if not top or not top[-1].is_return:
            out.append((m.end + 1, m.body_indent, code))
        return out
    position, call = grammar.split_position(join_position)
    if position not in POSITIONS or not grammar.is_anchor(call):
        return f"join.where '{join_position}' must be end, before:<call> or after:<call>"
    s = _stmt_with_call(m, call)
    if s is None:
        return f"join anchor {call} is not called in {cls_name}.{method_name}"
    if position == "after" and s.is_return:
        return (f"join.where after:{call}: {call} is called inside `return` in "
                f"{cls_name}.{method_name}, so nothing runs after it (the join would be dead "
                f"code); use before:{call}, or join in the caller")
    return [(s.start if position == "before" else s.end + 1, s.indent, code)]


def _is_a(view: SourceView, cls: str, goal: str) -> bool:
    seen, todo = set(), [cls]
    while todo:
        c = todo.pop()
        if c == goal:
            return True
        if c not in seen:
            seen.add(c)
            todo.extend(view.class_bases.get(c, []))
    return False


def _path_to(view: SourceView, start: str, goal: str, depth: int = 3) -> str | None:
    """The attribute path from a module of class `start` to its submodule of class `goal`
    ("" when it is one), from the constructors its __init__ calls (base classes included)."""
    todo = [(start, "")]
    for _ in range(depth + 1):
        nxt = []
        for cls, path in todo:
            if _is_a(view, cls, goal):
                return path
            chain = [cls]
            while view.class_bases.get(chain[-1]):
                b = view.class_bases[chain[-1]][0]
                if b in chain:
                    break
                chain.append(b)
            for c in chain:
                for attr, ctors in view.module_attrs.get(c, {}).items():
                    nxt += [(k, f"{path}.{attr}" if path else attr) for k in ctors
                            if k in view.class_bases]
        todo = nxt
    return None


def link_lines(view: SourceView, insert_cls: str) -> list[tuple[int, str, str]]:
    """Where each decoder stack holding `insert_cls` is built (`self.layers =
    nn.ModuleList(...)`, or any module list whose elements hold it): each layer's `insert_cls`
    module gets a plain reference to its twin in the next layer (`next_layer`, None on the last
    layer), so a prefetch there can name the next layer's weight and is skipped on the last one.
    Every such stack is linked, not only the first the file builds: a layer class shared by two
    stacks (moshi's depth decoder and main model) runs the same forward in both, and the model
    a user builds may hold either."""
    out: list[tuple[int, str, str]] = []
    for ml in view.module_lists:
        for el in ml.elements:
            path = _path_to(view, el, insert_cls)
            if path is None or not (grammar.is_identifier(ml.attr) and (
                    not path or grammar.is_dotted(path))):
                continue
            items: cst.BaseExpression = _path(f"self.{ml.attr}")
            if ml.is_dict:
                items = _call(f"self.{ml.attr}.values")
            # `_cbp.attr` walks the path and gives None where a layer lacks it (ergo's first
            # layers hold a dense MLP, later ones the MoE block with `shared_experts`)
            arg = items if not path else cst.ListComp(
                elt=cst.Call(func=_path(f"{ALIAS}.attr"),
                             args=[cst.Arg(cst.Name("_m")), cst.Arg(cst.SimpleString(repr(path)))]),
                for_in=cst.CompFor(target=cst.Name("_m"), iter=items))
            out.append((ml.last_line + 1, ml.indent, _render(cst.Expr(
                cst.Call(func=_path(f"{ALIAS}.link_next_layers"), args=[cst.Arg(arg)])))))
            break
    return out


def import_lines(view: SourceView, helper_module: str | None) -> list[tuple[int, str, str]]:
    if view.imports_end:
        line = view.imports_end + 1
    else:  # no imports: after the module docstring, if any
        body = view.module.body
        is_doc = body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str)
        line = body[0].end_lineno + 1 if is_doc else 1
    if helper_module is None:  # next to the model: relative import in a package, else absolute
        return [(line, "", f"try: from . import _cannbot_prefetch as {ALIAS}"),
                (line, "", f"except ImportError: import _cannbot_prefetch as {ALIAS}")]
    return [(line, "", _render(cst.Import([cst.ImportAlias(
        _path(helper_module), asname=cst.AsName(cst.Name(ALIAS)))])))]
