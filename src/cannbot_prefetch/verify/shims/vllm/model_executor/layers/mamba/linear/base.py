"""vLLM's base of linear-attention mixers (`LinearAttention`): the sizes it reads from the
config (vLLM's linear/base.py), no state cache."""
from vllm.distributed import get_tensor_model_parallel_rank, get_tensor_model_parallel_world_size
from vllm.model_executor.models.utils import extract_layer_index

from ..abstract import MambaBase


class LinearAttention(MambaBase):
    def __init__(self, config, vllm_config, prefix=""):
        super().__init__()
        self.layer_idx = extract_layer_index(prefix)
        self.prefix = prefix
        self.model_config = vllm_config.model_config
        self.cache_config = vllm_config.cache_config
        self.quant_config = vllm_config.quant_config
        self.BLOCK = getattr(config, "block", 256)
        self.hidden_size = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.num_hidden_layers = config.num_hidden_layers
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.num_heads
        self.hidden_inner_size = self.head_dim * self.num_heads
        self.tp_size = get_tensor_model_parallel_world_size()
        self.tp_rank = get_tensor_model_parallel_rank()
