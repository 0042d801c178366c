"""Values read statically from a class's `__init__`: the `self.X` a config class derives, and
the truth of a condition that only reads `__init__` values, the config and the decode phase
(used by flatten.py to follow the branch a deployment takes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import libcst as cst

from .bounds import EVAL_ERRORS, MAX_LAYERS, MissingKey
from .env import Env, exec_assign, init_env, settle
from .linears import LAYER_COUNT_KEYS, _layer_indexed

if TYPE_CHECKING:  # pragma: no cover
    from ..source import ModelSource


def derived_attrs(ms: ModelSource, cls: str) -> dict[str, Any]:
    """`self.X` a config class's __init__ sets, its parameters bound from the config."""
    env = Env.__new__(Env)
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
        exec_assign(env, s)
    settle(env)
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
    it depends on anything else. Attributes a parent sets after construction are not seen.
    A condition that reads a per-layer value (`self.use_moe` set under
    `if is_moe_layer(config, layer_idx)`) is read for every layer: the same value on each is
    its value, different values are None (the branch runs on some layers)."""
    v = _truth(ms, cls, site_key, test)
    if v is not None or ms.layer_index is not None or not _layer_indexed(ms):
        return v
    n = next((ms.config[k] for k in LAYER_COUNT_KEYS if isinstance(ms.config.get(k), int)), 0)
    seen: set[bool] = set()
    saved = ms.init_envs
    try:
        for i in range(min(n, MAX_LAYERS)):
            ms.layer_index = i
            ms.init_envs = ms.layer_envs.setdefault(i, {})   # each layer's envs, kept
            v = _truth(ms, cls, site_key, test)
            if v is None:
                return None        # undecided on one layer (a runtime value): undecided
            seen.add(v)
            if len(seen) > 1:
                return None
    finally:
        ms.layer_index, ms.init_envs = None, saved
    return seen.pop() if len(seen) == 1 and n <= MAX_LAYERS else None


def _truth(ms: ModelSource, cls: str, site_key, test: cst.BaseExpression) -> bool | None:
    """`static_truth` for the layer `ms.layer_index` names (None: what every layer shares)."""
    base = init_env(ms, cls, 0, site_key)
    if base is None:
        return None
    env = Env.__new__(Env)
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
