"""vllm.model_executor.layers.mamba.mamba_utils as a model file imports it: the state shape /
dtype / copy calculators are read only by a model's classmethods that size vLLM's state cache,
which a decode step on the shim never allocates; they are stand-ins that raise when built or
called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)
