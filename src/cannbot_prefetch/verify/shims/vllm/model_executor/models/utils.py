"""vLLM's model-building helpers at one pipeline stage: every layer built, none missing."""

from torch import nn


def maybe_prefix(prefix: str, name: str) -> str:
    return name if not prefix else f"{prefix}.{name}"


def extract_layer_index(name: str, num_attn_module: int = 1) -> int:
    found = [int(s) for s in name.split(".") if s.isdigit()]
    return found[0] if found else 0


def make_layers(num_hidden_layers, layer_fn, prefix: str = ""):
    """(start, end, ModuleList) with every layer on this one stage."""
    layers = nn.ModuleList(layer_fn(prefix=f"{prefix}.{i}") for i in range(num_hidden_layers))
    return 0, num_hidden_layers, layers


class PPMissingLayer(nn.Identity):
    pass


def is_pp_missing_parameter(name, model) -> bool:
    return False


def make_empty_intermediate_tensors_factory(keys, hidden_size):
    def make(batch_size, dtype, device):
        return {}
    return make


def spec_decode_needs_target_embed(vllm_config) -> bool:
    return False


class WeightsMapper:
    def __init__(self, **kw):
        self.kw = kw

    def __or__(self, other):
        """Two mappers merged, the right one's entries winning (vLLM's `|`)."""
        kw = {k: dict(v) if isinstance(v, dict) else v for k, v in self.kw.items()}
        for k, v in other.kw.items():
            kw[k] = {**kw.get(k, {}), **v} if isinstance(v, dict) else v
        return WeightsMapper(**kw)


class AutoWeightsLoader:
    def __init__(self, module, **_):
        self.module = module

    def load_weights(self, weights, **_):
        return {name for name, _ in weights}




def sequence_parallel_chunk(x):
    """One rank: the whole sequence."""
    return x


def get_fused_shared_expert_layers(module, moe_cls=None, enable_eplb=False) -> frozenset:
    """Layers whose shared expert is fused into the routed kernel: none on the shim."""
    return frozenset()


def get_pp_missing_layer_names(model) -> list:
    """Layers another pipeline stage holds: none on one stage."""
    return []


def get_spec_layer_idx_from_weight_name(config, weight_name):
    """A speculative (MTP) layer's index from a checkpoint name: the shim loads no weights."""
    return None


def maybe_fuse_shared_experts(weights, **_):
    """Checkpoint weights as given: no shared expert is fused on the shim (load time only)."""
    return weights


def fast_topk(values, topk: int, dim: int):
    """(values, indices) of the top `topk` along `dim` (vLLM's helper: torch.max for k = 1,
    torch.topk otherwise; the same result)."""
    import torch
    if topk == 1:
        return torch.max(values, dim=dim, keepdim=True)
    return torch.topk(values, topk, dim=dim)


ShardIds = object   # vLLM's type alias (a shard id, or a list of them): annotations only


def skip_spec_layers(weights, config):
    """The checkpoint's weights without the speculative (MTP) layers' (none are named on the
    shim: `get_spec_layer_idx_from_weight_name` finds none)."""
    return ((n, w) for n, w in weights if get_spec_layer_idx_from_weight_name(config, n) is None)


def __getattr__(name: str):
    """Weight-loading and pipeline helpers a TP-1 decode step never runs (StageMissingLayer,
    no_init_weights, ...): importable, stand-ins that raise when built or called."""
    from vllm._standin import standins

    return standins(__name__)(name)


def get_draft_quant_config(vllm_config):
    """A speculative draft's own quantization: none on the shim (its linears are plain)."""
    return None


def map_draft_quant_config(quant_config, weight_mapper, prefix, start_layer_id,
                           num_hidden_layers) -> None:
    """Maps a draft's quantized layer names to the runtime ones: nothing to map unquantized."""
    return None


def process_eagle_weight(model, name) -> None:
    """Notes, while weights load, that a draft has its own head or embedding: no loading here."""
    return None
