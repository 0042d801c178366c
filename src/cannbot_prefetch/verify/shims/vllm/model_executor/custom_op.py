"""vllm.model_executor.custom_op as a model file imports it; names a TP-1 decode step on the shim never uses are
stand-ins that raise when built or called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)


# vLLM's CustomOp / PluggableLayer bases: `@CustomOp.register(name)` is the identity, and
# `forward` runs `forward_native` (the plain-torch path; the CUDA/HIP/XPU kernels are not run on
# the shim's CPU platform).
from torch import nn


class CustomOp(nn.Module):
    def __init__(self, *_, **__):
        super().__init__()

    def forward(self, *args, **kwargs):
        return self.forward_native(*args, **kwargs)

    def forward_native(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}.forward_native")

    @classmethod
    def enabled(cls) -> bool:
        return False

    @staticmethod
    def default_on() -> bool:
        return False

    @classmethod
    def register(cls, name=None, **_):
        return lambda op_cls: op_cls

    @classmethod
    def register_oot(cls, _decorated=None, name=None):
        if _decorated is not None:
            return _decorated
        return lambda op_cls: op_cls


class PluggableLayer(nn.Module):
    register = CustomOp.register
    register_oot = CustomOp.register_oot

