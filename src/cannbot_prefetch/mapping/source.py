"""The model source as mapping sees it: classes, linear-like attributes with evaluated shapes,
submodules, and the order in which `forward` runs them.

Parsing reuses the rewriter's `SourceView` (one libcst parse, statements with defs/uses/calls),
so mapping and apply agree on what a statement is. On top of it this module adds:
  - linear-like attributes (`nn.Linear(in, out)`, vLLM-style parallel linears, fused expert
    `nn.Parameter(torch.empty(E, ...))`) with their weight dims evaluated from `config.json`
    (a small safe evaluator: config attributes, `self.X` set earlier in `__init__`, constructor
    arguments bound at the instantiation site, + - * //, getattr / config.get with defaults)
    and `--tp`;
  - submodules (`self.mlp = LlamaMLP(config)`, `self.layers = nn.ModuleList([... for ...])`);
  - `flatten(root)`: the calls of one forward pass in evaluation order, each with its path of
    hops (class, method, statement, call), descending into submodules and helper methods.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import libcst as cst

from ..errors import InputError, SourceError
from ..rewrite.source import ClassInfo, Method, SourceView, Stmt, code_of, dotted, parse_view

# constructor name -> how its weight dims follow from its arguments (out, in as [N, K])
COLUMN = {"ColumnParallelLinear", "MergedColumnParallelLinear", "QKVParallelLinear"}
ROW = {"RowParallelLinear"}
PLAIN = {"Linear", "ReplicatedLinear", "LinearBase", "Conv1D"}
LINEARS = COLUMN | ROW | PLAIN
PARAM_CTORS = {"empty", "zeros", "ones", "randn", "rand", "Tensor"}


class MissingKey(Exception):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


class _Unsupported(Exception):
    pass


@dataclass(frozen=True)
class LinearAttr:
    file: str
    cls: str
    attr: str
    ctor: str                    # Linear | QKVParallelLinear | Parameter | ...
    dims: tuple[int, ...] | None  # weight dims as stored per rank ([N, K]; experts [E, ., .])
    error: str = ""              # why dims are unknown (a missing config key, ...)
    missing_key: str = ""
    is_param: bool = False       # fused Parameter: no `.weight`
    line: int = 0

    @property
    def qualname(self) -> str:
        return f"{self.cls}.{self.attr}"


@dataclass(frozen=True)
class Hop:
    cls: str
    method: str
    stmt: int                    # index into Method.stmts
    call: str                    # dotted callee as written, e.g. self.mlp / decoder_layer / F.silu
    line: int


@dataclass(frozen=True)
class Event:
    path: tuple[Hop, ...]        # outermost first; the last hop is this call
    kind: str                    # linear | norm | act | module | func
    owner: str                   # class that owns the called attribute (for self.X calls)
    attr: str                    # X of self.X ('' for functions)
    child: str = ""              # class of the called submodule, when known

    @property
    def leaf(self) -> Hop:
        return self.path[-1]


@dataclass
class ModelSource:
    files: dict[str, SourceView]
    classes: dict[str, tuple[str, ClassInfo]]     # name -> (file, info)
    config: dict[str, Any]
    config_path: str
    tp: int = 1
    linears: dict[tuple[str, str], LinearAttr] = field(default_factory=dict)
    children: dict[tuple[str, str], str] = field(default_factory=dict)   # (cls, attr) -> class
    list_children: set[tuple[str, str]] = field(default_factory=set)     # ModuleList attrs
    ctor_args: dict[str, tuple[list[cst.Arg], str]] = field(default_factory=dict)

    def file_of(self, cls: str) -> str:
        return self.classes[cls][0]

    def method(self, cls: str, name: str) -> Method | None:
        info = self.classes.get(cls)
        while info is not None:
            m = info[1].methods.get(name)
            if m is not None:
                return m
            nxt = None
            for b in info[1].bases:
                if b.split(".")[-1] in self.classes:
                    nxt = self.classes[b.split(".")[-1]]
                    break
            info = nxt
        return None

    def method_owner(self, cls: str, name: str) -> str:
        info = self.classes.get(cls)
        while info is not None:
            if name in info[1].methods:
                return info[1].name
            info = next((self.classes[b.split(".")[-1]] for b in info[1].bases
                         if b.split(".")[-1] in self.classes), None)
        return cls


# ------------------------------------------------------------------------------ loading

def load_config(path: str | Path | None) -> tuple[dict[str, Any], str]:
    if path is None:
        return {}, ""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("model config not found", path=str(p)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"model config is not valid JSON ({exc})", path=str(p)) from None
    if not isinstance(data, dict):
        raise InputError("model config must be a JSON object", path=str(p))
    # multimodal configs nest the language model's sizes
    for sub in ("text_config", "language_config", "llm_config"):
        if isinstance(data.get(sub), dict):
            merged = dict(data[sub])
            merged.update({k: v for k, v in data.items() if k not in merged and k != sub})
            data = merged
            break
    return data, str(p)


def source_files(model_src: str | Path) -> list[Path]:
    p = Path(model_src)
    if p.is_file():
        return [p]
    if p.is_dir():
        files = sorted(x for x in p.rglob("*.py") if "_cannbot_prefetch" not in x.name)
        if not files:
            raise InputError("no Python files in the model source folder", path=str(p))
        return files
    raise InputError("model source not found", path=str(p))


def load_model_source(model_src: str | Path, config: dict[str, Any], config_path: str = "",
                      tp: int = 1) -> ModelSource:
    if tp < 1:
        raise InputError(f"--tp must be at least 1, not {tp}")
    files: dict[str, SourceView] = {}
    classes: dict[str, tuple[str, ClassInfo]] = {}
    for f in source_files(model_src):
        try:
            code = f.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise SourceError("model source is not UTF-8 text", path=str(f)) from None
        try:
            view = parse_view(code)
        except cst.ParserSyntaxError as exc:
            raise SourceError(f"model source does not parse: line {exc.raw_line}: "
                              f"{str(exc).splitlines()[0]}", path=str(f)) from None
        files[str(f)] = view
        for name, info in view.classes.items():
            classes.setdefault(name, (str(f), info))
    ms = ModelSource(files, classes, config, config_path, tp)
    _scan_structure(ms)
    for cls in list(classes):
        _scan_linears(ms, cls)
    return ms


def _callee_name(call: cst.Call) -> str:
    d = dotted(call.func) or ""
    return d.split(".")[-1]


def _assign_value(s: Stmt) -> tuple[str, cst.BaseExpression] | None:
    """`self.X = value` (or annotated) -> (X, value)."""
    node = s.node
    if not isinstance(node, cst.SimpleStatementLine) or len(node.body) != 1:
        return None
    small = node.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target, value = small.targets[0].target, small.value
    elif isinstance(small, cst.AnnAssign) and small.value is not None:
        target, value = small.target, small.value
    else:
        return None
    d = dotted(target) if isinstance(target, cst.Attribute) else None
    if not d or not d.startswith("self.") or d.count(".") != 1:
        return None
    return d[5:], value


def _scan_structure(ms: ModelSource) -> None:
    """Submodules and the argument lists each class is instantiated with."""
    for cname, (_, info) in ms.classes.items():
        init = info.methods.get("__init__")
        if init is None:
            continue
        for s in init.stmts:
            av = _assign_value(s)
            if av is None:
                continue
            attr, value = av
            for call, in_list in _module_calls(value):
                child = _callee_name(call)
                if child in ms.classes:
                    ms.children.setdefault((cname, attr), child)
                    if in_list:
                        ms.list_children.add((cname, attr))
                    ms.ctor_args.setdefault(child, (list(call.args), cname))


def _module_calls(value: cst.BaseExpression) -> Iterator[tuple[cst.Call, bool]]:
    if isinstance(value, cst.Call):
        name = _callee_name(value)
        if name in ("ModuleList", "Sequential") and value.args:
            inner = value.args[0].value
            if isinstance(inner, (cst.ListComp, cst.GeneratorExp)) and isinstance(inner.elt, cst.Call):
                yield inner.elt, True
            elif isinstance(inner, (cst.List, cst.Tuple)):
                for el in inner.elements:
                    if isinstance(el.value, cst.Call):
                        yield el.value, True
            return
        yield value, False
    elif isinstance(value, cst.IfExp):
        yield from _module_calls(value.body)
        yield from _module_calls(value.orelse)


# ------------------------------------------------------------------------------ evaluation

class _Env:
    """Names visible while evaluating an `__init__`: config, self.X, locals, bound arguments."""

    def __init__(self, ms: ModelSource, cls: str):
        self.ms = ms
        self.config = ms.config
        self.self_vals: dict[str, Any] = {}
        self.local: dict[str, Any] = {}
        self.missing: dict[str, str] = {}
        self.config_names = {"config"}
        init = ms.method(cls, "__init__")
        if init is None:
            return
        params = [p for p in init.params if p != "self"]
        # defaults
        fn = init.node
        for p in (*fn.params.params, *fn.params.kwonly_params):
            name = p.name.value
            if p.default is not None:
                try:
                    self.local[name] = self.eval(p.default)
                except Exception:
                    pass
            ann = code_of(p.annotation.annotation) if p.annotation else ""
            if "Config" in ann or name in ("config", "cfg", "model_config"):
                self.config_names.add(name)
        bound = ms.ctor_args.get(cls)
        if bound:
            args, parent = bound
            parent_env = _Env.__new__(_Env)
            parent_env.__dict__.update(ms=ms, config=ms.config, self_vals={}, local={},
                                       missing={}, config_names={"config"})
            parent_env.self_vals = _init_self_values(ms, parent) if parent != cls else {}
            pos = 0
            for a in args:
                if a.star:
                    continue
                name = a.keyword.value if a.keyword else (params[pos] if pos < len(params) else None)
                if a.keyword is None:
                    pos += 1
                if name is None:
                    continue
                if code_of(a.value) in ("config", "self.config"):
                    self.config_names.add(name)
                    continue
                try:
                    self.local[name] = parent_env.eval(a.value)
                except Exception:
                    pass

    def name(self, n: str) -> Any:
        if n in self.local:
            return self.local[n]
        if n in self.missing:
            raise MissingKey(self.missing[n])
        if n in self.config_names:
            return _CONFIG
        if n in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[n]
        raise _Unsupported(n)

    def cfg(self, key: str, default: Any = ...) -> Any:
        if key in self.config and self.config[key] is not None:
            return self.config[key]
        if default is not ...:
            return default
        raise MissingKey(key)

    def eval(self, node: cst.BaseExpression) -> Any:
        if isinstance(node, cst.Integer):
            return int(node.value.replace("_", ""), 0)
        if isinstance(node, cst.Float):
            return float(node.value)
        if isinstance(node, cst.SimpleString):
            return node.evaluated_value
        if isinstance(node, cst.Name):
            return self.name(node.value)
        if isinstance(node, cst.Attribute):
            base = node.value
            if isinstance(base, cst.Name) and base.value == "self":
                attr = node.attr.value
                if attr in self.self_vals:
                    return self.self_vals[attr]
                if attr in self.missing:
                    raise MissingKey(self.missing[attr])
                if attr == "config":
                    return _CONFIG
                raise _Unsupported(f"self.{attr}")
            obj = self.eval(base)
            if obj is _CONFIG:
                return self.cfg(node.attr.value)
            raise _Unsupported(code_of(node))
        if isinstance(node, cst.BinaryOperation):
            a, b = self.eval(node.left), self.eval(node.right)
            op = type(node.operator).__name__
            ops = {"Add": lambda: a + b, "Subtract": lambda: a - b, "Multiply": lambda: a * b,
                   "FloorDivide": lambda: a // b, "Divide": lambda: a / b,
                   "Power": lambda: a ** b, "Modulo": lambda: a % b}
            if op not in ops:
                raise _Unsupported(op)
            return ops[op]()
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
            return -self.eval(node.expression)
        if isinstance(node, (cst.List, cst.Tuple)):
            out = []
            for el in node.elements:
                if isinstance(el, cst.StarredElement):
                    out.extend(self.eval(el.value))
                else:
                    out.append(self.eval(el.value))
            return out
        if isinstance(node, cst.Call):
            return self.call(node)
        if isinstance(node, cst.IfExp):
            return self.eval(node.body) if self.eval(node.test) else self.eval(node.orelse)
        if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
            left, right = self.eval(node.left), self.eval(node.comparisons[0].comparator)
            op = type(node.comparisons[0].operator).__name__
            cmp = {"Equal": left == right, "NotEqual": left != right, "Is": left is right,
                   "IsNot": left is not right}
            if op in cmp:
                return cmp[op]
        if isinstance(node, cst.BooleanOperation):
            left = self.eval(node.left)
            if isinstance(node.operator, cst.Or):
                return left or self.eval(node.right)
            return left and self.eval(node.right)
        raise _Unsupported(code_of(node))

    def call(self, node: cst.Call) -> Any:
        fn = dotted(node.func) or ""
        args = [a for a in node.args if a.keyword is None]
        if fn == "getattr" and len(args) >= 2 and self.eval(args[0].value) is _CONFIG:
            key = self.eval(args[1].value)
            if len(args) > 2:
                try:
                    return self.cfg(key)
                except MissingKey:
                    return self.eval(args[2].value)
            return self.cfg(key)
        if fn.endswith(".get") and args and self.eval(node.func.value) is _CONFIG:  # type: ignore[attr-defined]
            key = self.eval(args[0].value)
            return self.cfg(key, self.eval(args[1].value) if len(args) > 1 else None)
        if fn in ("int", "max", "min", "len", "sum", "divide", "math.ceil", "divide_and_round"):
            vals = [self.eval(a.value) for a in args]
            if fn == "divide":
                return vals[0] // vals[1]
            f = {"int": int, "max": max, "min": min, "len": len, "sum": sum,
                 "math.ceil": math.ceil}.get(fn)
            if f is None:
                raise _Unsupported(fn)
            return f(*vals) if fn not in ("sum", "len") else f(vals[0])
        if fn in ("get_tensor_model_parallel_world_size", "get_tp_group().world_size"):
            return self.ms.tp
        raise _Unsupported(fn)


class _ConfigMarker:
    pass


_CONFIG = _ConfigMarker()


def _init_self_values(ms: ModelSource, cls: str, upto: int | None = None) -> dict[str, Any]:
    env = _Env(ms, cls)
    init = ms.method(cls, "__init__")
    if init is None:
        return {}
    for i, s in enumerate(init.stmts):
        if upto is not None and i >= upto:
            break
        _exec_assign(env, s)
    return env.self_vals


def _exec_assign(env: _Env, s: Stmt) -> None:
    node = s.node
    if not isinstance(node, cst.SimpleStatementLine):
        return
    for small in node.body:
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            target, value = small.targets[0].target, small.value
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            target, value = small.target, small.value
        else:
            continue
        try:
            v = env.eval(value)
        except MissingKey as exc:     # remembered, so a later use names the config key
            d = dotted(target) or ""
            env.missing[d[5:] if d.startswith("self.") else d] = exc.key
            continue
        except (_Unsupported, TypeError, ZeroDivisionError, ValueError):
            continue
        if isinstance(target, cst.Name):
            env.local[target.value] = v
        elif isinstance(target, cst.Attribute):
            d = dotted(target)
            if d and d.startswith("self.") and d.count(".") == 1:
                env.self_vals[d[5:]] = v


def _scan_linears(ms: ModelSource, cls: str) -> None:
    file, info = ms.classes[cls]
    init = info.methods.get("__init__")
    if init is None:
        return
    env = _Env(ms, cls)
    for s in init.stmts:
        av = _assign_value(s)
        if av is not None:
            attr, value = av
            lin = _linear_of(ms, env, file, cls, attr, value, s.start)
            if lin is not None:
                ms.linears[(cls, attr)] = lin
        _exec_assign(env, s)


def _arg(call: cst.Call, pos: int, *names: str) -> cst.BaseExpression | None:
    for a in call.args:
        if a.keyword is not None and a.keyword.value in names:
            return a.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[pos].value if pos < len(positional) else None


def _linear_of(ms: ModelSource, env: _Env, file: str, cls: str, attr: str,
               value: cst.BaseExpression, line: int) -> LinearAttr | None:
    if not isinstance(value, cst.Call):
        return None
    ctor = _callee_name(value)
    tp = ms.tp
    try:
        if ctor in LINEARS:
            if ctor == "QKVParallelLinear":
                h = env.eval(_arg(value, 0, "hidden_size"))
                hd = env.eval(_arg(value, 1, "head_size"))
                heads = env.eval(_arg(value, 2, "total_num_heads"))
                kvn = _arg(value, 3, "total_num_kv_heads")
                kv = env.eval(kvn) if kvn is not None else heads
                out = (heads // tp + 2 * max(kv // tp, 1)) * hd
                dims = (out, h)
            elif ctor == "MergedColumnParallelLinear":
                k = env.eval(_arg(value, 0, "input_size"))
                sizes = env.eval(_arg(value, 1, "output_sizes"))
                dims = (sum(sizes) // tp, k)
            else:
                k = env.eval(_arg(value, 0, "in_features", "input_size"))
                n = env.eval(_arg(value, 1, "out_features", "output_size"))
                if ctor in COLUMN:
                    n //= tp
                elif ctor in ROW:
                    k //= tp
                dims = (n, k)
            return LinearAttr(file, cls, attr, ctor, tuple(int(d) for d in dims), line=line)
        if ctor == "Parameter" and value.args:
            inner = value.args[0].value
            if isinstance(inner, cst.Call) and _callee_name(inner) in PARAM_CTORS:
                dims = tuple(int(env.eval(a.value)) for a in inner.args if a.keyword is None)
                if len(dims) >= 2:
                    return LinearAttr(file, cls, attr, "Parameter", dims, is_param=True, line=line)
        return None
    except MissingKey as exc:
        if ctor in LINEARS or ctor == "Parameter":
            return LinearAttr(file, cls, attr, ctor, None,
                              f"config key '{exc.key}' is missing", exc.key, ctor == "Parameter",
                              line)
        return None
    except (_Unsupported, TypeError, ZeroDivisionError, ValueError, AttributeError) as exc:
        if ctor in LINEARS:
            return LinearAttr(file, cls, attr, ctor, None, f"shape not evaluable ({exc})", line=line)
        return None


# ------------------------------------------------------------------------------ call order

NORM_HINTS = ("norm",)
ACT_HINTS = ("act", "silu", "gelu", "swiglu", "relu")


def _post_order_calls(node: cst.CSTNode) -> list[cst.Call]:
    """Calls of a statement in evaluation order (arguments before the call)."""
    out: list[cst.Call] = []

    class V(cst.CSTVisitor):
        def leave_Call(self, original: cst.Call) -> None:
            out.append(original)

        def visit_Lambda(self, node) -> bool:
            return False

        def visit_FunctionDef(self, node) -> bool:
            return False

    node.visit(V())
    return out


def _stmt_calls(s: Stmt) -> list[cst.Call]:
    if s.header:   # compound statement: only its header parts
        return [c for c in s.calls]
    return _post_order_calls(s.node)


def flatten(ms: ModelSource, root: str, method: str = "forward", *, max_depth: int = 12) -> list[Event]:
    """The calls one `root.method` runs, in order, descending into known submodules."""
    out: list[Event] = []
    _walk_method(ms, root, method, (), out, max_depth, set())
    return out


def _walk_method(ms, cls, method, prefix, out, depth, active) -> None:
    m = ms.method(cls, method)
    key = (cls, method)
    if m is None or depth <= 0 or key in active:
        return
    active = active | {key}
    owner = ms.method_owner(cls, method)
    loop_vars: dict[str, str] = {}
    params = {a: lin for (c, a), lin in _all_linears(ms, cls).items() if lin.is_param}
    params_seen: set[str] = set()
    for i, s in enumerate(m.stmts):
        if params:   # fused expert Parameters are used, not called: the first use runs them
            text = code_of(s.node) if not s.header else " ".join(code_of(c) for c in s.calls)
            for a in params:
                if a not in params_seen and re.search(rf"\bself\.{a}\b", text):
                    params_seen.add(a)
                    out.append(Event(prefix + (Hop(owner, method, i, f"self.{a}", s.start),),
                                     "linear", _attr_owner(ms, cls, a), a))
        if s.header and isinstance(s.node, cst.For):
            var, it = _loop_over(s.node)
            if var and it.startswith("self.") and (cls, it[5:]) in ms.list_children:
                loop_vars[var] = ms.children[(cls, it[5:])]
        for call in _stmt_calls(s):
            d = dotted(call.func) or ""
            hop = Hop(owner, method, i, d, s.start)
            path = prefix + (hop,)
            base = d[: -len(".forward")] if d.endswith(".forward") else d
            if base.startswith("self.") and base.count(".") == 1:
                attr = base[5:]
                if (cls, attr) in _all_linears(ms, cls):
                    out.append(Event(path, "linear", _attr_owner(ms, cls, attr), attr))
                    continue
                child = _child(ms, cls, attr)
                if child:
                    kind = "norm" if "norm" in child.lower() else "module"
                    out.append(Event(path, kind, _attr_owner(ms, cls, attr), attr, child))
                    if kind == "module":
                        _walk_method(ms, child, "forward", path, out, depth - 1, active)
                    continue
                if ms.method(cls, attr) is not None:
                    _walk_method(ms, cls, attr, path, out, depth - 1, active)
                    continue
                kind = "act" if any(h in attr.lower() for h in ACT_HINTS) else \
                    "norm" if "norm" in attr.lower() else "module"
                out.append(Event(path, kind, cls, attr))
            elif base in loop_vars:
                child = loop_vars[base]
                out.append(Event(path, "module", cls, base, child))
                _walk_method(ms, child, "forward", path, out, depth - 1, active)
            else:
                name = d.split(".")[-1].lower()
                kind = "act" if any(h in name for h in ACT_HINTS) else \
                    "norm" if "norm" in name else "func"
                out.append(Event(path, kind, "", d))


def _strip_sub(node: cst.BaseExpression) -> cst.BaseExpression:
    return node.value if isinstance(node, cst.Subscript) else node


def _loop_over(node: cst.For) -> tuple[str | None, str]:
    """(loop variable, iterated attribute) of `for x in self.layers[...]` and
    `for i, x in enumerate(self.layers[...])`."""
    it, target = node.iter, node.target
    if isinstance(it, cst.Call) and (dotted(it.func) or "") == "enumerate" and it.args:
        it = it.args[0].value
        if isinstance(target, cst.Tuple) and len(target.elements) == 2:
            target = target.elements[1].value
    var = target.value if isinstance(target, cst.Name) else None
    return var, dotted(_strip_sub(it)) or ""


def _bases_chain(ms: ModelSource, cls: str) -> list[str]:
    out, todo = [], [cls]
    while todo:
        c = todo.pop(0)
        if c in out or c not in ms.classes:
            continue
        out.append(c)
        todo.extend(b.split(".")[-1] for b in ms.classes[c][1].bases)
    return out


def _all_linears(ms: ModelSource, cls: str) -> dict[tuple[str, str], LinearAttr]:
    out = {}
    for c in _bases_chain(ms, cls):
        for (k, a), v in ms.linears.items():
            if k == c:
                out[(cls, a)] = v
    return out


def _attr_owner(ms: ModelSource, cls: str, attr: str) -> str:
    for c in _bases_chain(ms, cls):
        if (c, attr) in ms.linears or (c, attr) in ms.children:
            return c
        info = ms.classes[c][1]
        if attr in info.attrs:
            return c
    return cls


def _child(ms: ModelSource, cls: str, attr: str) -> str | None:
    for c in _bases_chain(ms, cls):
        if (c, attr) in ms.children:
            return ms.children[(c, attr)]
    return None


def roots(ms: ModelSource) -> list[str]:
    """Classes with a forward that no other class instantiates; CausalLM-like ones first."""
    used = set(ms.children.values())
    out = [c for c in ms.classes if c not in used and ms.method(c, "forward") is not None]
    out.sort(key=lambda c: (not c.endswith("ForCausalLM"), -len(flatten(ms, c))))
    return out
