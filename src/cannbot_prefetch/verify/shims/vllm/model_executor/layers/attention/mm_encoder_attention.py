"""vllm.model_executor.layers.attention.mm_encoder_attention as a model file imports it; names a TP-1 decode step on the shim never uses are
stand-ins that raise when built or called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)


import torch  # noqa: E402
from torch import nn  # noqa: E402


class MMEncoderAttention(nn.Module):
    """A vision/audio encoder's attention (vLLM's MMEncoderAttention): bidirectional scaled dot
    product over each sequence, q / k / v [..., tokens, heads * head_size], grouped kv heads;
    plain torch. Text-only runs skip the towers that build it."""

    def __init__(self, num_heads, head_size, scale=None, num_kv_heads=None, prefix="", **_):
        super().__init__()
        self.h, self.d = num_heads, head_size
        self.kv = num_kv_heads or num_heads
        self.scale = scale if scale is not None else head_size ** -0.5
        self.attn_backend = "TORCH_SDPA"      # what vLLM picks on a CPU (a name, read by towers)

    def forward(self, query, key, value, *_a, **_k):
        lead, t = query.shape[:-2], query.shape[-2]
        q = query.reshape(-1, t, self.h, self.d).transpose(1, 2)
        k = key.reshape(-1, t, self.kv, self.d).transpose(1, 2)
        v = value.reshape(-1, t, self.kv, self.d).transpose(1, 2)
        k = k.repeat_interleave(self.h // self.kv, 1)
        v = v.repeat_interleave(self.h // self.kv, 1)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=self.scale)
        return out.transpose(1, 2).reshape(*lead, t, self.h * self.d)
