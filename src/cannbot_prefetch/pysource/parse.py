"""`parse_view(code)`: one parse of a model source file into a `SourceView`. The stdlib ast
reads the whole file (imports, classes, module lists, existing npu_prefetch calls); libcst parses
only the classes a caller names."""

from __future__ import annotations

import ast
import textwrap

import libcst as cst

from .nodes import source_lines
from .positions import align_compound
from .statements import Builder, class_info
from .view import ClassInfo, ImportAlias, ModuleList, SourceView, Stmt


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

    nested = _nested_classes(tree, top_classes)
    for name, node in _nested_nodes(tree, top_classes).items():
        top_classes.setdefault(name, node)     # read like a top-level class (see below)
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
    b = Builder(lines, positions)
    infos: dict[str, ClassInfo] = {}
    layers: list[tuple[str, Stmt]] = []
    for name in sorted(wanted, key=lambda n: top_classes[n].lineno):
        node = top_classes[name]
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        # the class alone, padded so libcst sees it at its own line numbers
        text = "".join(lines[first - 1:node.end_lineno])
        if node.col_offset:      # a class inside a module-level block: parsed at column 0
            text = textwrap.dedent(text)
        try:
            cnode = cst.parse_module(text).body[0]
        except cst.ParserSyntaxError:      # a block whose lines do not dedent evenly
            if not node.col_offset:
                raise
            del top_classes[name]
            continue
        align_compound(cnode, node, positions)
        infos[name] = class_info(b, cnode, layers)
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
                      prefetch_calls, module_lists, module_attrs, bases, nested)


_BLOCK_WORDS = {ast.If: "if/else", ast.Try: "try", ast.With: "with", ast.For: "for", ast.While: "while"}


def _nested_nodes(tree: ast.Module, top: dict) -> dict[str, ast.ClassDef]:
    """Classes defined directly in a branch of a module-level `if`/`try` that no top-level
    statement defines (transformers' xlstm: `if is_xlstm_available(): <the package's> else:
    class xLSTMLayer ...`); a name defined in several branches: the last in the file, as for
    top-level redefinitions (xlstm's own `xLSTMBlock` in `else`, not the package's in `if`)."""
    out: dict[str, ast.ClassDef] = {}
    for stmt in tree.body:
        if not isinstance(stmt, (ast.If, ast.Try)):
            continue
        blocks = [stmt.body, stmt.orelse] + [h.body for h in getattr(stmt, "handlers", [])]
        todo = list(blocks)
        while todo:
            block = todo.pop(0)
            for n in block:
                if isinstance(n, ast.ClassDef) and n.name not in top:
                    out[n.name] = n
                elif isinstance(n, ast.If):      # elif chains
                    todo += [n.body, n.orelse]
    return dict(sorted(out.items(), key=lambda kv: kv[1].lineno))


def _nested_classes(tree: ast.Module, top: dict) -> dict[str, tuple[int, str]]:
    """Classes a module-level block defines that no top-level statement does (first one)."""
    out: dict[str, tuple[int, str]] = {}
    for stmt in tree.body:
        word = next((w for t, w in _BLOCK_WORDS.items() if isinstance(stmt, t)), None)
        if word is None:
            continue
        for n in ast.walk(stmt):
            if isinstance(n, ast.ClassDef) and n.name not in top and n.name not in out:
                out[n.name] = (n.lineno, word)
    return out
