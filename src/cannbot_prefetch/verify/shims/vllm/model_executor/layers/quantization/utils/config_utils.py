"""vllm.model_executor.layers.quantization.utils.config_utils as a model file imports it:
quantisation config helpers, for quantised checkpoints only; stand-ins that raise when built or
called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)


def get_quark_ocp_mx_group_size(quant_config, layer_name):
    """The OCP MX group size of a Quark-quantised layer: None without a quantisation config (the
    shim's models are never quantised), as vLLM's returns."""
    return None
