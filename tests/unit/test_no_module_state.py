"""No module-level state (issue 34 part 2): nothing a function fills lives at module level.

A module-level memo outlives the run that filled it: a config edited between two library calls
in one process is not seen, and an answer keyed by an object's `id` is inherited by the next
object at that address. State is passed down, and a cache belongs to the object that owns it.
This scans src/ with `ast` and fails on
- a module-level function decorated with `lru_cache` / `functools.cache` / `cached_property`;
- a module-level dict, list or set (a literal, a comprehension or `dict()`/`set()`/`list()`/
  `defaultdict()`/`OrderedDict()`) that a function of the module mutates (item assignment,
  `del`, augmented assignment, a mutating method) or rebinds through `global`."""

from __future__ import annotations

import ast
from pathlib import Path

import cannbot_prefetch as cp

SRC = Path(cp.__file__).resolve().parent
CACHES = {"lru_cache", "cache", "cached_property"}
MUTATORS = {"append", "add", "update", "setdefault", "pop", "popitem", "clear", "extend",
            "insert", "remove", "discard", "__setitem__", "__delitem__", "sort", "reverse",
            "appendleft", "extendleft", "intersection_update", "difference_update",
            "symmetric_difference_update", "move_to_end"}
CONTAINER_CALLS = {"dict", "list", "set", "defaultdict", "OrderedDict", "Counter", "deque"}


def _is_container(value: ast.expr) -> bool:
    if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
        return True
    if isinstance(value, ast.Call):
        f = value.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        return name in CONTAINER_CALLS
    return False


def _cache_decorator(dec: ast.expr) -> str | None:
    target = dec.func if isinstance(dec, ast.Call) else dec
    name = target.id if isinstance(target, ast.Name) else \
        target.attr if isinstance(target, ast.Attribute) else ""
    return name if name in CACHES else None


def _module_containers(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and _is_container(node.value):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and node.value is not None \
                and _is_container(node.value) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _locals(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names bound in `fn` itself (parameters, assignments): they shadow a module name."""
    a = fn.args
    out = {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if p}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
    return out


def _root(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _mutations(fn, shared: set[str]):
    """(name, line) of each module container `fn` changes."""
    declared = {n for node in ast.walk(fn) if isinstance(node, ast.Global) for n in node.names}
    visible = (shared - _locals(fn)) | (shared & declared)
    for node in ast.walk(fn):
        if isinstance(node, ast.Global):
            for n in node.names:
                yield n, node.lineno                         # rebinding module state
        targets = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for t in targets:
            if isinstance(t, (ast.Subscript, ast.Attribute)) and _root(t) in visible:
                yield _root(t), node.lineno
            if isinstance(node, ast.AugAssign) and isinstance(t, ast.Name) and t.id in visible:
                yield t.id, node.lineno
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in MUTATORS and _root(node.func.value) in visible:
            yield _root(node.func.value), node.lineno


def module_state(path: Path) -> list[str]:
    """Every finding in one source file, as "file:line: what"."""
    rel = path.relative_to(SRC).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:
                if _cache_decorator(dec):
                    found.append(f"{rel}:{node.lineno}: {node.name} is a module-level "
                                 f"{_cache_decorator(dec)}")
    shared = _module_containers(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for name, line in _mutations(node, shared):
                found.append(f"{rel}:{line}: {node.name} changes module-level {name}")
    return sorted(set(found), key=lambda f: int(f.split(":")[1]))


def test_the_scan_catches_each_kind(tmp_path):
    """The scanner itself: each pattern it must catch, and the ones it must let pass."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import functools\nfrom functools import lru_cache, cache\n"
        "_MEMO = {}\n_SEEN: set = set()\n_LOG = []\n_N = 0\nCONST = {'a': 1}\n"
        "@lru_cache(maxsize=None)\ndef a(): return 1\n"
        "@functools.cache\ndef b(): return 1\n"
        "def c(k): _MEMO[k] = 1\n"
        "def d(k): _SEEN.add(k)\n"
        "def e(k): _LOG.append(k)\n"
        "def f():\n    global _N\n    _N = 1\n"
        "def g(k): return CONST.get(k)\n"
        "def h(k):\n    _MEMO = {}\n    _MEMO[k] = 1\n"
        "class C:\n    @functools.cached_property\n    def x(self): return 1\n",
        encoding="utf-8")
    global SRC
    saved, SRC = SRC, tmp_path
    try:
        got = module_state(bad)
    finally:
        SRC = saved
    assert [g.split(": ", 1)[1] for g in got] == [
        "a is a module-level lru_cache", "b is a module-level cache",
        "c changes module-level _MEMO", "d changes module-level _SEEN",
        "e changes module-level _LOG", "f changes module-level _N"]


def test_no_module_level_cache_or_mutable_state():
    found = [f for path in sorted(SRC.rglob("*.py")) for f in module_state(path)]
    assert not found, "module-level state:\n" + "\n".join(found)
