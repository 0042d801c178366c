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


def is_torch_equal_or_newer(target: str) -> bool:
    """torch's version >= target (release numbers compared; vLLM's torch_utils helper)."""
    from packaging.version import Version
    return Version(torch.__version__).release >= Version(target).release
