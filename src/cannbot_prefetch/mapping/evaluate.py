"""A small, safe evaluator for the shapes of linear-like attributes in a model's `__init__`.

Names it understands: `config.X` (and any constructor parameter annotated as a config),
`getattr(config, "X", default)`, `config.get("X", default)`, `self.X` assigned earlier in the
same `__init__`, constructor arguments bound at the class's instantiation site, literals,
`+ - * // / % **`, `int/min/max/sum/len`, conditional expressions and comparisons. Anything else
is "not evaluable" (never executed). A missing config key is remembered and named when used.
Linear-like: `nn.Linear(in, out)`, vLLM `ColumnParallelLinear` / `MergedColumnParallelLinear` /
`QKVParallelLinear` (out / tp) / `RowParallelLinear` (in / tp) / `ReplicatedLinear`, and
`nn.Parameter(torch.empty(E, ...))` (fused experts, routers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import libcst as cst

from ..pysource import Stmt, code_of, dotted
from .roles import name_role, tp_split

if TYPE_CHECKING:  # pragma: no cover
    from .source import ModelSource

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


# Bounds on what model source may make the evaluator compute (it reads untrusted files): a
# shape is far below 2**64 and a config list far below 100k items, while `2 ** 2 ** 36` or
# `"a" * 10 ** 10` would take minutes and gigabytes. Beyond them a value is "not evaluable".
MAX_INT = 2**64
MAX_LEN = 100_000
MAX_EXP_BITS = 64
# what an evaluation may raise on odd source: the attribute is then "not evaluable"
EVAL_ERRORS = (_Unsupported, TypeError, ArithmeticError, ValueError, AttributeError, KeyError,
               IndexError, RecursionError)


def _bounded(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and not -MAX_INT <= value <= MAX_INT:
        raise _Unsupported(f"an integer of {value.bit_length()} bits")
    if isinstance(value, float) and not math.isfinite(value):
        raise _Unsupported(f"{value}")
    if isinstance(value, (str, list, tuple)) and len(value) > MAX_LEN:
        raise _Unsupported(f"a sequence of {len(value)} items")
    return value


def _power(a: Any, b: Any) -> Any:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        if abs(a) > 1 and b > 0 and b * math.log2(abs(a)) > MAX_EXP_BITS:
            raise _Unsupported(f"{a} ** {b} is too large")
    return a ** b


def _times(a: Any, b: Any) -> Any:
    for seq, n in ((a, b), (b, a)):
        if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * max(n, 0) > MAX_LEN:
            raise _Unsupported(f"a sequence of {len(seq)} x {n} items")
    return a * b


def _modulo(a: Any, b: Any) -> Any:
    if isinstance(a, str):      # `"%0999999999d" % 1` formats a gigabyte; shapes never need it
        raise _Unsupported("string formatting")
    return a % b


def _plus(a: Any, b: Any) -> Any:
    if isinstance(a, (str, list, tuple)) and isinstance(b, (str, list, tuple)) \
            and len(a) + len(b) > MAX_LEN:
        raise _Unsupported(f"a sequence of {len(a) + len(b)} items")
    return a + b


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
        return _bounded(self._eval(node))

    def _eval(self, node: cst.BaseExpression) -> Any:
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
            ops = {"Add": lambda: _plus(a, b), "Subtract": lambda: a - b,
                   "Multiply": lambda: _times(a, b), "FloorDivide": lambda: a // b,
                   "Divide": lambda: a / b, "Power": lambda: _power(a, b),
                   "Modulo": lambda: _modulo(a, b)}
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
        except EVAL_ERRORS:
            continue
        if isinstance(target, cst.Name):
            env.local[target.value] = v
        elif isinstance(target, cst.Attribute):
            d = dotted(target)
            if d and d.startswith("self.") and d.count(".") == 1:
                env.self_vals[d[5:]] = v


def scan_linears(ms: ModelSource, cls: str) -> None:
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


def _head_dim(cfg: dict[str, Any]) -> int | None:
    hd = cfg.get("head_dim")
    if isinstance(hd, int) and hd > 0:
        return hd
    h, heads = cfg.get("hidden_size"), cfg.get("num_attention_heads")
    return h // heads if isinstance(h, int) and isinstance(heads, int) and heads > 0 else None


def shard_linear(cfg: dict[str, Any], attr: str, n: int, k: int, tp: int) -> tuple[int, int]:
    """A Hugging Face nn.Linear's [out, in] on one of `tp` ranks (roles.py: column-parallel
    q/k/v/gate/up/lm_head split out, row-parallel o/down split in). K/V projections keep at least
    one head per rank: with fewer KV heads than ranks each rank holds a replica."""
    role = name_role(attr)
    split = tp_split(role)
    if split == "column":
        hd = _head_dim(cfg) if role in ("k", "v") else None
        return (max(n // tp, hd) if hd and n >= hd else n // tp), k
    if split == "row":
        return n, k // tp
    return n, k


def shard_experts(cfg: dict[str, Any], attr: str, dims: tuple[int, ...], moe_tp: int
                  ) -> tuple[int, ...]:
    """A fused 3-D expert Parameter on one of `moe_tp` ranks: gate_up [E, 2I, H] splits 2I,
    down [E, H, I] splits I. Only a dim equal to the model's full intermediate size is split, so a
    source that already sizes its experts per partition (vLLM) is left as it is."""
    inter = cfg.get("moe_intermediate_size") or cfg.get("intermediate_size")
    if not isinstance(inter, int) or inter <= 0:
        return dims
    role = name_role(attr)
    e, a, b = dims
    if tp_split(role) == "column" and a in (inter, 2 * inter):
        return e, a // moe_tp, b
    if tp_split(role) == "row" and b == inter:
        return e, a, b // moe_tp
    return dims


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
                elif tp > 1 and ctor == "Linear":   # HF nn.Linear in a TP deployment: by role
                    n, k = shard_linear(ms.config, attr, int(n), int(k), tp)
                dims = (n, k)
            return LinearAttr(file, cls, attr, ctor, tuple(int(d) for d in dims), line=line)
        if ctor == "Parameter" and value.args:
            inner = value.args[0].value
            if isinstance(inner, cst.Call) and _callee_name(inner) in PARAM_CTORS:
                dims = tuple(int(env.eval(a.value)) for a in inner.args if a.keyword is None)
                if len(dims) == 3 and ms.moe_tp > 1:
                    dims = shard_experts(ms.config, attr, dims, ms.moe_tp)
                if len(dims) >= 2:
                    return LinearAttr(file, cls, attr, "Parameter", dims, is_param=True, line=line)
        return None
    except MissingKey as exc:
        if ctor in LINEARS or ctor == "Parameter":
            return LinearAttr(file, cls, attr, ctor, None,
                              f"config key '{exc.key}' is missing", exc.key, ctor == "Parameter",
                              line)
        return None
    except EVAL_ERRORS as exc:
        if ctor in LINEARS:
            return LinearAttr(file, cls, attr, ctor, None, f"shape not evaluable ({exc})", line=line)
        return None


