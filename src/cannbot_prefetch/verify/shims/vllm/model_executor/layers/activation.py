"""Activations by name, and the gated ones: act(first half) * second half of the last dim."""
import torch
from torch import nn

_ACTS = {"silu": nn.functional.silu, "swish": nn.functional.silu, "relu": nn.functional.relu,
         "gelu": nn.functional.gelu, "gelu_new": lambda x: nn.functional.gelu(x, approximate="tanh"),
         "gelu_pytorch_tanh": lambda x: nn.functional.gelu(x, approximate="tanh"),
         "quick_gelu": lambda x: x * torch.sigmoid(1.702 * x)}


class _Act(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


class _AndMul(nn.Module):
    fn = staticmethod(nn.functional.silu)

    def __init__(self, *_, **__):
        super().__init__()

    def forward(self, x):
        d = x.shape[-1] // 2
        return self.fn(x[..., :d]) * x[..., d:]


class SiluAndMul(_AndMul):
    pass


class SiluAndMulWithClamp(_AndMul):
    pass


class GeluAndMul(_AndMul):
    fn = staticmethod(nn.functional.gelu)


class FatreluAndMul(_AndMul):
    fn = staticmethod(nn.functional.relu)


class MulAndSilu(_AndMul):
    pass


def get_act_fn(name: str) -> nn.Module:
    return _Act(_ACTS.get(str(name).lower(), nn.functional.silu))


def get_act_and_mul_fn(name: str) -> nn.Module:
    mod = _AndMul()
    mod.fn = _ACTS.get(str(name).lower(), nn.functional.silu)
    return mod


class SwigluStepAndMul(_AndMul):
    """step3p5's clamped SwiGLU: silu(gate) clamped above at `limit`, times up clamped to
    [-limit, limit] (no clamp when `limit` is None)."""

    def __init__(self, limit=None, *_, **__):
        super().__init__()
        self.limit = limit

    def forward(self, x):
        d = x.shape[-1] // 2
        gate, up = nn.functional.silu(x[..., :d]), x[..., d:]
        if self.limit is not None:
            gate, up = gate.clamp(max=self.limit), up.clamp(-self.limit, self.limit)
        return gate * up
