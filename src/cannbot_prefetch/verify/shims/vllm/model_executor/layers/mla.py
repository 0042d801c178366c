"""vLLM's multi-head latent attention wrapper at TP 1 in plain torch: the model file hands it its
projections (`MLAModules`) and calls only the wrapper, which runs them in vLLM's order: the
query (q_proj, or fused_qkv_a_proj / q_a_proj -> q_a_layernorm -> q_b_proj), the latent KV
(kv_a_proj_with_mqa, or the fused projection's second part) -> kv_a_layernorm -> kv_b_proj,
causal attention over the step's tokens, o_proj. The rotary part of q and k is left unrotated
(no positions are modelled): the shim runs every projection once, with the right shapes, which is
what `verify` checks; it is not vLLM's numerics."""
import torch
from torch import nn


class MLAModules:
    """The projections and norms handed to the wrapper (any subset, by keyword)."""

    def __init__(self, **modules):
        self.__dict__.update(modules)

    def __getattr__(self, name):
        return None


def _out(y):
    return y[0] if isinstance(y, tuple) else y


class MultiHeadLatentAttentionWrapper(nn.Module):
    def __init__(self, hidden_size, num_heads, scale, qk_nope_head_dim, qk_rope_head_dim,
                 v_head_dim, q_lora_rank, kv_lora_rank, mla_modules, cache_config=None,
                 quant_config=None, prefix="", **_):
        super().__init__()
        self.h, self.scale = num_heads, scale
        self.nope, self.rope, self.v = qk_nope_head_dim, qk_rope_head_dim, v_head_dim
        self.q_lora_rank, self.kv_lora_rank = q_lora_rank, kv_lora_rank
        m = mla_modules
        # registered as submodules (they are the attention's own, shared, not copies)
        for name in ("fused_qkv_a_proj", "q_a_proj", "q_a_layernorm", "q_b_proj", "q_proj",
                     "kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj", "o_proj"):
            mod = getattr(m, name, None)
            object.__setattr__(self, "_" + name, mod)

    def forward(self, positions, hidden_states, *_, **__):
        x, t = hidden_states, hidden_states.shape[0]
        latent = None
        if self._fused_qkv_a_proj is not None:
            qkv = _out(self._fused_qkv_a_proj(x))
            q_c, latent = qkv.split([self.q_lora_rank, self.kv_lora_rank + self.rope], dim=-1)
            q = _out(self._q_b_proj(_out(self._q_a_layernorm(q_c))))
        elif self._q_a_proj is not None and self._q_b_proj is not None:
            q = _out(self._q_b_proj(_out(self._q_a_layernorm(_out(self._q_a_proj(x))))))
        else:
            q = _out(self._q_proj(x))
        if latent is None:
            latent = _out(self._kv_a_proj_with_mqa(x))
        kv_c, k_pe = latent.split([self.kv_lora_rank, self.rope], dim=-1)
        kv = _out(self._kv_b_proj(_out(self._kv_a_layernorm(kv_c))))
        kv = kv.view(t, self.h, self.nope + self.v)
        k_nope, v = kv.split([self.nope, self.v], dim=-1)
        q = q.view(t, self.h, self.nope + self.rope)
        k = torch.cat([k_nope, k_pe.view(t, 1, self.rope).expand(t, self.h, self.rope)], -1)
        out = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=True,
            scale=self.scale)
        return _out(self._o_proj(out.transpose(0, 1).reshape(t, self.h * self.v)))
