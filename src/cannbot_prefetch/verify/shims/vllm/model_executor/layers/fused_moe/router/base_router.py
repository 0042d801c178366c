"""vLLM's router base helpers as a model file imports them (gemma4's routing)."""
from vllm._standin import standins


def get_moe_padding_mask(num_tokens: int):
    """Rows of the batch that are CUDA-graph or data-parallel padding: none on the shim (vLLM
    returns None as well when `VLLM_MOE_SKIP_PADDING` is off)."""
    return None


__getattr__ = standins(__name__)
