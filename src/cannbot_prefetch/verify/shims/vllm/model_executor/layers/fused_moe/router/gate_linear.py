"""vLLM's module of the router linear (minimax_m2 and mimo_v2 import it from here): the shim's
GateLinear, defined with the fused-MoE package."""
from vllm.model_executor.layers.fused_moe import GateLinear  # noqa: F401
