"""`rewrite_source(code, sites, ...)`: the pure rewrite, code in, code out.

Every line the tool writes is a whole new line ending in a marker comment
`# cannbot-prefetch: <tag>` (tag = site id, or `import` / `switch` / `join` / `next-layer`), put
at a statement boundary with the indentation of its neighbour. So:
- lines the tool did not write stay byte-identical (comments, formatting, line endings);
- stripping the marked lines gives the original back (`strip_markers`), which is how a rewrite
  is made idempotent (strip, then insert again: same plan, same text) and how `--revert` works;
- a re-applied plan with a changed `max_size` replaces the marked call with the same id.

The concerns, each a small function in concerns.py: insert the site calls (`site_lines`), thread
the switch through `__init__` (`switch_lines`), join the side stream (`join_lines`), link the
next layer (`link_lines`), import the helper (`import_lines`). The markers are markers.py.

A plan is data (CONTRACTS "Plan fields are data"): every plan value is checked against
plan/grammar.py first, each generated line is built as libcst nodes from those parsed pieces
(identifiers and integers, never the plan's text), and the result is re-parsed before it is
returned (`_check_output`): it must parse, strip back to the original byte for byte, hold
exactly the lines written, and none of them may sit after a `return` (dead code).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ..legality import MISSING, UNSAFE, Location, Placement, Problem, TargetRef, locate
from ..plan import Site, Switch, call_form, grammar
from ..pysource import ClassInfo, SourceView, parse_view
from .concerns import guard_problem, import_lines, join_lines, link_lines, site_lines, switch_lines
from .markers import (IMPORT_TAG, JOIN_TAG, LINK_TAG, MARKER, SWITCH_TAG, own_lines,
                      split_bom, strip_own)

def _side_stream(mode: str, call: str | None) -> bool:
    """Whether the plan issues on a side stream (and so joins it): plan `call`, else the mode's
    recommended form (plan/schema.py `call_form`)."""
    return call_form(mode, call) == "side_stream"


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


# ---------------------------------------------------------------- the rewrite

def check_site(view: SourceView, pl: Placement, target: TargetRef, *, mode: str = "eager",
               switch: Switch | None = None) -> Location | Problem:
    """Every check apply makes for one site, in one place, so analyze asks the same question
    before it plans (one truth): legality/'s rule (where the call goes, the dependency's flow),
    no hand-written prefetch of the same weight there, a layer stack to link for a next-layer
    weight, and a safe join for the side stream (checked in either call form)."""
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
    alt = grammar.alt_paths_problem(pl.weight_expr, pl.alt_weight_exprs, pl.scope)
    if alt:
        return Problem(UNSAFE, f"target.alt_weight_exprs {alt}")
    if pl.weight_expr.startswith("self.next_layer.") and not link_lines(view, pl.insert.cls):
        return Problem(UNSAFE, f"next-layer prefetch needs the module list that builds the layers "
                               f"(holding {pl.insert.cls}) in this file, to link each layer to "
                               f"the next")
    # the plan's join is checked in either call form of the modes that have one (written only
    # for side_stream): a plan stays valid when its `call` is switched (docs/rewrite.md "Call
    # form"); ge_graph has no side stream
    if mode != "ge_graph":
        j = pl.join
        lines = join_lines(view, j.cls, j.method, j.position, switch)
        if isinstance(lines, str):
            return Problem(MISSING if " is not defined in this file" in lines else UNSAFE, lines)
    return res



def rewrite_source(code: str, sites: list[Site] | tuple[Site, ...], *, mode: str = "eager",
                   switch: Switch | None = None, helper_module: str | None = None,
                   call: str | None = None) -> RewriteOutput:
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
    own = own_lines(body)            # the tool's lines already there, read once
    out = RewriteOutput(code=code, had_markers=bool(own))
    base = strip_own(body, own)
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
        gone = guard_problem(site, res)
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
    if _side_stream(mode, call):      # check_site made sure each join has a safe place
        for site, _ in placements:
            j = site.join
            key = (j.cls, j.method, j.position)
            if key not in joins:
                joins[key] = join_lines(view, j.cls, j.method, j.position, switch)
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

    for line, indent, text in import_lines(view, helper_module):
        add(line, 0, indent, text, IMPORT_TAG)
    threaded: set[str] = set()

    def thread(cls: ClassInfo) -> None:
        if cls.name in threaded:
            return
        threaded.add(cls.name)
        sw = switch_lines(cls, switch)
        if sw is not None:
            add(sw[0], 1, sw[1], sw[2], SWITCH_TAG)

    linked: set[str] = set()
    for site, _ in placements:
        if site.target.weight_expr.startswith("self.next_layer.") and \
                site.insert.cls not in linked:
            linked.add(site.insert.cls)
            for link in link_lines(view, site.insert.cls):
                add(link[0], 2, link[1], link[2], LINK_TAG)
    for site, loc in placements:
        thread(loc.cls)
        for text in site_lines(site, loc, switch):
            add(loc.line, 3, loc.indent, text, site.id)
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
        key = (j.cls, j.method, j.position)
        if not _side_stream(mode, call) or key in done:
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
    own = own_lines(new)            # `new` has no BOM (the engine rewrites the body)
    if strip_own(new, own) != base or len(own) != len(inserts):
        raise UnsafeOutput("the rewritten code would not revert to the original byte for byte: "
                           "nothing written", tags)
    own_rows = {i + 1: tag for i, tag in own}
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
