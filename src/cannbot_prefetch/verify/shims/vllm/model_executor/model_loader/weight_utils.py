"""Weight loading is not run by verify (the model keeps its random init); names only."""


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
