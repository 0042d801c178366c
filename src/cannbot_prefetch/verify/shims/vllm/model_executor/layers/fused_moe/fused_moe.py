"""vllm.model_executor.layers.fused_moe.fused_moe (Triton kernels and their config helpers) as a
model file imports it: stand-ins that raise when called (`vllm._standin`), except
`fused_experts`, the shim's plain-torch one."""
from vllm._standin import standins
from vllm.model_executor.layers.fused_moe import fused_experts  # noqa: F401

__getattr__ = standins(__name__)
