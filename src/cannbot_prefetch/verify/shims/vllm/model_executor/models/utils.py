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
