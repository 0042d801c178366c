"""vllm.model_executor.layers.fused_qk_norm_rope as a model file imports it: a CUDA / XPU kernel;
on the shim's platform (CPU) qwen3_next takes its eager split, norm and rope; stand-ins that
raise when built or called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)
