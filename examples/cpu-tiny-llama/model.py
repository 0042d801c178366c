"""A small Llama-style decoder in plain PyTorch, for the CPU walk-through of cannbot-prefetch.

Written for this example (not copied from any library), in the layout real model files use so
that the tool meets the same patterns it meets in transformers' modeling_llama.py:

- ``TinyLlamaConfig``: a dataclass read from ``config.json``;
- ``TinyLlamaRMSNorm``, ``TinyLlamaAttention`` (q_proj/k_proj/v_proj/o_proj, grouped KV heads,
  rotary embeddings, a per-layer KV cache), ``TinyLlamaMLP`` (gate_proj/up_proj/down_proj in one
  nested line), ``TinyLlamaDecoderLayer``, ``TinyLlamaModel`` and ``TinyLlamaForCausalLM``.

There is deliberately no ``enable_prefetch`` here: ``cannbot prefetch apply`` adds the switch
and the guarded ``npu_prefetch`` calls to a *copy* of this file (``run.py`` never rewrites this
one).

``make_model_and_inputs`` is the factory ``cannbot prefetch verify --factory`` calls: it builds
the model from the source file it lives in, with fixed random weights, and one decode input.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class TinyLlamaConfig:
    vocab_size: int = 4096
    hidden_size: int = 1024
    intermediate_size: int = 2816
    num_hidden_layers: int = 4
    num_attention_heads: int = 16
    num_key_value_heads: int = 4
    max_position_embeddings: int = 512
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    head_dim: int | None = None          # as in Llama-3.2's config.json; None: hidden / heads
    torch_dtype: str = "float32"

    @classmethod
    def from_json(cls, path: str | Path) -> "TinyLlamaConfig":
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        known = {f.name for f in fields(cls)}
        cfg = cls(**{k: v for k, v in data.items() if k in known})
        # Keys this dataclass does not declare (e.g. a switch added later) stay readable.
        for k, v in data.items():
            if k not in known:
                setattr(cfg, k, v)
        return cfg

    def __post_init__(self):
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads


class TinyLlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotary_cos_sin(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((angles, angles), dim=-1)
    return emb.cos(), emb.sin()


class TinyLlamaAttention(nn.Module):
    def __init__(self, config: TinyLlamaConfig, layer_idx: int):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.head_dim = config.head_dim
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.q_proj = nn.Linear(config.hidden_size, self.num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.num_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, config.hidden_size, bias=False)

    def forward(self, hidden_states, cos, sin, cache):
        bsz, seq, _ = hidden_states.shape
        query_states = self.q_proj(hidden_states).view(bsz, seq, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(bsz, seq, self.num_kv_heads, self.head_dim).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(bsz, seq, self.num_kv_heads, self.head_dim).transpose(1, 2)

        query_states = query_states * cos + rotate_half(query_states) * sin
        key_states = key_states * cos + rotate_half(key_states) * sin
        if cache is not None:
            key_states, value_states = cache.update(self.layer_idx, key_states, value_states)

        groups = self.num_heads // self.num_kv_heads
        key_states = key_states.repeat_interleave(groups, dim=1)
        value_states = value_states.repeat_interleave(groups, dim=1)
        scores = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.head_dim)
        if seq > 1:
            causal = torch.full((seq, key_states.shape[2]), float("-inf")).triu(key_states.shape[2] - seq + 1)
            scores = scores + causal
        probs = F.softmax(scores, dim=-1)
        attn_output = torch.matmul(probs, value_states)
        attn_output = attn_output.transpose(1, 2).reshape(bsz, seq, -1)
        attn_output = self.o_proj(attn_output)
        return attn_output


class TinyLlamaMLP(nn.Module):
    def __init__(self, config: TinyLlamaConfig):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        down_proj = self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))
        return down_proj


class TinyLlamaDecoderLayer(nn.Module):
    def __init__(self, config: TinyLlamaConfig, layer_idx: int):
        super().__init__()
        self.self_attn = TinyLlamaAttention(config, layer_idx)
        self.mlp = TinyLlamaMLP(config)
        self.input_layernorm = TinyLlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = TinyLlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, hidden_states, cos, sin, cache=None):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states, cos, sin, cache)
        hidden_states = residual + hidden_states

        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = residual + hidden_states
        return hidden_states


class KVCache:
    """Per-layer key/value tensors, grown by one decode step at a time."""

    def __init__(self, num_layers: int):
        self.keys: list[torch.Tensor | None] = [None] * num_layers
        self.values: list[torch.Tensor | None] = [None] * num_layers

    def update(self, layer_idx, key_states, value_states):
        if self.keys[layer_idx] is not None:
            key_states = torch.cat((self.keys[layer_idx], key_states), dim=2)
            value_states = torch.cat((self.values[layer_idx], value_states), dim=2)
        self.keys[layer_idx], self.values[layer_idx] = key_states, value_states
        return key_states, value_states

    def length(self) -> int:
        return 0 if self.keys[0] is None else self.keys[0].shape[2]


class TinyLlamaModel(nn.Module):
    def __init__(self, config: TinyLlamaConfig):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(
            [TinyLlamaDecoderLayer(config, i) for i in range(config.num_hidden_layers)]
        )
        self.norm = TinyLlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, input_ids, cache=None):
        past = cache.length() if cache is not None else 0
        positions = torch.arange(past, past + input_ids.shape[1])
        cos, sin = rotary_cos_sin(positions, self.config.head_dim, self.config.rope_theta)
        hidden_states = self.embed_tokens(input_ids)
        for decoder_layer in self.layers:
            hidden_states = decoder_layer(hidden_states, cos, sin, cache)
        hidden_states = self.norm(hidden_states)
        return hidden_states


class TinyLlamaForCausalLM(nn.Module):
    def __init__(self, config: TinyLlamaConfig):
        super().__init__()
        self.config = config
        self.model = TinyLlamaModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(self, input_ids, cache=None):
        hidden_states = self.model(input_ids, cache)
        logits = self.lm_head(hidden_states[:, -1:, :])
        return logits


def build_model(config: TinyLlamaConfig, seed: int = 0) -> TinyLlamaForCausalLM:
    """Fixed random weights (no checkpoint is needed to profile or verify)."""
    torch.manual_seed(seed)
    model = TinyLlamaForCausalLM(config)
    model.eval()
    return model


def make_model_and_inputs():
    """The `verify --factory` entry point: (model, inputs) for one decode-shaped forward.

    The config is the ``config.json`` beside this file. The input is one token and no KV cache,
    so calling the model twice (switch off, switch on) sees the same state: outputs must match
    bit for bit.
    """
    config = TinyLlamaConfig.from_json(Path(__file__).with_name("config.json"))
    model = build_model(config)
    next_token = torch.tensor([[3 % config.vocab_size]])
    return model, (next_token,)
