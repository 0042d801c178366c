"""`rewrite_source(code, sites, ...)`: the pure rewrite, code in, code out.

Every line the tool writes is a whole new line ending in a marker comment
`# cannbot-prefetch: <tag>` (tag = site id, or `import` / `switch` / `join` / `next-layer`), put
at a statement boundary with the indentation of its neighbour. So:
- lines the tool did not write stay byte-identical (comments, formatting, line endings);
- stripping the marked lines gives the original back (`strip_markers`), which is how a rewrite
  is made idempotent (strip, then insert again: same plan, same text) and how `--revert` works;
- a re-applied plan with a changed `max_size` replaces the marked call with the same id.

The concerns, each a small function below: insert the site calls (`_site_line`), thread the
switch through `__init__` (`_switch_lines`), join the side stream (`_join_lines`), link the next
layer (`_link_lines`), import the helper (`_import_lines`).

A plan is data (CONTRACTS "Plan fields are data"): every plan value is checked against
plan/grammar.py first, each generated line is built as libcst nodes from those parsed pieces
(identifiers and integers, never the plan's text), and the result is re-parsed before it is
returned (`_check_output`): it must parse, strip back to the original byte for byte, hold
exactly the lines written, and none of them may sit after a `return` (dead code).
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from dataclasses import dataclass, field

import libcst as cst

from ..legality import MISSING, UNSAFE, Location, Placement, Problem, TargetRef, locate
from ..plan import Site, Switch, grammar
from ..pysource import (ClassInfo, Method, SourceView, Stmt, call_name, code_of, dotted,
                        parse_view, source_lines)

MARKER = "# cannbot-prefetch: "
ALIAS = "_cbp"
BOM = "\ufeff"
# A line the tool wrote: indentation, one of the statement shapes below, two spaces, the marker
# and a tag. Recognised exactly (not by the marker substring), and only as a whole one-line
# statement (never inside a string or a bracket), so a user's line that mentions the marker
# is never taken for one of ours.
_OWN_LINE = re.compile(r"(?P<indent>[ \t]*)(?P<code>\S[^\r\n]*?)  # cannbot-prefetch: "
                       r"(?P<tag>[a-z0-9_.-]{1,128})(?P<nl>\r\n|\n|\r)?")
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_OWN_CODE = re.compile(
    rf"try: from \. import _cannbot_prefetch as {ALIAS}"
    rf"|except ImportError: import _cannbot_prefetch as {ALIAS}"
    rf"|import {_NAME}(?:\.{_NAME})* as {ALIAS}"
    rf"|self\.{_NAME} = {ALIAS}\.{_NAME}\([^\r\n]*\)"
    rf"|(?:if [^\r\n]+: )?{ALIAS}\.{_NAME}\([^\r\n]*\)")
JOIN_TAG, SWITCH_TAG, IMPORT_TAG, LINK_TAG = "join", "switch", "import", "next-layer"
SIDE_STREAM_MODES = ("eager", "npugraph_ex")


@dataclass(frozen=True)
class Refusal:
    site: str
    reason: str


@dataclass(frozen=True)
class ExistingCall:
    line: int
    where: str
    code: str


@dataclass
class RewriteOutput:
    code: str
    applied: list[str] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    existing: list[ExistingCall] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    had_markers: bool = False


class SiteErrors(Exception):
    """Sites that name something the file does not have (bad input): [(site id, message)]."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"site {s}: {m}" for s, m in problems))


class UnsafeOutput(Exception):
    """The rewritten code failed its own check (does not parse, does not revert, dead code):
    nothing is written. `sites` are the site ids whose lines are involved."""

    def __init__(self, message: str, sites: list[str]):
        self.sites = sites
        super().__init__(message)


def split_bom(code: str) -> tuple[str, str]:
    """(BOM or "", the rest): the rewrite works on the text after a UTF-8 byte-order mark."""
    return (BOM, code[1:]) if code.startswith(BOM) else ("", code)


def _one_line_statements(code: str) -> set[int] | None:
    """1-based rows that hold a whole logical line of their own (None: the code does not
    tokenize). A row inside a triple-quoted string or a bracket is not one."""
    rows: set[int] = set()
    start = None
    skip = (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.ENDMARKER:
                break
            if start is None:
                if tok.type in skip:
                    continue
                start = tok.start[0]
            if tok.type == tokenize.NEWLINE:
                if tok.start[0] == start:
                    rows.add(start)
                start = None
    except (tokenize.TokenError, SyntaxError):
        return None
    return rows


@functools.lru_cache(maxsize=16)
def _own(code: str) -> tuple[tuple[int, str], ...]:
    """(0-based line index, tag) of every line the tool wrote (code without a BOM)."""
    if MARKER not in code:
        return ()
    rows = _one_line_statements(code)
    if rows is None:     # not Python we can read: take nothing for ours (never drop user lines)
        return ()
    out = []
    for i, ln in enumerate(source_lines(code)):
        if MARKER in ln and i + 1 in rows:
            m = _OWN_LINE.fullmatch(ln)
            if m and _OWN_CODE.fullmatch(m["code"]):
                out.append((i, m["tag"]))
    return tuple(out)


def _drop_lines(code: str, drop: set[int]) -> str:
    """The code without the lines at `drop`. A file without a final newline keeps none: when
    its last line is one of ours (written without a newline), the line before it gets back
    its own ending (none)."""
    lines = source_lines(code)
    kept = "".join(ln for i, ln in enumerate(lines) if i not in drop)
    if lines and (len(lines) - 1) in drop and not lines[-1].endswith(("\n", "\r")):
        kept = re.sub(r"(\r\n|\n|\r)\Z", "", kept)
    return kept


def strip_markers(code: str) -> str:
    """The source without any line the tool wrote."""
    bom, body = split_bom(code)
    return bom + _drop_lines(body, {i for i, _ in _own(body)})


def has_markers(code: str) -> bool:
    return bool(_own(split_bom(code)[1]))


def marked_ids(code: str) -> set[str]:
    return {tag for _, tag in _own(split_bom(code)[1])}


# YAML runner configs: the lines _add_yaml_key writes (`key: false` / `parent:` + marker)
_OWN_YAML = re.compile(rf" *{_NAME}:(?: false)?  # cannbot-prefetch: switch(?:\r\n|\n|\r)?")


def strip_yaml_markers(text: str) -> str:
    lines = source_lines(text)
    return _drop_lines(text, {i for i, ln in enumerate(lines) if _OWN_YAML.fullmatch(ln)})


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


def _site_line(s: Site, loc: Location, switch: Switch) -> str:
    flag = _flag(loc.cls, switch)
    g = s.guard  # decode guard: the helper prefetches while `expr.shape[dim] <= max_len`
    extra = {"guard": cst.Tuple([cst.Element(_path(g.expr)), cst.Element(_signed(g.dim)),
                                 cst.Element(_int(g.max_len))])} if g is not None else {}
    call = _call(f"{ALIAS}.npu_prefetch", flag, _path(s.target.weight_expr), _path(s.dependency),
                 _int(s.max_size), **extra)
    if not loc.guard:
        return _render(cst.Expr(call))
    root, _, path = loc.guard.partition(".")
    present = cst.Comparison(_call(f"{ALIAS}.attr", _path(root), _str(path)),
                             [cst.ComparisonTarget(cst.IsNot(), cst.Name("None"))])
    return _render(cst.If(test=cst.BooleanOperation(_flag(loc.cls, switch), cst.And(), present),
                          body=cst.SimpleStatementSuite([cst.Expr(call)])))


def _guard_problem(site: Site, loc: Location) -> str | None:
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


def _switch_lines(cls: ClassInfo, switch: Switch) -> tuple[int, str, str] | None:
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


def _join_lines(view: SourceView, cls_name: str, method_name: str, where: str,
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
    if where == "end":
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
    kind, call = grammar.split_where(where)
    if kind not in ("before", "after") or not grammar.is_anchor(call):
        return f"join.where '{where}' must be end, before:<call> or after:<call>"
    s = _stmt_with_call(m, call)
    if s is None:
        return f"join anchor {call} is not called in {cls_name}.{method_name}"
    if kind == "after" and s.is_return:
        return (f"join.where after:{call}: {call} is called inside `return` in "
                f"{cls_name}.{method_name}, so nothing runs after it (the join would be dead "
                f"code); use before:{call}, or join in the caller")
    return [(s.start if kind == "before" else s.end + 1, s.indent, code)]


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


def _link_lines(view: SourceView, insert_cls: str) -> tuple[int, str, str] | None:
    """Where the decoder stack is built (`self.layers = nn.ModuleList(...)`, or any module list
    whose elements hold `insert_cls`): each layer's `insert_cls` module gets a plain reference to
    its twin in the next layer (`next_layer`, None on the last layer), so a prefetch there can
    name the next layer's weight and is skipped on the last one."""
    for ml in view.module_lists:
        for el in ml.elements:
            path = _path_to(view, el, insert_cls)
            if path is None or not (grammar.is_identifier(ml.attr) and (
                    not path or grammar.is_dotted(path))):
                continue
            items: cst.BaseExpression = _path(f"self.{ml.attr}")
            if ml.is_dict:
                items = _call(f"self.{ml.attr}.values")
            arg = items if not path else cst.ListComp(
                elt=_path(f"_m.{path}"),
                for_in=cst.CompFor(target=cst.Name("_m"), iter=items))
            return ml.last_line + 1, ml.indent, _render(cst.Expr(
                cst.Call(func=_path(f"{ALIAS}.link_next_layers"), args=[cst.Arg(arg)])))
    return None


def _import_lines(view: SourceView, helper_module: str | None) -> list[tuple[int, str, str]]:
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


# ---------------------------------------------------------------- the rewrite

def check_site(view: SourceView, pl: Placement, target: TargetRef, *, mode: str = "eager",
               switch: Switch | None = None) -> Location | Problem:
    """Every check apply makes for one site, in one place, so analyze asks the same question
    before it plans (one truth): legality.py's rule (where the call goes, the dependency's flow),
    no hand-written prefetch of the same weight there, a layer stack to link for a next-layer
    weight, and a safe join for the side stream (eager / npugraph_ex)."""
    switch = switch or Switch()
    res = locate(view, pl, target)
    if isinstance(res, Problem):
        return res
    where = f"{res.cls.name}.{res.method.name}"
    dup = next(((ln, c) for ln, w, c in view.prefetch_calls
                if w == where and pl.weight_expr in c), None)
    if dup is not None:
        return Problem(UNSAFE, f"already prefetched by code the tool did not write "
                               f"(line {dup[0]}: {dup[1]})")
    if pl.weight_expr.startswith("self.next_layer.") and _link_lines(view, pl.insert.cls) is None:
        return Problem(UNSAFE, f"next-layer prefetch needs the module list that builds the layers "
                               f"(holding {pl.insert.cls}) in this file, to link each layer to "
                               f"the next")
    if mode in SIDE_STREAM_MODES:
        j = pl.join
        lines = _join_lines(view, j.cls, j.method, j.where, switch)
        if isinstance(lines, str):
            return Problem(MISSING if " is not defined in this file" in lines else UNSAFE, lines)
    return res


def site_problem(code: str, pl: Placement, target: TargetRef, *, mode: str = "eager",
                 switch: Switch | None = None) -> str | None:
    """None when apply would insert this placement into `code`, else apply's reason."""
    try:
        view = parse_view(strip_markers(split_bom(code)[1]),
                          {target.cls, pl.insert.cls, pl.join.cls})
    except cst.ParserSyntaxError as exc:
        return f"the file does not parse: {str(exc).splitlines()[0]}"
    res = check_site(view, pl, target, mode=mode, switch=switch)
    return res.message if isinstance(res, Problem) else None



def rewrite_source(code: str, sites: list[Site] | tuple[Site, ...], *, mode: str = "eager",
                   switch: Switch | None = None, helper_module: str | None = None) -> RewriteOutput:
    """Insert the sites' guarded calls into `code`; returns the new code and what happened.

    Raises libcst.ParserSyntaxError when the code does not parse, SiteErrors when a site breaks
    the plan grammar or names a class, method, attribute, anchor or dependency that is not there
    (bad input), and UnsafeOutput when the result fails its own check (`_check_output`).
    """
    switch = switch or Switch()
    bad = [(s.id, f"{k} {m}") for s in sites for k, m in grammar.site_problems(s)]
    bad += [("switch", f"{k} {m}") for k, m in grammar.switch_problems(switch)]
    if helper_module is not None and not grammar.is_dotted(helper_module):
        bad.append(("helper", f"module name {helper_module!r} is not importable (a dotted name "
                              f"of identifiers)"))
    if bad:
        raise SiteErrors(bad)
    bom, body = split_bom(code)
    out = RewriteOutput(code=code, had_markers=has_markers(code))
    base = strip_markers(body)
    view = parse_view(base, {c for s in sites for c in (s.target.cls, s.insert.cls, s.join.cls)})
    out.existing = [ExistingCall(ln, where, c) for ln, where, c in view.prefetch_calls]

    errors: list[tuple[str, str]] = []
    placements: list[tuple[Site, Location]] = []
    for site in sites:
        res = check_site(view, Placement.of_site(site), site.target, mode=mode, switch=switch)
        if isinstance(res, Problem):
            if res.kind == MISSING:
                errors.append((site.id, res.message))
            else:
                out.refused.append(Refusal(site.id, res.message))
            continue
        gone = _guard_problem(site, res)
        if gone:
            errors.append((site.id, gone))
            continue
        placements.append((site, res))
    if errors:
        raise SiteErrors(errors)
    for e in out.existing:
        out.notes.append(f"line {e.line}: existing npu_prefetch call in {e.where} "
                         f"(not written by cannbot-prefetch; left as it is): {e.code}")
    joins: dict[tuple[str, str, str], list[tuple[int, str, str]] | str] = {}
    if mode in SIDE_STREAM_MODES:      # check_site made sure each join has a safe place
        for site, _ in placements:
            j = site.join
            key = (j.cls, j.method, j.where)
            if key not in joins:
                joins[key] = _join_lines(view, j.cls, j.method, j.where, switch)
    if not placements:
        out.code = bom + base
        return out

    # (line, priority, order, indent, code, tag); inserted before `line`
    inserts: list[tuple[int, int, int, str, str, str]] = []
    order = 0

    def add(line: int, prio: int, indent: str, text: str, tag: str) -> None:
        nonlocal order
        order += 1
        inserts.append((line, prio, order, indent, text, tag))

    for line, indent, text in _import_lines(view, helper_module):
        add(line, 0, indent, text, IMPORT_TAG)
    threaded: set[str] = set()

    def thread(cls: ClassInfo) -> None:
        if cls.name in threaded:
            return
        threaded.add(cls.name)
        sw = _switch_lines(cls, switch)
        if sw is not None:
            add(sw[0], 1, sw[1], sw[2], SWITCH_TAG)

    linked: set[str] = set()
    for site, _ in placements:
        if site.target.weight_expr.startswith("self.next_layer.") and \
                site.insert.cls not in linked:
            linked.add(site.insert.cls)
            link = _link_lines(view, site.insert.cls)
            add(link[0], 2, link[1], link[2], LINK_TAG)
    for site, loc in placements:
        thread(loc.cls)
        add(loc.line, 3, loc.indent, _site_line(site, loc, switch), site.id)
        if loc.note:
            out.notes.append(f"site {site.id}: {loc.note}")
        if site.guard is None and site.max_tokens is not None:
            out.notes.append(f"site {site.id}: max_tokens is superseded by guard{{expr, dim, "
                             f"max_len}} (query length): no decode guard written, so this site "
                             f"also prefetches in prefill; re-run analyze for a plan with a guard")
        out.applied.append(site.id)
    done: set[tuple[str, str, str]] = set()
    for site, _ in placements:
        j = site.join
        key = (j.cls, j.method, j.where)
        if mode not in SIDE_STREAM_MODES or key in done:
            continue
        done.add(key)
        thread(view.classes[j.cls])
        for line, indent, text in joins[key]:
            add(line, 4, indent, text, JOIN_TAG)

    new = _assemble(view, inserts)
    _check_output(new, base, inserts, out.applied)
    out.code = bom + new
    return out


def _assemble(view: SourceView, inserts) -> str:
    """The lines of the file with the new ones put in. A file without a final newline still
    ends without one: a line added after its last line is written without a newline, and the
    old last line gets one (strip_markers undoes exactly that)."""
    lines = list(view.lines)
    nl = view.newline
    by_line: dict[int, list] = {}
    for item in sorted(inserts, key=lambda x: (x[0], x[1], x[2])):
        by_line.setdefault(item[0], []).append(item)
    result: list[str] = []
    for i in range(1, len(lines) + 2):
        for _, _, _, indent, text, tag in by_line.get(i, []):
            if result and not result[-1].endswith(("\n", "\r")):
                result[-1] += nl
            result.append(f"{indent}{text}  {MARKER}{tag}{nl}")
        if i <= len(lines):
            result.append(lines[i - 1])
    if lines and not lines[-1].endswith(("\n", "\r")) and result[-1].endswith(nl) \
            and result[-1] is not lines[-1]:
        result[-1] = result[-1][: -len(nl)]
    return "".join(result)


_TERMINAL = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def _check_output(new: str, base: str, inserts, applied: list[str]) -> None:
    """The rewritten code must parse, strip back to `base` byte for byte, carry exactly the
    lines written, and none of them may follow a return/raise/continue/break in its block."""
    tags = sorted({t for *_, t in inserts} & set(applied)) or sorted(applied)
    try:
        tree = ast.parse(new)
    except (SyntaxError, ValueError) as exc:
        raise UnsafeOutput(f"the rewritten code does not parse ({exc}): nothing written",
                           tags) from None
    if strip_markers(new) != base or len(_own(new)) != len(inserts):
        raise UnsafeOutput("the rewritten code would not revert to the original byte for byte: "
                           "nothing written", tags)
    own_rows = {i + 1: tag for i, tag in _own(new)}
    dead = set()
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if not isinstance(block, list):
                continue
            for prev, stmt in zip(block, block[1:]):
                if isinstance(prev, _TERMINAL) and stmt.lineno in own_rows:
                    dead.add(own_rows[stmt.lineno])
    if dead:
        raise UnsafeOutput(f"lines {', '.join(sorted(dead))} would come after a return, raise, "
                           f"continue or break (dead code): nothing written", tags)
