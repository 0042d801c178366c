"""Weight loading is not run by verify (the model keeps its random init); names only."""
from typing import Any, Callable


def default_weight_loader(param, loaded_weight):
    param.data.copy_(loaded_weight)


def maybe_remap_kv_scale_name(name, params_dict):
    return name


def sharded_weight_loader(shard_axis):
    return default_weight_loader


def row_parallel_weight_loader(param, loaded_weight):
    default_weight_loader(param, loaded_weight)


def maybe_remap_moe_expert_param_name(name, *_a, **_k):
    """A checkpoint expert name as given (load time only; granitemoehybrid imports it)."""
    return name


from typing import Callable  # noqa: E402

import torch  # noqa: E402

LoaderFunction = Callable[[torch.Tensor, torch.Tensor], None]


def make_attention_sink(num_heads, dtype=None):
    """Per-head attention sink logits, -inf (no sink) until a checkpoint is loaded, as vLLM's
    weight_utils.make_attention_sink creates them."""
    return torch.nn.Parameter(torch.full((num_heads,), -float("inf"), dtype=dtype),
                              requires_grad=False)


def remap_moe_expert_weights(weights, params_dict):
    """Checkpoint expert names as the layer's parameters (weight loading, not run by verify)."""
    return weights


def composed_weight_loader(loader, fn):
    """A loader that runs `loader` and then applies `fn` to the loaded parameter's data."""
    def composed(param, loaded_weight):
        loader(param, loaded_weight)
        param.data.copy_(fn(param))
    return composed


from vllm._standin import standins  # noqa: E402

__getattr__ = standins(__name__)
