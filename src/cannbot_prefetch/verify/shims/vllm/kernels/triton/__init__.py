"""vllm.kernels.triton as a model file imports it: Triton kernels, never run on the shim's CPU
decode step; stand-ins that raise when built or called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)
