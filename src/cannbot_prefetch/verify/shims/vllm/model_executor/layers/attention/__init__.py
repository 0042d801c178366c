"""Attention over the step's tokens (causal, grouped kv heads): q, k, v flat [tokens, h*d]."""
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, num_heads, head_size, scale, num_kv_heads=None, **_):
        super().__init__()
        self.h, self.d, self.scale = num_heads, head_size, scale
        self.kv = num_kv_heads or num_heads

    def forward(self, q, k, v):
        t = q.shape[0]
        q = q.view(t, self.h, self.d).transpose(0, 1)
        k = k.view(t, self.kv, self.d).transpose(0, 1).repeat_interleave(self.h // self.kv, 0)
        v = v.view(t, self.kv, self.d).transpose(0, 1).repeat_interleave(self.h // self.kv, 0)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                               scale=self.scale)
        return out.transpose(0, 1).reshape(t, self.h * self.d)


EncoderOnlyAttention = Attention


def __getattr__(name: str):
    """Attention variants the shim does not model (RSWAAttention, ...): importable, and
    building one raises naming it."""
    from vllm._standin import standins

    return standins(__name__)(name)


from .mm_encoder_attention import MMEncoderAttention  # noqa: E402,F401


class ChunkedLocalAttention(Attention):
    """Attention within chunks of `attention_chunk_size` positions (llama4's local layers). The
    shim's attention sees no positions, so it attends causally over the step's tokens: the same
    as vLLM's whenever they share a chunk (a decode step's few tokens in a chunk of thousands)."""

    def __init__(self, num_heads, head_size, scale, attention_chunk_size=None,
                 num_kv_heads=None, **k):
        super().__init__(num_heads, head_size, scale, num_kv_heads=num_kv_heads, **k)
        self.attention_chunk_size = attention_chunk_size
