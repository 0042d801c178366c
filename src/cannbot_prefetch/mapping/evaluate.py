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
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import libcst as cst

from ..pysource import Stmt, code_of, dotted
from ..roofline.shapes import dtype_bytes
from .roles import name_role, tp_split

if TYPE_CHECKING:  # pragma: no cover
    from .source import ModelSource

# constructor name -> how its weight dims follow from its arguments (out, in as [N, K])
COLUMN = {"ColumnParallelLinear", "MergedColumnParallelLinear", "QKVParallelLinear"}
ROW = {"RowParallelLinear"}
PLAIN = {"Linear", "ReplicatedLinear", "LinearBase", "Conv1D"}
LINEARS = COLUMN | ROW | PLAIN
PARAM_CTORS = {"empty", "zeros", "ones", "randn", "rand", "Tensor"}
# fused-MoE layers whose class is not in the source (vLLM FusedMoE, cann-recipes FusedMoEGMM):
# their weights by name, [E, 2*I/tp, H] and [E, H, I/tp] (REFERENCE.md §7)
FUSED_MOE = {"FusedMoE", "FusedMoEGMM", "SharedFusedMoE"}


def bind_args(args, params: list[str]):
    """(parameter name, argument) of a call's arguments: keywords by name, positionals in the
    order of `params`; `*args` / `**kw` and positionals beyond `params` are skipped."""
    pos = 0
    for a in args:
        if a.star:
            continue
        name = a.keyword.value if a.keyword else (params[pos] if pos < len(params) else None)
        if a.keyword is None:
            pos += 1
        if name is not None:
            yield name, a


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
    dtype_bytes: float | None = None   # as declared (`params_dtype=torch.float32`), if it is

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


@dataclass
class _LayerConfig:
    """One layer's view of a per-layer override map: its overrides, else the model's keys."""
    overrides: dict


class _Env:
    """Names visible while evaluating an `__init__`: config, self.X, locals, bound arguments."""

    def __init__(self, ms: ModelSource, cls: str, depth: int = 0, site=None):
        self.ms = ms
        self.cls = cls
        self.nulls: list[str] = []
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
        if ms.layer_index is not None:       # scan_linears' per-layer pass
            for p in params:
                if LAYER_INDEX.fullmatch(p):
                    self.local[p] = ms.layer_index
        bound = site or ms.ctor_args.get(cls)
        if bound:
            args, parent = bound
            # the arguments are evaluated where the class is instantiated: the parent's
            # __init__ (its locals and self.X included: `self.mlp = MLP(inner_dim, config)`)
            parent_env = _init_env(ms, parent, depth + 1) if parent != cls and depth < 8 else None
            if parent_env is None:
                parent_env = _Env.__new__(_Env)
                parent_env.__dict__.update(ms=ms, cls=parent, config=ms.config, self_vals={},
                                           local={}, missing={}, config_names={"config"},
                                           nulls=[])
            for name, a in bind_args(args, params):
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
        if key in self.config:
            if self.config[key] is None:
                self.nulls.append(key)
            return self.config[key]
        alias = self.ms.attribute_map.get(key)     # hidden_size -> n_embd (gpt_bigcode)
        if alias and self.config.get(alias) is not None:
            return self.config[alias]
        if default is not ...:
            return default
        raise MissingKey(key if not alias else f"{key}' (or '{alias}")

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
            if isinstance(obj, _LayerConfig):      # an override, else the model's config
                a = node.attr.value
                return obj.overrides[a] if a in obj.overrides else self.cfg(a)
            if isinstance(obj, dict) and node.attr.value in obj:   # a sub-config of config.json
                return obj[node.attr.value]
            raise _Unsupported(code_of(node))
        if isinstance(node, cst.Subscript) and len(node.slice) == 1 and \
                isinstance(node.slice[0].slice, cst.Index):
            # `config.layer_types[layer_idx]`: a per-layer value (scan_linears' per-layer pass)
            obj, key = self.eval(node.value), self.eval(node.slice[0].slice.value)
            if isinstance(obj, dict) and isinstance(key, int) and obj and \
                    all(isinstance(k, str) and k.isdigit() for k in obj):
                # per-layer overrides keyed by layer index (`per_layer_config: {"05": {...}}`)
                return _LayerConfig(next((v for k, v in obj.items() if int(k) == key), None) or {})
            try:
                return obj[key]
            except (TypeError, KeyError, IndexError):
                raise _Unsupported(code_of(node)) from None
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
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            return not self.eval(node.expression)
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
            cmp = {"Equal": lambda: left == right, "NotEqual": lambda: left != right,
                   "Is": lambda: left is right, "IsNot": lambda: left is not right,
                   "LessThan": lambda: left < right, "GreaterThan": lambda: left > right,
                   "LessThanEqual": lambda: left <= right,
                   "GreaterThanEqual": lambda: left >= right,
                   "In": lambda: left in right, "NotIn": lambda: left not in right}
            if op in cmp:
                return cmp[op]()
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


def _init_env(ms: ModelSource, cls: str, depth: int = 0, site_key=None) -> _Env | None:
    """The names a class's whole __init__ leaves behind (locals and self.X), once per class
    (per instantiation site with `site_key` = (parent class, attr))."""
    cache = ms.init_envs
    key = (cls, site_key)
    if key in cache:
        return cache[key]
    cache[key] = None                     # a cycle of instantiations stops here
    site = ms.ctor_sites.get((site_key[0], site_key[1], cls)) if site_key else None
    env = _Env(ms, cls, depth, site)
    init = ms.method(cls, "__init__")
    for s in init.stmts if init is not None else []:
        _exec_assign(env, s)
    cache[key] = env
    return env


def derived_attrs(ms: ModelSource, cls: str) -> dict[str, Any]:
    """`self.X` a config class's __init__ sets, its parameters bound from the config."""
    env = _Env.__new__(_Env)
    env.__dict__.update(ms=ms, cls=cls, config=ms.config, self_vals={}, local={}, missing={},
                        config_names=set(), nulls=[])
    init = ms.method(cls, "__init__")
    for p in (*init.node.params.params, *init.node.params.kwonly_params):
        name = p.name.value
        if name in ms.config:
            env.local[name] = ms.config[name]
        elif p.default is not None:
            try:
                env.local[name] = env.eval(p.default)
            except Exception:
                pass
    for s in init.stmts:
        _exec_assign(env, s)
    return env.self_vals


def _phase_names(test: cst.BaseExpression, switch: str = "enable_prefetch") -> dict[str, bool]:
    """The plan is for decode inference with the prefetch switch on: a flag named for the phase
    (`is_prefill`, `prefill`, `is_decode`), `training` and the switch have those values."""
    out: dict[str, bool] = {}

    class V(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            low = node.value.lower()
            if node.value == switch:
                out[node.value] = True
            elif "prefill" in low:
                out[node.value] = False
            elif "decode" in low and "encode" not in low:
                out[node.value] = True
            elif low == "training":
                out[node.value] = False

    test.visit(V())
    return out


def static_truth(ms: ModelSource, cls: str, site_key, test: cst.BaseExpression) -> bool | None:
    """The value of a condition that only reads the instance's __init__ values, the config and
    the decode-inference phase (`if self.is_cross_attention:`, `if is_prefill:`), or None when
    it depends on anything else. Attributes a parent sets after construction are not seen."""
    base = _init_env(ms, cls, 0, site_key)
    if base is None:
        return None
    env = _Env.__new__(_Env)
    env.__dict__.update(base.__dict__)
    phase = _phase_names(test, ms.switch_name)
    env.local = {**phase, **base.local}
    env.self_vals = {**phase, **base.self_vals}
    env.nulls = []
    try:
        v = env.eval(test)
    except (MissingKey, *EVAL_ERRORS):
        return None
    if isinstance(v, (bool, int, float, str, type(None))):
        return bool(v)
    return None


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


LAYER_INDEX = re.compile(r"layer_(idx|id|index|number|num)")
LAYER_COUNT_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "decoder_layers")


def scan_linears(ms: ModelSource, cls: str) -> None:
    file, info = ms.classes[cls]
    init = info.methods.get("__init__")
    if init is None:
        return
    found = _scan_once(ms, cls, file, init)
    ms.linears.update(found)
    unknown = [k for k, lin in found.items() if lin.dims is None]
    if unknown and ms.layer_index is None and _layer_indexed(ms):
        for k, lin in _per_layer(ms, cls, file, init, unknown).items():
            ms.linears[k] = lin


def _layer_indexed(ms: ModelSource) -> bool:
    """Whether any constructor in the source takes a layer index (its shapes may then be read
    per layer, by it or by a submodule it hands a per-layer value to)."""
    if ms.layer_indexed is None:
        ms.layer_indexed = any(LAYER_INDEX.fullmatch(p) for _, info in ms.classes.values()
                               for p in (info.methods["__init__"].params
                                         if "__init__" in info.methods else ()))
    return ms.layer_indexed


def _per_layer(ms: ModelSource, cls: str, file: str, init, unknown) -> dict:
    """Shapes read per layer (`config.layer_types[layer_idx]`, a per-layer head count handed
    down by the decoder layer): evaluated for every layer index; a weight whose shape every
    layer gives is sized by its smallest instance, so one max_size fits each layer's weight."""
    n = next((ms.config[k] for k in LAYER_COUNT_KEYS if isinstance(ms.config.get(k), int)), None)
    if not n or n < 1:
        return {}
    saved = ms.init_envs
    per: dict = {k: [] for k in unknown}
    try:
        for i in range(min(n, 512)):
            ms.layer_index, ms.init_envs = i, {}
            got = _scan_once(ms, cls, file, init)
            for k in unknown:
                if k in got and got[k].dims is not None:
                    per[k].append(got[k])
    finally:
        ms.layer_index, ms.init_envs = None, saved
    return {k: min(v, key=lambda lin: math.prod(lin.dims)) for k, v in per.items()
            if len(v) == min(n, 512)}


def _scan_once(ms: ModelSource, cls: str, file: str, init) -> dict:
    out: dict = {}
    env = _Env(ms, cls)
    for s in init.stmts:
        av = _assign_value(s)
        if av is not None:
            attr, value = av
            if isinstance(value, cst.Call) and _callee_name(value) in FUSED_MOE \
                    and _callee_name(value) not in ms.classes:
                for lin in _fused_moe(ms, env, file, cls, attr, value, s.start):
                    out[(cls, lin.attr)] = lin
            else:
                lin = _linear_of(ms, env, file, cls, attr, value, s.start)
                if lin is not None:
                    out[(cls, attr)] = lin
        for name, value, where in _registered(s, env):
            lin = _linear_of(ms, where, file, cls, name, value, s.start)
            if lin is not None:
                out[(cls, name)] = lin
        _exec_assign(env, s)
    return out


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


def _registered(s: Stmt, env: "_Env") -> list[tuple[str, cst.BaseExpression, "_Env"]]:
    """Weights a statement registers on this module: `self.register_parameter("w", P)`, and
    those a quantisation method registers on it (`self.quant_method.create_weights(self, ...)`
    whose body calls `layer.register_parameter("w", P)`)."""
    out: list[tuple[str, cst.BaseExpression, _Env]] = []
    node = s.node
    if not isinstance(node, cst.SimpleStatementLine) or s.header:
        return out
    for small in node.body:
        call = small.value if isinstance(small, cst.Expr) else None
        if not isinstance(call, cst.Call):
            continue
        d = dotted(call.func) or code_of(call.func)
        if d == "self.register_parameter" and len(call.args) >= 2:
            name = call.args[0].value
            if isinstance(name, cst.SimpleString) and name.evaluated_value.isidentifier():
                out.append((name.evaluated_value, call.args[1].value, env))
        elif d.endswith(".create_weights") or d == "create_weights":
            out += _created_weights(env, call)
    return out


def _created_weights(env: "_Env", call: cst.Call) -> list[tuple[str, cst.BaseExpression, "_Env"]]:
    """`layer.register_parameter(...)` inside the create_weights the call reaches, with the
    callee's parameters bound to the call's values (evaluated here) and its locals followed."""
    ms = env.ms
    holder = dotted(call.func.value) if isinstance(call.func, cst.Attribute) else None
    classes = _method_holders(env, holder)
    for k in classes:
        m = ms.method(k, "create_weights")
        if m is None:
            continue
        params = [p for p in m.params if p != "self"]
        sub = _Env(ms, k)
        sub.self_vals, sub.local, sub.missing = {}, {}, {}
        layer_name = None
        for name, a in bind_args(call.args, params):
            if code_of(a.value) == "self":
                layer_name = name
                continue
            try:
                sub.local[name] = env.eval(a.value)
            except (MissingKey, *EVAL_ERRORS):
                pass
        if layer_name is None:
            continue
        out = []
        exprs: dict[str, cst.BaseExpression] = {}
        for st in m.stmts:
            node = st.node
            if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 and \
                    isinstance(node.body[0], cst.Expr) and isinstance(node.body[0].value, cst.Call):
                c = node.body[0].value
                if (dotted(c.func) or "") == f"{layer_name}.register_parameter" and len(c.args) >= 2:
                    nm = c.args[0].value
                    val = c.args[1].value
                    if isinstance(val, cst.Name) and val.value in exprs:
                        val = exprs[val.value]
                    if isinstance(nm, cst.SimpleString) and nm.evaluated_value.isidentifier():
                        out.append((nm.evaluated_value, val, sub))
                        continue
            b = _local_assign(st)
            if b is not None:
                exprs[b[0]] = b[1]
            _exec_assign(sub, st)
        if out:
            return out
    return []


def _local_assign(s: Stmt) -> tuple[str, cst.BaseExpression] | None:
    node = s.node
    if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 and \
            isinstance(node.body[0], cst.Assign) and len(node.body[0].targets) == 1 and \
            isinstance(node.body[0].targets[0].target, cst.Name):
        return node.body[0].targets[0].target.value, node.body[0].value
    return None


def _method_holders(env: "_Env", holder: str | None) -> list[str]:
    """Classes `self.quant_method` may hold: every `self.quant_method = Cls(...)` in __init__
    of a class in the source (the unquantised branch is as good a shape source as any)."""
    ms = env.ms
    if not holder or not holder.startswith("self.") or holder.count(".") != 1:
        return []
    attr = holder[5:]
    out = []
    for c, info in ((c, ms.classes[c][1]) for c in [env.cls] if c in ms.classes):
        for st in info.attrs.get(attr, []):
            for call in _calls_in(st.node):
                n = _callee_name(call)
                if n in ms.classes and n not in out:
                    out.append(n)
    return out


def _calls_in(node: cst.CSTNode) -> list[cst.Call]:
    out: list[cst.Call] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            out.append(n)

    node.visit(V())
    return out


def _fused_moe(ms, env, file, cls, attr, call, line) -> list[LinearAttr]:
    """vLLM FusedMoE / FusedMoEGMM known by name: `<attr>.w13_weight`, `<attr>.w2_weight`."""
    try:
        e = env.eval(_arg(call, 0, "num_experts"))
        h = env.eval(_arg(call, 2, "hidden_size"))
        i = env.eval(_arg(call, 3, "intermediate_size"))
        tp_node = _arg(call, 99, "tp_size")
        ep_node = _arg(call, 99, "ep_size")
        tp = env.eval(tp_node) if tp_node is not None else ms.moe_tp
        ep = env.eval(ep_node) if ep_node is not None else 1
        e, ip = int(e) // max(int(ep), 1), int(i) // max(int(tp), 1)
        dims13, dims2, err, key = (e, 2 * ip, int(h)), (e, int(h), ip), "", ""
    except MissingKey as exc:
        dims13 = dims2 = None
        err, key = f"config key '{exc.key}' is missing", exc.key
    except EVAL_ERRORS as exc:
        dims13 = dims2 = None
        err, key = f"shape not evaluable ({exc})", ""
    return [LinearAttr(file, cls, f"{attr}.w13_weight", "FusedMoE", dims13, err, key, True, line),
            LinearAttr(file, cls, f"{attr}.w2_weight", "FusedMoE", dims2, err, key, True, line)]


def _declared_dtype(env: "_Env", *calls: cst.Call) -> float | None:
    """Bytes per element of `params_dtype=torch.float32` / `dtype=...` when the source says."""
    for call in calls:
        node = _arg(call, 99, "params_dtype", "dtype")
        if node is None:
            continue
        name = (dotted(node) or "").split(".")[-1]
        if dtype_bytes(name) is None:
            try:
                v = env.eval(node)
                name = str(v).split(".")[-1] if v is not None else ""
            except Exception:
                name = ""
        if name and dtype_bytes(name) is not None:
            return float(dtype_bytes(name))
    return None


def _arg(call: cst.Call, pos: int, *names: str) -> cst.BaseExpression | None:
    for a in call.args:
        if a.keyword is not None and a.keyword.value in names:
            return a.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[pos].value if pos < len(positional) else None


def _chosen(env: _Env, value: cst.BaseExpression) -> cst.BaseExpression:
    """`Linear(...) if self.q_lora_rank is not None else None`: the branch the config selects,
    else (undecidable) the branch that builds something."""
    while isinstance(value, cst.IfExp):
        try:
            value = value.body if env.eval(value.test) else value.orelse
        except Exception:
            value = value.body if isinstance(value.body, (cst.Call, cst.IfExp)) else value.orelse
    return value


def linear_kind(ms: ModelSource, name: str, depth: int = 0) -> str | None:
    """The known layer a constructor name is, through the source's own subclasses
    (`class FalconLinear(nn.Linear)` builds like nn.Linear)."""
    if name in LINEARS:
        return name
    if depth > 4 or name not in ms.classes:
        return None
    for b in ms.classes[name][1].bases:
        got = linear_kind(ms, b.split(".")[-1], depth + 1)
        if got is not None:
            return got
    return None


def _base_init_call(ms: ModelSource, env: _Env, parent: str, call: cst.Call
                    ) -> tuple[cst.Call, _Env]:
    """A subclass of a known layer with its own __init__ (`class Router(nn.Linear)` calling
    `super().__init__(config.hidden_size, config.num_experts)`): the base's constructor call,
    with the subclass's parameters bound to `call`'s arguments; else `call` itself."""
    name = _callee_name(call)
    init = ms.method(name, "__init__") if name in ms.classes else None
    if init is None or init.node is None:
        return call, env
    sub = _Env(ms, name, site=(list(call.args), parent))
    for st in init.stmts:
        for c in _calls_in(st.node):
            f = code_of(c.func)
            if f == "super().__init__" or (f.endswith(".__init__") and c.args
                                           and code_of(c.args[0].value) == "self"):
                args = c.args if f == "super().__init__" else c.args[1:]
                return c.with_changes(args=args), sub
        _exec_assign(sub, st)
    return call, env


def _linear_of(ms: ModelSource, env: _Env, file: str, cls: str, attr: str,
               value: cst.BaseExpression, line: int) -> LinearAttr | None:
    value = _chosen(env, value)
    if not isinstance(value, cst.Call):
        return None
    ctor = linear_kind(ms, _callee_name(value)) or _callee_name(value)
    if ctor in LINEARS and _callee_name(value) != ctor:
        value, env = _base_init_call(ms, env, cls, value)
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
            return LinearAttr(file, cls, attr, ctor, tuple(int(d) for d in dims), line=line,
                              dtype_bytes=_declared_dtype(env, value))
        if ctor == "Parameter" and value.args:
            inner = value.args[0].value
            if isinstance(inner, cst.Call) and _callee_name(inner) in PARAM_CTORS:
                vals = [env.eval(a.value) for a in inner.args if a.keyword is None]
                if len(vals) == 1 and isinstance(vals[0], (list, tuple)):
                    vals = list(vals[0])
                dims = tuple(int(v) for v in vals)
                if len(dims) == 3 and ms.moe_tp > 1:
                    dims = shard_experts(ms.config, attr, dims, ms.moe_tp)
                if len(dims) >= 2:
                    return LinearAttr(file, cls, attr, "Parameter", dims, is_param=True, line=line,
                                      dtype_bytes=_declared_dtype(env, inner, value))
        return None
    except MissingKey as exc:
        if ctor in LINEARS or ctor == "Parameter":
            return LinearAttr(file, cls, attr, ctor, None,
                              f"config key '{exc.key}' is missing", exc.key, ctor == "Parameter",
                              line)
        return None
    except EVAL_ERRORS as exc:
        if ctor in LINEARS or (ctor == "Parameter" and env.nulls):
            why = (f"config key '{env.nulls[-1]}' is null" if env.nulls and
                   isinstance(exc, TypeError) else f"shape not evaluable ({exc})")
            return LinearAttr(file, cls, attr, ctor, None, why, env.nulls[-1] if env.nulls
                              and isinstance(exc, TypeError) else "", ctor == "Parameter",
                              line=line)
        return None


