"""Weight loading is not run by verify (the model keeps its random init); names only."""


def default_weight_loader(param, loaded_weight):
    param.data.copy_(loaded_weight)


def maybe_remap_kv_scale_name(name, params_dict):
    return name


def sharded_weight_loader(shard_axis):
    return default_weight_loader


def row_parallel_weight_loader(param, loaded_weight):
    default_weight_loader(param, loaded_weight)


def make_attention_sink(num_heads, dtype=None):
    """Per-head attention-sink logits (gpt-oss), as vLLM makes them: -inf until loaded, so a
    sink takes no attention weight (the shim's attention leaves them out: exp(-inf) = 0)."""
    import torch

    return torch.nn.Parameter(torch.full((num_heads,), -float("inf"), dtype=dtype),
                              requires_grad=False)


def remap_moe_expert_weights(weights, params_dict):
    """Checkpoint expert names as the layer's parameters (weight loading, not run by verify)."""
    return weights
