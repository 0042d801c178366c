"""The helper module written next to the model (`_cannbot_prefetch.py`).

It is the project's own equivalent of a `npu_prefetch(switch_flag, weight, depend, size,
offset=0)` wrapper: nothing happens while the switch is off, and `torch_npu` is imported only
when it is on. Mode `eager` / `npugraph_ex`: the prefetch runs on a side stream that first waits
for the current one, and `join()` (placed where the plan says) makes the current stream wait for
it again. Mode `ge_graph`: the plain call with its dependency, which GE turns into a control edge.
"""

from __future__ import annotations

import ast

from ..plan import MODES, grammar

HELPER_NAME = "_cannbot_prefetch.py"
HEADER = "# Written by cannbot-prefetch (`cannbot prefetch apply --write`)."

_TEMPLATE = '''{header} Do not edit: apply rewrites it.
"""Switch-guarded weight prefetch for Ascend NPUs (torch_npu.npu_prefetch).

Turn it on through the model config (`{config_path}: true`) or, for constructors that get no
config object, by setting `ENABLED = True` in this module before the model is built. Off by
default; when off nothing here touches torch_npu.
"""

MODE = {mode!r}                      # eager | ge_graph | npugraph_ex
ENABLED = {default!r}                  # module-level switch (runner sets it; default off)
MULTI_STREAM_KEY = "enable_multi_streams"

_side_stream = None
_pending = False


def _lookup(config, path):
    """`a.b.c` through attributes or mapping keys; None when any step is missing."""
    value = config
    for key in path.split("."):
        if value is None:
            return None
        if isinstance(value, dict):
            value = value.get(key)
        else:
            value = getattr(value, key, None)
    return value


def read_switch(config, path, default=False):
    """The switch for a module built from `config` (None: the module-level ENABLED)."""
    value = _lookup(config, path) if config is not None else None
    if value is None:
        value = ENABLED or default
    on = bool(value)
    if on:
        _check_multi_stream(config, path)
    return on


def _check_multi_stream(config, path):
    if MODE not in ("eager", "npugraph_ex") or config is None:
        return
    parent = path.rsplit(".", 1)[0] + "." if "." in path else ""
    value = _lookup(config, parent + MULTI_STREAM_KEY)
    if value is None and MODE == "npugraph_ex":
        raise ValueError(
            f"{{path}} is on, and prefetch mode 'npugraph_ex' captures the side stream in the "
            f"graph: set {{parent}}{{MULTI_STREAM_KEY}} > 0 in the config, or turn {{path}} off")
    if value is not None and not (int(value) > 0):
        raise ValueError(
            f"{{path}} is on, and prefetch mode {{MODE!r}} issues it on a side stream: "
            f"set {{parent}}{{MULTI_STREAM_KEY}} > 0 (it is {{value!r}}), or turn {{path}} off")


def enabled():
    return bool(ENABLED)


def _tokens(t):
    shape = tuple(getattr(t, "shape", ()))
    if not shape:
        return 1
    if len(shape) == 1:
        return shape[0]
    n = 1
    for d in shape[:-1]:
        n *= d
    return n


def npu_prefetch(switch_flag, weight, depend, size, offset=0, *, max_tokens=None):
    """Prefetch up to `size` bytes of `weight` into L2 once `depend` is computed."""
    if not switch_flag:
        return None
    if max_tokens is not None and depend is not None and _tokens(depend) > max_tokens:
        return None  # prefill: too many tokens for the weight to be the bottleneck
    import torch_npu  # only when the switch is on

    args = (weight, depend, size) if not offset else (weight, depend, size, offset)
    if MODE == "ge_graph":
        if depend is None:
            raise ValueError("npu_prefetch in ge_graph mode needs a dependency tensor, not None")
        return torch_npu.npu_prefetch(*args)
    import torch

    global _side_stream, _pending
    if _side_stream is None:
        _side_stream = torch.npu.Stream()
    _side_stream.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(_side_stream):
        torch_npu.npu_prefetch(*args)
    _pending = True
    return None


def join(switch_flag):
    """The current stream waits for the side stream's prefetches (eager / npugraph_ex)."""
    global _pending
    if not switch_flag or not _pending or MODE == "ge_graph":
        return None
    import torch

    torch.npu.current_stream().wait_stream(_side_stream)
    _pending = False
    return None


def attr(obj, path):
    """`obj.a.b` or None when a module on the way is absent or None (conditional modules)."""
    for key in path.split("."):
        obj = getattr(obj, key, None)
        if obj is None:
            return None
    return obj


def link_next_layers(layers):
    """Give each decoder layer a plain reference to the next one (not a submodule)."""
    layers = list(layers)
    for layer, nxt in zip(layers, layers[1:] + [None]):
        object.__setattr__(layer, "next_layer", nxt)
    return layers
'''


def helper_source(mode: str, config_path: str, default: bool = False) -> str:
    """The helper's text. The plan values it holds are checked first (a mode name, a dotted
    config path, a bool: nothing that can close a string or a docstring) and the result must
    parse."""
    if mode not in MODES or not grammar.is_dotted(config_path) or not isinstance(default, bool):
        raise ValueError(f"helper values not allowed: mode={mode!r}, config_path={config_path!r}, "
                         f"default={default!r}")
    text = _TEMPLATE.format(header=HEADER, mode=mode, config_path=config_path, default=default)
    ast.parse(text)
    return text


def is_ours(text: str) -> bool:
    return text.startswith(HEADER)
