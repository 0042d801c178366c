"""vllm.model_executor.layers.rotary_embedding.common as a model file imports it; names a TP-1 decode step on the shim never uses are
stand-ins that raise when built or called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)


import torch  # noqa: E402

from vllm.model_executor.custom_op import CustomOp  # noqa: E402


class ApplyRotaryEmb(CustomOp):
    """Rotate x [..., tokens, heads, head_size] by cos / sin [tokens, head_size / 2]: the two
    halves (neox style) or the even and odd lanes (GPT-J style), as vLLM's rotary
    `ApplyRotaryEmb`; computed in float32 when asked, returned in x's dtype."""

    def __init__(self, enforce_enable=False, is_neox_style=True, enable_fp32_compute=False):
        super().__init__()
        self.is_neox_style, self.fp32 = is_neox_style, enable_fp32_compute

    def forward_native(self, x, cos, sin):
        dtype = x.dtype
        y = x.float() if self.fp32 else x
        c, s = cos.unsqueeze(-2).to(y.dtype), sin.unsqueeze(-2).to(y.dtype)
        a, b = (y.chunk(2, dim=-1) if self.is_neox_style else (y[..., 0::2], y[..., 1::2]))
        ra, rb = a * c - b * s, b * c + a * s
        out = torch.cat((ra, rb), -1) if self.is_neox_style else \
            torch.stack((ra, rb), -1).flatten(-2)
        return out.to(dtype)
