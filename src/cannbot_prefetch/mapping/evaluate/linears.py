"""Linear-like attributes of a class's `__init__` and their weight dims per rank: `nn.Linear`,
vLLM's parallel linears (column: out / tp, row: in / tp), fused-MoE layers known by name, and
`nn.Parameter(torch.empty(E, ...))`; read per layer when a shape depends on the layer index.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from ...pysource import code_of, dotted
from ...roofline.shapes import dtype_bytes
from ..roles import shard_experts, shard_linear
from .bounds import EVAL_ERRORS, MissingKey
from ..init_body import init_statements
from .env import LAYER_INDEX, Env, exec_assign
from . import serving
from .registered import registered_weights
from .syntax import assign_value, callee_name, calls_in

if TYPE_CHECKING:  # pragma: no cover
    from ..source import ModelSource

# constructor name -> how its weight dims follow from its arguments (out, in as [N, K]); the
# serving engines' layers are configs/serving_layers.yaml (evaluate/serving.py)
SERVING = {k for k, v in serving.table()["layers"].items() if v["kind"] != "fused_moe"}
PLAIN = {"Linear", "Conv1D"}
LINEARS = SERVING | PLAIN
PARAM_CTORS = {"empty", "zeros", "ones", "randn", "rand", "Tensor"}
# fused-MoE layers whose class is not in the source (vLLM FusedMoE, cann-recipes FusedMoEGMM):
# their weights by name, [E, 2*I/tp, H] and [E, H, I/tp] (REFERENCE.md §7)
FUSED_MOE = {k for k, v in serving.table()["layers"].items() if v["kind"] == "fused_moe"}


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
        calls = serving.layer_index_calls()
        ms.layer_indexed = any(LAYER_INDEX.fullmatch(p) for _, info in ms.classes.values()
                               for p in (info.methods["__init__"].params
                                         if "__init__" in info.methods else ())) or any(
            (dotted(c.func) or "").split(".")[-1] in calls for cls in ms.classes
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


def _scan_once(ms: ModelSource, cls: str, file: str, init, site=None) -> dict:
    out: dict = {}
    env = Env(ms, cls, site=site)
    for s in init_statements(ms, cls):
        av = assign_value(s)
        if av is not None:
            attr, value = av
            if isinstance(value, cst.Call) and callee_name(value) in FUSED_MOE \
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
        dims13, dims2 = serving.moe_dims(callee_name(call), call, env.eval, ms.moe_tp,
                                         getattr(ms, "experts_per_rank", None))
        err, key = "", ""
    except MissingKey as exc:
        dims13 = dims2 = None
        err, key = f"config key '{exc.key}' is missing", exc.key
    except EVAL_ERRORS as exc:
        dims13 = dims2 = None
        err, key = f"shape not evaluable ({exc})", ""
    w13, w2 = serving.moe_weights()
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
    if name in LINEARS:
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


def _linear_of(ms: ModelSource, env: Env, file: str, cls: str, attr: str,
               value: cst.BaseExpression, line: int) -> LinearAttr | None:
    value = _chosen(env, value)
    if not isinstance(value, cst.Call):
        return None
    ctor = linear_kind(ms, callee_name(value)) or callee_name(value)
    if ctor in LINEARS and callee_name(value) != ctor:
        value, env = _base_init_call(ms, env, cls, value)
    tp = ms.tp
    try:
        if ctor in LINEARS:
            if ctor in SERVING:
                dims = serving.linear_dims(ctor, value, env.eval, tp)
            else:
                k = env.eval(_arg(value, 0, "in_features", "input_size"))
                n = env.eval(_arg(value, 1, "out_features", "output_size"))
                if tp > 1 and ctor == "Linear":   # HF nn.Linear in a TP deployment: by role
                    n, k = shard_linear(ms.config, attr, int(n), int(k), tp)
                dims = (n, k)
            return LinearAttr(file, cls, attr, ctor, tuple(int(d) for d in dims), line=line,
                              dtype_bytes=_declared_dtype(env, value))
        if ctor == "Parameter" and value.args:
            inner = value.args[0].value
            if isinstance(inner, cst.Call) and callee_name(inner) in PARAM_CTORS:
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
