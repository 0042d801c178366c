"""Read-only view of one model source file: classes, methods, statements in order, with lines.

A leaf shared by mapping/ (stage 4: where is the attribute called, which statement holds the
window op) and rewrite/ (stage 7a: where do the lines go), so both agree on statements without
mapping importing the rewriter. libcst parses the file once; everything the rewriter decides is computed from this view, and the
edits themselves are whole lines inserted at statement boundaries (see engine.py), so the bytes
of every line the tool did not write stay exactly as they were.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

import libcst as cst

_EMPTY = cst.Module(body=[])
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\n|\r)|[^\r\n]+\Z")


def source_lines(code: str) -> list[str]:
    """Lines with their endings, split where Python splits them (\\n, \\r\\n, \\r) and not at
    form feeds or other characters `str.splitlines` also breaks at, so line numbers agree with
    the parser's."""
    return _LINE.findall(code)


def code_of(node: cst.CSTNode) -> str:
    return _EMPTY.code_for_node(node)


def dotted(node: cst.CSTNode) -> str | None:
    """`self.mlp.gate_proj` for Name/Attribute chains, else None."""
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


def call_name(call: cst.Call) -> str:
    """The callee of a call as written, without whitespace (`self.mlps[0]`, `self.attn.forward`):
    how mapping names an anchor and how the rewriter finds it again."""
    return re.sub(r"\s+", "", code_of(call.func))


class _Names(cst.CSTVisitor):
    """Names read by an expression (not attribute names, not keyword names)."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.calls: list[cst.Call] = []

    def visit_Name(self, node: cst.Name) -> bool:
        self.names.add(node.value)
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False

    def visit_Call(self, node: cst.Call) -> bool:
        self.calls.append(node)
        return True

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        node.body.visit(self)
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False


def names_and_calls(node: cst.CSTNode | None) -> tuple[set[str], list[cst.Call]]:
    if node is None:
        return set(), []
    v = _Names()
    node.visit(v)
    return v.names, v.calls


def _target_names(t: cst.BaseExpression) -> tuple[set[str], set[str]]:
    """(defined, read) by an assignment target."""
    if isinstance(t, cst.Name):
        return {t.value}, set()
    if isinstance(t, (cst.Tuple, cst.List)):
        d, r = set(), set()
        for el in t.elements:
            dd, rr = _target_names(el.value)
            d |= dd
            r |= rr
        return d, r
    if isinstance(t, cst.StarredElement):
        return _target_names(t.value)
    if isinstance(t, (cst.Attribute, cst.Subscript)):
        # x[i] = y / x.a = y updates x: it is both read and (re)defined
        base = t.value
        while isinstance(base, (cst.Attribute, cst.Subscript)):
            base = base.value
        names, _ = names_and_calls(t)
        if isinstance(base, cst.Name) and base.value != "self":
            return {base.value}, names
        return set(), names
    return set(), names_and_calls(t)[0]


@dataclass
class Stmt:
    """One statement of a method in program order (compound statements: their header)."""

    node: cst.CSTNode            # the statement (SimpleStatementLine or compound statement)
    start: int                   # first line, 1-based
    end: int                     # last line (for compound statements: of the whole block)
    indent: str                  # leading whitespace of the first line
    defs: set[str] = field(default_factory=set)
    uses: set[str] = field(default_factory=set)
    calls: list[cst.Call] = field(default_factory=list)
    is_return: bool = False
    in_block: bool = True        # directly inside an indented block (a place lines can go)
    header: bool = False         # the header of a compound statement


@dataclass
class Method:
    name: str
    node: cst.FunctionDef
    params: list[str]
    stmts: list[Stmt]
    start: int
    end: int
    body_indent: str


@dataclass
class ClassInfo:
    name: str
    node: cst.ClassDef
    bases: list[str]
    methods: dict[str, Method]
    attrs: dict[str, list[Stmt]]     # self.<attr> assignments (any method) -> statements
    conditional_attrs: set[str]      # attrs assigned under if/else in __init__, or set to None
    start: int


@dataclass
class ImportAlias:
    name: str        # the local name
    source: str      # module it comes from
    original: str    # the imported name


@dataclass
class SourceView:
    code: str
    module: ast.Module                # the whole file (stdlib ast); libcst holds the classes
    lines: list[str]                  # keepends=True
    newline: str
    classes: dict[str, ClassInfo]
    imports_end: int                  # last line of the leading import block (0: none)
    import_indent: str
    aliases: dict[str, ImportAlias]
    layers_assignments: list[tuple[str, Stmt]]   # (class, `self.layers = ...` statement)
    prefetch_calls: list[tuple[int, str, str]]   # (line, class.method, code) of npu_prefetch calls
    module_lists: list["ModuleList"] = field(default_factory=list)
    module_attrs: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    #                 class -> self.<attr> in __init__ -> constructor names it is built with
    class_bases: dict[str, list[str]] = field(default_factory=dict)   # every class in the file


@dataclass(frozen=True)
class ModuleList:
    """`self.<attr> = nn.ModuleList([...])` (or Sequential / ModuleDict) in a class's __init__,
    with the last top-level __init__ statement that fills it (`.append` loops included)."""

    cls: str
    attr: str
    elements: tuple[str, ...]     # constructor names of the elements
    is_dict: bool                 # a ModuleDict: its modules are .values()
    last_line: int                # last line of the last statement that mentions self.<attr>
    indent: str


class _Builder:
    def __init__(self, view_lines: list[str], positions) -> None:
        self.lines = view_lines
        self.pos = positions

    def line_range(self, node: cst.CSTNode) -> tuple[int, int]:
        return self.pos[id(node)]

    def indent_of(self, line: int) -> str:
        text = self.lines[line - 1]
        return text[: len(text) - len(text.lstrip(" \t"))]

    def stmts(self, body, out: list[Stmt], in_block: bool = True) -> None:
        items = body.body if isinstance(body, (cst.IndentedBlock, cst.Module)) else [body]
        for st in items:
            self.stmt(st, out, in_block)

    def stmt(self, st: cst.CSTNode, out: list[Stmt], in_block: bool) -> None:
        start, end = self.line_range(st)
        s = Stmt(st, start, end, self.indent_of(start), in_block=in_block)
        if isinstance(st, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            for small in st.body:
                self.small(small, s)
            out.append(s)
            return
        if isinstance(st, (cst.FunctionDef, cst.ClassDef)):
            s.defs.add(st.name.value)
            out.append(s)
            return
        s.header = True
        header_parts: list[cst.CSTNode] = []
        blocks: list[cst.CSTNode] = []
        if isinstance(st, (cst.If, cst.While)):
            header_parts.append(st.test)
            blocks.append(st.body)
            orelse = st.orelse
            while orelse is not None:
                if isinstance(orelse, cst.If):
                    header_parts.append(orelse.test)
                    blocks.append(orelse.body)
                    orelse = orelse.orelse
                else:
                    blocks.append(orelse.body)
                    orelse = None
        elif isinstance(st, cst.For):
            header_parts.append(st.iter)
            d, r = _target_names(st.target)
            s.defs |= d
            s.uses |= r
            blocks.append(st.body)
            if st.orelse is not None:
                blocks.append(st.orelse.body)
        elif isinstance(st, cst.With):
            for item in st.items:
                header_parts.append(item.item)
                if item.asname is not None:
                    d, r = _target_names(item.asname.name)
                    s.defs |= d
            blocks.append(st.body)
        elif isinstance(st, cst.Try):
            blocks.append(st.body)
            for h in st.handlers:
                blocks.append(h.body)
            if st.orelse is not None:
                blocks.append(st.orelse.body)
            if st.finalbody is not None:
                blocks.append(st.finalbody.body)
        else:  # match and anything newer: opaque
            names, calls = names_and_calls(st)
            s.uses |= names
            s.calls += calls
            out.append(s)
            return
        for part in header_parts:
            names, calls = names_and_calls(part)
            s.uses |= names
            s.calls += calls
        out.append(s)
        for b in blocks:
            if isinstance(b, cst.IndentedBlock):
                self.stmts(b, out, True)
            else:  # one-line suite: part of the header line
                for small in b.body:
                    self.small(small, s)

    def small(self, small: cst.BaseSmallStatement, s: Stmt) -> None:
        if isinstance(small, cst.Assign):
            for t in small.targets:
                d, r = _target_names(t.target)
                s.defs |= d
                s.uses |= r
            value = small.value
        elif isinstance(small, cst.AnnAssign):
            d, r = _target_names(small.target)
            s.defs |= d
            s.uses |= r
            value = small.value
        elif isinstance(small, cst.AugAssign):
            d, r = _target_names(small.target)
            s.defs |= d
            s.uses |= r | d
            value = small.value
        elif isinstance(small, cst.Return):
            s.is_return = True
            value = small.value
        elif isinstance(small, cst.Expr):
            value = small.value
        elif isinstance(small, (cst.Import, cst.ImportFrom)):
            names = small.names if not isinstance(small.names, cst.ImportStar) else []
            for a in names:
                local = a.asname.name if a.asname else a.name
                if isinstance(local, cst.Name):
                    s.defs.add(local.value)
                elif isinstance(local, cst.Attribute):
                    s.defs.add(dotted(local).split(".")[0])
            return
        else:
            value = small
        names, calls = names_and_calls(value)
        s.uses |= names
        s.calls += calls


def _params(fn: cst.FunctionDef) -> list[str]:
    p = fn.params
    out = [x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)]
    if isinstance(p.star_arg, cst.Param):
        out.append(p.star_arg.name.value)
    if p.star_kwarg is not None:
        out.append(p.star_kwarg.name.value)
    return out


def assigned_targets(s: Stmt) -> list[cst.BaseExpression]:
    """Every assignment target of a simple statement, tuples unpacked, in order
    (`x, _ = self.o_proj(x)` -> [x, _])."""
    node = s.node
    if not isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        return []
    out: list[cst.BaseExpression] = []
    for small in node.body:
        targets = []
        if isinstance(small, cst.Assign):
            targets = [t.target for t in small.targets]
        elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
            targets = [small.target]
        for t in targets:
            for el in (t.elements if isinstance(t, (cst.Tuple, cst.List)) else [t]):
                out.append(el.value if isinstance(el, (cst.Element, cst.StarredElement)) else el)
    return out


def _self_attr_targets(s: Stmt) -> set[str]:
    out = set()
    for el in assigned_targets(s):
        d = dotted(el) if isinstance(el, cst.Attribute) else None
        if d and d.startswith("self.") and d.count(".") == 1:
            out.add(d.split(".")[1])
    return out


def _assigns_none(s: Stmt) -> set[str]:
    node = s.node
    out = set()
    if isinstance(node, cst.SimpleStatementLine):
        for small in node.body:
            if isinstance(small, cst.Assign) and isinstance(small.value, cst.Name) \
                    and small.value.value == "None":
                for t in small.targets:
                    d = dotted(t.target)
                    if d and d.startswith("self.") and d.count(".") == 1:
                        out.add(d.split(".")[1])
    return out


def _align(cst_body, ast_body, out: dict[int, tuple[int, int]]) -> None:
    """Line ranges of libcst statements, read from the stdlib ast (same statements, same order).

    libcst's PositionProvider costs a second full code generation; the C parser of `ast` gives
    the same statement lines for a fraction of that (see benchmarks/bench_rewrite.py)."""
    i = 0
    for node in cst_body:
        if i >= len(ast_body):
            return
        if isinstance(node, cst.SimpleStatementLine):
            n = len(node.body)
            first, last = ast_body[i], ast_body[min(i + n, len(ast_body)) - 1]
            out[id(node)] = (first.lineno, last.end_lineno)
            i += n
            continue
        a = ast_body[i]
        i += 1
        _align_compound(node, a, out)


def _block(body) -> list:
    return list(body.body) if isinstance(body, cst.IndentedBlock) else []


def _align_compound(node, a, out) -> None:
    out[id(node)] = (a.lineno, a.end_lineno)
    for child in ("body",):
        body = getattr(node, child, None)
        if isinstance(body, cst.SimpleStatementSuite):
            out[id(body)] = (a.lineno, a.lineno)
    if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.With, cst.For, cst.While, cst.If)):
        _align(_block(node.body), getattr(a, "body", []), out)
    if isinstance(node, (cst.If, cst.For, cst.While)) and node.orelse is not None:
        if isinstance(node.orelse, cst.If) and a.orelse:
            _align_compound(node.orelse, a.orelse[0], out)
        elif isinstance(node.orelse, cst.Else):
            _align(_block(node.orelse.body), a.orelse, out)
    if isinstance(node, cst.Try) and isinstance(a, (ast.Try, getattr(ast, "TryStar", ast.Try))):
        _align(_block(node.body), a.body, out)
        for h, ah in zip(node.handlers, a.handlers):
            _align(_block(h.body), ah.body, out)
        if node.orelse is not None:
            _align(_block(node.orelse.body), a.orelse, out)
        if node.finalbody is not None:
            _align(_block(node.finalbody.body), a.finalbody, out)


def _ast_dotted(node) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


_LIST_CTORS = ("ModuleList", "Sequential", "ModuleDict")


def _ctor_names(value: ast.AST) -> list[str]:
    return [_ast_dotted(n.func).split(".")[-1] for n in ast.walk(value)
            if isinstance(n, ast.Call) and _ast_dotted(n.func)]


def _module_structure(cls: ast.ClassDef, lines: list[str]):
    """(attr -> constructor names, module lists) of a class's __init__ (stdlib ast only)."""
    attrs: dict[str, list[str]] = {}
    lists: list[ModuleList] = []
    init = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"),
                None)
    if init is None:
        return attrs, lists
    for n in ast.walk(init):
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                d = _ast_dotted(t)
                if d.startswith("self.") and d.count(".") == 1:
                    attrs.setdefault(d[5:], []).extend(_ctor_names(n.value))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                n.func.attr == "append" and _ast_dotted(n.func.value).startswith("self."):
            attrs.setdefault(_ast_dotted(n.func.value)[5:], []).extend(
                x for a in n.args for x in _ctor_names(a))
    for attr, names in attrs.items():
        is_list = any(x in _LIST_CTORS for x in names)
        if not is_list:
            continue
        mentions = [st for st in init.body if any(
            isinstance(x, ast.Attribute) and _ast_dotted(x) == f"self.{attr}" for x in ast.walk(st))]
        if not mentions:
            continue
        last = mentions[-1]
        text = lines[last.lineno - 1]
        lists.append(ModuleList(cls.name, attr, tuple(x for x in names if x not in _LIST_CTORS),
                                "ModuleDict" in names, last.end_lineno, text[: len(text) - len(text.lstrip(" \t"))]))
    return attrs, lists


def _assigns_self_layers(cls: ast.ClassDef) -> bool:
    for fn in cls.body:
        if isinstance(fn, ast.FunctionDef) and fn.name == "__init__":
            for n in ast.walk(fn):
                if isinstance(n, (ast.Assign, ast.AnnAssign)):
                    targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                    if any(_ast_dotted(t) == "self.layers" for t in targets):
                        return True
    return False


def parse_view(code: str, classes: set[str] | None = None) -> SourceView:
    """Parse once; raises libcst.ParserSyntaxError on a file that does not parse.

    The stdlib `ast` (C parser) reads the whole file: imports, aliases, classes, existing
    npu_prefetch calls, statement lines. libcst parses only the classes named in `classes`
    (plus their in-file bases and the class that builds `self.layers`), or all when None: the
    cost follows the classes a plan touches, not the file size (benchmarks/bench_rewrite.py)."""
    try:   # a UTF-8 byte-order mark is fine for Python but not for ast.parse on a str
        tree = ast.parse(code[1:] if code.startswith("\ufeff") else code)
    except (SyntaxError, ValueError) as exc:
        raise cst.ParserSyntaxError(str(getattr(exc, "msg", exc)), lines=code.splitlines() or [""],
                                    raw_line=getattr(exc, "lineno", None) or 1,
                                    raw_column=max(getattr(exc, "offset", None) or 1, 1) - 1
                                    ) from None
    lines = source_lines(code)
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    aliases: dict[str, ImportAlias] = {}
    imports_end = 0
    seen_def = False
    top_classes: dict[str, ast.ClassDef] = {}
    prefetch_calls: list[tuple[int, str, str]] = []
    for top in tree.body:
        if isinstance(top, (ast.Import, ast.ImportFrom)) and not seen_def:
            imports_end = top.end_lineno
        if isinstance(top, ast.ImportFrom):
            src = "." * top.level + (top.module or "")
            for a in top.names:
                local = a.asname or a.name
                if local != "*":
                    aliases.setdefault(local, ImportAlias(local, src, a.name))
                    if a.asname:
                        aliases[local] = ImportAlias(local, src, a.name)
        elif isinstance(top, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            seen_def = True
        if isinstance(top, ast.ClassDef):
            top_classes[top.name] = top
            for fn in top.body:
                if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                for n in ast.walk(fn):
                    if isinstance(n, ast.Call) and _ast_dotted(n.func).split(".")[-1] == "npu_prefetch":
                        text = ast.get_source_segment(code, n) or ast.unparse(n)
                        prefetch_calls.append((n.lineno, f"{top.name}.{fn.name}", text))

    wanted = set(top_classes) if classes is None else {c for c in classes if c in top_classes}
    wanted |= {name for name, node in top_classes.items() if _assigns_self_layers(node)}
    todo = list(wanted)
    while todo:
        node = top_classes[todo.pop()]
        for base in node.bases:
            b = _ast_dotted(base).split(".")[-1]
            if b in top_classes and b not in wanted:
                wanted.add(b)
                todo.append(b)

    positions: dict[int, tuple[int, int]] = {}
    b = _Builder(lines, positions)
    infos: dict[str, ClassInfo] = {}
    layers: list[tuple[str, Stmt]] = []
    for name in sorted(wanted, key=lambda n: top_classes[n].lineno):
        node = top_classes[name]
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        # the class alone, padded so libcst sees it at its own line numbers
        text = "".join(lines[first - 1:node.end_lineno])
        cnode = cst.parse_module(text).body[0]
        _align_compound(cnode, node, positions)
        infos[name] = _class_info(b, cnode, layers)
    module = tree
    module_attrs: dict[str, dict[str, list[str]]] = {}
    module_lists: list[ModuleList] = []
    for name, node in top_classes.items():
        attrs, lists = _module_structure(node, lines)
        module_attrs[name] = attrs
        module_lists += lists
    bases = {name: [_ast_dotted(b).split(".")[-1] for b in node.bases]
             for name, node in top_classes.items()}
    return SourceView(code, module, lines, newline, infos, imports_end, "", aliases, layers,
                      prefetch_calls, module_lists, module_attrs, bases)


def _class_info(b: _Builder, node: cst.ClassDef, layers: list) -> ClassInfo:
    methods: dict[str, Method] = {}
    attrs: dict[str, list[Stmt]] = {}
    conditional: set[str] = set()
    body = node.body
    for item in (body.body if isinstance(body, cst.IndentedBlock) else []):
        fn = item
        if not isinstance(fn, cst.FunctionDef):
            continue
        stmts: list[Stmt] = []
        b.stmts(fn.body, stmts)
        start, end = b.line_range(fn)
        first_body = fn.body.body[0] if isinstance(fn.body, cst.IndentedBlock) and fn.body.body else None
        body_indent = b.indent_of(b.line_range(first_body)[0]) if first_body is not None else ""
        m = Method(fn.name.value, fn, _params(fn), stmts, start, end, body_indent)
        methods[m.name] = m
        top_level = {id(x) for x in (fn.body.body if isinstance(fn.body, cst.IndentedBlock) else [])}
        for s in stmts:
            for a in _self_attr_targets(s):
                attrs.setdefault(a, []).append(s)
                if fn.name.value == "__init__" and id(s.node) not in top_level:
                    conditional.add(a)
                if a == "layers" and fn.name.value == "__init__":
                    layers.append((node.name.value, s))
            conditional |= _assigns_none(s)
    bases = [dotted(a.value) or code_of(a.value) for a in node.bases]
    return ClassInfo(node.name.value, node, bases, methods, attrs, conditional, b.line_range(node)[0])
