"""vllm.model_executor.layers.pooler.tokwise as a model file imports it (internlm2's reward
model's pooler); names a TP-1 decode step on the shim never uses are stand-ins that raise when
built or called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)
