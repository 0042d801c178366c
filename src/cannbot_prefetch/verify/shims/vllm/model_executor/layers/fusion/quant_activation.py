"""vllm.model_executor.layers.fusion.quant_activation as a model file imports it: FP8 activation
quantisation, for quantised checkpoints only; stand-ins that raise when built or called
(`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)
