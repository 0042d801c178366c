"""vllm.model_executor.layers.fused_moe.routed_experts as a model file imports it (gpt_oss
subclasses RoutedExperts for its weight loading and hands the class to FusedMoE, which the shim's
FusedMoE does not build); names are stand-ins that raise when built or called."""
from vllm._standin import standins

__getattr__ = standins(__name__)
