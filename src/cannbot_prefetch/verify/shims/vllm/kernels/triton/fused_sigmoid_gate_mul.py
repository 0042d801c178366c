"""vllm.kernels.triton.fused_sigmoid_gate_mul as a model file imports it: a fused output gate
qwen3_next runs only when a subclass (Qwen3.5) turns it on; stand-ins that raise when built or
called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)
