"""vllm.model_executor.layers.quantization.fp8 as a model file imports it: the shim builds
unquantised layers (quant_config None), so a model's `isinstance(quant_config, Fp8Config)` is
false and no FP8 method is built; every name is a stand-in that raises when built or called
(`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)
