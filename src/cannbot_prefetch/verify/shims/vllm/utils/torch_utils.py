"""Tensor helpers at TP 1 on a CPU."""
import contextlib

import torch

PIN_MEMORY = False


def async_tensor_h2d(data, device, dtype=None, pin_memory=False, **_):
    return torch.tensor(data, dtype=dtype, device=device)


@contextlib.contextmanager
def set_default_torch_dtype(dtype):
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def direct_register_custom_op(op_name=None, op_func=None, mutates_args=None, fake_impl=None,
                              target_lib=None, dispatch_key=None, tags=(), **__):
    """`torch.ops.vllm.<op_name>` running `op_func` on the CPU, as vLLM registers a model file's
    own op (zaya's `zaya_cca`, which runs the model's projections); an op torch cannot infer a
    schema for, or one already registered, is left as it was (nothing registered)."""
    if op_name is None or op_func is None or hasattr(torch.ops.vllm, op_name):
        return None
    try:
        schema = torch.library.infer_schema(op_func, mutates_args=mutates_args or [])
        _LIB.define(op_name + schema, tags=tags)
        _LIB.impl(op_name, op_func, "CPU")
        if fake_impl is not None:
            _LIB._register_fake(op_name, fake_impl)
    except Exception:
        return None
    return None


_LIB = torch.library.Library("vllm", "FRAGMENT")      # kept alive: the ops live as long as it


def is_torch_equal_or_newer(target: str) -> bool:
    """torch's version >= target (release numbers compared; vLLM's torch_utils helper)."""
    from packaging.version import Version
    return Version(torch.__version__).release >= Version(target).release


# a layer's name as a custom op receives it: a plain string (vLLM wraps it in `LayerName` only
# behind a setting the shim leaves off)
LayerNameType = str


def _encode_layer_name(layer_name: str) -> str:
    return layer_name


def _resolve_layer_name(layer_name: str) -> str:
    return layer_name
