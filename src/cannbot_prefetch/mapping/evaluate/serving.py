"""Serving engines' layers (vLLM, vllm-ascend, SGLang) as linears: a weight's per-rank dims from
the constructor's keyword or positional arguments, split by the layer's kind. The table (which
argument is which, which kind splits what) is data: configs/serving_layers.yaml, read into the
run's policy (`policy.serving_layers`) and held by the model source as `ServingLayers`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import libcst as cst

from .bounds import Unsupported


@dataclass(frozen=True)
class ServingLayers:
    """One run's serving-layer table (`policy.serving_layers`) and the name sets read from it."""

    table: Mapping[str, Any]
    linears: frozenset[str]            # layers sized as one linear (every kind but fused_moe)
    fused_moe: frozenset[str]          # fused-MoE layers: their weights by name
    layer_index_calls: frozenset[str]  # vLLM `extract_layer_index(prefix)`: the layer a
    #                                    per-layer pass sizes
    position_args: frozenset[str]      # token positions: never the value a linear consumes
    moe_weights: tuple[str, str]       # the fused-MoE weights' names (w13, w2)
    layer_list_calls: Mapping[str, tuple[str, int]] = None  # type: ignore[assignment]
    #                                    vLLM `make_layers(n, layer_fn, prefix)`: the factory
    #                                    argument's (name, position)
    layer_prefix_params: frozenset[str] = frozenset()  # `int(prefix.split(".")[-1])`: the
    #                                    names a layer index is parsed from
    quant_config_types: frozenset[str] = frozenset()   # `quant_config: QuantizationConfig`:
    #                                    the checkpoint's quantization config, not the model's

    @classmethod
    def of(cls, table: Mapping[str, Any]) -> "ServingLayers":
        layers = table["layers"]
        w13, w2 = table["moe_weights"]
        return cls(table,
                   frozenset(k for k, v in layers.items() if v["kind"] != "fused_moe"),
                   frozenset(k for k, v in layers.items() if v["kind"] == "fused_moe"),
                   frozenset(table.get("layer_index_calls", ())),
                   frozenset(table.get("position_args", ())), (w13, w2),
                   {k: (v["factory"], int(v["position"]))
                    for k, v in (table.get("layer_list_calls") or {}).items()},
                   frozenset(table.get("layer_prefix_params", ())),
                   frozenset(table.get("quant_config_types", ())))

    def is_quant_config(self, annotation: str) -> bool:
        """Whether a parameter's annotation (`QuantizationConfig | None`) names the checkpoint's
        quantization config, which a "...Config" annotation would otherwise make the model's."""
        return bool(self.quant_config_types
                    & set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", annotation)))

    def is_layer_index(self, node: cst.BaseExpression) -> bool:
        """Whether `node` asks for the layer's own index: `extract_layer_index(prefix)` or the
        prefix's number parsed in place, `int(prefix.split(".")[-1])` (any chain of `.split` /
        `.rsplit` calls and subscripts of a `layer_prefix_params` name, inside `int(...)`)."""
        if not isinstance(node, cst.Call):
            return False
        fn = node.func
        name = fn.value if isinstance(fn, cst.Name) else \
            fn.attr.value if isinstance(fn, cst.Attribute) else ""
        if name in self.layer_index_calls:
            return True
        if not (isinstance(fn, cst.Name) and fn.value == "int" and len(node.args) == 1
                and node.args[0].keyword is None and not node.args[0].star):
            return False
        return _parses_prefix(node.args[0].value, self.layer_prefix_params)

    def kind_of(self, ctor: str) -> str | None:
        """The layer's kind (column, row, qkv, fused_moe, ...), None when it is not a serving
        layer."""
        spec = self.table["layers"].get(ctor)
        return spec["kind"] if spec else None

    def linear_dims(self, ctor: str, call: cst.Call, ev: Callable[[cst.BaseExpression], Any],
                    tp: int) -> tuple[int, int]:
        """[N, K] of a serving linear on one of `tp` ranks. `ev` evaluates an argument (raising
        the evaluator's errors when it cannot); `disable_tp=True` keeps the full weight."""
        return linear_dims(self.table, ctor, call, ev, tp)

    def moe_dims(self, ctor: str, call: cst.Call, ev: Callable[[cst.BaseExpression], Any],
                 moe_tp: int, experts_per_rank: int | None = None
                 ) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """(w13 [E, 2*I/tp, H], w2 [E, H, I/tp]) of a fused-MoE layer on one rank: the layer's
        own `tp_size` / `ep_size` when the source passes them, else --moe-tp and
        --experts-per-rank."""
        return moe_dims(self.table, ctor, call, ev, moe_tp, experts_per_rank)

    def flat_tokens(self, linears: Any) -> bool:
        """Whether the model is a serving engine's (its linears, `ms.linears`, are the engine's
        layers): its forward takes every sequence's tokens flat, [num_tokens, ...] (vLLM's
        `input_ids`, `positions`), not batch-first [B, S, ...]."""
        layers = self.table["layers"]
        return any(lin.ctor in layers or lin.ctor == "FusedMoE" for lin in linears.values())


def _parses_prefix(node: cst.BaseExpression, names: frozenset[str]) -> bool:
    """`prefix.split(".")[-1]`, `prefix.rsplit(".", 1)[1]`, `prefix.split("layers.")[1].split(".")
    [0]`: subscripts and `.split` / `.rsplit` calls down to a name of `names`, one split at least."""
    split = False
    while True:
        if isinstance(node, cst.Subscript):
            node = node.value
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
                node.func.attr.value in ("split", "rsplit"):
            node, split = node.func.value, True
        else:
            return split and isinstance(node, cst.Name) and node.value in names


def arg(call: cst.Call, spec: list) -> cst.BaseExpression | None:
    """The argument a table entry [position, keyword, ...] names in `call`, else None."""
    pos, names = spec[0], spec[1:]
    for a in call.args:
        if a.keyword is not None and a.keyword.value in names:
            return a.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[pos].value if pos is not None and pos < len(positional) else None


def _required(ev: Callable[[cst.BaseExpression], Any], ctor: str) -> Callable:
    """`ev` for an argument the layer needs: a call without it cannot be sized."""
    def need(node: cst.BaseExpression | None) -> Any:
        if node is None:
            raise Unsupported(f"{ctor}(...) without one of its size arguments")
        return ev(node)
    return need


def linear_dims(table: Mapping[str, Any], ctor: str, call: cst.Call,
                ev: Callable[[cst.BaseExpression], Any], tp: int) -> tuple[int, int]:
    """`ServingLayers.linear_dims` on the table `table`."""
    opt, ev = ev, _required(ev, ctor)
    spec = table["layers"][ctor]
    kind = spec["kind"]
    off = arg(call, [None, table["disable_tp"]])
    if _maybe(opt, off) is True:
        tp = 1
    k = int(ev(arg(call, spec["input"])))
    if kind == "qkv":
        hd = int(ev(arg(call, spec["head"])))
        heads = int(ev(arg(call, spec["heads"])))
        kvn = arg(call, spec["kv_heads"])
        kv = opt(kvn) if kvn is not None else None
        # None (absent or passed as None: `getattr(config, "kv_heads", None)`) is the layer's
        # own default, as many kv heads as heads (vLLM 0.34 linear.py QKVParallelLinear)
        kv = heads if kv is None else int(kv)
        vhd = _maybe(opt, arg(call, spec["v_head"]))
        vhd = int(vhd) if isinstance(vhd, int) else hd
        kv_rank = max(kv // tp, 1)          # fewer kv heads than ranks: each rank holds a replica
        return _positive(ctor, ((heads // tp) * hd + kv_rank * hd + kv_rank * vhd, k))
    if kind == "merged_column":
        sizes = ev(arg(call, spec["outputs"]))
        return _positive(ctor, (sum(int(s) // tp for s in sizes), k))
    n = int(ev(arg(call, spec["output"])))
    if kind in ("column", "vocab"):
        return _positive(ctor, (n // tp, k))
    if kind == "row":
        return _positive(ctor, (n, k // tp))
    return _positive(ctor, (n, k))


def _positive(ctor: str, dims: tuple[int, ...]) -> tuple[int, ...]:
    """A weight with a dim of 0 or less is not a shape (a config that turns the layer off, a
    count smaller than the ranks): not evaluable, never planned."""
    if any(d <= 0 for d in dims):
        raise Unsupported(f"{ctor} weight evaluates to {list(dims)}")
    return dims


def moe_dims(table: Mapping[str, Any], ctor: str, call: cst.Call,
             ev: Callable[[cst.BaseExpression], Any], moe_tp: int,
             experts_per_rank: int | None = None
             ) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """`ServingLayers.moe_dims` on the table `table`."""
    opt, ev = ev, _required(ev, ctor)
    spec = table["layers"][ctor]
    e = int(ev(arg(call, spec["experts"])))
    h = int(ev(arg(call, spec["hidden"])))
    i = int(ev(arg(call, spec["intermediate"])))
    tp = _maybe(opt, arg(call, spec["tp"]))
    tp = tp if isinstance(tp, int) and tp > 0 else moe_tp
    ep = _maybe(opt, arg(call, spec["ep"]))
    if isinstance(ep, int) and ep > 0:
        e //= ep
    elif experts_per_rank:
        e = min(e, experts_per_rank)
    ip = i // max(tp, 1)
    return _positive(ctor, (e, 2 * ip, h)), _positive(ctor, (e, h, ip))


def _maybe(ev, node) -> Any:
    """An optional argument's value; None when absent or not evaluable (its default applies)."""
    if node is None:
        return None
    try:
        return ev(node)
    except Exception:
        return None
