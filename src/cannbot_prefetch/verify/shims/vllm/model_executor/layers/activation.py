"""SiluAndMul: silu(first half) * second half of the last dim."""
import torch
from torch import nn


class SiluAndMul(nn.Module):
    def forward(self, x):
        d = x.shape[-1] // 2
        return torch.nn.functional.silu(x[..., :d]) * x[..., d:]
