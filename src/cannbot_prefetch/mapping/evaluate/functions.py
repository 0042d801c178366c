"""Plain helper functions a shape calls (xlstm's `round_up_to_next_multiple_of(x, m)`, vLLM's
`_get_dflash_fc_input_size(vllm_config)`, gemma4's `_get_text_config` with its guard clauses): found in the calling file at module level or directly
in a module-level `if`/`try` branch, or in a sibling module of the same folder a `from .sibling
import f` names. Its body may be straight-line code: local assignments, `if`/`elif`/`else` on
conditions the evaluator decides, `assert`, early `return`s, at most `MAX_HELPER_STATEMENTS`
statements and no loop, so each runs at most once; each value goes through the same evaluator
with the arguments bound. Files are parsed (ast to find, libcst to evaluate), never imported or
executed; anything else is refused with the function's name and why.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import libcst as cst

from ...pysource import code_of

from .bounds import EVAL_ERRORS, MAX_HELPER_DEPTH, MAX_HELPER_STATEMENTS, MissingKey, Unsupported

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
    why = _not_straight(body, [0])
    if why:
        return Helper(name, file, None, f"{name}: {why}")
    return Helper(name, file, node)


def _not_straight(block, count: list[int]) -> str:
    """Why a helper is too long to run ("" when it is not): at most MAX_HELPER_STATEMENTS
    statements in all (`count` carries the running total). What each statement may be is
    checked when it runs (`_cannot_run`): a statement after a return that is taken, or in a
    branch not taken, never runs, so it cannot stop the helper (vLLM bailing_moe_v3's padding
    helper returns its argument unchanged, for an unquantized checkpoint, before its loop-free
    `alignments.append(...)` lines)."""
    for st in block:
        count[0] += 1
        if count[0] > MAX_HELPER_STATEMENTS:
            return f"more than {MAX_HELPER_STATEMENTS} statements"
        if isinstance(st, cst.If):
            branch: cst.If | cst.Else | None = st
            while branch is not None:
                why = _not_straight(_lines(branch.body), count)
                if why:
                    return why
                branch = branch.orelse if isinstance(branch, cst.If) else None
    return ""


def _cannot_run(small) -> str:
    """Why one simple statement is not straight-line code the evaluator may run ("" when it
    is): only assignments to one plain name, `assert`, `pass`, a docstring and `return
    <value>` (a call for its effect, `xs.append(v)`, may change a local: not evaluated)."""
    if isinstance(small, cst.Assign):
        if len(small.targets) != 1 or not isinstance(small.targets[0].target, cst.Name):
            return "an assignment to something other than one name"
    elif isinstance(small, cst.AnnAssign):
        if small.value is None or not isinstance(small.target, cst.Name):
            return "an annotation without a value"
    elif isinstance(small, cst.Return):
        if small.value is None:
            return "a bare `return`"
    elif not isinstance(small, (cst.Assert, cst.Pass, cst.Expr)) or \
            (isinstance(small, cst.Expr) and not isinstance(
                small.value, cst.SimpleString | cst.ConcatenatedString)):
        return f"a `{type(small).__name__.lower()}` statement"
    return ""


def _is_docstring(stmt) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and \
        isinstance(stmt.body[0], cst.Expr) and \
        isinstance(stmt.body[0].value, cst.SimpleString | cst.ConcatenatedString)


def call_helper(env: Env, call: cst.Call, name: str, file: str) -> Any:
    """The value of `name(...)` called from `env` (whose code lies in `file`)."""
    helper = find_helper(env.ms, file, name)
    if helper is None:
        tree, _ = _parsed(env.ms, file)
        origin = next((f"{'.' * n.level}{n.module or ''}" for n in (tree.body if tree else [])
                       if isinstance(n, ast.ImportFrom)
                       and any((a.asname or a.name) == name for a in n.names)), None)
        # a function of a library (vLLM's own v1 worker, torch): its code is not read
        raise Unsupported(f"{name}() from {origin}, whose code is not read" if origin else name)
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
    body = list(fn.body.body)
    run = helper_env(env, helper.file, depth, values)
    try:
        found, value = _run(run, body[1:] if body and _is_docstring(body[0]) else body)
    except Unsupported as exc:      # named once, also through a recursion
        why = str(exc)
        raise Unsupported(why if why.startswith(f"{name}: ") else f"{name}: {why}") from None
    if not found:
        raise Unsupported(f"{name}: no `return` runs with this config")
    return value


def _run(env: Env, block) -> tuple[bool, Any]:
    """Run a straight-line block (its length checked by `_not_straight`, each statement by
    `_cannot_run` when it is reached): (returned, value). A local whose
    value is not evaluable is remembered with why (a config key it lacks stays a MissingKey), so
    only a use of it fails; an `if` test must be decided, an `assert` that is decided false
    means this config cannot build the model."""
    for st in block:
        if not isinstance(st, (cst.If, cst.SimpleStatementLine)):
            raise Unsupported(f"a `{type(st).__name__.lower()}` statement (line-by-line code "
                              f"only)")
        if isinstance(st, cst.If):
            branch: cst.If | cst.Else | None = st
            while isinstance(branch, cst.If):
                if _decided(env, branch.test, "if"):
                    break
                branch = branch.orelse
            if branch is not None:
                found, value = _run(env, _lines(branch.body))
                if found:
                    return True, value
            continue
        for small in st.body:
            why = _cannot_run(small)
            if why:
                raise Unsupported(why)
            if isinstance(small, cst.Return):
                return True, env.eval(small.value)
            if isinstance(small, cst.Assert):
                try:
                    holds = _decided(env, small.test, "assert")
                except (Unsupported, MissingKey):
                    continue                 # an assert changes no value: unknown is fine
                if not holds:
                    raise Unsupported(f"`assert {code_of(small.test)}` fails with this config")
                continue
            if not isinstance(small, (cst.Assign, cst.AnnAssign)):
                continue                     # pass, a docstring
            target = small.targets[0].target if isinstance(small, cst.Assign) else small.target
            name = target.value
            try:     # the value first: it may read the name's old value (`x = [*x, *y]`)
                value, why, key = env.eval(small.value), None, None
            except MissingKey as exc:
                value, why, key = None, None, exc.key
            except EVAL_ERRORS as exc:
                value, why, key = None, str(exc) or type(exc).__name__, None
            env.local.pop(name, None)
            env.missing.pop(name, None)
            env.failed.pop(name, None)
            if key is not None:
                env.missing[name] = key
            elif why is not None:
                env.failed[name] = why
            else:
                env.local[name] = value
    return False, None


def _lines(suite) -> list:
    """A branch's statements, an indented block's or a one-line suite's (`if x: return y`)."""
    if isinstance(suite, cst.SimpleStatementSuite):
        return [cst.SimpleStatementLine(body=suite.body)]
    return list(suite.body)


def _decided(env: Env, test, what: str) -> bool:
    from .env import _DECIDABLE

    v = env.eval(test)
    if not isinstance(v, _DECIDABLE):
        raise Unsupported(f"`{what} {code_of(test)}` is not decided by the config")
    return bool(v)


def helper_env(env: Env, file: str, depth: int, local: dict) -> Env:
    """An evaluator for a helper's body: its parameters only (no `self`, no implicit config;
    a config passed in stays one), the caller's config.json and ranks."""
    from .env import Env as _Env
    inner = _Env.__new__(_Env)
    inner.__dict__.update(ms=env.ms, cls=env.cls, config=env.config, self_vals={}, local=local,
                          missing={}, unknown={}, failed={}, config_names=set(),
                          nulls=env.nulls, dead=set(), helper_file=file, helper_depth=depth)
    return inner
