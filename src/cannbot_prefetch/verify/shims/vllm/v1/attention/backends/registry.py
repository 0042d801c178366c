"""vllm.v1.attention.backends.registry as a model file imports it: backend enums read by a mixer's
`mamba_type`, which only vLLM's state-cache setup calls; stand-ins that raise when built or
called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)
