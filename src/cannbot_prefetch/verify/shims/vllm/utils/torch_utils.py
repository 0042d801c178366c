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


def direct_register_custom_op(*_, **__):
    return None


# a layer's name as a custom op receives it: a plain string (vLLM wraps it in `LayerName` only
# behind a setting the shim leaves off)
LayerNameType = str


def _encode_layer_name(layer_name: str) -> str:
    return layer_name


def _resolve_layer_name(layer_name: str) -> str:
    return layer_name
