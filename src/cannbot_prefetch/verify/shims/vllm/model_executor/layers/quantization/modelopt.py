"""vllm.model_executor.layers.quantization.modelopt as a model file imports it: ModelOpt's quantization
configs (MXFP8, FP4); the shim's linears are unquantized, so every name is a stand-in that raises
when built or called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)
