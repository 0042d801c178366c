"""vLLM's base of gated delta-net mixers (`GatedDeltaNetAttention`): the sizes every GDN layer
reads from the config (vLLM's gdn/base.py), no state cache."""
from vllm.distributed import get_tensor_model_parallel_rank, get_tensor_model_parallel_world_size
from vllm.model_executor.models.utils import extract_layer_index

from ..abstract import MambaBase


class GatedDeltaNetAttention(MambaBase):
    def __init__(self, config, vllm_config, prefix=""):
        super().__init__()
        self.prefix = prefix
        self.tp_size = get_tensor_model_parallel_world_size()
        self.tp_rank = get_tensor_model_parallel_rank()
        self.layer_idx = extract_layer_index(prefix)
        self.hidden_size = config.hidden_size
        self.activation = getattr(config, "hidden_act", "silu")
        self.layer_norm_epsilon = getattr(config, "rms_norm_eps", 1e-6)
        self.model_config = vllm_config.model_config
        self.cache_config = vllm_config.cache_config
        self.quant_config = vllm_config.quant_config
        self.num_spec = 0
        self.num_k_heads = config.linear_num_key_heads
        self.num_v_heads = config.linear_num_value_heads
        self.head_k_dim = config.linear_key_head_dim
        self.head_v_dim = config.linear_value_head_dim
        self.conv_kernel_size = config.linear_conv_kernel_dim
        self.key_dim = self.head_k_dim * self.num_k_heads
        self.value_dim = self.head_v_dim * self.num_v_heads
        self.conv_dim = self.key_dim * 2 + self.value_dim
