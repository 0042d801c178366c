"""The evaluator: the names visible while evaluating a class's `__init__` (config keys, `self.X`
assigned earlier, locals, arguments bound at the instantiation site) and the expressions it
understands. Nothing is ever executed; anything else raises `Unsupported`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import libcst as cst

from ...pysource import Stmt, code_of, dotted
from ..init_body import init_statements
from .bounds import EVAL_ERRORS, MissingKey, Unsupported, bounded, modulo, plus, power, times
from .functions import call_helper

if TYPE_CHECKING:  # pragma: no cover
    from ..source import ModelSource

# a constructor parameter that carries the layer's index (`layer_idx`, `layer_number`, ...)
LAYER_INDEX = re.compile(r"layer_(idx|id|index|number|num)")
# where a serving engine keeps the model's config.json (vLLM `vllm_config.model_config.hf_config`,
# `.hf_text_config` for multimodal wrappers; SGLang passes `config` itself)
HF_CONFIG_ATTRS = frozenset({"hf_config", "hf_text_config"})
# transformers' PreTrainedConfig.per_layer_config: a sparse mapping from a layer index to the
# keys that layer overrides (transformers 5 configuration_utils); a layer it omits keeps the
# model's keys
PER_LAYER_KEY = "per_layer_config"


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


@dataclass
class _LayerConfig:
    """One layer's view of a per-layer override map: its overrides, else the model's keys."""
    overrides: dict


class Env:
    """Names visible while evaluating an `__init__`: config, self.X, locals, bound arguments."""

    def __init__(self, ms: ModelSource, cls: str, depth: int = 0, site=None):
        self.ms = ms
        self.cls = cls
        self.nulls: list[str] = []
        self.config = ms.config
        self.self_vals: dict[str, Any] = {}
        self.local: dict[str, Any] = {}
        self.missing: dict[str, str] = {}
        self.unknown: dict[str, str] = {}   # self.X assigned a value it could not evaluate: why
        self.config_names = {"config"}
        self.dead: set[int] = set()      # statements of branches the config does not take
        init = ms.method(cls, "__init__")
        if init is None:
            return
        params = [p for p in init.params if p != "self"]
        # defaults
        fn = init.node
        from_default: set[str] = set()
        for p in (*fn.params.params, *fn.params.kwonly_params):
            name = p.name.value
            ann = code_of(p.annotation.annotation) if p.annotation else ""
            if ms.serving.is_quant_config(ann):
                # the checkpoint's quantization config, not the model's: None for a checkpoint
                # whose config.json has no `quantization_config` (vLLM's loader), else unread
                if "quantization_config" not in ms.config:
                    self.local[name] = None
                else:
                    self.__dict__.setdefault("failed", {})[name] = (
                        "the checkpoint's quantization config (config.json "
                        "`quantization_config`) is not read")
                continue
            if "Config" in ann or name in ("config", "cfg", "model_config"):
                self.config_names.add(name)
            if p.default is not None and not (name in self.config_names
                                              and code_of(p.default) == "None"):
                try:     # (`config: LlamaConfig | None = None` is still the model's config)
                    self.local[name] = self.eval(p.default)
                    from_default.add(name)
                except Exception:
                    pass
        if ms.layer_index is not None:       # scan_linears' per-layer pass
            for p in params:
                if LAYER_INDEX.fullmatch(p):
                    self.local[p] = ms.layer_index
                    from_default.discard(p)
        bound = site or ms.ctor_args.get(cls)
        self.site = bound                # (arguments, parent class) this instance is built with
        if bound:
            args, parent = bound
            # the arguments are evaluated where the class is instantiated: the parent's
            # __init__ (its locals and self.X included: `self.mlp = MLP(inner_dim, config)`)
            parent_env = init_env(ms, parent, depth + 1) if parent != cls and depth < 8 else None
            if parent_env is None:
                parent_env = Env.__new__(Env)
                parent_env.__dict__.update(ms=ms, cls=parent, config=ms.config, self_vals={},
                                           local={}, missing={}, config_names={"config"},
                                           nulls=[], dead=set())
            for name, a in bind_args(args, params):
                if code_of(a.value) in ("config", "self.config"):
                    # the parent's config may itself be a sub-config it was handed
                    # (`BltLocalEncoder(config.encoder_config)` -> `BltTransformerLayer(config)`)
                    sub = parent_env.local.get("config") if code_of(a.value) == "config" \
                        else parent_env.self_vals.get("config")
                    if isinstance(sub, dict):
                        self.local[name] = sub
                    else:
                        self.config_names.add(name)
                    continue
                try:
                    self.local[name] = parent_env.eval(a.value)
                except Exception as exc:
                    # passed but not evaluable: the default is not its value
                    # (`if x is None:` must not pick the default's branch)
                    if name in from_default:
                        del self.local[name]
                    if isinstance(exc, MissingKey):   # a use names the key the config lacks
                        self.missing[name] = exc.key

    def name(self, n: str) -> Any:
        if n in self.local:
            return self.local[n]
        if n in self.missing:
            raise MissingKey(self.missing[n])
        failed = self.__dict__.get("failed")      # a helper's local it could not evaluate
        if failed and n in failed:
            raise Unsupported(f"{n}: {failed[n]}")
        if n in self.config_names:
            return _CONFIG
        if n in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[n]
        raise Unsupported(n)

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
        return bounded(self._eval(node))

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
            if node.attr.value in HF_CONFIG_ATTRS:   # vLLM: vllm_config.model_config.hf_config
                return _CONFIG
            base = node.value
            if isinstance(base, cst.Name) and base.value == "self" and \
                    "helper_file" not in self.__dict__:     # a plain helper has no self
                attr = node.attr.value
                if attr in self.self_vals:
                    return self.self_vals[attr]
                if attr in self.missing:
                    raise MissingKey(self.missing[attr])
                if attr == "config":
                    return _CONFIG
                why = getattr(self, "unknown", {}).get(attr)
                raise Unsupported(f"self.{attr}: {why}" if why else f"self.{attr}")
            obj = self.eval(base)
            if obj is _CONFIG and node.attr.value == PER_LAYER_KEY:
                # sparse per-layer overrides: absent or null, no layer overrides anything
                return self.cfg(PER_LAYER_KEY, None) or {}
            if obj is _CONFIG:
                return self.cfg(node.attr.value)
            if isinstance(obj, _LayerConfig):      # an override, else the model's config
                a = node.attr.value
                return obj.overrides[a] if a in obj.overrides else self.cfg(a)
            if isinstance(obj, dict) and node.attr.value in obj:   # a sub-config of config.json
                return obj[node.attr.value]
            raise Unsupported(code_of(node))
        if isinstance(node, cst.Subscript) and len(node.slice) == 1 and \
                isinstance(node.slice[0].slice, cst.Index):
            # `config.layer_types[layer_idx]`: a per-layer value (scan_linears' per-layer pass)
            obj, key = self.eval(node.value), self.eval(node.slice[0].slice.value)
            if isinstance(obj, dict) and isinstance(key, int) and \
                    (obj or code_of(node.value).endswith("." + PER_LAYER_KEY)) and \
                    all(isinstance(k, str) and k.isdigit() for k in obj):
                # per-layer overrides keyed by layer index (`per_layer_config: {"05": {...}}`)
                return _LayerConfig(next((v for k, v in obj.items() if int(k) == key), None) or {})
            try:
                return obj[key]
            except (TypeError, KeyError, IndexError):
                raise Unsupported(code_of(node)) from None
        if isinstance(node, cst.BinaryOperation):
            a, b = self.eval(node.left), self.eval(node.right)
            op = type(node.operator).__name__
            ops = {"Add": lambda: plus(a, b), "Subtract": lambda: a - b,
                   "Multiply": lambda: times(a, b), "FloorDivide": lambda: a // b,
                   "Divide": lambda: a / b, "Power": lambda: power(a, b),
                   "Modulo": lambda: modulo(a, b)}
            if op not in ops:
                raise Unsupported(op)
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
        if isinstance(node, cst.NamedExpr) and isinstance(node.target, cst.Name):
            value = self.eval(node.value)        # `(x := getattr(config, "x", None))`
            self.local[node.target.value] = value
            return value
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
        raise Unsupported(code_of(node))

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
        if fn == "hasattr" and len(args) == 2 and self.eval(args[0].value) is _CONFIG:
            try:        # a config has the attribute when config.json (or an alias) gives it
                self.cfg(self.eval(args[1].value))
                return True
            except MissingKey:
                return False
        if fn == "getattr" and len(args) > 2 and self.eval(args[0].value) is None:
            return self.eval(args[2].value)     # None has no config key: the default
        if fn == "getattr" and len(args) > 2 and isinstance(self.eval(args[0].value), dict):
            sub, key = self.eval(args[0].value), self.eval(args[1].value)   # a sub-config
            return sub[key] if key in sub else self.eval(args[2].value)
        if fn.endswith(".get") and args and self.eval(node.func.value) is _CONFIG:  # type: ignore[attr-defined]
            key = self.eval(args[0].value)
            return self.cfg(key, self.eval(args[1].value) if len(args) > 1 else None)
        if self.ms.layer_index is not None and self.ms.serving.is_layer_index(node):
            return self.ms.layer_index     # vLLM: `extract_layer_index(prefix)`, `int(prefix.
            #                                split(".")[-1])`: the per-layer pass's layer
        if fn in ("int", "max", "min", "len", "sum", "divide", "math.ceil", "divide_and_round"):
            vals = [self.eval(a.value) for a in args]
            if fn == "divide":
                return vals[0] // vals[1]
            f = {"int": int, "max": max, "min": min, "len": len, "sum": sum,
                 "math.ceil": math.ceil}.get(fn)
            if f is None:
                raise Unsupported(fn)
            return f(*vals) if fn not in ("sum", "len") else f(vals[0])
        if fn == "isinstance" and len(args) == 2:
            return self._isinstance(args[0].value, args[1].value)
        if fn in ("get_tensor_model_parallel_world_size", "get_tp_group().world_size"):
            return self.ms.tp
        if fn and "." not in fn and fn not in self.local:
            file = self.code_file()       # a plain helper of the model's own folder
            if file is not None:
                return call_helper(self, node, fn, file)
        raise Unsupported(fn)

    def code_file(self) -> str | None:
        """The file the code being evaluated lies in: a helper's own, else the class's."""
        if "helper_file" in self.__dict__:
            return self.__dict__["helper_file"]
        return self.ms.file_of(self.cls) if self.cls in self.ms.classes else None


    def _isinstance(self, value: cst.BaseExpression, types: cst.BaseExpression) -> bool:
        """`isinstance(config.num_experts, int)` on a plain value read from config.json (a key
        that holds one number for every layer or a per-layer list: hunyuan_v1_moe); the types
        are builtins named as such. A config object, or any other type, is not evaluable."""
        names = [e.value for e in types.elements] if isinstance(types, cst.Tuple) else [types]
        kinds = []
        if all(isinstance(n, (cst.Name, cst.Attribute)) for n in names) and \
                code_of(value) in self.local and self.local[code_of(value)] is None:
            return False      # None is no instance of a class the file names (`Fp8Config`)
        for n in names:
            if not (isinstance(n, cst.Name) and n.value in _BUILTIN_TYPES) or \
                    n.value in self.local:
                raise Unsupported(f"isinstance(..., {code_of(types)})")
            kinds.append(_BUILTIN_TYPES[n.value])
        v = self.eval(value)
        if not isinstance(v, _DECIDABLE):
            raise Unsupported(f"isinstance({code_of(value)}, ...)")
        return isinstance(v, tuple(kinds))


# the builtin types `isinstance` may name, and a JSON value's Python type
_BUILTIN_TYPES = {"int": int, "float": float, "str": str, "bool": bool, "list": list,
                  "tuple": tuple, "dict": dict}


class _ConfigMarker:
    pass


_CONFIG = _ConfigMarker()


def init_env(ms: ModelSource, cls: str, depth: int = 0, site_key=None) -> Env | None:
    """The names a class's whole __init__ leaves behind (locals and self.X), once per class
    (per instantiation site with `site_key` = (parent class, attr))."""
    cache = ms.init_envs
    key = (cls, site_key)
    if key in cache:
        return cache[key]
    cache[key] = None                     # a cycle of instantiations stops here
    site = ms.ctor_sites.get((site_key[0], site_key[1], cls)) if site_key else None
    env = Env(ms, cls, depth, site)
    init = ms.method(cls, "__init__")
    for s in init_statements(ms, cls) if init is not None else []:
        exec_assign(env, s)
    settle(env)
    cache[key] = env
    return env


def exec_assign(env: Env, s: Stmt) -> None:
    node = s.node
    dead = env.__dict__.setdefault("dead", set())
    if id(node) in dead:
        return
    settle(env, node)
    if isinstance(node, cst.If):
        ruled_out, decided = _untaken(env, node)
        dead.update(id(n) for n in ruled_out)
        if not decided:
            live = _statements(node, dead)
            env.__dict__.setdefault("open_ifs", []).append(
                (live, {id(n) for n in live}, code_of(node.test)))
        return
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
        except EVAL_ERRORS as exc:
            # a value it cannot evaluate replaces any earlier one: `self.mamba = None`, then
            # `self.mamba = MambaLayer(...)` under `if` (granitemoehybrid) is not known None
            d = dotted(target) or ""
            if isinstance(target, cst.Name):
                env.local.pop(target.value, None)
                if target.value not in env.config_names:    # a use names the first cause
                    env.__dict__.setdefault("failed", {})[target.value] = \
                        str(exc) or type(exc).__name__
            elif d.startswith("self.") and d.count(".") == 1:
                env.self_vals.pop(d[5:], None)
                env.__dict__.setdefault("unknown", {})[d[5:]] = str(exc) or type(exc).__name__
            continue
        if isinstance(target, cst.Name):
            env.local[target.value] = v
            env.__dict__.get("failed", {}).pop(target.value, None)
        elif isinstance(target, cst.Attribute):
            d = dotted(target)
            if d and d.startswith("self.") and d.count(".") == 1:
                env.self_vals[d[5:]] = v
                env.__dict__.get("unknown", {}).pop(d[5:], None)


def settle(env: Env, node: cst.CSTNode | None = None) -> None:
    """Close each undecided `if` chain `node` lies outside of (None: the end of the body). A
    `self.X` one of its live branches assigns has the value of whichever branch the config
    takes, which the evaluator cannot tell: unknown afterwards, with why (`self.use_moe = False`
    then `if is_moe(layer_idx): self.use_moe = True` is neither False nor True for every layer).
    Inside the branch the assigned value holds, as on the path that runs it. Locals keep their
    last value: a submodule's arguments are read from its parent's final locals, which is the
    value at a build site inside the branch (deepseek_v2's shared expert, `intermediate_size =
    moe_intermediate_size * n_shared_experts` under an undecided `else:`)."""
    stack = env.__dict__.get("open_ifs")
    while stack and (node is None or id(node) not in stack[-1][1]):
        live, _ids, test = stack.pop()
        why = f"assigned under `if {test}`, which the config does not decide"
        for target in _assigned(live):
            d = (dotted(target) or "") if isinstance(target, cst.Attribute) else ""
            if d.startswith("self.") and d.count(".") == 1:
                env.self_vals.pop(d[5:], None)
                env.__dict__.setdefault("unknown", {})[d[5:]] = why


def _statements(node: cst.If, dead: set[int]) -> list[cst.CSTNode]:
    """Every statement under an `if` chain (nested ones included) not ruled out."""
    out: list[cst.CSTNode] = []
    _Statements(out).visit_all(node)
    return [n for n in out if n is not node and id(n) not in dead]


def _assigned(stmts: list[cst.CSTNode]) -> list[cst.BaseExpression]:
    """The targets of the plain and annotated assignments among `stmts`."""
    out = []
    for node in stmts:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                if isinstance(small, cst.Assign):
                    out += [t.target for t in small.targets]
                elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
                    out.append(small.target)
    return out


# what an `if` test may evaluate to for the branch to be decided (not a config object)
_DECIDABLE = (bool, int, float, str, type(None), list, tuple, dict)


def _untaken(env: Env, node: cst.If) -> tuple[list[cst.CSTNode], bool]:
    """The statements of the branches of an `if`/`elif`/`else` chain the evaluated tests rule
    out (`if intermediate_size is None: ... else: self.X = intermediate_size` with the
    argument not passed runs only the first: the last assignment of both is not the value),
    and whether the tests decide which branch runs. A test it cannot evaluate keeps that
    branch and every later one."""
    ruled_out: list[cst.CSTNode] = []
    cur: cst.If | cst.Else | None = node
    decided = False
    while isinstance(cur, cst.If):
        try:
            test = env.eval(cur.test)
        except Exception:
            break
        if not isinstance(test, _DECIDABLE):
            break
        if test:
            if cur.orelse is not None:
                ruled_out.append(cur.orelse)
            decided = True
            break
        ruled_out.append(cur.body)
        cur = cur.orelse
    else:
        decided = True          # every test false: the `else` (or nothing) runs
    out: list[cst.CSTNode] = []
    for branch in ruled_out:
        _Statements(out).visit_all(branch)
    return out, decided


class _Statements(cst.CSTVisitor):
    """Every statement node under a branch (nested blocks included)."""

    def __init__(self, out: list):
        self.out = out

    def visit_all(self, node: cst.CSTNode) -> None:
        node.visit(self)

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            self.out.append(node)
        return True
