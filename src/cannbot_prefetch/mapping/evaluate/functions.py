"""Plain helper functions a shape calls (xlstm's `round_up_to_next_multiple_of(x, m)`): found
in the calling file at module level or directly in a module-level `if`/`try` branch, or in a
sibling module of the same folder a `from .sibling import f` names; one whose body is (a
docstring,) guard clauses `if <test>: return <expr>` and a final `return <expr>` is evaluated
by the same evaluator with its arguments bound. Files are parsed (ast to find, libcst to
evaluate), never imported or executed; anything else is refused with the function's name and
why.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import libcst as cst

from .bounds import MAX_HELPER_DEPTH, Unsupported

if TYPE_CHECKING:  # pragma: no cover
    from .env import Env


@dataclass(frozen=True)
class Helper:
    name: str
    file: str                        # the file that defines it (its own calls resolve there)
    node: cst.FunctionDef | None     # None: found but not evaluable (`why`)
    why: str = ""


def find_helper(ms, file: str, name: str, seen: frozenset = frozenset()) -> Helper | None:
    """The plain function `name` as `file` sees it, cached on the ModelSource; None when the
    file neither defines it nor imports it from a sibling (a builtin, torch, ...)."""
    cache = ms.helper_functions
    key = (file, name)
    if key not in cache:
        cache[key] = _find(ms, file, name, seen)
    return cache[key]


def _find(ms, file: str, name: str, seen: frozenset) -> Helper | None:
    tree, lines = _parsed(ms, file)
    if tree is None:
        return None
    defs: list[ast.stmt] = []
    imports: list[tuple[ast.ImportFrom, str]] = []
    for stmt in _module_level(tree):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
            defs.append(stmt)
        elif isinstance(stmt, ast.ImportFrom):
            for a in stmt.names:
                if (a.asname or a.name) == name:
                    imports.append((stmt, a.name))
    if defs:
        # a top-level definition wins; else the last one in a branch (as classes: parse.py)
        top_defs = [d for d in defs if d.col_offset == 0]
        return _helper(name, file, (top_defs or defs)[-1], lines)
    for imp, original in reversed(imports):
        if imp.level != 1 or not imp.module or "." in imp.module:
            continue           # only a sibling module of the same folder is read
        sibling = Path(file).parent / f"{imp.module}.py"
        try:
            same_folder = sibling.resolve().parent == Path(file).resolve().parent
        except OSError:
            same_folder = False
        if not (same_folder and sibling.is_file()) or (str(sibling), original) in seen:
            return Helper(name, file, None, f"{name}: from .{imp.module} (not read)")
        found = find_helper(ms, str(sibling), original, seen | {(file, name)})
        if found is None:
            return Helper(name, file, None, f"{name}: not defined in {sibling.name}")
        return found
    return None


def _module_level(tree: ast.Module):
    """Statements at module level and directly in module-level `if`/`elif`/`else`/`try`
    branches (transformers' `if is_xlstm_available(): ... else: from .x import f`)."""
    for stmt in tree.body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.Try)):
            todo = [stmt.body, stmt.orelse] + [h.body for h in getattr(stmt, "handlers", [])]
            while todo:
                for n in todo.pop(0):
                    yield n
                    if isinstance(n, ast.If):
                        todo += [n.body, n.orelse]


def _parsed(ms, file: str) -> tuple[ast.Module | None, list[str]]:
    view = ms.files.get(file)
    if view is not None:
        return view.module, view.lines
    cache = ms.helper_modules
    if file not in cache:
        try:
            code = Path(file).read_text(encoding="utf-8")
            cache[file] = (ast.parse(code), code.splitlines(keepends=True))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            cache[file] = (None, [])
    return cache[file]


def _helper(name: str, file: str, fn: ast.stmt, lines: list[str]) -> Helper:
    if isinstance(fn, ast.AsyncFunctionDef):
        return Helper(name, file, None, f"{name}: async")
    if fn.decorator_list:
        return Helper(name, file, None, f"{name}: decorated")
    text = textwrap.dedent("".join(lines[fn.lineno - 1:fn.end_lineno]))
    try:
        node = cst.parse_module(text).body[0]
    except cst.ParserSyntaxError:
        return Helper(name, file, None, f"{name}: does not parse on its own")
    body = list(node.body.body)
    if body and _is_docstring(body[0]):
        body = body[1:]
    # guard clauses before the return (vLLM's gemma4 `_get_text_config`: `if hasattr(config,
    # "text_config"): return config.text_config` then `return config`): an expression too
    if not (body and all(_guard(b) is not None for b in body[:-1])):
        return Helper(name, file, None,
                      f"{name}: its body is not a single `return` ({len(body)} statements)")
    if _returned(body[-1]) is None:
        return Helper(name, file, None, f"{name}: its body is not a single `return <value>`")
    return Helper(name, file, node)


def _returned(stmt) -> cst.BaseExpression | None:
    """The value of a statement that is only `return <value>`, else None."""
    small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and \
        len(stmt.body) == 1 else stmt
    return small.value if isinstance(small, cst.Return) else None


def _guard(stmt) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """(test, value) of `if <test>: return <value>` with no else branch, else None."""
    if not isinstance(stmt, cst.If) or stmt.orelse is not None or \
            not isinstance(stmt.body, cst.IndentedBlock) or len(stmt.body.body) != 1:
        return None
    value = _returned(stmt.body.body[0])
    return None if value is None else (stmt.test, value)


def _is_docstring(stmt) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and \
        isinstance(stmt.body[0], cst.Expr) and \
        isinstance(stmt.body[0].value, cst.SimpleString | cst.ConcatenatedString)


def call_helper(env: Env, call: cst.Call, name: str, file: str) -> Any:
    """The value of `name(...)` called from `env` (whose code lies in `file`)."""
    helper = find_helper(env.ms, file, name)
    if helper is None:
        raise Unsupported(name)
    if helper.node is None:
        raise Unsupported(helper.why)
    depth = getattr(env, "helper_depth", 0) + 1
    if depth > MAX_HELPER_DEPTH:
        raise Unsupported(f"{name}: helpers nested deeper than {MAX_HELPER_DEPTH}")
    fn = helper.node
    ps = fn.params
    if isinstance(ps.star_arg, cst.Param) or ps.star_kwarg is not None:
        raise Unsupported(f"{name}: *args / **kwargs")
    positional = [*ps.posonly_params, *ps.params]
    by_name = {p.name.value: p for p in (*ps.params, *ps.kwonly_params)}
    values: dict[str, Any] = {}
    pos = 0
    for a in call.args:
        if a.star:
            raise Unsupported(f"{name}: called with *args / **kwargs")
        if a.keyword is None:
            if pos >= len(positional):
                raise Unsupported(f"{name}: too many arguments")
            target = positional[pos].name.value
            pos += 1
        else:
            target = a.keyword.value
            if target not in by_name or target in values:
                raise Unsupported(f"{name}: argument {target!r}")
        values[target] = env.eval(a.value)          # evaluated where the call is written
    inner = helper_env(env, helper.file, depth, {})
    for p in (*positional, *ps.kwonly_params):
        pname = p.name.value
        if pname in values:
            continue
        if p.default is None:
            raise Unsupported(f"{name}: argument {pname!r} not passed")
        values[pname] = inner.eval(p.default)       # defaults: the defining module's scope
    body = [b for b in fn.body.body if not _is_docstring(b)]
    inner = helper_env(env, helper.file, depth, values)
    try:
        for test, value in (_guard(b) for b in body[:-1]):
            if inner.eval(test):        # the first guard that holds returns its value
                return inner.eval(value)
        return inner.eval(_returned(body[-1]))
    except Unsupported as exc:      # named once, also through a recursion
        why = str(exc)
        raise Unsupported(why if why.startswith(f"{name}: ") else f"{name}: {why}") from None


def helper_env(env: Env, file: str, depth: int, local: dict) -> Env:
    """An evaluator for a helper's body: its parameters only (no `self`, no implicit config;
    a config passed in stays one), the caller's config.json and ranks."""
    from .env import Env as _Env
    inner = _Env.__new__(_Env)
    inner.__dict__.update(ms=env.ms, cls=env.cls, config=env.config, self_vals={}, local=local,
                          missing={}, unknown={}, config_names=set(), nulls=env.nulls,
                          dead=set(), helper_file=file, helper_depth=depth)
    return inner
