"""vllm.model_executor.layers.utils as a model file imports it (ROCm GEMM paths, never taken
on the shim's CPU platform); names are stand-ins that raise when built or called."""
from vllm._standin import standins

__getattr__ = standins(__name__)
