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


# vLLM's type of a weight loader (param, loaded weight) -> None; model files annotate with it
LoaderFunction = Callable[[Any, Any], None]


def composed_weight_loader(loader: LoaderFunction, fn: Callable) -> LoaderFunction:
    """A loader that loads with `loader`, then replaces the parameter's data by `fn(data)`
    (plamo3's norms store weight - offset). Built at model build; verify never loads."""
    def composed(param, loaded_weight) -> None:
        loader(param, loaded_weight)
        param.data.copy_(fn(param.data))
    return composed


def make_attention_sink(num_heads, dtype=None):
    """A per-head attention sink logit, -inf until loaded (a sink of -inf adds nothing to the
    softmax); a parameter without gradient, as vLLM makes it."""
    import torch
    sink = torch.nn.Parameter(torch.full((num_heads,), -float("inf"), dtype=dtype),
                              requires_grad=False)
    sink.weight_loader = default_weight_loader
    return sink
