"""The helper module written next to the model (`_cannbot_prefetch.py`).

It is the project's own equivalent of a `npu_prefetch(switch_flag, weight, depend, size,
offset=0)` wrapper: nothing happens while the switch is off, and `torch_npu` is imported only
when it is on. The call is expressed so that a graph capture keeps it, in order, in every mode
(docs/rewrite.md "What each mode emits"):
- call form `direct` (the default in `eager` and `ge_graph`, as cann-recipes-infer's prefetch
  principles recommend; plan `call`): `torch_npu.npu_prefetch` (the op
  `torch.ops.npu.npu_prefetch`) with its dependency, on the current stream; torch_npu registers
  it with a side effect and torchair converts it to a GE `Cmo` node with a control edge from the
  dependency. No join.
- call form `side_stream` (the default in `npugraph_ex`): the custom op `cannbot_prefetch::prefetch(weight, dependency, ...)`
  (registered here with `torch.library`, a fake kernel for tracing and a side effect so no
  dead-code pass drops it), whose real kernel makes a side stream (created once per device)
  wait for the current one and issues the prefetch on it; `cannbot_prefetch::join()` makes the
  current stream wait again. Both are opaque to torch.compile, so the stream hand-off runs at
  run time (and is recorded by aclgraph capture) instead of being traced.
The decode guard reads one shape (`guard=(tensor, dim, max_len)`), so it adds no guard on the
batch size and no recompilation per batch.
"""

from __future__ import annotations

import ast

from ..plan import CALL_FORMS, MODES, call_form, grammar
from ..contract.plan import ENV_SIZE, ENV_SWITCH, SIZE_KEY

HELPER_NAME = "_cannbot_prefetch.py"
# the ops a captured graph holds for a prefetch (verify looks for these names)
SIDE_STREAM_OPS = "cannbot_prefetch"     # torch.library namespace the helper defines
PREFETCH_OPS = (f"{SIDE_STREAM_OPS}::prefetch", "npu::npu_prefetch")
JOIN_OP = f"{SIDE_STREAM_OPS}::join"
RUNTIME_STATE = "_cannbot_prefetch_runtime"  # sys.modules entry shared by every helper copy
HEADER = "# Written by cannbot-prefetch (`cannbot prefetch apply --write`)."

_TEMPLATE = '''{header} Do not edit: apply rewrites it.
"""Switch-guarded weight prefetch for Ascend NPUs (torch_npu.npu_prefetch), graph-capture safe.

Turn it on where you build the model: `{config_path}: true` at the top level of the config the
model is built from (sub-configs such as `text_config`, and layers built with no config object,
see it too), or the environment variable `{env}=1` in the process that builds the model (vLLM
workers inherit it); `{env}=0` turns it off whatever the config says. Off by default; when off
nothing here touches torch_npu.

The prefetch size of each site is read when the model is built: `{size_key}` next to the switch
in the config (one value for every site, or a mapping site id -> value) or `{env_size}` (`0.7`, or
`site-a=0.7,site-b=1048576`). A number with a decimal point is a fraction of the weight's bytes
(the tuning ladder 0.5 -> 0.7 -> 1.0 / 0.3 -> 0.1), a whole number is bytes; a site without one
keeps its planned size.

Call form `direct` calls torch_npu's `npu_prefetch` op with its dependency on the current
stream (ge_graph / torchair: a Cmo node with a control edge); `join()` does nothing. Call form
`side_stream` calls the custom op `cannbot_prefetch::prefetch`, whose kernel issues the prefetch
on a side stream after that stream waits for the current one; `join()` makes the current stream
wait for the side stream. Both ops have a fake kernel and a declared side effect, so
torch.compile keeps them, in program order, after their dependency.
"""

import importlib.util
import os
import sys
import types

import torch

MODE = {mode!r}                      # eager | ge_graph | npugraph_ex
CALL = {call!r}                    # direct | side_stream (plan `call`)
ENABLED = {default!r}                  # module-level switch (lowest precedence; default off)
ENV_SWITCH = {env!r}          # environment switch: 1 / 0 (wins over the config)
ENV_SIZE = {env_size!r}  # environment sizes: fraction or bytes, per site
SIZE_KEY = {size_key!r}          # config key beside the switch: sizes
SIZES = {{}}                          # site id ("*": every site) -> fraction (float) or bytes (int)
MULTI_STREAM_KEY = "enable_multi_streams"
OPS = {ops!r}           # torch.library namespace of the side-stream ops


def _shared_state():
    """One state per process, shared by every copy of this module (two model packages may each
    have one): side streams by device index (made once), devices with prefetches not yet joined,
    and the library that owns the ops."""
    state = sys.modules.get({state!r})
    if state is None:
        state = types.ModuleType({state!r})
        state.side_streams, state.pending, state.lib = {{}}, set(), None
        sys.modules[{state!r}] = state
    return state


_STATE = _shared_state()


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


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _env_switch():
    """The environment switch: True / False, or None when unset."""
    raw = os.environ.get(ENV_SWITCH, "").strip().lower()
    if not raw:
        return None
    if raw in _TRUE or raw in _FALSE:
        return raw in _TRUE
    raise ValueError(f"{{ENV_SWITCH}}={{os.environ[ENV_SWITCH]!r}}: use 1 (on) or 0 (off)")


def _building_configs(config):
    """`config`, then the configs of the modules whose constructors are running, innermost
    first. A layer built from a sub-config (`text_config`) or with no config object at all is
    built inside the constructor of the model the user builds, whose `config` is the one the
    user set the switch in: the call stack at build time is the only path from the layer to it
    (read once, at build time; nothing at forward)."""
    out = [config] if config is not None else []
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "__init__":
            local = frame.f_locals
            if isinstance(local.get("self"), torch.nn.Module):
                for name, value in local.items():
                    if value is not None and (name == "config" or (
                            type(value).__name__.endswith("Config") and name != "self")):
                        if all(value is not c for c in out):
                            out.append(value)
        frame = frame.f_back
    return out


def read_switch(config, path, default=False):
    """The switch for a module built from `config` (None: a constructor given no config), read
    once while the model is built: the environment switch if set, else the nearest config
    (this one, then those of the enclosing model constructors) that sets `path`, else
    ENABLED or the plan's default."""
    value, found = _env_switch(), None
    for cfg in _building_configs(config):
        if _lookup(cfg, path) is not None:
            found = cfg
            break
    if value is None:
        value = _lookup(found, path) if found is not None else (ENABLED or default)
    on = bool(value)
    if on:
        _read_sizes(found, path)
        _check_multi_stream(found, path)
        prepare()
    return on


def _size_value(where, value):
    """A size as given: a fraction (0, 1] of the weight's bytes, or whole bytes >= 1."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = float(text) if "." in text or "e" in text.lower() else int(text)
        except ValueError:
            raise ValueError(f"{{where}}: {{value!r}} is not a number") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{{where}}: {{value!r}} is not a number")
    if isinstance(value, float) and not 0.0 < value <= 1.0:
        raise ValueError(f"{{where}}: {{value!r}}: a fraction of the weight must be in (0, 1]")
    if isinstance(value, int) and value < 1:
        raise ValueError(f"{{where}}: {{value!r}}: bytes must be at least 1")
    return value


def _read_sizes(config, path):
    """SIZES from the config key beside the switch, then the environment (which wins)."""
    SIZES.clear()
    parent = path.rsplit(".", 1)[0] + "." if "." in path else ""
    given = _lookup(config, parent + SIZE_KEY) if config is not None else None
    if isinstance(given, dict):
        for site, v in given.items():
            SIZES[str(site)] = _size_value(f"{{parent}}{{SIZE_KEY}}.{{site}}", v)
    elif given is not None:
        SIZES["*"] = _size_value(parent + SIZE_KEY, given)
    raw = os.environ.get(ENV_SIZE, "").strip()
    for part in (p.strip() for p in raw.split(",")) if raw else ():
        site, eq, v = part.rpartition("=")
        SIZES[site.strip() if eq else "*"] = _size_value(f"{{ENV_SIZE}} ({{part}})", v)


def size_of(site, planned, weight):
    """The bytes to prefetch for `site`: its run-time size if one was given, else the planned
    one. Plain Python on the weight's static shape (no tensor op: graph capture keeps it a
    constant)."""
    value = SIZES.get(site, SIZES.get("*")) if SIZES and site is not None else None
    if value is None:
        return planned
    if isinstance(value, float):
        return max(1, int(value * weight.numel() * weight.element_size()))
    return value


def _check_multi_stream(config, path):
    if CALL != "side_stream" or config is None:
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
    """The switch of a class with no `__init__` of its own (no config reaches it): the
    environment switch, else ENABLED."""
    env = _env_switch()
    return bool(ENABLED) if env is None else env


def _npu_present():
    if "torch_npu" in sys.modules:
        return True
    return importlib.util.find_spec("torch_npu") is not None


def prepare():
    """Create the side stream of the current device now, while the model is built (switch on),
    so that no stream is created inside a compiled or captured forward."""
    if CALL != "side_stream" or not _npu_present():
        return
    import torch_npu  # noqa: F401  (switch on: torch.npu exists from here)

    current = getattr(torch.npu, "current_device", None)
    if current is not None:
        _side_stream(current())


def _side_stream(index):
    """The side stream of device `index` (None: the current device), made on first use."""
    stream = _STATE.side_streams.get(index)
    if stream is None:
        stream = torch.npu.Stream() if index is None else torch.npu.Stream(device=index)
        _STATE.side_streams[index] = stream
    return stream


def _decode(guard):
    """guard = (tensor, dim, max_len): True while tensor.shape[dim] <= max_len (query length)."""
    if guard is None:
        return True
    tensor, dim, max_len = guard
    shape = getattr(tensor, "shape", None)
    if shape is None or not -len(shape) <= dim < len(shape):
        return False  # nothing to read the query length from: do not prefetch
    return shape[dim] <= max_len


def npu_prefetch(switch_flag, weight, depend, size, offset=0, *, guard=None, site=None):
    """Prefetch up to `size` bytes of `weight` into L2 once `depend` is computed (`site`: the
    plan's site id, whose run-time size, if given, replaces `size`)."""
    if not switch_flag or not _decode(guard):
        return None
    size = size_of(site, size, weight)
    if CALL == "direct":
        if depend is None:
            raise ValueError("npu_prefetch called directly needs a dependency tensor, not None")
        import torch_npu  # only when the switch is on

        if offset:  # torch_npu.npu_prefetch is the op torch.ops.npu.npu_prefetch itself
            torch_npu.npu_prefetch(weight, depend, size, offset)
        else:
            torch_npu.npu_prefetch(weight, depend, size)
        return None
    torch.ops.{ops}.prefetch(weight, depend, size, offset)
    return None


def join(switch_flag):
    """The current stream waits for the side stream's prefetches (call form side_stream)."""
    if not switch_flag or CALL != "side_stream":
        return None
    torch.ops.{ops}.join()
    return None


# ---- the ops (kernels run at run time; torch.compile sees only their fake kernels)

def _prefetch_kernel(weight, dependency, max_size, offset=0):
    import torch_npu  # the op is only called with the switch on

    index = weight.device.index
    side = _side_stream(index)
    side.wait_stream(torch.npu.current_stream(index))
    with torch.npu.stream(side):
        if offset:
            torch_npu.npu_prefetch(weight, dependency, max_size, offset)
        else:
            torch_npu.npu_prefetch(weight, dependency, max_size)
    _STATE.pending.add(index)


def _join_kernel():
    for index in list(_STATE.pending):
        torch.npu.current_stream(index).wait_stream(_STATE.side_streams[index])
    _STATE.pending.clear()


def _no_output(*args, **kwargs):
    return None


def _register_ops():
    """Define the two ops once per process (another copy of this module may have)."""
    ns = getattr(torch.ops, OPS)
    if hasattr(ns, "prefetch") and hasattr(ns, "join"):
        return
    lib = _STATE.lib = torch.library.Library(OPS, "FRAGMENT")
    lib.define("prefetch(Tensor weight, Tensor? dependency, int max_size, int offset=0) -> ()")
    lib.define("join() -> ()")
    lib.impl("prefetch", _prefetch_kernel, "CompositeExplicitAutograd")
    lib.impl("join", _join_kernel, "CompositeExplicitAutograd")
    for name in ("prefetch", "join"):
        torch.library.register_fake(f"{{OPS}}::{{name}}", _no_output, lib=lib)
        torch.fx.node.has_side_effect(getattr(ns, name).default)


_register_ops()


def attr(obj, path):
    """`obj.a.b` or None when a module on the way is absent or None (conditional modules)."""
    for key in path.split("."):
        obj = getattr(obj, key, None)
        if obj is None:
            return None
    return obj


def link_next_layers(layers):
    """Give each decoder layer a plain reference to the next one (not a submodule). An entry
    is None where that layer lacks the module (a dense layer among MoE ones): it gets nothing,
    and the layer before it sees next_layer None, so its cross-layer prefetch is skipped."""
    layers = list(layers)
    for layer, nxt in zip(layers, layers[1:] + [None]):
        if layer is not None:
            object.__setattr__(layer, "next_layer", nxt)
    return layers
'''


def helper_source(mode: str, config_path: str, default: bool = False,
                  call: str | None = None) -> str:
    """The helper's text. The plan values it holds are checked first (a mode name, a call form,
    a dotted config path, a bool: nothing that can close a string or a docstring) and the result
    must parse. `call` None: the mode's default form (plan.call_form)."""
    form = call_form(mode, call)
    if mode not in MODES or form not in CALL_FORMS or not grammar.is_dotted(config_path) \
            or not isinstance(default, bool):
        raise ValueError(f"helper values not allowed: mode={mode!r}, call={call!r}, "
                         f"config_path={config_path!r}, default={default!r}")
    text = _TEMPLATE.format(header=HEADER, mode=mode, config_path=config_path, default=default,
                            ops=SIDE_STREAM_OPS, state=RUNTIME_STATE, call=form, env=ENV_SWITCH,
                            env_size=ENV_SIZE, size_key=SIZE_KEY)
    ast.parse(text)
    return text


def is_ours(text: str) -> bool:
    return text.startswith(HEADER)
