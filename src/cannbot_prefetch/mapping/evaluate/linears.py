"""Linear-like attributes of a class's `__init__` and their weight dims per rank: `nn.Linear`,
vLLM's parallel linears (column: out / tp, row: in / tp), fused-MoE layers known by name, and
`nn.Parameter(torch.empty(E, ...))` (also scaled or shifted by a number); a module handed in
through the constructor, built where the class is instantiated; read per layer when a shape
depends on the layer index.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from ...pysource import code_of, dotted
from ...roofline.shapes import dtype_bytes
from ..roles import shard_experts, shard_linear
from .bounds import EVAL_ERRORS, MAX_LAYERS, MissingKey
from ..init_body import init_statements
from .env import LAYER_INDEX, Env, bind_args, exec_assign, init_env
from .registered import registered_weights
from .syntax import assign_value, callee_name, calls_in

if TYPE_CHECKING:  # pragma: no cover
    from ..source import ModelSource

# constructor name -> how its weight dims follow from its arguments (out, in as [N, K]); the
# serving engines' layers are configs/serving_layers.yaml (`ms.serving`: evaluate/serving.py),
# and so are the fused-MoE layers whose class is not in the source (vLLM FusedMoE,
# cann-recipes FusedMoEGMM): their weights by name, [E, 2*I/tp, H] and [E, H, I/tp]
# (REFERENCE.md §7)
PLAIN = frozenset({"Linear", "Conv1D"})
PARAM_CTORS = {"empty", "zeros", "ones", "randn", "rand", "Tensor"}


def _is_linear(ms: ModelSource, ctor: str) -> bool:
    return ctor in PLAIN or ctor in ms.serving.linears


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


LAYER_COUNT_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "decoder_layers")


def scan_linears(ms: ModelSource, cls: str) -> None:
    file, info = ms.classes[cls]
    init = info.methods.get("__init__")
    if init is None:
        return
    found = _scan_once(ms, cls, file, init)
    if any(lin.dims is not None and min(lin.dims) <= 0 for lin in found.values()):
        found = _other_sites(ms, cls, file, init, found)
    ms.linears.update(found)
    unknown = [k for k, lin in found.items() if lin.dims is None]
    if unknown and ms.layer_index is None and _layer_indexed(ms):
        for k, lin in _per_layer(ms, cls, file, init, unknown).items():
            ms.linears[k] = lin


def _other_sites(ms: ModelSource, cls: str, file: str, init, found: dict) -> dict:
    """A dim of 0 or less is no weight the model holds: the instantiation site the shapes were
    read at builds none (cohere2_moe's shared expert, `intermediate_size=config.
    intermediate_size * config.num_shared_experts` under `if num_shared_experts > 0`). Each
    other site of the class is tried; a weight no site gives positive dims is "unknown", with
    the reason, never planned with a 0."""
    out = dict(found)
    for (parent, _attr, child), site in ms.ctor_sites.items():
        if child != cls or site == ms.ctor_args.get(cls):
            continue
        again = _scan_once(ms, cls, file, init, site)
        for k, lin in again.items():
            old = out.get(k)
            if lin.dims is not None and min(lin.dims) > 0 and (
                    old is None or old.dims is None or min(old.dims) <= 0):
                out[k] = lin
    for k, lin in out.items():
        if lin.dims is not None and min(lin.dims) <= 0:
            out[k] = LinearAttr(lin.file, lin.cls, lin.attr, lin.ctor, None,
                                f"shape evaluates to {list(lin.dims)} at every instantiation "
                                f"site (a dim of 0: the config builds no such weight)",
                                is_param=lin.is_param, line=lin.line)
    return out


def _layer_indexed(ms: ModelSource) -> bool:
    """Whether any constructor in the source takes a layer index (its shapes may then be read
    per layer, by it or by a submodule it hands a per-layer value to)."""
    if ms.layer_indexed is None:
        ms.layer_indexed = any(LAYER_INDEX.fullmatch(p) for _, info in ms.classes.values()
                               for p in (info.methods["__init__"].params
                                         if "__init__" in info.methods else ())) or any(
            ms.serving.is_layer_index(c) for cls in ms.classes
            for st in init_statements(ms, cls) for c in calls_in(st.node))
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
        for i in range(min(n, MAX_LAYERS)):
            ms.layer_index, ms.init_envs = i, {}
            got = _scan_once(ms, cls, file, init)
            for k in unknown:
                if k in got and got[k].dims is not None:
                    per[k].append(got[k])
    finally:
        ms.layer_index, ms.init_envs = None, saved
    return {k: min(v, key=lambda lin: math.prod(lin.dims)) for k, v in per.items()
            if len(v) == min(n, MAX_LAYERS)}


def _scan_once(ms: ModelSource, cls: str, file: str, init, site=None) -> dict:
    out: dict = {}
    env = Env(ms, cls, site=site)
    for s in init_statements(ms, cls):
        av = assign_value(s)
        if av is not None:
            attr, value = av
            if isinstance(value, cst.Call) and callee_name(value) in ms.serving.fused_moe \
                    and callee_name(value) not in ms.classes:
                for lin in _fused_moe(ms, env, file, cls, attr, value, s.start):
                    out[(cls, lin.attr)] = lin
            else:
                lin = _linear_of(ms, env, file, cls, attr, value, s.start)
                if lin is not None:
                    out[(cls, attr)] = lin
        for name, value, where in registered_weights(s, env):
            lin = _linear_of(ms, where, file, cls, name, value, s.start)
            if lin is not None:
                out[(cls, name)] = lin
        exec_assign(env, s)
    return out


def _fused_moe(ms, env, file, cls, attr, call, line) -> list[LinearAttr]:
    """A fused-MoE layer known by name (vLLM FusedMoE / FusedMoEFactory, FusedMoEGMM):
    `<attr>.w13_weight`, `<attr>.w2_weight` (configs/serving_layers.yaml)."""
    try:
        dims13, dims2 = ms.serving.moe_dims(callee_name(call), call, env.eval, ms.moe_tp,
                                            getattr(ms, "experts_per_rank", None))
        err, key = "", ""
    except MissingKey as exc:
        dims13 = dims2 = None
        err, key = f"config key '{exc.key}' is missing", exc.key
    except EVAL_ERRORS as exc:
        dims13 = dims2 = None
        err, key = f"shape not evaluable ({exc})", ""
    w13, w2 = ms.serving.moe_weights
    return [LinearAttr(file, cls, f"{attr}.{w13}", "FusedMoE", dims13, err, key, True, line),
            LinearAttr(file, cls, f"{attr}.{w2}", "FusedMoE", dims2, err, key, True, line)]


def _declared_dtype(env: "Env", *calls: cst.Call) -> float | None:
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


def _chosen(env: Env, value: cst.BaseExpression) -> cst.BaseExpression:
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
    if _is_linear(ms, name):
        return name
    if depth > 4 or name not in ms.classes:
        return None
    for b in ms.classes[name][1].bases:
        got = linear_kind(ms, b.split(".")[-1], depth + 1)
        if got is not None:
            return got
    return None


def _base_init_call(ms: ModelSource, env: Env, parent: str, call: cst.Call
                    ) -> tuple[cst.Call, Env]:
    """A subclass of a known layer with its own __init__ (`class Router(nn.Linear)` calling
    `super().__init__(config.hidden_size, config.num_experts)`): the base's constructor call,
    with the subclass's parameters bound to `call`'s arguments; else `call` itself."""
    name = callee_name(call)
    init = ms.method(name, "__init__") if name in ms.classes else None
    if init is None or init.node is None:
        return call, env
    sub = Env(ms, name, site=(list(call.args), parent))
    for st in init.stmts:
        for c in calls_in(st.node):
            f = code_of(c.func)
            if f == "super().__init__" or (f.endswith(".__init__") and c.args
                                           and code_of(c.args[0].value) == "self"):
                args = c.args if f == "super().__init__" else c.args[1:]
                return c.with_changes(args=args), sub
        exec_assign(sub, st)
    return call, env


def _factory(env: Env, node: cst.BaseExpression) -> cst.Call | None:
    """The tensor factory call whose shape `node` has: the call itself, or one side of
    element-wise arithmetic with a number (zamba's `nn.Parameter((torch.zeros(heads, d, r) - 0.5)
    * 2 / r**0.5)`), or its negation; None otherwise (a broadcast with another tensor, a call)."""
    if isinstance(node, cst.Call):
        return node if callee_name(node) in PARAM_CTORS else None
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return _factory(env, node.expression)
    if isinstance(node, cst.BinaryOperation):
        for tensor, other in ((node.left, node.right), (node.right, node.left)):
            call = _factory(env, tensor)
            if call is not None:
                try:
                    number = env.eval(other)
                except Exception:
                    return None
                ok = isinstance(number, (int, float)) and not isinstance(number, bool)
                return call if ok else None
    return None


def _passed_in(ms: ModelSource, env: Env, cls: str, value: cst.BaseExpression):
    """`self.linear = linear`, a constructor parameter: the module its instantiation site builds
    for it (zamba: `linear = nn.Linear(...)` in ZambaModel.__init__, then
    `ZambaHybridLayer(..., linear, mamba)`), as (the constructor call, the caller's Env), else
    None. Only a call written at the site, or a local the building method assigns exactly once."""
    init = ms.method(cls, "__init__")
    if not isinstance(value, cst.Name) or init is None or value.value not in init.params \
            or value.value in env.config_names or value.value in env.local:
        return None                  # (a config, or a value the site already evaluated)
    bound = getattr(env, "site", None) or ms.ctor_args.get(cls) or _only_site(ms, cls)
    if not bound:
        return None
    args, parent = bound
    arg = next((a.value for n, a in bind_args(args, [p for p in init.params if p != "self"])
                if n == value.value), None)
    if arg is None or parent == cls or parent not in ms.classes:
        return None
    if isinstance(arg, cst.Name):
        # the local in the parent's method that builds `cls` (__init__, or a helper it calls:
        # zamba2's get_layers)
        found = [n.value for m in ms.classes[parent][1].methods.values() if m.node is not None
                 and any(isinstance(c, cst.Call) and callee_name(c) == cls for c in _walk(m.node))
                 for n in _walk(m.node) if isinstance(n, cst.Assign)
                 and len(n.targets) == 1 and isinstance(n.targets[0].target, cst.Name)
                 and n.targets[0].target.value == arg.value]
        arg = found[0] if len(found) == 1 else None
    penv = init_env(ms, parent, 1)
    if not isinstance(arg, cst.Call) or penv is None:
        return None
    return arg, penv


def _only_site(ms: ModelSource, cls: str):
    """(arguments, class) of the one call in the source that builds `cls` outside `__init__`
    (zamba2's `get_layers()` helper, which __init__ assigns to self.layers), else None."""
    if ms.calls_by_callee is None:           # one walk of the source
        by: dict[str, list] = {}
        for owner, (_, info) in ms.classes.items():
            for m in info.methods.values():
                for c in _walk(m.node) if m.node is not None else ():
                    if isinstance(c, cst.Call):
                        by.setdefault(callee_name(c), []).append((list(c.args), owner))
        ms.calls_by_callee = by
    sites = ms.calls_by_callee.get(cls, [])
    return sites[0] if len(sites) == 1 else None


def _walk(node: cst.CSTNode):
    yield node
    for child in node.children:
        yield from _walk(child)


def _linear_of(ms: ModelSource, env: Env, file: str, cls: str, attr: str,
               value: cst.BaseExpression, line: int) -> LinearAttr | None:
    value = _chosen(env, value)
    passed = _passed_in(ms, env, cls, value)
    if passed is not None:
        value, env = passed
    if not isinstance(value, cst.Call):
        return None
    ctor = linear_kind(ms, callee_name(value)) or callee_name(value)
    if _is_linear(ms, ctor) and callee_name(value) != ctor:
        value, env = _base_init_call(ms, env, cls, value)
    tp = ms.tp
    try:
        if _is_linear(ms, ctor):
            if ctor in ms.serving.linears:
                dims = ms.serving.linear_dims(ctor, value, env.eval, tp)
            else:
                k = env.eval(_arg(value, 0, "in_features", "input_size"))
                n = env.eval(_arg(value, 1, "out_features", "output_size"))
                if tp > 1 and ctor == "Linear":   # HF nn.Linear in a TP deployment: by role
                    n, k = shard_linear(ms.config, attr, int(n), int(k), tp)
                dims = (n, k)
            return LinearAttr(file, cls, attr, ctor, tuple(int(d) for d in dims), line=line,
                              dtype_bytes=_declared_dtype(env, value))
        if ctor == "Parameter" and value.args:
            inner = _factory(env, value.args[0].value)
            if inner is not None:
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
        if _is_linear(ms, ctor) or ctor == "Parameter":
            return LinearAttr(file, cls, attr, ctor, None,
                              f"config key '{exc.key}' is missing", exc.key, ctor == "Parameter",
                              line)
        return None
    except EVAL_ERRORS as exc:
        if _is_linear(ms, ctor) or (ctor == "Parameter" and env.nulls):
            why = (f"config key '{env.nulls[-1]}' is null" if env.nulls and
                   isinstance(exc, TypeError) else f"shape not evaluable ({exc})")
            return LinearAttr(file, cls, attr, ctor, None, why, env.nulls[-1] if env.nulls
                              and isinstance(exc, TypeError) else "", ctor == "Parameter",
                              line=line)
        return None
