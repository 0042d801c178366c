"""ERNIE 4.5 VL's 3-D rotary embedding at one decode step of text: positions are 1-D, so it is
the ordinary rotary embedding with GPT-J (interleaved) pairing (`is_neox_style=False`), over
the first `rotary_dim` of each head; the t/h/w sections apply only to 2-D (multimodal)
positions, which a text decode step does not pass (raises if it does)."""
import torch
from torch import nn


class Ernie4_5_VLRotaryEmbedding(nn.Module):
    def __init__(self, head_size, rotary_dim, max_position_embeddings=None, base=10000.0,
                 is_neox_style=False, dtype=None, mrope_section=None, **_):
        super().__init__()
        self.head_size, self.rotary_dim, self.neox = head_size, rotary_dim, is_neox_style
        self.register_buffer("inv_freq", 1.0 / float(base) ** (
            torch.arange(0, rotary_dim, 2).float() / rotary_dim), persistent=False)

    def _rot(self, x, cos, sin):
        shape = x.shape
        x = x.view(shape[0], -1, self.head_size)
        rot, rest = x[..., :self.rotary_dim], x[..., self.rotary_dim:]
        if self.neox:
            a, b = rot.chunk(2, dim=-1)
            out = torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)
        else:
            a, b = rot[..., 0::2], rot[..., 1::2]
            out = torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(-2)
        return torch.cat((out.to(x.dtype), rest), dim=-1).view(shape)

    def forward(self, positions, query, key):
        if positions.ndim != 1:
            raise NotImplementedError("3-D (multimodal) positions: not modelled by the shim")
        f = positions.float()[:, None] * self.inv_freq
        cos, sin = f.cos()[:, None, :], f.sin()[:, None, :]
        return self._rot(query, cos, sin), self._rot(key, cos, sin)
