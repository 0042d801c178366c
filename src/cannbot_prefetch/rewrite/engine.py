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
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

import libcst as cst

from ..plan import Site, Switch
from .check import MISSING, Placement, Problem, locate
from ..pysource import ClassInfo, Method, SourceView, Stmt, code_of, dotted, parse_view

MARKER = "# cannbot-prefetch: "
_MARKED = re.compile(r"[ \t]*#[ \t]*cannbot-prefetch: [^\r\n]*\r?\n?$")
ALIAS = "_cbp"
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


def is_marked(line: str) -> bool:
    return bool(_MARKED.search(line)) and MARKER.strip() in line


def strip_markers(code: str) -> str:
    """The source without any line the tool wrote."""
    lines = code.splitlines(keepends=True)
    return "".join(ln for ln in lines if not _MARKED.search(ln))


def has_markers(code: str) -> bool:
    return any(_MARKED.search(ln) for ln in code.splitlines(keepends=True))


def marked_ids(code: str) -> set[str]:
    out = set()
    for ln in code.splitlines():
        m = re.search(r"#[ \t]*cannbot-prefetch: (\S+)", ln)
        if m:
            out.add(m.group(1))
    return out


# ---------------------------------------------------------------- the concerns

def _flag(cls: ClassInfo, switch: Switch) -> str:
    return f"self.{switch.name}" if "__init__" in cls.methods else f"{ALIAS}.enabled()"


def _site_line(p: Placement, switch: Switch) -> str:
    s = p.site
    flag = _flag(p.cls, switch)
    extra = f", max_tokens={s.max_tokens}" if s.max_tokens is not None else ""
    call = f"{ALIAS}.npu_prefetch({flag}, {s.target.weight_expr}, {s.dependency}, {s.max_size}{extra})"
    if p.guard:
        root, _, path = p.guard.partition(".")
        call = f'if {flag} and {ALIAS}.attr({root}, "{path}") is not None: {call}'
    return call


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
    default = ", default=True" if switch.default else ""
    code = f'self.{switch.name} = {ALIAS}.read_switch({cfg}, "{switch.config_path}"{default})'
    return anchor_line, init.body_indent, code


def _stmt_with_call(method: Method, call: str) -> Stmt | None:
    for s in method.stmts:
        for c in s.calls:
            d = dotted(c.func)
            if d is not None and (d == call or d == call + ".forward"):
                return s if s.in_block else None
    return None


def _runs_module(call: cst.Call) -> bool:
    """A call that may run a module's weights (self.<x>(...), or self.<...> passed in)."""
    d = dotted(call.func) or ""
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
    code = f"{ALIAS}.join({_flag(cls, switch)})"
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
    kind, _, call = where.partition(":")
    if kind not in ("before", "after") or not call:
        return f"join.where '{where}' must be end, before:<call> or after:<call>"
    s = _stmt_with_call(m, call)
    if s is None:
        return f"join anchor {call} is not called in {cls_name}.{method_name}"
    return [(s.start if kind == "before" else s.end + 1, s.indent, code)]


def _link_lines(view: SourceView) -> tuple[int, str, str] | None:
    if not view.layers_assignments:
        return None
    _, s = view.layers_assignments[0]
    return s.end + 1, s.indent, f"{ALIAS}.link_next_layers(self.layers)"


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
    return [(line, "", f"import {helper_module} as {ALIAS}")]


# ---------------------------------------------------------------- the rewrite

def rewrite_source(code: str, sites: list[Site] | tuple[Site, ...], *, mode: str = "eager",
                   switch: Switch | None = None, helper_module: str | None = None) -> RewriteOutput:
    """Insert the sites' guarded calls into `code`; returns the new code and what happened.

    Raises libcst.ParserSyntaxError when the code does not parse and SiteErrors when a site names
    a class, method, attribute, anchor or dependency that is not there (bad input).
    """
    switch = switch or Switch()
    out = RewriteOutput(code=code, had_markers=has_markers(code))
    base = strip_markers(code)
    view = parse_view(base, {c for s in sites for c in (s.target.cls, s.insert.cls, s.join.cls)})
    out.existing = [ExistingCall(ln, where, c) for ln, where, c in view.prefetch_calls]

    errors: list[tuple[str, str]] = []
    placements: list[Placement] = []
    for site in sites:
        res = locate(view, site)
        if isinstance(res, Problem):
            if res.kind == MISSING:
                errors.append((site.id, res.message))
            else:
                out.refused.append(Refusal(site.id, res.message))
            continue
        dup = next((e for e in out.existing if e.where == f"{res.cls.name}.{res.method.name}"
                    and site.target.weight_expr in e.code), None)
        if dup is not None:
            out.refused.append(Refusal(site.id, f"already prefetched by code the tool did not write "
                                                f"(line {dup.line}: {dup.code})"))
            continue
        if site.target.weight_expr.startswith("self.next_layer.") and not view.layers_assignments:
            out.refused.append(Refusal(site.id, "next-layer prefetch needs the model's "
                                                "`self.layers = ...` in this file to link the layers"))
            continue
        placements.append(res)
    if errors:
        raise SiteErrors(errors)
    for e in out.existing:
        out.notes.append(f"line {e.line}: existing npu_prefetch call in {e.where} "
                         f"(not written by cannbot-prefetch; left as it is): {e.code}")
    # the side-stream joins, first: a site whose join has no safe place is refused
    joins: dict[tuple[str, str, str], list[tuple[int, str, str]]] = {}
    if mode in SIDE_STREAM_MODES:
        kept = []
        for p in placements:
            j = p.site.join
            key = (j.cls, j.method, j.where)
            if key not in joins:
                joins[key] = _join_lines(view, j.cls, j.method, j.where, switch)
            if isinstance(joins[key], str):
                if " is not defined in this file" in joins[key]:
                    errors.append((p.site.id, joins[key]))
                else:
                    out.refused.append(Refusal(p.site.id, joins[key]))
            else:
                kept.append(p)
        placements = kept
    if errors:
        raise SiteErrors(errors)
    if not placements:
        out.code = base
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

    if any(p.site.target.weight_expr.startswith("self.next_layer.") for p in placements):
        link = _link_lines(view)
        add(link[0], 2, link[1], link[2], LINK_TAG)
    for p in placements:
        thread(p.cls)
        add(p.line, 3, p.indent, _site_line(p, switch), p.site.id)
        if p.note:
            out.notes.append(f"site {p.site.id}: {p.note}")
        out.applied.append(p.site.id)
    done: set[tuple[str, str, str]] = set()
    for p in placements:
        j = p.site.join
        key = (j.cls, j.method, j.where)
        if mode not in SIDE_STREAM_MODES or key in done:
            continue
        done.add(key)
        thread(view.classes[j.cls])
        for line, indent, text in joins[key]:
            add(line, 4, indent, text, JOIN_TAG)

    out.code = _assemble(view, inserts)
    return out


def _assemble(view: SourceView, inserts) -> str:
    lines = list(view.lines)
    nl = view.newline
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += nl
    by_line: dict[int, list] = {}
    for item in sorted(inserts, key=lambda x: (x[0], x[1], x[2])):
        by_line.setdefault(item[0], []).append(item)
    result: list[str] = []
    for i in range(1, len(lines) + 2):
        for _, _, _, indent, text, tag in by_line.get(i, []):
            result.append(f"{indent}{text}  {MARKER}{tag}{nl}")
        if i <= len(lines):
            result.append(lines[i - 1])
    return "".join(result)
