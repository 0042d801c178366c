"""Real Hugging Face `config.json` contents of the models the matrix generates (data, with sources).

Only the keys a decode step's sizes need plus the ones transformers reads to build the model.
Each entry is the published file's values (not tuned): the `source` says where it was read.
`write_config(name, path)` writes one as config.json for `analyze --model-config`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_LLAMA_COMMON = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": False,
    "attention_dropout": 0.0, "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu",
    "initializer_range": 0.02, "max_position_embeddings": 131072, "mlp_bias": False,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "torch_dtype": "bfloat16",
    "use_cache": True, "vocab_size": 128256,
}
_LLAMA32_ROPE = {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                 "original_max_position_embeddings": 8192, "rope_type": "llama3"}
_LLAMA31_ROPE = dict(_LLAMA32_ROPE, factor=8.0)

# name -> (source, config.json content)
CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "llama-3.2-1b": ("https://huggingface.co/meta-llama/Llama-3.2-1B/blob/main/config.json",
                     dict(_LLAMA_COMMON, hidden_size=2048, intermediate_size=8192,
                          num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                          num_hidden_layers=16, tie_word_embeddings=True,
                          rope_scaling=_LLAMA32_ROPE)),
    "llama-3.2-3b": ("https://huggingface.co/meta-llama/Llama-3.2-3B/blob/main/config.json",
                     dict(_LLAMA_COMMON, hidden_size=3072, intermediate_size=8192,
                          num_attention_heads=24, num_key_value_heads=8, head_dim=128,
                          num_hidden_layers=28, tie_word_embeddings=True,
                          rope_scaling=_LLAMA32_ROPE)),
    "llama-3.1-8b": ("https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json",
                     dict(_LLAMA_COMMON, hidden_size=4096, intermediate_size=14336,
                          num_attention_heads=32, num_key_value_heads=8,
                          num_hidden_layers=32, tie_word_embeddings=False,
                          rope_scaling=_LLAMA31_ROPE)),
    "qwen3-30b-a3b": ("https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json", {
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "attention_bias": False,
        "attention_dropout": 0.0, "bos_token_id": 151643, "decoder_sparse_step": 1,
        "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048,
        "initializer_range": 0.02, "intermediate_size": 6144, "max_position_embeddings": 40960,
        "max_window_layers": 48, "mlp_only_layers": [], "moe_intermediate_size": 768,
        "norm_topk_prob": True, "num_attention_heads": 32, "num_experts": 128,
        "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4,
        "output_router_logits": False, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
        "router_aux_loss_coef": 0.001, "sliding_window": None, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "use_cache": True, "use_sliding_window": False,
        "vocab_size": 151936}),
    # issue 30: models the matrix does not hold (decoder files other than modeling_llama.py)
    "mistral-7b": ("https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json", {
        "architectures": ["MistralForCausalLM"], "model_type": "mistral", "bos_token_id": 1,
        "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
        "intermediate_size": 14336, "max_position_embeddings": 32768, "num_attention_heads": 32,
        "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
        "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 32000}),
    "qwen2.5-7b": ("https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json", {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "attention_dropout": 0.0,
        "bos_token_id": 151643, "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 3584,
        "initializer_range": 0.02, "intermediate_size": 18944, "max_position_embeddings": 131072,
        "max_window_layers": 28, "num_attention_heads": 28, "num_hidden_layers": 28,
        "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
        "sliding_window": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "use_cache": True, "use_sliding_window": False, "vocab_size": 152064}),
}

# The transformers module whose source each model_type runs (the file the tests copy and plan on).
SOURCES = {"llama": "llama", "qwen3_moe": "qwen3_moe", "mistral": "mistral", "qwen2": "qwen2"}


def config(name: str) -> dict[str, Any]:
    """A copy of the named model's config.json content."""
    if name not in CONFIGS:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(CONFIGS)}")
    return json.loads(json.dumps(CONFIGS[name][1]))


def write_config(name: str, path: str | Path) -> Path:
    """Write the named model's config.json to `path` (a file path); returns it."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(config(name), indent=2) + "\n", encoding="utf-8")
    return p
