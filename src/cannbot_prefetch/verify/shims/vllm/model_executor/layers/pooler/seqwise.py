"""vllm.model_executor.layers.pooler.seqwise as a model file imports it: poolers serve embedding
models, never a causal LM's decode step; stand-ins that raise when built or called
(`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)
