"""get_rope: neox-style rotary embedding applied to flat [tokens, heads*dim] q and k."""
import torch
from torch import nn


class _Rope(nn.Module):
    def __init__(self, head_size, base=10000.0):
        super().__init__()
        self.head_size = head_size
        self.register_buffer("inv_freq", 1.0 / base ** (torch.arange(0, head_size, 2).float()
                                                        / head_size), persistent=False)

    def _rot(self, x, cos, sin):
        shape = x.shape
        x = x.reshape(shape[0], -1, self.head_size)   # [tokens, heads*dim] / [tokens, heads, dim]
        a, b = x.chunk(2, dim=-1)
        out = torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)
        return out.view(shape)

    def forward(self, positions, q, k):
        f = positions.float()[..., None] * self.inv_freq
        cos, sin = f.cos()[..., None, :], f.sin()[..., None, :]
        # a KV-sharing layer rotates its query alone (`rotary_emb(positions, q, None)`)
        return self._rot(q, cos, sin), None if k is None else self._rot(k, cos, sin)


def get_rope(head_size, max_position=None, base=10000.0, rope_parameters=None, **_):
    theta = (rope_parameters or {}).get("rope_theta", base) if isinstance(rope_parameters, dict) \
        else base
    return _Rope(head_size, float(theta))


class RotaryEmbedding(_Rope):
    """vLLM's base rotary embedding class (model files name it in annotations; lfm3), built with
    its signature; rotates the whole head (rotary_dim is not modelled)."""

    def __init__(self, head_size, rotary_dim, max_position_embeddings, base, is_neox_style,
                 dtype=None, init_cache=True):
        super().__init__(head_size, float(base))


class MRotaryEmbedding(RotaryEmbedding):
    """vLLM's multimodal (sectioned) rope: model files test `type(rotary_emb) is
    MRotaryEmbedding`; the shim's get_rope never builds one."""
