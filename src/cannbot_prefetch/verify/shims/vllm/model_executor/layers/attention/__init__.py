"""Attention over the step's tokens (causal, grouped kv heads): q, k, v flat [tokens, h*d]."""
import weakref

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, num_heads, head_size, scale, num_kv_heads=None, *_, prefix="",
                 kv_sharing_target_layer_name=None, head_size_v=None, **__):
        super().__init__()
        self.h, self.d, self.scale = num_heads, head_size, scale
        self.kv = num_kv_heads or num_heads
        self.dv = head_size_v or head_size
        # vLLM's KV sharing (gemma3n's, gemma4's later layers): the layer reads the cache an
        # earlier layer of the same model wrote; that layer was built just before, under its
        # prefix, so it is found here (kept unregistered: it is not this layer's submodule)
        object.__setattr__(self, "_kv_source", _BUILT.get(kv_sharing_target_layer_name)
                           if kv_sharing_target_layer_name else None)
        if prefix:
            _BUILT[prefix] = self

    def forward(self, q, k, v, *_, **__):
        if k is None:
            # vLLM reads the layer's KV cache when no new key and value are given (iquest's
            # loop attention calls its first loop's layer again with `(q, None, None)`; a
            # KV-sharing layer, its target's): the step's cache is what that layer's last call
            # in the step wrote
            k, v = (self._kv_source or self)._step_kv
        else:
            self._step_kv = (k, v)
        t = q.shape[0]
        q = q.view(t, self.h, self.d).transpose(0, 1)
        k = k.view(t, self.kv, self.d).transpose(0, 1).repeat_interleave(self.h // self.kv, 0)
        v = v.view(t, self.kv, self.dv).transpose(0, 1).repeat_interleave(self.h // self.kv, 0)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                               scale=self.scale)
        return out.transpose(0, 1).reshape(t, self.h * self.dv)


# attention layers by prefix, as built (vLLM's static forward context): weak, so a model's
# layers go with the model; a later build under the same prefix replaces the entry
_BUILT: "weakref.WeakValueDictionary[str, Attention]" = weakref.WeakValueDictionary()


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


# vLLM's prefix-LM decoder attention (hrm_text): non-causal only over a prefill's prompt; at a
# single-token decode step it attends as a causal decoder does (vLLM's own docstring,
# prefill_prefix_lm_attention.py), so the shim's decode-step attention
PrefillPrefixLMAttention = Attention
