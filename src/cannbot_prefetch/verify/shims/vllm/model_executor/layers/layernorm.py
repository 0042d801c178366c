"""RMSNorm as vLLM calls it: `norm(x)` or `norm(x, residual)` -> (normed, x + residual)."""
import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6, **_):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    @property
    def variance_epsilon(self):
        """vLLM's name for the epsilon (k2_horizon's grouped norm reads it; a subclass may set
        it): the one value `eps`."""
        return self.eps

    @variance_epsilon.setter
    def variance_epsilon(self, value):
        self.eps = value

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def forward(self, x, residual=None):
        if residual is None:
            return self._norm(x)
        x = x + residual
        return self._norm(x), x


class GemmaRMSNorm(RMSNorm):
    """Gemma's norm scales by (1 + weight); the weight starts at zero."""

    def __init__(self, hidden_size, eps=1e-6, **_):
        super().__init__(hidden_size, eps)
        nn.init.zeros_(self.weight)

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1 + self.weight)


class LayerNorm(nn.LayerNorm):
    def __init__(self, hidden_size, eps=1e-5, **_):
        super().__init__(hidden_size, eps=eps)


def _forward_native(self, *args, **kwargs):
    """vLLM's CustomOp name of the plain-torch path (plamo3 calls `q_norm.forward_native(q)`):
    here the only path, so the same computation as `forward`."""
    return self.forward(*args, **kwargs)


RMSNorm.forward_native = _forward_native
